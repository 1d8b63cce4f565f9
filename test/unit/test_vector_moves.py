"""In-place moves as vector loops (issue 44, item 4): -insert-dma broadcasts
a conv's input tile into the end of its padded LDM buffer and moves each
row into its padded place, reading the buffer it writes through floordiv /
mod subscripts (the digits of one element offset). swir.analysis.vector_plan
finds that offset (flat_offset) and lets the move run 4 lanes at a time
when no lane reads what an earlier lane of its vector writes (the store's
offset at most the load's, or 4 or more past it, over the whole nest:
docs/codegen.md, "Vector micro-kernels"). The program must give the
interpreter's result."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from swir.analysis import vector_plan as V
from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.interp.loop import io_signature
from swir.interp.run import run_function
from swir.parser import parse_module
from swir.passes.pipelines import pipeline_flags
from swir.tools import swir_opt

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                                reason="needs a host C compiler (cc) and make")

CONV = """module "mv"
stage graph

func @main(%x: <1 x 16 x 14 x 14 x f32>, %w: <32 x 16 x 3 x 3 x f32>) -> <1 x 32 x 14 x 14 x f32> {
'entry:
  %y = conv2d %x, %w {pad = [1, 1, 1, 1]} : <1 x 32 x 14 x 14 x f32>
  return %y
}
"""


def moves(m) -> list:
    """The loop nests that read the LDM buffer they write (the moves)."""
    out = []
    for f in m.functions:
        if f.target != "cpe":
            continue
        for inst in f.walk():
            if inst.opname != "for":
                continue
            body = inst
            while len(body.regions[0].blocks[0].instructions) == 1 and \
                    body.regions[0].blocks[0].instructions[0].opname == "for":
                body = body.regions[0].blocks[0].instructions[0]
            ops = body.regions[0].blocks[0].instructions
            loads = [i for i in ops if i.opname == "load"]
            stores = [i for i in ops if i.opname == "store"]
            if len(loads) == 1 and len(stores) == 1 and \
                    V.access_of(loads[0]).base is V.access_of(stores[0]).base and \
                    inst.regions[0].blocks[0].args[0].name == "mv":
                out.append((inst, V.access_of(loads[0]), V.access_of(stores[0])))
    return out


def test_a_padded_broadcast_moves_4_lanes_at_a_time_and_matches_the_interpreter(tmp_path):
    src = tmp_path / "mv.swir"
    src.write_text(CONV)
    dma = tmp_path / "mv.dma.swir"
    assert swir_opt.main([*pipeline_flags("graph", "O3"), str(src), "-o", str(dma)]) == 0
    m = parse_module(dma.read_text(), str(dma))
    found = moves(m)
    assert found, "the -O3 plan no longer moves a broadcast tile in place"
    for loop, load, store in found:
        assert any(V.Compound is type(a) for ix in load.indices for a, _ in ix.terms)
        flat = V.flat_offset(load)
        assert flat is not None and V._plain(flat)
        p = V.plan(loop)
        assert p is not None and p.kind == "map"
        # a vector load and store per 4 columns, the last n mod 4 stored
        # through an array (2 more memory operations each), where the scalar
        # loop takes 2 per point
        n = p.columns
        want = (-(-n // 4) * 2 + 2 * (n % 4)) / n
        assert V.body_cost(p.body, p).cycles == pytest.approx(want)
        assert V.body_cost(p.body, None).cycles == 2
    out = tmp_path / "p"
    write_project(generate(m, Options(source=str(dma))), str(out), force=False)
    c = (out / "layers_slave.c").read_text()
    assert re.search(r"simd_loadu\(P_ldm_v, &P_ldm\[swir_floordiv\(", c) or \
        re.search(r"simd_loadu\(P_ldm_v, &P_ldm\[\(", c), "the move is not a vector load"
    g = parse_module(CONV, "<mv>")
    main = g.lookup("main")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(p.type.shape).astype(np.float32) for p in main.params]
    want = np.asarray(run_function(g, main, args)[0])
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(emulate.build(out, m.name), args, [p.type for p in ins], outs)
    assert np.allclose(np.asarray(run.outputs[0]), want, rtol=1e-5, atol=1e-5)


def test_a_move_whose_store_lands_just_ahead_of_its_load_stays_scalar():
    """d = store offset - load offset in 1..3 somewhere: a lane would read
    what the lane before it writes; the nest is not a vector loop."""
    text = """module "ahead"
stage loop
cpe kernel @k() {
  %b = ldm_alloc : ldm<64 x f32>
  for %i = 0 to 32 {
    %x = load %b[%i] : f32
    store %x, %b[%i + 2]
  }
}
"""
    behind = text.replace("store %x, %b[%i + 2]", "store %x, %b[%i + 0]").replace(
        "%x = load %b[%i] : f32", "%x = load %b[%i + 9] : f32")
    for src, ok in ((text, False), (behind, True)):
        m = parse_module(src, "<ahead>")
        loop = next(i for i in m.lookup("k").walk() if i.opname == "for")
        assert (V.plan(loop) is not None) == ok
