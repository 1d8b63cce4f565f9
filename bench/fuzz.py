"""Fuzz swir's front ends: the textual IR parser and verifier (swir-opt),
the ONNX importer (swir-import) and swir-run's program inputs.

The property, for every input: the tool either succeeds (exit 0, and its
output is valid: the printed IR parses, verifies and prints to itself; the
.npy it wrote loads) or fails cleanly (exit 1, stderr's first line is a
diagnostic -- ``FILE:LINE:COL: error: ...`` or ``TOOL: error: ...`` -- and
no output file exists). Anything else is a failure: another exit status
(2 is swir's internal error), a Python traceback, an exception escaping
the tool, or a case running longer than the time bound.

Tools run in this process (as ``run_tool`` runs them from the command line)
so a campaign can try 100,000 cases. Inputs come from seeds -- every .swir
file under examples/ and test/, small ONNX models built here, and valid
.npy inputs -- changed by mutators that aim at the error paths: byte edits,
truncation, token swaps, huge and special numbers, long and unicode
identifiers, NUL bytes, deep nesting, splices of other seeds; for ONNX,
changes to the protobuf's structure (wrong initializer shapes and sizes,
cycles, dangling and duplicate names, unknown ops, bad attributes, external
data outside the model's folder) as well as to its bytes; randomly
generated modules exercise the verifier beyond what the seeds contain.

    python bench/fuzz.py --parser 100000 --importer 10000 --run-inputs 10000
    python bench/fuzz.py --engine atheris --parser 100000   # coverage-guided

The CI test (test/unit/test_fuzz.py) runs a bounded campaign through
hypothesis with these same mutators and checks.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import re
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Seconds per case. Most cases take milliseconds; the slowest are mutants that
# repeat a line a thousand times (e.g. 1,000 guarded copies, each bounded by the
# verifier: 5 s for four verifications on an idle core), so the bound leaves
# room for a loaded machine. A campaign reports its slowest case.
TIME_BOUND = 60.0


class Failure(AssertionError):
    """The property does not hold for one input."""


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in swir eats it."""


# --------------------------------------------------------------------------------------
# Running a tool in process and checking the property
# --------------------------------------------------------------------------------------

_DIAGNOSTIC = re.compile(r"^(\S.*?:\d+:\d+: error: |\S.*?: error: |swir-[a-z]+: error: )\S")


@contextlib.contextmanager
def time_bound(seconds: float):
    """Raise Hang in this thread after ``seconds`` (main thread only)."""
    def alarm(signum, frame):
        raise Hang()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_in_process(tool: str, argv: list[str], bound: float = TIME_BOUND) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``tool argv`` run as its entry point runs it."""
    from swir.tools import swir_import, swir_opt, swir_run
    from swir.tools.driver import run_tool
    main = {"swir-opt": swir_opt.main, "swir-import": swir_import.main,
            "swir-run": swir_run.main}[tool]
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_bound(bound):
            status = run_tool(tool, main, argv)
    except Hang:
        raise Failure(f"{tool} ran longer than {bound:.0f} s") from None
    except SystemExit as e:
        raise Failure(f"{tool} raised SystemExit({e.code}): {err.getvalue()}") from None
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise Failure(f"{tool} let {type(e).__name__} escape: {e}") from e
    if time.perf_counter() - start > bound:
        raise Failure(f"{tool} ran longer than {bound:.0f} s")
    return status, out.getvalue(), err.getvalue()


def check(tool: str, argv: list[str], outputs: list[Path],
          accept=None, bound: float = TIME_BOUND) -> str:
    """Run one case and check the property; 'ok' or 'rejected', or raise Failure.
    ``accept(stdout)`` checks a successful run's output further."""
    for p in outputs:
        if p.exists():
            p.unlink()
    status, out, err = run_in_process(tool, argv, bound)
    if "Traceback" in err or "Traceback" in out:
        raise Failure(f"{tool} printed a traceback (exit {status}):\n{err}")
    if status == 0:
        missing = [str(p) for p in outputs if not p.exists()]
        if missing:
            raise Failure(f"{tool} succeeded without writing {missing}")
        if accept is not None:
            accept(out)
        return "ok"
    if status != 1:
        raise Failure(f"{tool} exited with status {status}:\n{err}")
    first = err.split("\n", 1)[0]
    if not _DIAGNOSTIC.match(first):
        raise Failure(f"{tool} exited with status 1 but its first line of stderr is "
                      f"not a diagnostic: {first!r}")
    written = [str(p) for p in outputs if p.exists()]
    if written:
        raise Failure(f"{tool} failed but wrote {written}")
    return "rejected"


