"""swir.analysis.vector_plan: which CPE nests become vector micro-kernels, the
block each gets, and what the cost model charges for the code written
(docs/codegen.md, "Vector micro-kernels"; docs/cost-model.md, "Compute")."""

from __future__ import annotations

import pytest

from swir.analysis import vector_plan as V
from swir.costmodel.cost import cost_report
from swir.codegen.project import Options, generate
from swir.ir.core import Module
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.target import SW26010
from swir.verifier import verify


def lowered(text: str) -> Module:
    m = parse_module(text, "<vector>")
    verify(m)
    PassManager([pass_class(n)() for n in ("lower-loops", "ldm-plan", "insert-dma")],
                verify_each=True).run(m)
    return m


def graph(body: str, args: str, result: str) -> str:
    return f"""module "v"
stage graph
func @main({args}) -> {result} {{
'entry:
{body}
}}
"""


CONV = graph("  %y = conv2d %x, %w {pad = [1, 1, 1, 1]} : <1 x 16 x 32 x 32 x f32>\n  return %y",
             "%x: <1 x 8 x 32 x 32 x f32>, %w: <16 x 8 x 3 x 3 x f32>",
             "<1 x 16 x 32 x 32 x f32>")
RELU = graph("  %y = relu %x : <4 x 64 x f32>\n  return %y", "%x: <4 x 64 x f32>",
             "<4 x 64 x f32>")
POOL = graph("  %y = max_pool2d %x {kernel = [3, 3], stride = [1, 1], pad = [1, 1, 1, 1]} : "
             "<1 x 8 x 16 x 16 x f32>\n  return %y", "%x: <1 x 8 x 16 x 16 x f32>",
             "<1 x 8 x 16 x 16 x f32>")
NARROW = graph("  %c = matmul %a, %b : <8 x 6 x f32>\n  return %c",
               "%a: <8 x 32 x f32>, %b: <32 x 6 x f32>", "<8 x 6 x f32>")
STRIDED = graph("  %y = conv2d %x, %w {stride = [2, 2], pad = [1, 1, 1, 1]} : "
                "<1 x 8 x 6 x 6 x f32>\n  return %y",
                "%x: <1 x 4 x 12 x 12 x f32>, %w: <8 x 4 x 3 x 3 x f32>",
                "<1 x 8 x 6 x 6 x f32>")


def plans(m: Module) -> list[V.Plan]:
    """The outermost planned nest of every loop of every CPE kernel, as
    swir-cg meets them."""
    out: list[V.Plan] = []

    def visit(region) -> None:
        for block in region.blocks:
            for inst in block.instructions:
                p = V.plan(inst) if inst.opname == "for" else None
                if p is not None:
                    out.append(p)
                    continue
                for r in inst.regions:
                    visit(r)
    for f in m.functions:
        if f.target == "cpe":
            visit(f.body)
    return out


def test_a_conv_gets_a_register_block_that_fits_the_registers():
    reduce = [p for p in plans(lowered(CONV)) if p.kind == "reduce"]
    assert reduce
    for p in reduce:
        assert p.v.name == "owi"                 # output columns in the lanes
        assert p.m is not None and p.m.name in ("oci", "ohi") and p.M > 1 and p.U > 1
        assert p.fused is not None and p.fused.opname == "mul"      # one FMA per term
        # accumulators + the step's vector loads + broadcasts within 32 - 4
        assert p.M * p.U + p.U + p.M <= SW26010.vector_registers - V.SPARE_REGISTERS


def test_the_vector_micro_kernel_costs_less_than_the_scalar_nest():
    p = next(p for p in plans(lowered(CONV)) if p.kind == "reduce")
    scalar = V.body_cost(p.body, None)
    vector = V.body_cost(p.body, p)
    # scalar: a load of Y, the input and the weight, a store, a mul and an add
    # per point, on a chain through Y: the FP latency bounds it
    assert scalar.cycles == max(2, 4, SW26010.fp_latency)
    assert scalar.vector_flops == 0
    assert vector.cycles < scalar.cycles / 4
    assert vector.vector_flops == 2                # 32 columns: whole vectors only


def test_the_last_columns_are_the_vector_ending_at_the_bound():
    """6 columns, a count known where the code is written: one block of two
    vectors, the whole one and the 4 columns ending at the bound (its lanes
    2 and 3 new, lanes 0 and 1 recomputing columns 2 and 3 and dropped):
    every load contiguous, every flop a vector one, and the model charges
    that code (docs/cost-model.md, "Compute")."""
    m = lowered(NARROW)
    p = next(p for p in plans(m) if p.kind == "reduce")
    assert (p.v.name, p.m, p.U, p.most(p.v)) == ("yi", None, 2, 6)   # a row per CPE
    cost = V.body_cost(p.body, p)
    assert cost.vector_flops == 2
    # Per k (32 steps): 2 FMAs (FP pipe); B's 2 vector loads and A's
    # broadcast, one simd_loade (memory pipe: 3); the FMA's latency (7)
    # bounds the step. C, per 32 steps: the whole vector's load and store,
    # the other's lanes stored, then per new column 2 loads and a store
    # (1 + 3 x 2). 6 points.
    assert cost.cycles == pytest.approx((7 + (2 + 7) / 32) / 6)
    c = generate(m, Options(source="<vector>"))["layers_slave.c"].decode()
    assert "/* the last 6 columns: 1 vector and the 4 ending at the bound, 2 lanes new */" in c
    assert "simd_loadu(B_ldm_v_2, &B_ldm[ki][2]);" in c      # columns 2 to 5
    assert "C_ldm[4] += acc0_1_lanes[2];" in c and "C_ldm[3] +=" not in c
    assert "simd_set_floatv4" not in c               # nothing gathered
    # no scalar column loop: the zero fill's last 2 columns (a map loop's,
    # one per copy of the double-buffered tile loop's body) are the vector
    # of the 4 ending at the bound, 2 of its lanes stored
    assert "for (; yi < 6; yi++)" not in c
    assert c.count("the last 2 columns: the 4 ending at the bound, 2 lanes stored") == \
        c.count("/* vector loop") == 2


