"""Model-supplied names never reach C, the Makefile or a path unsanitised:
the generator's name rules, and a module whose every name is hostile
compiling with -Werror, running correctly and writing only inside its DIR.

The same end to end from ONNX (test_hostile_onnx_*): a model whose graph,
node, input, output and initializer names, doc strings, producer and metadata
hold quotes, backslashes, comment delimiters, control characters, shell
syntax, ``../``, unicode, 5000 characters, C keywords, libc names and names
that sanitise to the same identifier, imported with an -o path of the same
kind, compiled, built, run against onnxruntime; the generated text holds the
names only as escaped comments and literals, and nothing is written outside
the directories named on the command lines. The program reads inputs and
weights of exactly the expected size, taking no size or offset from a file
(also test/CodeGen/swir-cg-errors.swir: short input, short or missing
--weights), and quotes names in its messages on one printable line; so does
swir-import, which reads external data only from beside the model."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from swir.codegen import emulate, templates
from swir.codegen.names import (
    MAX_IDENTIFIER,
    Scope,
    c_identifier,
    c_string,
    comment_text,
    display_text,
    file_stem,
)
from swir.codegen.project import RUNTIME_FILES, TARGET_HEADER
from swir.interp.run import interpreter_for
from swir.ir.core import Module
from swir.parser import parse_module

SWIR_CG = str(Path(sys.executable).with_name("swir-cg"))


def test_identifiers_are_c_identifiers_and_avoid_keywords_and_library_names():
    s = Scope()
    names = [s.declare(n) for n in ["for", "exp", "a.b", "a$b", "9lives", "", "x", "x",
                                    "swir_chunk_lo", "athread_get", "_Hidden", "__x"]]
    for n in names:
        assert n.isidentifier() and n.isascii()
    assert names[:3] == ["for_", "exp_", "a_b"]
    assert names[6:8] == ["x", "x_2"]                    # unique in the scope
    assert not names[8].startswith("swir_") and not names[9].startswith("athread_")
    assert not names[10].startswith("_") and not names[11].startswith("__")
    inner = Scope(s)
    assert inner.declare("x") == "x_3"                   # no shadowing of outer names
    assert c_identifier("héllo wörld") == "h_llo_w_rld"


def test_comments_strings_and_file_names_cannot_escape():
    text = 'a */ int evil; /* "q" \\ ??/ \n$(rm -rf /)'
    c = comment_text(text)
    assert "*/" not in c and "\n" not in c and "??" not in c
    s = c_string(text)
    assert s.startswith('"') and s.endswith('"') and "\n" not in s
    assert '\\"' in s and "\\\\" in s and "??" not in s
    assert file_stem('../../x; rm -rf $(HOME)') == "x__rm__rf___HOME"
    assert file_stem("///") == "model"


HOSTILE = r'''
module "evil\"; $(touch PWNED) `id` */ ../../x \\"
stage graph

global @"w */ int pwned; /* \"" : <2 x 2 x f32> = dense<[[1.0, 2.0], [3.0, 4.0]]>
global @"b$(touch PWNED)" : <2 x f32> = dense<[0.5, -0.5]>

func @"main" (%"in\"put; system(\"x\")": <1 x 2 x f32>) -> <1 x 2 x f32> {
'"entry */":
  %"y\\n" = matmul %"in\"put; system(\"x\")", @"w */ int pwned; /* \"" : <1 x 2 x f32>
  %"exp" = add %"y\\n", @"b$(touch PWNED)" : <1 x 2 x f32>
  %"for" = relu %"exp" : <1 x 2 x f32>
  return %"for"
}
'''


def _compile_and_run(text: str, src: Path, out: Path, cwd: Path):
    """swir-cg ``text`` (saved as ``src``) into ``out`` from ``cwd``, build it with
    make emu and run it on one input; its result must equal the interpreter's.
    Returns the program and the run."""
    src.write_text(text)
    r = subprocess.run([SWIR_CG, str(src), "-o", str(out)], capture_output=True, text=True,
                       cwd=cwd, check=False)
    assert r.returncode == 0, r.stderr
    m = parse_module(text, f"<{src.name}>")
    program = emulate.build(out, m.name)
    x = np.array([[1.0, -2.0]], dtype=np.float32)
    f = m.lookup("main")
    run = emulate.run(program, [x], [f.params[0].type], f.result_types)
    (want,) = interpreter_for(m, src.parent).run("main", [x])
    np.testing.assert_array_equal(run.outputs[0], want)
    return program, run


def test_hostile_names_compile_run_and_stay_inside_the_directory(tmp_path):
    out = tmp_path / "work" / "out"
    out.parent.mkdir()
    program, run = _compile_and_run(HOSTILE, tmp_path / "hostile.swir", out, tmp_path / "work")
    assert program.parent == out
    # Nothing ran, nothing was written outside out/.
    assert not list(tmp_path.rglob("PWNED"))
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["out"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.swir", "work"]
    # The stats file names the kernels by their swir names.
    assert all(name.isprintable() for name in run.stats["functions"])


def test_long_and_reserved_names_give_short_safe_names():
    long = "L" * 5000
    stem = file_stem('x"; $(touch PWNED) */ ../../' + long)
    assert re.fullmatch(r"[A-Za-z0-9_]{1,64}", stem) and stem.startswith("x__")
    # Never a Makefile target, a makefile, or a file or directory of the project.
    for name in ["emu", "Makefile", "makefile", "GNUmakefile", "all", "clean", "main", "EMU",
                 "layers", "layers_slave", "weights", "../emu"]:
        assert file_stem(name).lower() not in ("emu", "makefile", "gnumakefile", "all", "clean",
                                               "main", "layers", "layers_slave", "weights")
    assert file_stem("emu") == "emu_model" and file_stem("net") == "net"
    # Identifiers: at most MAX_IDENTIFIER characters, still unique in their scope.
    s = Scope()
    a, b = s.declare(long), s.declare(long + "x")
    assert len(a) == MAX_IDENTIFIER and a != b and len(b) <= MAX_IDENTIFIER + 3
    # Messages the program prints: one printable line, cut short.
    shown = display_text("in\nput\x1b[2J\u202e" + long)
    assert shown.isprintable() and shown.isascii() and len(shown) <= 80
    assert shown.startswith("in\\x0aput\\x1b[2J\\u202e") and shown.endswith("...")
    assert display_text("x" * 80) == "x" * 80
    # What a C string cannot hold is spelled out, not cut or crashed on.
    assert c_string("a\0b") == '"a\\\\0b"'
    assert c_string("w\udc80") == '"w\\\\udc80"'


NUL_AND_SURROGATE = r'''
module "emu"
stage graph

global @"w\udc80" : <2 x 2 x f32> = dense<[[1.0, 2.0], [3.0, 4.0]]>

func @main (%"in\u0000put\n\u001b[2J\udc80": <1 x 2 x f32>) -> <1 x 2 x f32> {
'entry:
  %"y\u0000" = matmul %"in\u0000put\n\u001b[2J\udc80", @"w\udc80" : <1 x 2 x f32>
  %"y\u0000\u0000" = relu %"y\u0000" : <1 x 2 x f32>
  return %"y\u0000\u0000"
}
'''


def test_nul_surrogate_and_reserved_module_names_compile_and_run(tmp_path):
    """A NUL or a lone surrogate (legal in a swir name: JSON escapes) reaches no
    C string unescaped, and a module called "emu" (the runtime's directory) or
    "Makefile" still builds its program."""
    for name in ["emu", "Makefile"]:
        text = NUL_AND_SURROGATE.replace('module "emu"', f'module "{name}"')
        program, _ = _compile_and_run(text, tmp_path / f"{name}.swir", tmp_path / f"out_{name}",
                                      tmp_path)
        assert program.name == f"{name}_model_emu"
        # The input's name in the program's messages: one line, escaped.
        short = tmp_path / "short.bin"
        short.write_bytes(b"\0" * 7)
        r = subprocess.run([str(program), "--input", str(short)], capture_output=True, check=False)
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"\x1b" not in r.stderr
        assert b"input 1 (in\\x00put\\x0a\\x1b[2J\\udc80 : " in r.stderr, r.stderr


MAIN_C_NAMES = r"""
module "names"
stage graph

global @w : <2 x 2 x f32> = dense<[[1.0, 2.0], [3.0, 4.0]]>
global @arena : <2 x f32> = dense<[0.5, -0.5]>
global @input_ports : <1 x 2 x f32> = dense<[[2.0, 3.0]]>

func @main(%in: <1 x 2 x f32>) -> <1 x 2 x f32> {
'entry:
  %out = matmul %in, @w : <1 x 2 x f32>
  %opt = add %out, @arena : <1 x 2 x f32>
  %r = mul %opt, @input_ports : <1 x 2 x f32>
  return %r
}
"""


def test_model_names_equal_to_main_c_s_own_compile_and_run(tmp_path):
    """Globals and values named as main.c's fixed code names its ports and
    locals (w, arena, input_ports, in, out, opt, r): main.c's generated parts
    name theirs swir_..., and the fixed C's names are read from it
    (templates.NAMES), so the model's are renamed, not clashing."""
    assert {"input_ports", "opt", "in", "out", "load_constants", "swir_run"} <= templates.NAMES
    _compile_and_run(MAIN_C_NAMES, tmp_path / "names.swir", tmp_path / "out", tmp_path)
    main_c = (tmp_path / "out" / "main.c").read_text()
    assert "unsigned char *swir_weights = " in main_c and "#define SWIR_ARENA_BYTES" in main_c
    assert re.search(r"\binput_ports_2\b", main_c), "the model's @input_ports is renamed"


DYN_INDEX = r"""
module "dyn"
stage loop

global @"x\n" : buf<3 x f32> = dense<[1.0, 2.0, 3.0]>

func @main(%"k\n\u001b[2J": buf<1 x i32>, %o: buf<1 x f32>) attributes {outputs = 1} {
'entry:
  call @"gat\u001b[31m\nher"(@"x\n", %"k\n\u001b[2J", %o)
  return
}

kernel @"gat\u001b[31m\nher"(%X: buf<3 x f32>, %K: buf<1 x i32>, %O: buf<1 x f32>) {
  %"k\n\u001b[2J" = load %K[0] : i32
  %d = dyn_index %"k\n\u001b[2J" {bound = 3} : index
  %v = load %X[%d] : f32
  store %v, %O[0]
}
"""


def test_run_time_errors_quote_names_on_one_printable_line(tmp_path):
    """A data-dependent index out of range traps with a message naming the
    source file, the value and the kernel: escaped, one line. The counters
    still name the kernel exactly."""
    src = tmp_path / "d\n\x1b[2J.swir"
    src.write_text(DYN_INDEX)
    out = tmp_path / "out"
    r = subprocess.run([SWIR_CG, src.name, "-o", "out"], capture_output=True, text=True,
                       cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stderr
    m = parse_module(DYN_INDEX, "<dyn>")
    program = emulate.build(out, m.name)
    f = m.lookup("main")
    run = emulate.run(program, [np.array([1], np.int32)], [f.params[0].type], [f.params[1].type])
    assert run.outputs[0].tolist() == [2.0]
    assert list(run.stats["functions"]) == ["gat\x1b[31m\nher"]
    (tmp_path / "k.bin").write_bytes(np.array([7], "<i4").tobytes())
    r = subprocess.run([str(program), "--input", "k.bin"], capture_output=True, cwd=tmp_path,
                       check=False)
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"\x1b" not in r.stderr
    # the program, the kernel and the CPE, then the op, its value and the function
    assert re.fullmatch(re.escape(str(program).encode()) + rb": error: kernel 'gat\\x1b\[31m"
                        rb"\\x0aher', CPE \d+: " + re.escape(
                            b"d\\x0a\\x1b[2J.swir:15:8: 'dyn_index' of %k\\x0a\\x1b[2J = 7 is "
                            b"outside [-3, 3) (bound = 3) in @gat\\x1b[31m\\x0aher\n"),
                        r.stderr), r.stderr


# -- ONNX models whose every name is hostile ------------------------------------------

SWIR_IMPORT = str(Path(sys.executable).with_name("swir-import"))
LONG = "L" * 5000
# Graph names: hostile (and 5000 characters long), and two the program's file
# name must not become (the emu/ directory, the makefile).
GRAPH_NAMES = {"hostile": 'x"; $(touch PWNED) `touch PWNED` */ ../../evil\n\\' + LONG,
               "emu": "emu", "Makefile": "Makefile"}
# swir-import's -o: the only path the user controls; the module names its
# weights file after it.
OUT_SWIR = 'we"ird $(touch PWNED) `touch PWNED`;|&<>\\ \u263a.swir'
# Graph inputs (in order) and the two graph outputs: quotes, backslashes,
# comment delimiters, shell syntax, control characters, a right-to-left
# override, unicode, 5000 characters, C keywords and libc names, and three
# names the sanitiser maps to the same C identifier (a.b, a-b, a_b).
X0 = '`touch PWNED`;|&"q"\n\x1b[2J\u202e'
INPUTS = [(X0, [2, 8]), ("a.b", [2, 16]), ("a-b", [2, 4]), ("for", [2, 4])]
OUTPUTS = [("ünïcødé ☃ 日本 */", [2, 4]), ('"; system("touch PWNED"); "', [2, 16])]
HOSTILE_STRINGS = [X0, '"; system("touch PWNED"); "', "*/ int pwned = 1; /*", "$(touch PWNED)",
                   "line1\nline2", "??/\\", "../../x", "ünïcødé", LONG, "*/ node; /*",
                   "`touch PWNED`", "touch PWNED"]


def hostile_onnx_model(graph_name: str):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(11)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)      # 128 elements: sidecar
    w2 = rng.standard_normal((16, 4)).astype(np.float32)      # 64: sidecar
    b1 = rng.standard_normal((16,)).astype(np.float32)        # 16: inline
    scale = rng.standard_normal((4,)).astype(np.float32)      # 4: inline
    inits = [numpy_helper.from_array(w1, "*/ int pwned = 1; /*"),
             numpy_helper.from_array(w2, LONG),
             numpy_helper.from_array(b1, "a_b"),
             numpy_helper.from_array(scale, "exp")]
    ctl = "line1\nline2\r\t\x0b\x0c\x1b[31m"

    def node(op, ins, out, name):
        return helper.make_node(op, ins, [out], name=name,
                                doc_string="*/ doc \n $(touch PWNED) `touch PWNED`")
    nodes = [node("MatMul", [X0, "*/ int pwned = 1; /*"], "$(touch PWNED)", "*/ node; /*\n"),
             node("Add", ["$(touch PWNED)", "a_b"], ctl, "$(touch PWNED)"),
             node("Relu", [ctl], OUTPUTS[1][0], "\\"),
             node("Add", [OUTPUTS[1][0], "a.b"], "main", LONG),
             node("MatMul", ["main", LONG], "printf", "../../x"),
             node("Add", ["printf", "a-b"], "../../x", "for"),
             node("Mul", ["../../x", "exp"], "??/\\", "int"),
             node("Sub", ["??/\\", "for"], OUTPUTS[0][0], "M" * 5000)]
    graph = helper.make_graph(
        nodes, graph_name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in INPUTS],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in OUTPUTS],
        inits, doc_string="*/ graph doc\n$(touch PWNED)")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9,
                              producer_name='"; $(touch PWNED) */', producer_version="\\\n",
                              doc_string="`touch PWNED`", domain="../../x")
    helper.set_model_props(model, {"$(touch PWNED)": "*/\n`touch PWNED`"})
    return model