def module_is_valid_and_stable(path: Path) -> None:
    """A module swir-opt wrote parses, verifies and prints to itself."""
    from swir.parser import parse_module
    from swir.printer import print_module
    from swir.verifier import verify
    text = path.read_text(encoding="utf-8")
    try:
        m = parse_module(text, str(path))
        verify(m)
    except Exception as e:  # noqa: BLE001  any failure to read it back fails the case
        raise Failure(f"the tool succeeded but its output is not valid IR: {e}") from None
    if print_module(m) != text:
        raise Failure("the tool's output is not a fixed point of parse and print")


# --------------------------------------------------------------------------------------
# Text mutators (the IR)
# --------------------------------------------------------------------------------------

_PRINTABLE = [chr(c) for c in range(0x20, 0x7f)]
_STRANGE = ([bytes([c]) for c in range(0x20)] + [b"\x7f", b"\x00", b"\x00\x00"] +
            [b"\xff", b"\xfe", b"\xc3", b"\x80", b"\xe2\x80", b"\xed\xa0\x80"] +
            [c.encode() for c in "\u00e9\u2028\u200b\ufeff\U0001f600\u03bb\u0301\u202e"])
_NUMBERS = [b"9" * 400, b"-" + b"9" * 400, b"1e999", b"-1e999", b"1e-999", b"nan", b"inf",
            b"-inf", b"0x10", b"1_000", b"-0", b"0.0", b"2147483648", b"9223372036854775808",
            b"-9223372036854775809", b"18446744073709551616", b"4294967296", b"1e308",
            b"4.9e-324", b"0", b"-1", b"65536", b"1" + b"0" * 30]
