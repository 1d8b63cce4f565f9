"""-train-step: turn an inference module into one training step (graph stage).

@main(x) -> y, whose weights are globals (as swir-import writes an ONNX
model's initializers), becomes

    @main(x, labels, w..., stats..., state...) -> (loss, w'..., stats'..., state'...)
        attributes {carried = [@w..., @stats..., @state...]}

forward, loss, backward and update in one function. The float globals @main
reads are the parameters (batch_norm's mean and variance, in training mode,
are running statistics instead: carried, updated, not trained); the optimiser
state starts as new zero globals. ``carried`` names the global each carried
parameter starts from, and result 1 + k is carried parameter k's next value
(docs/ir.md, "Training steps"); swir-cg --train runs N such steps.

The gradient is -differentiate's (swir.autodiff) of the loss function; with
``ranks`` > 1 the step is data-parallel: each rank its share of the batch,
the gradients (and the loss and batch statistics) averaged by allreduce
before the update, so that every rank keeps the same parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from swir.autodiff.reverse import RECOMPUTE, GradientFailure, differentiate
from swir.diagnostics import Diagnostic
from swir.ir.builder import Builder
from swir.ir.clone import clone
from swir.ir.core import Dense, Function, Global, Instruction, Module, SymbolRef, Value
from swir.ir.gradient import GradientDecl
from swir.ir.graph_builder import GraphBuilder
from swir.ir.types import I64, TensorType
from swir.ops import BATCH_NORM, RETURN
from swir.ops.util import attr
from swir.passes.manager import AnalysisManager, Pass, PassFailure, at_least, one_of, option

LOSSES = ("cross-entropy", "mse")
OPTIMIZERS = ("sgd", "adam")
BATCH_NORM_MODES = ("train", "frozen")


@dataclass
class TrainStep(Pass):
    name = "train-step"
    summary = "Make @main one training step: forward, loss, gradient, optimiser update " \
              "(graph stage)"
    stages = ("graph",)

    loss: str = option("cross-entropy", "cross-entropy (of @main's N x C logits and N integer "
                                        "labels) or mse (against a target like the output)",
                       check=one_of(*LOSSES))
    optimizer: str = option("sgd", "sgd (PyTorch's, with momentum and weight decay) or adam",
                            check=one_of(*OPTIMIZERS))
    lr: float = option(0.01, "learning rate", check=at_least(0))
    momentum: float = option(0.0, "SGD momentum, in [0, 1]",
                             check=lambda v: None if 0 <= v <= 1 else "must be in [0, 1]")
    weight_decay: float = option(0.0, "L2 penalty added to each gradient", check=at_least(0))
    beta1: float = option(0.9, "Adam's first-moment decay")
    beta2: float = option(0.999, "Adam's second-moment decay")
    epsilon: float = option(1e-8, "Adam's epsilon")
    batch_norm: str = option("train", "train: batch statistics, running statistics updated; "
                                      "frozen: batch_norm as in inference",
                             check=one_of(*BATCH_NORM_MODES))
    bn_momentum: float = option(0.1, "running-statistics momentum of training batch_norm")
    recompute: str = option("none", "-differentiate's checkpointing (none, cheap)",
                            check=one_of(*RECOMPUTE))
    ranks: int = option(1, "data-parallel ranks (MPI): gradients averaged by allreduce",
                        check=at_least(1))

    def run(self, module: Module, analyses: AnalysisManager) -> bool:
        main = module.lookup("main")
        if not isinstance(main, Function) or main.body is None:
            raise self._fail("the module has no @main to train", module)
        if "carried" in main.attrs:
            raise self._fail("@main is a training step already", main)
        if not main.result_types:
            raise self._fail("@main returns nothing to take a loss of", main)
        try:
            step = StepBuilder(module, main, self).build()
        except GradientFailure as e:
            raise PassFailure([Diagnostic(f"-train-step: {e}",
                                          e.inst.loc if e.inst else main.loc)]) from None
        module.remove(main)
        module.add(step)
        if self.ranks > 1:
            module.attrs.update(ranks=self.ranks, split="data")
        self.bump("parameters trained", len(step.attrs["carried"]))
        return True

    def _fail(self, message: str, where) -> PassFailure:
        return PassFailure([Diagnostic(f"-train-step: {message}", getattr(where, "loc", None))])


class StepBuilder:
    def __init__(self, module: Module, main: Function, p: TrainStep) -> None:
        self.m, self.main, self.p = module, main, p
        self.stats: list[Global] = []     # running statistics, in batch_norm order
        self.params = self._parameters()

    def _parameters(self) -> list[Global]:
        """The float globals @main reads, by first use; running statistics apart."""
        seen: dict[Global, None] = {}
        for inst in self.main.walk():
            for i, v in enumerate(inst.operands):
                if not (isinstance(v, Global) and isinstance(v.type, TensorType)
                        and v.type.element.is_float):
                    continue
                if self.p.batch_norm == "train" and inst.isa(BATCH_NORM) and i >= 3:
                    if v in self.stats:
                        raise PassFailure([Diagnostic(f"-train-step: @{v.name} is the running "
                                                      "statistic of two batch_norms", inst.loc)])
                    self.stats.append(v)
                else:
                    seen.setdefault(v)
        return [g for g in seen if g not in self.stats]

    def build(self) -> Function:
        if not self.params:
            raise PassFailure([Diagnostic("-train-step: @main reads no float global: "
                                          "nothing to train", self.main.loc)])
        loss_fn = self._loss_function()
        n_data = len(self.main.params) + 1
        wrt = tuple(range(n_data, n_data + len(self.params)))
        decl = GradientDecl(loss_fn, wrt, tuple(range(len(loss_fn.result_types))), 0, False)
        params, results = decl.signature()
        step = Function("main", params, results,
                        param_names=[p.name for p in loss_fn.params])
        differentiate(step, decl, self.p.recompute)
        self._update(step)
        return step

    # -- the loss function -----------------------------------------------------------
    def _loss_function(self) -> Function:
        """(data..., labels, params..., stats...) -> (loss, stats'...)."""
        main = self.main
        out = main.result_types[0]
        label = self._label_type(out)
        types = [p.type for p in main.params] + [label] + [g.type for g in self.params] + \
            [g.type for g in self.stats]
        names = [p.name for p in main.params] + ["labels" if self.p.loss != "mse" else "target"]
        names += [g.name for g in self.params] + [g.name for g in self.stats]
        f, b = Builder.function(Module("loss", stage="graph"), "loss", types,
                                param_names=names)
        mapping: dict = dict(zip(main.params, f.params))
        mapping.update(zip(self.params + self.stats, f.params[len(main.params) + 1:]))
        new_stats: dict[Global, Value] = {}
        body = main.body.blocks[0].instructions
        for inst in body[:-1]:
            if inst.isa(BATCH_NORM) and self.p.batch_norm == "train":
                self._batch_norm_train(b, inst, mapping, new_stats)
            else:
                clone(b, [inst], mapping)
        y = mapping.get(body[-1].args[0], body[-1].args[0])
        g = GraphBuilder(b)
        loss = g.op("softmax_cross_entropy" if self.p.loss == "cross-entropy" else "mse_loss",
                    y, f.params[len(main.params)])
        outs = [loss] + [new_stats[s] for s in self.stats]
        b.create("return", *outs)
        f.result_types = [v.type for v in outs]
        return f

    def _label_type(self, out) -> TensorType:
        if self.p.loss == "mse":
            return out
        if not (isinstance(out, TensorType) and out.rank == 2):
            raise PassFailure([Diagnostic(f"-train-step: loss=cross-entropy takes N x C "
                                          f"logits; @main returns {out}", self.main.loc)])
        return TensorType(out.shape[:1], I64)

    def _batch_norm_train(self, b: Builder, inst: Instruction, mapping: dict,
                          new_stats: dict) -> None:
        args = [mapping.get(a, a) for a in inst.args]
        bn = b.create_inst("batch_norm_train", *args,
                           attrs={"epsilon": attr(inst, "epsilon"),
                                  "momentum": self.p.bn_momentum})
        mapping[inst.results[0]] = bn.results[0]
        for g, new in zip(inst.args[3:], bn.results[1:]):
            if g in self.stats:
                new_stats[g] = new

    # -- the update ---------------------------------------------------------------------
    def _update(self, step: Function) -> None:
        """Replace the gradient's return by the optimiser's update."""
        ret = step.body.blocks[0].instructions[-1]
        assert ret.isa(RETURN)
        n_stats = len(self.stats)
        loss, stats, grads = ret.args[0], ret.args[1:1 + n_stats], ret.args[1 + n_stats:]
        g = GraphBuilder(Builder(ret.parent, before=ret))
        loss, stats, grads = self._averaged(g, loss, stats, grads)
        first = len(self.main.params) + 1
        params = step.params[first:first + len(self.params)]
        state_globals, state_params, new_state, new_params = [], [], [], []
        count = self._adam_step(step, g, state_globals, state_params, new_state)
        for param, grad, glob in zip(params, grads, self.params):
            news, made = self._optimise(step, g, param, grad, glob, count)
            new_params.append(news[0])
            for gl, (p_new, p_old) in made:
                state_globals.append(gl)
                state_params.append(p_old)
                new_state.append(p_new)
        outs = [loss] + new_params + list(stats) + new_state
        ret.set_args(outs)
        step.result_types = [v.type for v in outs]
        carried = self.params + self.stats + state_globals
        # The state parameters were appended in the order of state_globals.
        step.attrs["carried"] = tuple(SymbolRef(x.name) for x in carried)

    def _averaged(self, g: GraphBuilder, loss, stats, grads):
        if self.p.ranks == 1:
            return loss, list(stats), list(grads)

        def mean(v: Value) -> Value:
            return g.scale(g.op("allreduce", v, ranks=self.p.ranks), 1.0 / self.p.ranks)
        return mean(loss), [mean(s) for s in stats], [mean(d) for d in grads]

    def _adam_step(self, step: Function, g: GraphBuilder, globs: list, params: list,
                   news: list) -> Value | None:
        """Adam's step count (carried, from 0): this step's number, t + 1."""
        if self.p.optimizer != "adam":
            return None
        # (of the parameters' element type: adam_update takes it with them)
        glob, old = self._state(step, "adam_step", TensorType((), self.params[0].type.element))
        new = g.op("add", old, g.scalar(1.0, old))
        globs.append(glob)
        params.append(old)
        news.append(new)
        return new

    def _optimise(self, step: Function, g: GraphBuilder, param: Value, grad: Value,
                  glob: Global, count: Value | None):
        """The update of one parameter: (its results, [(state global, (new, old))])."""
        p = self.p
        if p.optimizer == "sgd":
            if p.momentum == 0:
                return [g.op("sgd_update", param, grad, lr=p.lr,
                             weight_decay=p.weight_decay)], []
            vg, v = self._state(step, f"{glob.name}_velocity", param.type)
            outs = g.ops("sgd_update", param, grad, v, lr=p.lr, momentum=p.momentum,
                         weight_decay=p.weight_decay)
            return outs, [(vg, (outs[1], v))]
        mg, m = self._state(step, f"{glob.name}_m", param.type)
        vg, v = self._state(step, f"{glob.name}_v", param.type)
        outs = g.ops("adam_update", param, grad, m, v, count, lr=p.lr, beta1=p.beta1,
                     beta2=p.beta2, epsilon=p.epsilon, weight_decay=p.weight_decay)
        return outs, [(mg, (outs[1], m)), (vg, (outs[2], v))]

    def _state(self, step: Function, base: str, t: TensorType) -> tuple[Global, Value]:
        """A new optimiser-state global (zeros) and the step's parameter for it."""
        glob = Builder.global_(self.m, self.m.unique_name(base), t,
                               init=Dense(0.0 if t.element.is_float else 0))
        return glob, step.add_param(t, glob.name)
