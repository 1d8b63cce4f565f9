"""max, min, relu, clip and max pooling as vector code (issue 43, item 6;
docs/codegen.md, "Vector code (simd.h)"): the public SW26010 simd.h has no
vector max, so swir-cg writes swir's NaN-propagating max as selects on
compares (simd_vfcmplt, simd_vfcmpun, simd_vseleq). Each case's generated
program runs under the emulation on inputs with NaN, +-infinity and +-0 in
every lane position (and beside equal values of the other sign), and must
give the interpreter's result element for element: the same NaNs, the same
infinities, the same sign of every zero."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.interp.loop import io_signature
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.verifier import verify

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                                reason="needs a host C compiler (cc) and make")

PIPELINE = ["dce", "cse", "dce", "lower-loops", "ldm-plan", "insert-dma"]
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0]


def module(body: str, params: str, result: str) -> str:
    return f"""module "sel"
stage graph

func @main({params}) -> {result} {{
'entry:
{body}
}}
"""


# name, graph, the kernel whose nest must be vector code
CASES = {
    "relu": module("  %y = relu %x : <2 x 4 x 8 x 12 x {t}>\n  return %y",
                   "%x: <2 x 4 x 8 x 12 x {t}>", "<2 x 4 x 8 x 12 x {t}>"),
    "max": module("  %y = max %x, %z : <2 x 4 x 8 x 12 x {t}>\n  return %y",
                  "%x: <2 x 4 x 8 x 12 x {t}>, %z: <2 x 4 x 8 x 12 x {t}>",
                  "<2 x 4 x 8 x 12 x {t}>"),
    "min": module("  %y = min %x, %z : <2 x 4 x 8 x 12 x {t}>\n  return %y",
                  "%x: <2 x 4 x 8 x 12 x {t}>, %z: <2 x 4 x 8 x 12 x {t}>",
                  "<2 x 4 x 8 x 12 x {t}>"),
    "clip": module("  %y = clip %x {min = 0.0, max = 6.0} : <2 x 4 x 8 x 12 x {t}>\n  return %y",
                   "%x: <2 x 4 x 8 x 12 x {t}>", "<2 x 4 x 8 x 12 x {t}>"),
    # 7 columns: the map's last 3 as the vector ending at the bound; the
    # clip epilogue of a 1-channel 1x1 conv rewrites Y in place (one product
    # per output, so the conv's result is exact either way)
    "clip_7": module("  %y = clip %x {min = -1.0, max = 2.0} : <2 x 4 x 7 x 7 x {t}>\n  return %y",
                     "%x: <2 x 4 x 7 x 7 x {t}>", "<2 x 4 x 7 x 7 x {t}>"),
    "conv_clip_7": module(
        "  %c = conv2d %x, %w : <1 x 4 x 7 x 7 x {t}>\n"
        "  %y = clip %c {min = 0.0, max = 6.0} : <1 x 4 x 7 x 7 x {t}>\n  return %y",
        "%x: <1 x 1 x 7 x 7 x {t}>, %w: <4 x 1 x 1 x 1 x {t}>", "<1 x 4 x 7 x 7 x {t}>"),
    "max_pool2d": module(
        "  %y = max_pool2d %x {kernel = [2, 2], stride = [2, 2]} : <2 x 4 x 4 x 6 x {t}>\n"
        "  return %y", "%x: <2 x 4 x 8 x 12 x {t}>", "<2 x 4 x 4 x 6 x {t}>"),
    "max_pool2d_3x3": module(
        "  %y = max_pool2d %x {kernel = [3, 3], stride = [1, 1], pad = [1, 1, 1, 1]} "
        ": <2 x 4 x 8 x 12 x {t}>\n  return %y",
        "%x: <2 x 4 x 8 x 12 x {t}>", "<2 x 4 x 8 x 12 x {t}>"),
}


def special_input(shape: tuple[int, ...], dtype, seed: int) -> np.ndarray:
    """Small random values (with repeats, so maxima tie), and the SPECIAL
    values at every lane position: element k of each row of 12 columns, for
    k cycling through the rows, so each special value lands on every column
    mod 4; a zero's neighbour is often the other zero."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    for r in range(rows.shape[0]):
        if r % 3 == 0:
            continue                       # some rows without specials: NaN-free windows
        col = (r * 5 + seed) % shape[-1]
        rows[r, col] = SPECIAL[(r + seed) % len(SPECIAL)]
        rows[r, (col + 1) % shape[-1]] = -rows[r, col] if rows[r, col] == 0 else rows[r, col]
    return x