_TOKEN = re.compile(rb"[^\s(),\[\]{}<>:=]+")
_NUMBER = re.compile(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_NAME = re.compile(rb"[%@'][A-Za-z_][A-Za-z0-9_.$]*")


def _long_name(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return b"n" * rng.choice([256, 5000, 70000])
    if kind == 1:
        return "\u03bb\u00e9\U0001f600x".encode() * rng.randint(1, 50)
    if kind == 2:
        return b'"' + rng.choice([b"a b", b"\\\"", b"\\n", b"*/", b"$(x)", b"\\", b""]) + b'"'
    return rng.choice(_STRANGE) + b"x"


def _nest(rng: random.Random, data: bytes, pos: int) -> bytes:
    """Deep nesting at pos: parentheses, brackets, loops or blocks."""
    depth = rng.choice([50, 200, 1000, 5000])
    opener, closer = rng.choice([(b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"<", b">"),
                                 (b"for %i = 0 to 2 {\n", b"}\n"), (b"-", b"")])
    inner = rng.choice([b"0", b"", b"%i", b"1.0"])
    return data[:pos] + opener * depth + inner + closer * depth + data[pos:]


def mutate_text(rng: random.Random, data: bytes, others: list[bytes] = ()) -> bytes:
    """One mutation of a module's bytes."""
    if not data:
        return rng.choice(_PRINTABLE).encode()
    kind = rng.choice(["delete", "insert_printable", "insert_strange", "dup_line",
                       "delete_line", "swap_tokens", "truncate", "digit", "sigil",
                       "number", "name", "nest", "splice", "repeat", "bit_flip"])
    pos = rng.randrange(len(data) + 1)
    if kind == "delete":
        return data[:pos] + data[pos + rng.randint(1, 8):]
    if kind == "insert_printable":
        s = "".join(rng.choice(_PRINTABLE) for _ in range(rng.randint(1, 4)))
        return data[:pos] + s.encode() + data[pos:]
    if kind == "insert_strange":
        return data[:pos] + rng.choice(_STRANGE) + data[pos:]
    if kind in ("dup_line", "delete_line"):
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        if kind == "delete_line":
            del lines[i]
        else:
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        return b"\n".join(lines)
    if kind == "swap_tokens":
        toks = list(_TOKEN.finditer(data))
        if len(toks) < 2:
            return data[:pos]
        i = rng.randrange(len(toks) - 1)
        j = i + 1 if rng.random() < 0.6 else rng.randrange(len(toks))
        a, b = sorted((toks[i], toks[j]), key=lambda m: m.start())
        if a.start() == b.start():
            return data
        return (data[:a.start()] + b.group() + data[a.end():b.start()] + a.group() +
                data[b.end():])
    if kind == "truncate":
        return data[:pos]
    if kind == "digit":
        digits = [i for i, c in enumerate(data) if 0x30 <= c <= 0x39]
        if not digits:
            return data
        i = rng.choice(digits)
        return data[:i] + rng.choice(b"0123456789-").to_bytes(1, "big") + data[i + 1:]
    if kind == "sigil":
        sigils = [i for i, c in enumerate(data) if c in b"%@'!"]
        if not sigils:
            return data
        i = rng.choice(sigils)
        return data[:i] + rng.choice([b"", b"%", b"@", b"'", b"!"]) + data[i + 1:]
    if kind == "number":
        return _replace_match(rng, data, _NUMBER, lambda m: rng.choice(_NUMBERS))
    if kind == "name":
        return _replace_match(rng, data, _NAME, lambda m: m.group()[:1] + _long_name(rng))
    if kind == "nest":
        return _nest(rng, data, pos)
    if kind == "splice":
        if not others:
            return data
        other = rng.choice(others)
        a = rng.randrange(len(other) + 1)
        return data[:pos] + other[a:a + rng.randint(1, 400)] + data[pos:]
    if kind == "repeat":
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [lines[i]] * rng.choice([10, 100, 1000]) + lines[i:])
    if kind == "bit_flip":
        if pos == len(data):
            pos -= 1
        return data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]
    raise AssertionError(kind)


def _replace_match(rng: random.Random, data: bytes, pattern: re.Pattern, new) -> bytes:
    matches = list(pattern.finditer(data))
    if not matches:
        return data
    m = rng.choice(matches)
    return data[:m.start()] + new(m) + data[m.end():]


def mutate_times(rng: random.Random, data: bytes, others: list[bytes] = (),
                 mutator=mutate_text) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
        data = mutator(rng, data, others)
    return data


def ir_seeds() -> list[bytes]:
    """Every bundled module (examples/, test/) up to 40 KB: valid ones and the
    lit tests' deliberately broken ones."""
    paths = sorted(p for d in ("examples", "test") for p in (ROOT / d).rglob("*.swir")
                   if "Output" not in p.parts)
    return [p.read_bytes() for p in paths if p.stat().st_size <= 40_000]


# --------------------------------------------------------------------------------------
# Random modules (the verifier beyond the seeds)
# --------------------------------------------------------------------------------------

_UNARY = ["relu", "exp", "neg", "sigmoid", "tanh", "sqrt", "abs", "log", "gelu", "softmax"]
_BINARY = ["add", "sub", "mul", "div", "max", "min", "matmul", "pow"]
_OTHER = ["reshape", "transpose", "reduce_sum", "concat", "slice", "conv2d", "max_pool",
          "broadcast", "cast", "bogus"]