def test_relu_is_a_map_of_selects_and_zero_fill_is_a_map():
    """relu is a map plan: per 4 points, a vector load and store and the 4
    vector instructions of its select form (compare, select, NaN test,
    select), against the scalar code's 2 memory operations per point."""
    m = lowered(RELU)
    assert {p.kind for p in plans(m)} == {"map"}          # (one per double-buffered copy)
    relu = m.lookup("relu_0")
    costs = list(V.body_costs(relu.body))
    assert costs and all(c.vector_flops == 1 and c.cycles == 1.0 for _, c in costs)
    body = costs[0][0]
    assert V.body_cost(body, None).cycles == 2.0
    conv = plans(lowered(CONV))
    assert any(p.kind == "map" and [i.opname for i in p.body] == ["store"] for p in conv)


def test_max_pooling_is_a_reduce_plan_charged_its_select_form():
    """Y[s] = max(Y[s], x) reduces like a sum: accumulators in registers over
    the window, no FMA fused, the max charged 4 vector instructions."""
    p = next(p for p in plans(lowered(POOL)) if p.kind == "reduce")
    assert p.fused is None and V.producer(p.body, p.store.args[0]).opname == "max"
    assert V._profile(p).combine == 4
    assert V.body_cost(p.body, p).vector_flops == 1
    assert V.body_cost(p.body, p).cycles < V.body_cost(p.body, None).cycles


def test_a_strided_input_is_gathered():
    p = next(p for p in plans(lowered(STRIDED)) if p.kind == "reduce")
    kinds = {V.access_of(i).base.name: V.access_kind(V.access_of(i), p.v)
             for i in p.body if i.opname == "load" and i is not p.acc_load}
    assert kinds["P_ldm"] == "gather" and kinds["W_ldm"] == "invariant"
    # 4 scalar loads per vector: memory bound, but still below the scalar nest
    assert V.body_cost(p.body, p).cycles < V.body_cost(p.body, None).cycles


@pytest.mark.parametrize("text", [CONV, STRIDED, NARROW, RELU],
                         ids=["conv", "strided", "narrow", "relu"])
def test_codegen_writes_what_the_cost_model_charges(text):
    """Every nest the model charges as a vector micro-kernel or loop is one
    the C has, and the model's vector flops come from those nests only."""
    m = lowered(text)
    c = generate(m, Options(source="<vector>"))["layers_slave.c"].decode()
    found = plans(m)
    assert c.count("/* vector micro-kernel") == sum(p.kind == "reduce" for p in found)
    assert c.count("/* vector loop") == sum(p.kind == "map" for p in found)
    report = cost_report(m)
    for k in report.kernels:
        assert (k.vector_flops > 0) == any(
            p.kind == "reduce" or any(V.flops_of(i) for i in p.body)
            for p in plans_of(m, k.name))


def plans_of(m: Module, kernel: str) -> list[V.Plan]:
    return [p for p in plans(m) if _owner(m, p) == kernel]


def _owner(m: Module, p: V.Plan) -> str:
    for f in m.functions:
        if any(i is p.loops[0] for i in f.walk()):
            return f.name
    raise AssertionError("a plan outside every function")


def test_no_simd_writes_no_vector_code():
    m = lowered(CONV)
    c = generate(m, Options(source="<vector>", simd=False))["layers_slave.c"].decode()
    assert "floatv4" not in c and "simd.h" not in c


def test_a_broadcast_is_one_load_beside_the_fmas():
    """docs/cost-model.md, "A broadcast is a load": simd_loade takes a slot
    of the memory pipe only (swGEMM's inner loop issues its lddec beside 16
    vmad in 16 cycles), a gathered vector its 4 loads and simd_set's 4
    stores and vector load."""
    bcast = V._Profile(loads=((False, "contig"), (True, "invariant")), ops=0,
                       reduction_points=None)
    # 4 x 4: 16 FMAs (FP pipe); 4 vector loads and 4 simd_loade (memory pipe)
    assert V._reduce_cost(bcast, 4, 4, SW26010) == 16 / 64
    gathered = V._Profile(loads=((False, "gather"), (True, "invariant")), ops=0,
                          reduction_points=None)
    assert V._reduce_cost(gathered, 4, 4, SW26010) == (4 * 9 + 4) / 64
    # 7 known columns, 8 rows of output channels: one block of 2 vectors, the
    # second the 4 columns ending at the bound (3 new): 16 FMAs per 56 points
    assert V._block_point_cost(bcast, 7, 8, 8, 2, SW26010, True) == 16 / 56
    # known only at run time: a vector block, then the gathered tail block
    assert V._block_point_cost(bcast, 7, 8, 8, 1, SW26010, False) > 16 / 56
