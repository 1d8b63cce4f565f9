"""swir-import's engine: an ONNX model → a graph-stage swir module and its weights.

    imported = import_onnx("resnet18.onnx", weights_file="resnet18.weights",
                           shapes={"input": (1, 3, 224, 224)})
    text = print_module(imported.module)        # refers to resnet18.weights
    blob = imported.weights                     # its contents

The steps, each with its own diagnostics (``ImportFailure``: one line naming the
file and, where there is one, the node by name and op type):

1. **Load** (:func:`load_model`): the protobuf (a file that does not parse is
   "not an ONNX model"), the ONNX checker (unless ``check=False``), external
   data (``MODEL.onnx.data``, what ``torch.onnx.export`` writes) read from
   beside the model, and the default-domain opset: 13 up to the newest the
   installed ``onnx`` knows.
2. **Bind shapes**: every graph input needs a static shape; symbolic or
   unknown dimensions are bound by ``shapes`` (per input, or per symbol name).
3. **Live nodes in dependency order**: only nodes the graph outputs depend on
   are imported (an unsupported op that nothing uses is no error); a cycle or
   an input nobody produces is a diagnostic.
4. **Convert** node by node: a node whose inputs are all known at import time
   (initializers, Constant nodes, shapes: ``Shape`` of a value with a static
   type is a constant) is evaluated by onnx's reference implementation, so
   the Shape → Gather → Concat → Reshape chains of exported models fold into
   constants; every other node goes to its converter in
   :mod:`swir.frontend.onnx_ops`, which checks every attribute and input it
   does not support and emits swir graph ops (whose shape rules then check
   the types).
5. **Cross-check**: each value's inferred type is compared with the type the
   model declares for it (graph outputs and ``value_info``), where declared.
6. **Constants** become module ``global``s: at most ``DENSE_MAX`` elements (or
   all equal) as ``dense<...>`` literals, the rest in the sidecar weights file,
   64-byte aligned.
"""

from __future__ import annotations

import errno
import hashlib
import math
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swir.frontend import (onnx_control, onnx_graph, onnx_ops,  # noqa: F401 (converters)
                           onnx_recurrent)
from swir.frontend.onnx_types import (NUMPY_ELEMENTS, ImportFailure, Tensor, dtype_name,
                                      element_types, first_line, numpy_element, onnx_modules,
                                      swir_element)
from swir.frontend.tensorflow_import import convert_tensorflow, tensorflow_kind
from swir.ir.builder import Builder
from swir.ir.core import Dense, FileInit, Function, Global, Module, Value
from swir.ir.dtypes import dtype_of
from swir.ir.types import (I1, ScalarType, TensorType,
                             size_error)
from swir.target import Target, default_target

# Constants with at most this many elements are dense<...> literals in the module.
DENSE_MAX = 16
MIN_OPSET = 13

# -- loading ---------------------------------------------------------------------------