_DTYPES = ["f32", "f64", "i32", "i64", "i1", "f16", "q8"]
_ATTRS = ["", "{axis = 1}", "{axis = -1}", "{perm = [1, 0]}", "{shape = [-1]}",
          "{axes = [0], keepdims = true}", "{stride = [1, 1], pad = [0, 0, 0, 0]}",
          "{kernel = [2, 2], stride = [2, 2]}", "{starts = [0], ends = [1]}",
          "{to = f64}", "{axis = 99999999999999999999}", "{x = \"s\\\"\"}", "{= 1}"]


def _random_type(rng: random.Random) -> str:
    rank = rng.choice([0, 1, 1, 2, 2, 3, 4, 6])
    dims = [str(rng.choice([1, 2, 3, 4, 8, 0, 17, 2 ** 31, 2 ** 62])) for _ in range(rank)]
    return "<" + " x ".join(dims + [rng.choice(_DTYPES[:3] if rng.random() < 0.9
                                               else _DTYPES)]) + ">"


def random_module(rng: random.Random) -> bytes:
    """A graph-stage module of random ops, operands and types: some valid,
    most rejected by the verifier (each for one of many reasons)."""
    lines = ['module "fuzz"', "stage graph"]
    for g in range(rng.randrange(3)):
        lines.append(f"global @g{g} : <2 x f32> = dense<[{rng.random()}, {-rng.random()}]>")
    n_params = rng.randint(0, 3)
    params = [(f"%p{i}", _random_type(rng)) for i in range(n_params)]
    lines.append("func @main(" + ", ".join(f"{n}: {t}" for n, t in params) + ") {")
    lines.append("'entry:")
    values = [n for n, _ in params] + [f"@g{g}" for g in range(2)]
    for i in range(rng.randint(0, 12)):
        op = rng.choice(_UNARY + _BINARY + _OTHER)
        arity = 1 if op in _UNARY else 2 if op in _BINARY else rng.randint(0, 3)
        operands = [rng.choice(values) if values else "%p0" for _ in range(arity)]
        attrs = rng.choice(_ATTRS) if rng.random() < 0.4 else ""
        lines.append(f"  %v{i} = {op} {', '.join(operands)} {attrs} : {_random_type(rng)}")
        values.append(f"%v{i}")
    lines.append("  return" + (" " + rng.choice(values) if values and rng.random() < 0.3 else ""))
    lines.append("}")
    return ("\n".join(lines) + "\n").encode()


# --------------------------------------------------------------------------------------
# ONNX seeds and mutators
# --------------------------------------------------------------------------------------

