"""swir-cg end to end on every graph op: graph module -> the default pipeline
-> C project -> ``make emu`` -> run, against the graph-stage interpreter; and
the program's DMA counters against the dma-stage interpreter's, exactly.

Each op configuration of the -ldm-plan case table (test_ldm_plan.CASES: every
graph op, awkward extents) runs twice: with the full 64 KB LDM, and with 2 KB so
that tiles, remainder tiles, strided DMAs and edge branches all occur in C.
Each is written with vector micro-kernels (swir-cg's default) and, at 64 KB,
also with scalar loop nests only (--no-simd), so every op's vector and scalar
C are both checked; and for the SW26010-Pro (its CRTS DMAs, RMA broadcasts
and 8-lane vectors; docs/codegen.md, "The SW26010-Pro") at 2 KB. The projects are generated and compiled once per session,
two at a time.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from siblings import sibling

from swir.codegen import emulate
from swir.codegen.project import Options, generate, write_project
from swir.interp.loop import io_signature
from swir.interp.run import interpreter_for, run_function
from swir.parser import parse_module
from swir.passes import pass_class
from swir.passes.manager import PassManager
from swir.printer import print_module
from swir.target import SW26010, SW26010_PRO, Target
from swir.verifier import verify

_cases = sibling("test_ldm_plan")
CASES, build, inputs = _cases.CASES, _cases.build, _cases.inputs
assert_matches_graph = _cases.assert_matches_graph
PIPELINE = ["dce", "cse", "dce", "lower-loops", "ldm-plan", "insert-dma"]
LDM_SIZES = [65536, 2048]
# (LDM size, vector code, target): every size with vectors, the full LDM also
# without; the Pro at the small LDM, where tiles, tails and strided DMAs occur.
VARIANTS = [(65536, True, SW26010), (2048, True, SW26010), (65536, False, SW26010),
            (2048, True, SW26010_PRO)]
VARIANT_IDS = [f"{s}-{'simd' if v else 'scalar'}" + ("" if t is SW26010 else f"-{t.name}")
               for s, v, t in VARIANTS]
# Ops whose C result is computed by libm in double and rounded, where the
# reference computes with numpy's own double routines: the two may differ in
# the last double bit, which can move the rounded result by one unit of the
# result type.
LIBM = frozenset({"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "erfc", "pow", "gelu",
        "softmax", "log_softmax", "layer_norm", "batch_norm", "reduce_mean", "avg_pool2d",
        "global_avg_pool2d", "instance_norm", "silu", "hard_sigmoid", "mish", "elu",
        "selu", "softplus", "softsign"})


# LDM reserves (bytes) at 2 KB for the kernels whose spawn Para, which the LDM
# holds beside the buffers, exceeds the default reserve (1/16: 128 B): -ldm-plan
# does not count the Para. max_pool2d_grad spawns 5 nests, each Para member
# holding the kernel's 9 pointers: 360 B. Such a case is planned without
# -insert-dma's double buffers, which fill the LDM up to the default reserve
# whatever -ldm-plan's.
PARA_RESERVES = {"max_pool2d_grad": 512}


def lower(text: str, ldm_size: int, ldm_reserve: int = -1, target: Target = SW26010):
    """The dma-stage module swir-cg compiles for ``target``."""
    m = parse_module(text, "<case>")
    verify(m)
    passes = [pass_class(n)() for n in PIPELINE]
    passes[PIPELINE.index("ldm-plan")].ldm_size = ldm_size
    passes[PIPELINE.index("ldm-plan")].ldm_reserve = ldm_reserve
    if ldm_reserve != -1:
        passes[PIPELINE.index("insert-dma")].double_buffer = False
    PassManager(passes, verify_each=True, target=target).run(m)
    return m


def _project(root: Path, index: int, case, ldm_size: int, simd: bool, target: Target):
    """Generate one case's project (Python: one at a time)."""
    op, types, attrs = case
    text = build(op, types, attrs)
    m = lower(text, ldm_size, PARA_RESERVES.get(op, -1) if ldm_size < 4096 else -1, target)
    out = root / f"case{index}_{ldm_size}_{'simd' if simd else 'scalar'}_{target.name}"
    write_project(generate(m, Options(source="<case>", simd=simd)), str(out), force=False)
    return text, print_module(m), out, m.name


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """Every (case, LDM size, vector code) generated, then compiled two at a
    time (make runs in its own process): {(index, ldm_size, simd, target):
    future of (graph text, dma text, program)}."""
    root = tmp_path_factory.mktemp("codegen")
    made = {(i, s, v, t): _project(root, i, c, s, v, t) for i, c in enumerate(CASES)
            for s, v, t in VARIANTS}

    def compile_one(key):
        text, dma, out, name = made[key]
        return text, dma, emulate.build(out, name)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {k: pool.submit(compile_one, k) for k in made}


def interpreter_counters(dma_text: str, args) -> dict:
    m = parse_module(dma_text, "<case>")
    interp = interpreter_for(m, ".")
    interp.run("main", args)
    return emulate.dma_counters(interp.stats())   # the same JSON shape as the program's