def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise: both NaN, or equal with the same sign (so +0 is not -0)."""
    both_nan = np.isnan(a) & np.isnan(b)
    return both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_vector_selects_match_the_interpreter(tmp_path, name, t):
    text = CASES[name].replace("{t}", t)
    m = parse_module(text, "<sel>")
    verify(m)
    PassManager([pass_class(n)() for n in PIPELINE], verify_each=True).run(m)
    out = tmp_path / "p"
    write_project(generate(m, Options(source="<sel>")), str(out), force=False)
    c = (out / "layers_slave.c").read_text()
    # the max / min / relu nest is vector code, written with the public intrinsics
    assert re.search(r"simd_vseleq\(simd_vfcmpun\((\w+), \1\), simd_vseleq\(simd_vfcmplt\(", c)
    if name.startswith("max_pool2d"):
        assert "vector micro-kernel" in c and "vlowest_s = " in c and "-INFINITY;" in c
    if name.endswith("_7"):
        assert "the last 3 columns: the 4 ending at the bound, 3 lanes stored" in c
    g = parse_module(text, "<sel>")
    main = g.lookup("main")
    dtype = np.float32 if t == "f32" else np.float64
    args = [special_input(p.type.shape, dtype, seed) for seed, p in enumerate(main.params)]
    want = run_function(g, main, args)
    if name in ("max", "min"):       # some pairs are zeros of opposite signs
        x, z = args
        assert ((x == 0) & (z == 0) & (np.signbit(x) != np.signbit(z))).any()
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(emulate.build(out, "sel"), args, [p.type for p in ins], outs)
    got, ref = np.asarray(run.outputs[0]), np.asarray(want[0])
    assert got.dtype == ref.dtype and got.shape == ref.shape
    bad = ~same(got, ref)
    assert not bad.any(), list(zip(got[bad][:8], ref[bad][:8]))
    assert np.isnan(ref).any()                                 # the specials reached Y
    assert np.isinf(ref).any() or "clip" in name               # (clip bounds infinities)


BATCH_NORM = module(
    "  %y = conv2d %x, %w {stride = [2, 2], pad = [1, 1, 1, 1], groups = 8} : <1 x 8 x 7 x 7 x f32>\n"
    "  %n = batch_norm %y, %g, %b, %m, %v : <1 x 8 x 7 x 7 x f32>\n"
    "  %c = clip %n {min = 0.0, max = 6.0} : <1 x 8 x 7 x 7 x f32>\n  return %c",
    "%x: <1 x 8 x 14 x 14 x f32>, %w: <8 x 1 x 3 x 3 x f32>, %g: <8 x f32>, %b: <8 x f32>, "
    "%m: <8 x f32>, %v: <8 x f32>", "<1 x 8 x 7 x 7 x f32>")


def test_a_batch_norm_epilogue_in_f64_is_vector_code_bit_identical_to_scalar(tmp_path):
    """The batch norm epilogue computes in f64 between casts: the channel's
    scale (cast, add, sqrt, div) once per row in scalar C, the element's
    chain (cast to f64, sub, mul, add, cast to f32, the clip) in doublev4
    and floatv4, the casts lane by lane through memory. Its program gives
    the bits of the --no-simd program, NaN and infinities included, and
    matches the interpreter."""
    m = parse_module(BATCH_NORM, "<bn>")
    verify(m)
    PassManager([pass_class(n)() for n in PIPELINE], verify_each=True).run(m)
    rng = np.random.default_rng(7)
    g = parse_module(BATCH_NORM, "<bn>")
    main = g.lookup("main")
    args = [special_input(main.params[0].type.shape, np.float32, 0),
            rng.integers(-2, 3, size=(8, 1, 3, 3)).astype(np.float32),
            rng.uniform(0.5, 2, 8).astype(np.float32), rng.uniform(-1, 1, 8).astype(np.float32),
            rng.uniform(-1, 1, 8).astype(np.float32), rng.uniform(0.1, 2, 8).astype(np.float32)]
    ins, outs = io_signature(m.lookup("main"))
    results = {}
    for simd in (True, False):
        out = tmp_path / ("simd" if simd else "scalar")
        write_project(generate(m, Options(source="<bn>", simd=simd)), str(out), force=False)
        c = (out / "layers_slave.c").read_text()
        assert ("simd_set_doublev4((double)" in c and "const double t_10 = sqrt(t_9);" in c) == simd
        run = emulate.run(emulate.build(out, "sel"), args, [p.type for p in ins], outs)
        results[simd] = np.asarray(run.outputs[0])
    assert results[True].tobytes() == results[False].tobytes()
    want = np.asarray(run_function(g, main, args)[0])
    assert np.isnan(want).any() and same(results[True], want).mean() > 0.99
    assert np.allclose(results[True], want, rtol=1e-6, atol=1e-6, equal_nan=True)