def onnx_seeds() -> list[bytes]:
    """Small models covering the importer's paths: dense layers, a conv net
    with batch norm and pooling, attention-like reshapes, constants."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    r = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(r.standard_normal(shape).astype(np.float32), name)

    def model(nodes, inputs, outputs, inits, name="g", opset=17):
        g = helper.make_graph(nodes, name, inputs, outputs, inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]) \
            .SerializeToString()

    f32 = TensorProto.FLOAT
    mlp = model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node("Add", ["h", "b"], ["a"], name="add"),
                 helper.make_node("Relu", ["a"], ["y"], name="relu")],
                [helper.make_tensor_value_info("x", f32, [1, 4])],
                [helper.make_tensor_value_info("y", f32, [1, 3])],
                [init("w", 4, 3), init("b", 3)])
    conv = model([helper.make_node("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1],
                                   strides=[1, 1]),
                  helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"]),
                  helper.make_node("Relu", ["n"], ["r"]),
                  helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                  helper.make_node("Flatten", ["p"], ["f"], axis=1),
                  helper.make_node("Gemm", ["f", "gw", "gb"], ["y"], transB=1)],
                 [helper.make_tensor_value_info("x", f32, [1, 2, 4, 4])],
                 [helper.make_tensor_value_info("y", f32, [1, 5])],
                 [init("k", 3, 2, 3, 3), init("kb", 3), init("s", 3), init("o", 3),
                  init("m", 3), numpy_helper.from_array(np.ones(3, np.float32), "v"),
                  init("gw", 5, 12), init("gb", 5)])
    shape = numpy_helper.from_array(np.array([1, 2, 4], np.int64), "shape")
    attn = model([helper.make_node("Reshape", ["x", "shape"], ["r"]),
                  helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
                  helper.make_node("MatMul", ["r", "t"], ["s"]),
                  helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                  helper.make_node("Constant", [], ["c"],
                                   value=numpy_helper.from_array(np.float32(0.5))),
                  helper.make_node("Mul", ["p", "c"], ["y"])],
                 [helper.make_tensor_value_info("x", f32, [1, 8])],
                 [helper.make_tensor_value_info("y", f32, [1, 2, 2])], [shape])
    return [mlp, conv, attn]


_ONNX_OPS = ["Relu", "Add", "MatMul", "Conv", "Gemm", "Reshape", "Softmax", "Nope", "",
             "Loop", "If", "Gather", "Concat", "Split", "Resize", "Pad", "Cast", "Where"]


def mutate_onnx(rng: random.Random, data: bytes, others: list[bytes] = ()) -> bytes:
    """One mutation: of the protobuf's structure (usually), or of its bytes."""
    import onnx
    if rng.random() < 0.15:
        return _mutate_bytes(rng, data)
    try:
        m = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001  an earlier mutation broke the protobuf: mutate bytes
        return _mutate_bytes(rng, data)
    g = m.graph
    kind = rng.choice(["init_dims", "init_data", "init_type", "dangling", "cycle",
                       "duplicate", "op_type", "attribute", "input_shape", "drop_output",
                       "drop_input", "external", "opset", "drop_node", "dup_node"])
    nodes = list(g.node)
    if kind.startswith("init") and len(g.initializer):
        t = rng.choice(list(g.initializer))
        if kind == "init_dims":
            i = rng.randrange(len(t.dims) + 1)
            new = rng.choice([0, 1, 2, 7, -1, 2 ** 40])
            if i < len(t.dims) and rng.random() < 0.7:
                t.dims[i] = new
            else:
                t.dims.append(new)
        elif kind == "init_data":
            raw = t.raw_data
            t.raw_data = raw[:rng.randrange(len(raw) + 1)] if raw and rng.random() < 0.6 \
                else raw + b"\x00" * rng.choice([1, 4, 1000])
        else:
            t.data_type = rng.choice([0, 2, 6, 7, 8, 9, 10, 11, 16, 99])
    elif kind == "dangling" and nodes:
        n = rng.choice(nodes)
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(["missing", "", "x" * 300])
    elif kind == "cycle" and nodes:
        n = rng.choice(nodes)
        later = nodes[nodes.index(n):]
        src = rng.choice(later)
        if n.input and src.output:
            n.input[rng.randrange(len(n.input))] = src.output[0]
    elif kind == "duplicate" and len(nodes) > 1:
        a, b = rng.sample(nodes, 2)
        if a.output and b.output:
            b.output[0] = a.output[0]
    elif kind == "op_type" and nodes:
        rng.choice(nodes).op_type = rng.choice(_ONNX_OPS)
    elif kind == "attribute" and nodes:
        _mutate_attribute(rng, rng.choice(nodes))
    elif kind == "input_shape" and len(g.input):
        dims = g.input[rng.randrange(len(g.input))].type.tensor_type.shape.dim
        if len(dims):
            d = dims[rng.randrange(len(dims))]
            if rng.random() < 0.3:
                d.dim_param = rng.choice(["N", "", "batch size"])
            else:
                d.dim_value = rng.choice([0, 1, 3, 2 ** 31, 2 ** 62])
        elif rng.random() < 0.5:
            g.input[0].type.tensor_type.elem_type = rng.choice([0, 7, 11, 16])
    elif kind == "drop_output" and len(g.output):
        del g.output[rng.randrange(len(g.output))]
    elif kind == "drop_input" and len(g.input):
        del g.input[rng.randrange(len(g.input))]
    elif kind == "external" and len(g.initializer):
        t = rng.choice(list(g.initializer))
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in [("location", rng.choice(["../../etc/passwd", "/etc/passwd", "missing.bin",
                                              "", "a\x00b", "."])),
                     ("offset", rng.choice(["0", "-1", "99999999999", "x"])),
                     ("length", rng.choice(["4", "0", "-5", "99999999999"]))]:
            if rng.random() < 0.85:
                e = t.external_data.add()
                e.key, e.value = k, v
    elif kind == "opset" and len(m.opset_import):
        m.opset_import[0].version = rng.choice([1, 6, 9, 11, 13, 99, 0, -1])
    elif kind == "drop_node" and nodes:
        del g.node[rng.randrange(len(nodes))]
    elif kind == "dup_node" and nodes:
        g.node.append(rng.choice(nodes))
    try:
        return m.SerializeToString()
    except Exception:  # noqa: BLE001  protobuf refuses to encode the change: skip it
        return data