@dataclass
class OnnxProject:
    scratch: Path          # holds model.onnx and work/ only
    work: Path             # the tools' working directory: OUT_SWIR, its weights, out/
    out: Path              # swir-cg's DIR
    program: Path
    module: Module
    inputs: list[np.ndarray]
    run: emulate.Run


@pytest.fixture(scope="module", params=list(GRAPH_NAMES), ids=list(GRAPH_NAMES))
def onnx_project(request, tmp_path_factory):
    """swir-import, swir-cg, make emu and one run of the hostile model, every
    tool in a scratch directory of its own."""
    onnx = pytest.importorskip("onnx")
    scratch = tmp_path_factory.mktemp("hostile-onnx")
    work = scratch / "work"
    work.mkdir()
    onnx.save(hostile_onnx_model(GRAPH_NAMES[request.param]), scratch / "model.onnx")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)       # make and the program inherit it
        r = subprocess.run([SWIR_IMPORT, "../model.onnx", "-o", OUT_SWIR], capture_output=True,
                           text=True, cwd=work, check=False)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([SWIR_CG, OUT_SWIR, "-o", "out"], capture_output=True, text=True,
                           cwd=work, check=False)
        assert r.returncode == 0, r.stderr
        module = parse_module((work / OUT_SWIR).read_text(), OUT_SWIR)
        program = emulate.build(work / "out", module.name)
        rng = np.random.default_rng(5)
        inputs = [rng.standard_normal(shape).astype(np.float32) for _, shape in INPUTS]
        f = module.lookup("main")
        run = emulate.run(program, inputs, [p.type for p in f.params], f.result_types)
    return OnnxProject(scratch, work, work / "out", program, module, inputs, run)