@pytest.mark.parametrize("ldm_size,simd,target", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_generated_program_computes_the_graph_result(projects, index, ldm_size, simd, target):
    op, types, _ = CASES[index]
    text, dma_text, program = projects[(index, ldm_size, simd, target)].result()
    g = parse_module(text, "<case>")
    args = inputs(op, types, (op, str(types)))
    want = run_function(g, g.lookup("main"), args)
    f = parse_module(dma_text, "<case>").lookup("main")
    ins, outs = io_signature(f)
    flat = [a.reshape(a.shape or (1,)) for a in args]    # a 0-d tensor is a buf<1 x T>
    run = emulate.run(program, flat, [p.type for p in ins], outs)
    assert_matches_graph(op, g, args, want, run.outputs, rounded=LIBM)
    # Every DMA the C program issued is one the dma-stage interpreter issued.
    assert emulate.dma_counters(run.stats) == interpreter_counters(dma_text, flat)


def test_the_cases_above_run_vector_tail_blocks(projects):
    """Last columns whose count is known when swir-cg writes them
    (docs/codegen.md, "Remainders": the last 1 to 3 columns of a reduce nest
    in the vector of the 4 ending at the bound, its other lanes dropped)
    occur in the cases above, so their C is checked against the interpreter
    there; those known only at run time (tail blocks) are checked below."""
    sources = [(projects[k].result()[2].parent / "layers_slave.c").read_text()
               for k in projects if k[2] and k[3] is SW26010]
    assert any(re.search(r"the 4 ending at the bound, [123] lanes? new", c) for c in sources)


# A matmul whose column tile on a 4 KB LDM is min(64, N - 64 j): its last
# columns are known only at run time. N = 149, 150, 151 leaves 21, 22, 23
# columns to the last tile: 5 vectors and a tail block of 1, 2 or 3 columns
# under `if`, its lanes 1 and 2 chosen by run-time flags.
def tail_matmul(n: int) -> str:
    return f"""module "tail"
stage graph
func @main(%a: <8 x 96 x f32>, %b: <96 x {n} x f32>) -> <8 x {n} x f32> {{
'entry:
  %c = matmul %a, %b : <8 x {n} x f32>
  return %c
}}
"""


@pytest.mark.parametrize("n", [149, 150, 151])
def test_a_tail_block_known_only_at_run_time(tmp_path, n):
    text = tail_matmul(n)
    m = lower(text, 4096)
    dma = print_module(m)
    write_project(generate(m, Options(source="<tail>")), str(tmp_path / "p"), force=False)
    assert "the last 1 to 3 columns" in (tmp_path / "p" / "layers_slave.c").read_text()
    program = emulate.build(tmp_path / "p", "tail")
    g = parse_module(text, "<tail>")
    args = inputs("matmul", [p.type for p in g.lookup("main").params], ("tail", n))
    want = run_function(g, g.lookup("main"), args)
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(program, args, [p.type for p in ins], outs)
    assert_matches_graph("matmul", g, args, want, run.outputs)
    assert emulate.dma_counters(run.stats) == interpreter_counters(dma, args)


# Spawns of several kernels, written by hand: two kernels with different
# arguments, a kernel of a group also spawned alone, a kernel twice in one
# spawn. @shift reads the row another CPE wrote in the kernel before it in the
# same spawn: only the barrier between them makes that row ready.
GROUPS = """
module "groups"
stage dma
buffer @t : buf<64 x 8 x f32> {offset = 0}

cpe kernel @inc(%A: buf<64 x 8 x f32>, %B: buf<64 x 8 x f32>) {
  %id = cpe_id : index
  %one = const 1.0 : f32
  %L = ldm_alloc : ldm<8 x f32>
  dma_get %A[%id, 0] -> %L {count = 8, reply = 0}
  dma_wait {reply = 0, times = 1}
  for %i = 0 to 8 {
    %x = load %L[%i] : f32
    %y = add %x, %one : f32
    store %y, %L[%i]
  }
  dma_put %L -> %B[%id, 0] {count = 8, reply = 1}
  dma_wait {reply = 1, times = 1}
}

cpe kernel @shift(%A: buf<64 x 8 x f32>, %B: buf<64 x 8 x f32>) {
  %id = cpe_id : index
  %one = const 1.0 : f32
  %L = ldm_alloc : ldm<8 x f32>
  dma_get %A[63 - %id, 0] -> %L {count = 8, reply = 0}
  dma_wait {reply = 0, times = 1}
  for %i = 0 to 8 {
    %x = load %L[%i] : f32
    %y = add %x, %one : f32
    store %y, %L[%i]
  }
  dma_put %L -> %B[%id, 0] {count = 8, reply = 1}
  dma_wait {reply = 1, times = 1}
}

host func @main(%x: buf<64 x 8 x f32>, %o1: buf<64 x 8 x f32>, %o2: buf<64 x 8 x f32>) attributes {outputs = 2} {
'entry:
  spawn @inc(%x, @t), @shift(@t, %o1)
  join
  spawn @shift(%o1, @t)
  join
  spawn @inc(@t, %o2), @inc(%o2, %o2)
  join
  return
}
"""


def test_spawns_of_several_kernels(tmp_path):
    """The C of spawns of several kernels computes what the dma-stage
    interpreter does, with the same counters: spawns, barriers, DMAs."""
    m = parse_module(GROUPS, "<groups>")
    verify(m)
    write_project(generate(m, Options(source="<groups>")), str(tmp_path / "p"), force=False)
    program = emulate.build(tmp_path / "p", "groups")
    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    ins, outs = io_signature(m.lookup("main"))
    run = emulate.run(program, [x], [p.type for p in ins], outs)
    np.testing.assert_array_equal(run.outputs[0], x[::-1] + 2)
    np.testing.assert_array_equal(run.outputs[1], x + 5)
    counters = emulate.dma_counters(run.stats)
    assert counters == interpreter_counters(GROUPS, [x])
    assert [(counters[k]["spawns"], counters[k]["barriers"]) for k in ("inc", "shift")] == \
        [(2, 1), (1, 1)]
    layers = (tmp_path / "p" / "layers.c").read_text()
    # The first group's wrapper takes its two kernels' arguments (three
    # distinct values of four); the last takes @t and %o2 once each.
    assert "void spawn_inc_group(float *A, float *B, float *B_2)" in layers, layers
    assert "void spawn_inc_group_2(float *A, float *B)" in layers, layers