def _mutate_attribute(rng: random.Random, node) -> None:
    from onnx import helper
    if node.attribute and rng.random() < 0.5:
        a = node.attribute[rng.randrange(len(node.attribute))]
        if rng.random() < 0.3:
            node.attribute.remove(a)
        elif a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice([0, -1, -7, 2 ** 40, 3])
        else:
            a.i = rng.choice([0, -1, 2 ** 40, 5])
            a.f = rng.choice([float("nan"), float("inf"), -1.0, 1e30])
    else:
        name = rng.choice(["axis", "perm", "pads", "strides", "kernel_shape", "group",
                           "dilations", "transA", "epsilon", "mode", "bogus"])
        value = rng.choice([0, -1, 99, [1, 1], [0, 0, 0, 0], [2 ** 40], "s", 1.5, []])
        with contextlib.suppress(Exception):   # onnx cannot type the value: skip it
            node.attribute.append(helper.make_attribute(name, value))


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    pos = rng.randrange(len(data))
    kind = rng.randrange(4)
    if kind == 0:
        return data[:pos]
    if kind == 1:
        return data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]
    if kind == 2:
        return data[:pos] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + \
            data[pos:]
    return data[:pos] + data[pos + rng.randint(1, 16):]


# --------------------------------------------------------------------------------------
# swir-run inputs
# --------------------------------------------------------------------------------------

RUN_MODULE = """\
module "fuzz_run"
stage graph
func @main(%x: <2 x 3 x f32>, %w: <3 x 4 x f32>) -> <2 x 4 x f32> {
'entry:
  %y = matmul %x, %w : <2 x 4 x f32>
  %z = relu %y : <2 x 4 x f32>
  return %z
}
"""