def load_model(path: Path, check: bool = True):
    """Parse, check, read external data; return the ModelProto and its opset."""
    onnx, _, _ = onnx_modules()
    why = _not_a_model_file(path)
    if why:
        raise ImportFailure(f"cannot read the model: {why}")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except OSError as e:
        raise ImportFailure(f"cannot read the model: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001  protobuf's DecodeError and friends
        raise ImportFailure(f"not an ONNX model, or a truncated one: {first_line(e)}") from None
    _require_graph(model)
    opset = default_opset(model)
    check_external_data(model, path.parent)
    if check:   # by path: the checker reads a model over 2 GB from its file
        _checked(onnx, str(path))
    try:
        from onnx.external_data_helper import load_external_data_for_model
        load_external_data_for_model(model, str(path.parent))
    except Exception as e:  # noqa: BLE001  missing file, bad location, short file
        raise ImportFailure(f"cannot read the model's external data: {first_line(e)}") from None
    return model, opset


def _not_a_model_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a model (None: a regular file); a FIFO
    or a device is named, never opened to block or never end."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return "no such file" if e.errno == errno.ENOENT else (e.strerror or str(e))
    if stat.S_ISREG(mode):
        return None
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")
    return f"it is {kind}, not a regular file"


def check_external_data(model, base: Path) -> None:
    """Where each tensor's external data is must be a regular file inside the
    model's directory, and its offset and length inside that file: the
    model's ``location`` strings never name a file elsewhere (an absolute
    path, ``../``, a symbolic link out), whatever the installed onnx checks
    (older versions checked none of it)."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    root = base.resolve()
    for t in _get_all_tensors(model):
        if not uses_external_data(t):
            continue
        info = {e.key: e.value for e in t.external_data}
        where = f"tensor '{t.name}'"
        loc = info.get("location", "")
        parts = loc.replace("\\", "/").split("/")
        if not loc or "\0" in loc or loc.startswith(("/", "\\")) or loc[1:2] == ":" \
                or ".." in parts:
            raise ImportFailure(f"{where}: external data location '{loc}' is not a file name "
                                "relative to the model's directory")
        size = None
        try:
            real = (root / loc).resolve()     # symbolic links followed
            if real != root and root not in real.parents:
                raise ImportFailure(f"{where}: external data '{loc}' leads outside the "
                                    "model's directory")
            if real.is_file():
                size = real.stat().st_size
        except (OSError, RuntimeError):       # unreadable, a loop of links
            pass
        if size is None:
            raise ImportFailure(f"{where}: external data '{loc}' is not a readable regular "
                                "file beside the model")
        try:
            offset = int(info.get("offset", "0"))
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError:
            raise ImportFailure(f"{where}: external data offset or length is not an "
                                "integer") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise ImportFailure(f"{where}: external data at offset {offset}, length {length} "
                                f"does not fit in '{loc}' ({size} bytes)")


def default_opset(model) -> int:
    onnx, _, _ = onnx_modules()
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise ImportFailure("the model imports no version of the default ONNX opset")
    newest = onnx.defs.onnx_opset_version()
    v = versions[0]
    if not MIN_OPSET <= v <= newest:
        raise ImportFailure(f"opset {v} is not supported: swir-import reads opsets "
                            f"{MIN_OPSET} to {newest} (convert the model with "
                            "onnx.version_converter)")
    return v


# -- the result ----------------------------------------------------------------------------

@dataclass
class Imported:
    module: Module
    weights: bytearray                 # the sidecar file's contents (may be empty)
    weights_file: str                  # its name, as the module refers to it
    stats: dict[str, int] = field(default_factory=dict)


def import_onnx(source: str | Path | Any, weights_file: str,
                shapes: dict[str, tuple[int, ...]] | None = None,
                name: str | None = None, check: bool = True,
                target: Target | None = None, inline_max: int = DENSE_MAX) -> Imported:
    """Translate a model: an ONNX file, a TensorFlow SavedModel folder, a Keras
    or TFLite file (through tf2onnx: :mod:`swir.frontend.tensorflow_import`),
    or an ``onnx.ModelProto``. ``weights_file`` is the sidecar's
    name relative to where the module will be written; each of its arrays
    starts at a multiple of ``target``'s main-memory alignment (the default
    target's if none). Constants of at most ``inline_max`` elements, and
    splats unless it is 0, are dense<...> literals (0: every constant is in
    the weights file, so a training program can save every parameter)."""
    model, opset, stem = read_model(source, check)
    module_name = name or model.graph.name or stem
    imp = Importer(model, opset, weights_file, module_name,
                   (target or default_target()).mem_align, inline_max)
    imp.run(dict(shapes or {}))
    return Imported(imp.module, imp.blob, weights_file, imp.stats)


def read_model(source: str | Path | Any, check: bool = True) -> tuple[Any, int, str]:
    """The ModelProto, its opset and a fallback module name, from any source
    import_onnx takes."""
    if not isinstance(source, (str, Path)):
        return model_from_proto(source, check), default_opset(source), "model"
    path = Path(source)
    kind = tensorflow_kind(path)
    if kind is None:
        model, opset = load_model(path, check)
        return model, opset, path.stem
    model = model_from_proto(convert_tensorflow(path, kind), check)
    return model, default_opset(model), path.stem


def model_from_proto(model: Any, check: bool = True) -> Any:
    """An in-memory ModelProto, checked as a file would be; its tensors must
    hold their data (external data has no folder to be read from)."""
    onnx, _, _ = onnx_modules()
    if not isinstance(model, onnx.ModelProto):
        raise ImportFailure(f"not a model: expected a path or an onnx.ModelProto, got "
                            f"{type(model).__name__}")
    _require_graph(model)
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    if any(uses_external_data(t) for t in _get_all_tensors(model)):
        raise ImportFailure("the model keeps tensors in external data: load it with "
                            "onnx.load(path) (which reads them) or pass its path")
    if check:
        _checked(onnx, model)
    return model


def _require_graph(model) -> None:
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ImportFailure("not an ONNX model: it has no IR version or no graph")


def _checked(onnx, model: Any) -> None:
    """onnx.checker on a model (a ModelProto or a path), as a located failure."""
    try:
        onnx.checker.check_model(model)
    except Exception as e:  # noqa: BLE001  ValidationError, or protobuf's
        raise ImportFailure(f"invalid ONNX model: {first_line(e)} "
                            "(--no-check imports it anyway)") from None


# -- the importer ------------------------------------------------------------------------

class Importer:
    """Holds the module under construction and the ONNX name → Tensor map."""

    def __init__(self, model, opset: int, weights_file: str, module_name: str,
                 align: int, inline_max: int = DENSE_MAX) -> None:
        self.model = model
        self.inline_max = inline_max
        self.align = align                  # of each array in the weights file
        self.graph = model.graph
        self.opset = opset
        self.weights_file = weights_file
        self.module = Module(module_name, stage="graph")
        self.blob = bytearray()
        self.values: dict[str, Tensor] = {}
        self.globals: dict[int, Global] = {}   # id(array) -> its global (kept alive below)
        self.by_content: dict[tuple, Global] = {}  # (name, dtype, shape, digest) -> global
        self._arrays: list[np.ndarray] = []
        self.builder: Builder | None = None
        self.function: Function | None = None
        self.declared: dict[str, tuple[int, Any]] = {}  # name -> (elem type, dims or None)
        self.symbols: dict[str, int] = {}
        self.used: set[str] = set()         # names a live node or a graph output reads
        self.stats = {"nodes": 0, "folded": 0, "ops": 0, "globals": 0, "inline": 0}

    # -- driver --------------------------------------------------------------------
    def run(self, shapes: dict[str, tuple[int, ...]]) -> None:
        _, numpy_helper, _ = onnx_modules()
        for init in self.graph.initializer:
            self.values[init.name] = _to_array(numpy_helper, init)
        for sparse in self.graph.sparse_initializer:
            raise ImportFailure(f"sparse initializer '{sparse.values.name}' is not supported")
        inputs = [i for i in self.graph.input if i.name not in self.values]
        bound = onnx_graph.bind_shapes(inputs, shapes)
        self.symbols = onnx_graph.bound_symbols(inputs, bound, shapes)
        self.declared = onnx_graph.declared_types(self.graph)
        self._open_function(inputs, bound)
        order, self.used = onnx_graph.live_nodes(self.graph, set(self.values))
        for node, index in order:
            self._convert(node, index)
        self._return()
        # Constants were added as they were first used; print them first.
        self.module.items.sort(key=lambda item: not isinstance(item, Global))

    def _open_function(self, inputs, bound: dict[str, tuple[int, ...]]) -> None:
        types, names = [], []
        for vi in inputs:
            elem = swir_element(vi.type.tensor_type.elem_type, f"input '{vi.name}'")
            types.append(TensorType(bound[vi.name], elem))
            too_large = size_error(types[-1])
            if too_large:
                raise ImportFailure(f"input '{vi.name}': {too_large}")
            names.append(vi.name)
        self.function, self.builder = Builder.function(
            self.module, self._symbol("main"), types, [], param_names=names)
        for vi, p in zip(inputs, self.function.params):
            self.values[vi.name] = p

    def _convert(self, node, index: int) -> None:
        self.stats["nodes"] += 1
        n = onnx_ops.Node(self, node, index)
        outputs = onnx_ops.fold(n) if n.foldable() else None
        if outputs is not None:
            self.stats["folded"] += 1
        else:
            outputs = onnx_ops.convert(n)
        for i, out_name in enumerate(node.output):
            if not out_name:
                continue
            result = outputs[i] if i < len(outputs) else None
            if result is None:
                if out_name in n.live_outputs:
                    n.fail(f"output {i} ('{out_name}') is not supported, and the model uses it")
                continue
            if isinstance(result, Value) and result.name is None:
                result.name = out_name
            self._check_declared(n, out_name, result)
            self.values[out_name] = result

    def run_subgraph(self, graph, inputs: list[Tensor], where: str) -> list[Tensor]:
        """Convert a subgraph's nodes once (a Loop body for one iteration, an If
        branch) with its inputs bound to ``inputs``; return its outputs. The
        names it defines are visible only while it runs (ONNX's scoping), so
        the next iteration defines them anew."""
        _, numpy_helper, _ = onnx_modules()
        if len(inputs) != len(graph.input):
            raise ImportFailure(f"{where}: its subgraph has {len(graph.input)} inputs, "
                                f"the node gives {len(inputs)}")
        saved = self.values, self.declared, self.used
        self.values = dict(self.values)
        try:
            for vi, v in zip(graph.input, inputs):
                self.values[vi.name] = v
            for init in graph.initializer:
                self.values[init.name] = _to_array(numpy_helper, init)
            self.declared = {**self.declared, **onnx_graph.declared_types(graph)}
            order, used = onnx_graph.live_nodes(graph, set(self.values))
            self.used = self.used | used
            for node, index in order:
                self._convert(node, index)
            return [self.values[o.name] for o in graph.output]
        finally:
            self.values, self.declared, self.used = saved

    def _return(self) -> None:
        results = []
        for out in self.graph.output:
            if out.name not in self.values:
                raise ImportFailure(f"graph output '{out.name}' is not produced by any node, "
                                    "initializer or input")
            v = self.values[out.name]
            if isinstance(v, np.ndarray):
                # A constant output still needs an op writing it (a function
                # result is a value, and lowering writes results with kernels).
                g = self.constant(v, out.name)
                v = self.builder.create("reshape", g, attrs={"shape": list(g.type.shape)},
                                        names=[out.name])
            results.append(v)
        assert self.function is not None
        self.function.result_types = [v.type for v in results]
        self.builder.create("return", *results)

    # -- constants ---------------------------------------------------------------
    def constant(self, a: np.ndarray, name: str) -> Global:
        """The global holding array ``a`` (one per array object)."""
        g = self.globals.get(id(a))
        if g is not None:
            return g
        # An unrolled loop folds the same constant anew in every iteration:
        # one global serves them all (distinct ONNX tensors stay distinct,
        # even when equal: a training step updates each on its own).
        same = (name, a.dtype.str, a.shape, hashlib.blake2b(a.tobytes(), digest_size=16).digest())
        g = self.by_content.get(same)
        if g is not None:
            return g
        what = f"constant '{name}'"
        elem = numpy_element(a, what)
        if a.size == 0 or 0 in a.shape:
            raise ImportFailure(f"{what} is empty (shape {list(a.shape)}); swir tensors have "
                                "positive dimensions")
        t = TensorType(tuple(int(d) for d in a.shape), elem)
        g = Builder.global_(self.module, self._symbol(name), t, init=self._init(a, elem))
        self.globals[id(a)] = self.by_content[same] = g
        self._arrays.append(a)
        self.stats["globals"] += 1
        return g

    def _init(self, a: np.ndarray, elem: ScalarType) -> Dense | FileInit:
        flat = a.reshape(-1)
        if self.inline_max > 0 and _is_splat(flat):
            self.stats["inline"] += 1
            return Dense(_literal(flat[0], elem))
        if a.size <= self.inline_max:
            self.stats["inline"] += 1
            return Dense(tuple(_literal(x, elem) for x in flat))
        pad = -len(self.blob) % self.align
        self.blob += b"\0" * pad
        offset = len(self.blob)
        data = np.ascontiguousarray(a, dtype=dtype_of(TensorType((1,), elem)).newbyteorder("<"))
        self.blob += data.tobytes()
        return FileInit(self.weights_file, offset)

    def _symbol(self, name: str) -> str:
        base, n = name or "c", 0
        candidate = base
        while self.module.lookup(candidate) is not None:
            n += 1
            candidate = f"{base}_{n}"
        return candidate

    # -- checks --------------------------------------------------------------------
    def _check_declared(self, n, name: str, result: Tensor) -> None:
        """The model's own declared type for ``name``, where it states one, must
        be what swir inferred (a safety net against a converter's mistake)."""
        declared = self.declared.get(name)
        if declared is None:
            return
        elem_type, dims = declared
        elem = element_types().get(elem_type)
        if isinstance(result, np.ndarray):
            # A folded constant may have a type swir lacks (uint8, string):
            # fine while only other folded nodes read it.
            shape, actual_elem = result.shape, NUMPY_ELEMENTS.get(result.dtype)
        else:
            shape, actual_elem = result.type.shape, result.type.element
        if elem is not None and actual_elem is not None and elem != actual_elem:
            n.fail(f"output '{name}' is {actual_elem}, but the model declares "
                   f"{dtype_name(elem_type)}")
        if dims is None:
            return
        if len(dims) != len(shape) or any(
                _dim_value(d, self.symbols) not in (None, s) for d, s in zip(dims, shape)):
            want = "[" + ", ".join(str(_dim_value(d, self.symbols) or d) for d in dims) + "]"
            n.fail(f"output '{name}' has shape {list(shape)}, but the model declares {want}")


def _is_splat(flat: np.ndarray) -> bool:
    """All elements bit-for-bit equal (so -0.0 and 0.0 differ, and one NaN
    pattern repeated is a splat)."""
    bits = flat.view(np.dtype(f"u{flat.dtype.itemsize}")) if flat.dtype != np.bool_ else flat
    return bool(np.all(bits == bits[0]))


def _dim_value(d: Any, symbols: dict[str, int]) -> int | None:
    if isinstance(d, int):
        return d
    return symbols.get(d)


def _to_array(numpy_helper, tensor) -> np.ndarray:
    if any(d < 0 for d in tensor.dims):      # onnx.checker's; also under --no-check
        raise ImportFailure(f"initializer '{tensor.name}' has a negative dimension "
                            f"({list(tensor.dims)})")
    return _tensor_array(numpy_helper, tensor)


def _tensor_array(numpy_helper, tensor) -> np.ndarray:
    try:
        return np.array(numpy_helper.to_array(tensor))
    except Exception as e:  # noqa: BLE001  bad raw_data length, unknown type, ...
        raise ImportFailure(f"initializer '{tensor.name}' cannot be read: "
                            f"{first_line(e)}") from None


def _literal(x: Any, elem: ScalarType) -> float | int | bool:
    """A Python number that converts back to exactly ``x`` in ``elem``: the
    shortest decimal for floats (0.1, not 0.10000000149011612)."""
    if elem == I1:
        return bool(x)
    if not elem.is_float:
        return int(x)
    v = float(x)
    if not math.isfinite(v):
        return v
    short = float(str(x))   # numpy prints the shortest round-trip decimal
    dtype = dtype_of(elem)
    return short if dtype.type(short) == x else v