def test_hostile_onnx_names_import_compile_run_and_stay_inside_the_directory(onnx_project):
    ort = pytest.importorskip("onnxruntime")
    p = onnx_project
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(p.scratch / "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    want = sess.run([n for n, _ in OUTPUTS], {n: a for (n, _), a in zip(INPUTS, p.inputs)})
    assert len(p.run.outputs) == len(want)
    for got, w in zip(p.run.outputs, want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    # The module keeps the model's names exactly (they are data, not code).
    f = p.module.lookup("main")
    assert [q.name for q in f.params] == [n for n, _ in INPUTS]
    assert p.module.lookup("*/ int pwned = 1; /*") is not None and p.module.lookup(LONG)
    # Nothing ran and nothing was written outside the directories named on the
    # command lines: -o OUT_SWIR (and its weights beside it) and -o out.
    assert not list(p.scratch.rglob("PWNED")) and not Path("PWNED").exists()
    assert sorted(q.name for q in p.scratch.iterdir()) == ["model.onnx", "work"]
    weights = OUT_SWIR.removesuffix(".swir") + ".weights"
    assert sorted(q.name for q in p.work.iterdir()) == sorted([OUT_SWIR, weights, "out"])
    assert (p.work / weights).stat().st_size == 8 * 16 * 4 + 16 * 4 * 4   # the two big ones
    stem = file_stem(p.module.name)
    assert p.program == p.out / f"{stem}_emu"
    assert sorted(q.name for q in p.out.iterdir()) == sorted(
        ["Makefile", "emu", "layers.c", "layers.h", "layers_mix.h", "layers_slave.c", "main.c",
         "weights.bin", p.program.name])
    assert sorted(q.name for q in (p.out / "emu").iterdir()) == sorted(RUNTIME_FILES + (TARGET_HEADER,))
    assert re.fullmatch(r"[A-Za-z0-9_]{1,64}", stem)
    declared = re.search(r"#define SWIR_WEIGHTS_BYTES (\d+)", (p.out / "main.c").read_text())
    assert (p.out / "weights.bin").stat().st_size == int(declared.group(1)) >= 768
    # The counters name the kernels; every name is one printable line.
    assert p.run.stats["functions"] and all(n.isprintable() for n in p.run.stats["functions"])


_C_TOKENS = re.compile(r'/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', re.DOTALL)


def test_hostile_names_reach_generated_text_only_as_comments_and_literals(onnx_project):
    """Outside comments and string literals the generated C holds only
    identifiers ([A-Za-z_][A-Za-z0-9_]{0,62}), numbers and punctuation; the
    comments and literals are printable ASCII and cannot end early (a '*/' of
    a name would end its comment, and what follows would be caught as code).
    The Makefile holds no model text but the sanitised program name."""
    p = onnx_project
    for name in ["main.c", "layers.c", "layers.h", "layers_mix.h", "layers_slave.c"]:
        text = (p.out / name).read_text()
        assert text.isascii(), name
        pieces = _C_TOKENS.findall(text)
        code = _C_TOKENS.sub(" ", text)
        for piece in pieces:
            assert all(ch == "\n" or " " <= ch <= "~" for ch in piece), (name, piece[:200])
            if piece.startswith("/*"):
                assert "/*" not in piece[2:-2] and "??" not in piece, (name, piece[:200])
            else:
                assert "\n" not in piece and "??" not in piece
        for fragment in ["pwned = 1", "`", "$", "../", "\\", "'", '"', "??",
                         "//", "*/"]:
            assert fragment not in code, (name, fragment)
        for line in code.splitlines():
            assert "#" not in line or line.lstrip().startswith("#"), (name, line)
        words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code)
        assert max(map(len, words)) <= 63, name
        # the hostile strings themselves appear only where proven harmless above
        for s in HOSTILE_STRINGS:
            assert s not in code
    # The Makefile is the fixed template but for the program's name and the
    # source's name in a comment, both from safe alphabets.
    make = (p.out / "Makefile").read_text()
    stem = file_stem(p.module.name)
    head, _, rest = make.partition("\n")
    m = re.fullmatch(rf"# Makefile for {stem}, generated by swir-cg from ([A-Za-z0-9_./ -]*)\.",
                     head)
    assert m and ".." not in m.group(1), head
    reserve = int(re.search(r"^LDM_RESERVE = (\d+)$", make, re.MULTILINE).group(1))
    assert "# Makefile for STEM, generated by swir-cg from SRC.\n" + rest.replace(stem, "STEM") \
        == templates.makefile("STEM", "SRC", reserve)
    # swir-import wrote the model's names into the module as quoted swir
    # names, and its weights file's name as a quoted string, nothing else.
    text = (p.work / OUT_SWIR).read_text()
    assert "\x1b" not in text and "\u202e" not in text and "line1\n" not in text


def test_program_checks_input_and_weights_sizes_and_names_inputs_on_one_line(onnx_project,
                                                                               tmp_path):
    """No size or offset comes from a file: an input or weights file one byte
    too long or too short, or a directory, is a one-line error naming the
    (escaped) input, exit status 1. (Short inputs and weights given with
    --weights: test/CodeGen/swir-cg-errors.swir.)"""
    p = onnx_project
    sizes = [a.nbytes for a in p.inputs]
    files = []
    for i, a in enumerate(p.inputs):
        files.append(tmp_path / f"in{i}.bin")
        a.tofile(files[-1])

    def run(program: Path, inputs: list[Path], *extra: str) -> subprocess.CompletedProcess:
        args = [str(program)]
        for f in inputs:
            args += ["--input", str(f)]
        return subprocess.run(args + list(extra), capture_output=True, cwd=tmp_path, check=False)

    def fails(r: subprocess.CompletedProcess, message: bytes) -> None:
        assert r.returncode == 1, r
        assert r.stderr.count(b"\n") == 1 and b"\x1b" not in r.stderr, r.stderr
        assert message in r.stderr, r.stderr

    assert run(p.program, files).returncode == 0
    name = b"`touch PWNED`;|&\"q\"\\x0a\\x1b[2J\\u202e : buf<2 x 8 x f32>"
    long_ = tmp_path / "long.bin"
    long_.write_bytes(files[0].read_bytes() + b"\0")
    fails(run(p.program, [long_, *files[1:]]),
          b"input 1 (" + name + b") '" + bytes(long_) + b"' has 65 bytes; expected 64")
    short = tmp_path / "short.bin"
    short.write_bytes(files[0].read_bytes()[:-1])
    fails(run(p.program, [short, *files[1:]]), b"has 63 bytes; expected 64")
    fails(run(p.program, [tmp_path, *files[1:]]), b"(not a regular file?)")
    fails(run(p.program, [*files[:3], long_]),
          b"input 4 (for : buf<2 x 4 x f32>) '" + bytes(long_) + b"' has 65 bytes; expected 32")
    assert sizes == [64, 128, 32, 32]
    # weights.bin beside the program (the default), one byte too long or short.
    weights = (p.out / "weights.bin").read_bytes()
    for bad in [weights + b"\0", weights[:-1], b""]:
        copy = tmp_path / "copy"
        copy.mkdir(exist_ok=True)
        shutil.copy(p.program, copy / p.program.name)
        (copy / "weights.bin").write_bytes(bad)
        fails(run(copy / p.program.name, files),
              b"weights file '" + bytes(copy / "weights.bin") + b"' has " +
              str(len(bad)).encode() + b" bytes; expected " + str(len(weights)).encode())
    fails(run(p.program, files, "--weights", "/dev/zero"), b"has 0 bytes; expected")


def _import(tmp_path: Path, model, *args: str) -> subprocess.CompletedProcess:
    import onnx
    onnx.save(model, tmp_path / "m.onnx")
    return subprocess.run([SWIR_IMPORT, "m.onnx", "-o", "m.swir", *args], capture_output=True,
                          text=True, cwd=tmp_path, check=False)


def test_import_errors_quote_model_names_on_one_line(tmp_path):
    """swir-import's diagnostics quote node and tensor names with every
    non-printable character escaped: one line, no terminal control."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    evil = "evil\n\x1b[2J\u202e"
    nodes = [helper.make_node("Einsum", ["x", "x"], [evil], name=evil, equation="i,i->i")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(evil, TensorProto.FLOAT, [4])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    r = _import(tmp_path, model)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and r.stderr.isascii(), r.stderr
    assert "node 'evil\\x0a\\x1b[2J\\u202e' (Einsum): this operator is not supported" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


@pytest.mark.parametrize("location,offset,length,message", [
    ("../secret.bin", 0, 64, "is not a file name relative to the model's directory"),
    ("sub/../../secret.bin", 0, 64, "is not a file name relative to the model's directory"),
    ("{abs}", 0, 64, "is not a file name relative to the model's directory"),
    ("link.bin", 0, 64, "leads outside the model's directory"),
    ("data.bin", 8, 64, "at offset 8, length 64 does not fit in 'data.bin' (64 bytes)"),
    ("data.bin", 0, 65, "at offset 0, length 65 does not fit"),
    ("data.bin", -1, 64, "at offset -1, length 64 does not fit"),
    ("nothere.bin", 0, 64, "is not a readable regular file beside the model"),
    (".", 0, 64, "is not a readable regular file beside the model"),
])
def test_external_data_is_read_only_from_beside_the_model(tmp_path, location, offset, length,
                                                          message):
    """An initializer's external data (a location, offset and length the model
    gives) is read only from a regular file in the model's own directory and
    only within it, whichever onnx is installed; with or without the checker."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    outside = tmp_path / "secret.bin"
    outside.write_bytes(bytes(range(64)))
    d = tmp_path / "model"
    d.mkdir()
    (d / "data.bin").write_bytes(bytes(64))
    (d / "link.bin").symlink_to(outside)
    w = numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in [("location", location.format(abs=outside)), ("offset", str(offset)),
                       ("length", str(length))]:
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    model = helper.make_model(
        helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    for extra in ([], ["--no-check"]):
        r = _import(d, model, *extra)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "m.onnx: error: tensor 'w': external data" in r.stderr and message in r.stderr, \
            r.stderr
    assert sorted(p.name for p in d.iterdir()) == ["data.bin", "link.bin", "m.onnx"]


def test_long_names_keep_their_head_and_tail():
    """Exporters' long names often differ only at the end: cut from the
    middle, two such names stay distinct without a uniqueness suffix."""
    s = Scope()
    q = s.declare("/encoder/layer.11/attention/self/query/MatMul_output_0")
    v = s.declare("/encoder/layer.11/attention/self/value/MatMul_output_0")
    assert len(q) == len(v) == 48 and q != v
    assert q.startswith("_encoder_layer_11") and q.endswith("query_MatMul_output_0")