def npy_seeds() -> list[bytes]:
    import numpy as np
    out = []
    for shape in [(2, 3), (3, 4)]:
        buf = io.BytesIO()
        np.save(buf, np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
        out.append(buf.getvalue())
    return out


def mutate_npy(rng: random.Random, data: bytes, others: list[bytes] = ()) -> bytes:
    """Corrupt the header's dictionary (shape, dtype, order), its length
    field, or the data; or swap in an array of another kind altogether."""
    import numpy as np
    kind = rng.randrange(5)
    if kind == 0 or len(data) < 10:
        return _mutate_bytes(rng, data)
    if kind == 1:   # rewrite the header dictionary
        header_len = int.from_bytes(data[8:10], "little")
        header = data[10:10 + header_len].decode("latin1")
        field_ = rng.choice(["shape", "descr", "fortran_order"])
        value = {"shape": rng.choice(["(2, 3)", "(3, 2)", "()", "(6,)", "(2, 3, 1)",
                                      "(99999999999, 99999999999)", "(-1, 3)", "(2,", "x"]),
                 "descr": rng.choice(["'<f8'", "'<i4'", "'|O'", "'>f4'", "'<c8'", "'V12'",
                                      "'<U3'", "'bogus'"]),
                 "fortran_order": rng.choice(["True", "False", "1", "'x'"])}[field_]
        header = re.sub(rf"'{field_}': [^,}}]*(\)[^,}}]*)?", f"'{field_}': {value}", header)
        body = header.encode("latin1")
        return data[:8] + len(body).to_bytes(2, "little") + body + data[10 + header_len:]
    if kind == 2:   # the header-length field
        return data[:8] + rng.randrange(65536).to_bytes(2, "little") + data[10:]
    if kind == 3:   # truncate or extend the data
        return data[:rng.randrange(len(data))] if rng.random() < 0.5 else data + b"\x00" * 7
    buf = io.BytesIO()
    arr = rng.choice([np.zeros((2, 3), np.float64), np.zeros((2, 3), np.int32),
                      np.full((2, 3), np.nan, np.float32), np.zeros((0, 3), np.float32),
                      np.zeros((2, 3), np.complex64), np.array(["ab"] * 6).reshape(2, 3),
                      np.zeros((3, 2), np.float32).T, np.float32(1.0)])
    np.save(buf, arr)
    return buf.getvalue()


# --------------------------------------------------------------------------------------
# The targets: one case each
# --------------------------------------------------------------------------------------

@dataclass
class Workdir:
    """One scratch folder per campaign; each case overwrites the same files."""
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="swir-fuzz-")))

    def __post_init__(self) -> None:
        (self.root / "run.swir").write_text(RUN_MODULE)
        (self.root / "w.npy").write_bytes(npy_seeds()[1])


def parser_case(work: Workdir, data: bytes) -> str:
    """swir-opt parses, verifies, runs -dce -cse and prints ``data``."""
    src, out = work.root / "case.swir", work.root / "case.out.swir"
    src.write_bytes(data)
    return check("swir-opt", ["-dce", "-cse", str(src), "-o", str(out)], [out],
                 accept=lambda _: module_is_valid_and_stable(out))


def importer_case(work: Workdir, data: bytes) -> str:
    """swir-import translates ``data`` (an ONNX model): once as users run it,
    once with --no-check, so that swir's own checks meet what onnx.checker
    would have caught first."""
    src, out = work.root / "case.onnx", work.root / "case.out.swir"
    weights = work.root / "case.out.weights"
    src.write_bytes(data)
    outcomes = []
    for flags in ([], ["--no-check"]):
        if weights.exists():
            weights.unlink()
        outcomes.append(check("swir-import", [str(src), "-o", str(out), *flags], [out],
                              accept=lambda _: module_is_valid_and_stable(out)))
        if outcomes[-1] == "rejected" and weights.exists():
            raise Failure(f"swir-import {' '.join(flags)} failed but wrote the weights file")
    return "ok" if "ok" in outcomes else "rejected"


def run_input_case(work: Workdir, data: bytes) -> str:
    """swir-run runs RUN_MODULE with ``data`` as its first input."""
    import numpy as np
    x, out = work.root / "x.npy", work.root / "y.npy"
    x.write_bytes(data)

    def accept(_):
        y = np.load(out, allow_pickle=False)
        if y.shape != (2, 4) or y.dtype != np.float32:
            raise Failure(f"swir-run wrote a {y.dtype} {y.shape} result")
    return check("swir-run", [str(work.root / "run.swir"), "--input", str(x),
                              "--input", str(work.root / "w.npy"), "--output", str(out)],
                 [out], accept=accept)


def target(name: str):
    """(case function, seeds, mutator) for a target."""
    if name == "parser":
        return parser_case, ir_seeds(), mutate_text
    if name == "importer":
        return importer_case, onnx_seeds(), mutate_onnx
    if name == "run-inputs":
        return run_input_case, npy_seeds()[:1], mutate_npy
    raise ValueError(name)


def next_input(rng: random.Random, name: str, seeds: list[bytes], mutator) -> bytes:
    if name == "parser" and rng.random() < 0.1:
        return random_module(rng)
    return mutate_times(rng, rng.choice(seeds), seeds, mutator)


# --------------------------------------------------------------------------------------
# Campaigns
# --------------------------------------------------------------------------------------

@dataclass
class Campaign:
    name: str
    cases: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: {"ok": 0, "rejected": 0})
    failures: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0
    slowest: float = 0.0


def run_campaign(name: str, count: int, seed: int, save: Path | None) -> Campaign:
    case, seeds, mutator = target(name)
    work, rng, c = Workdir(), random.Random(seed), Campaign(name)
    start = time.perf_counter()
    for i in range(count):
        data = next_input(rng, name, seeds, mutator)
        began = time.perf_counter()
        try:
            c.outcomes[case(work, data)] += 1
        except Failure as f:
            c.failures.append((i, str(f).split("\n")[0][:300]))
            if save is not None:
                save.mkdir(parents=True, exist_ok=True)
                suffix = {"parser": ".swir", "importer": ".onnx", "run-inputs": ".npy"}[name]
                (save / f"{name}-{i}{suffix}").write_bytes(data)
        c.cases += 1
        c.slowest = max(c.slowest, time.perf_counter() - began)
        if (i + 1) % 1000 == 0:
            print(f"  {name}: {i + 1}/{count} cases, {len(c.failures)} failures, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    c.seconds = time.perf_counter() - start
    return c


def run_atheris(name: str, count: int) -> None:
    """Coverage-guided: atheris drives the mutations of the seeds' bytes; a
    Failure ends the run with atheris's crash report and input file."""
    import atheris
    with atheris.instrument_imports():
        import swir.frontend.onnx_import
        import swir.parser
        import swir.verifier  # noqa: F401
    case, seeds, _ = target(name)
    work = Workdir()
    corpus = Path(tempfile.mkdtemp(prefix=f"swir-fuzz-{name}-corpus-"))
    for i, s in enumerate(seeds):
        (corpus / f"seed{i}").write_bytes(s)

    def one(data: bytes) -> None:
        case(work, data)
    atheris.Setup([sys.argv[0], f"-runs={count}", "-timeout=30", str(corpus)], one)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parser", type=int, default=0, metavar="N", help="parser cases")
    ap.add_argument("--importer", type=int, default=0, metavar="N", help="importer cases")
    ap.add_argument("--run-inputs", type=int, default=0, metavar="N", help="swir-run cases")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", choices=["random", "atheris"], default="random")
    ap.add_argument("--save", type=Path, help="write each failing input to this folder")
    a = ap.parse_args(argv)
    jobs = [("parser", a.parser), ("importer", a.importer), ("run-inputs", a.run_inputs)]
    jobs = [(n, k) for n, k in jobs if k > 0] or [("parser", 1000)]
    if a.engine == "atheris":
        (name, count), = jobs[:1]
        run_atheris(name, count)
        return 0
    print("| target | cases | accepted | rejected | failures | seconds | slowest case (s) |")
    print("|---|---|---|---|---|---|---|", flush=True)
    results = []
    for n, k in jobs:
        c = run_campaign(n, k, a.seed, a.save)
        print(f"| {c.name} | {c.cases:,} | {c.outcomes['ok']:,} | {c.outcomes['rejected']:,} | "
              f"{len(c.failures)} | {c.seconds:.0f} | {c.slowest:.2f} |", flush=True)
        results.append(c)
    for c in results:
        for i, what in c.failures[:20]:
            print(f"{c.name} case {i}: {what}")
    return 1 if any(c.failures for c in results) else 0


if __name__ == "__main__":
    sys.exit(main())
