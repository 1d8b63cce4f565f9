"""Model-supplied names never reach C, the Makefile or a path unsanitised:
the generator's name rules, and a module whose every name is hostile
compiling with -Werror, running correctly and writing only inside its DIR."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from swir.codegen import emulate
from swir.codegen.names import Scope, c_identifier, c_string, comment_text, file_stem
from swir.interp.run import interpreter_for
from swir.parser import parse_module


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


def test_hostile_names_compile_run_and_stay_inside_the_directory(tmp_path):
    src = tmp_path / "hostile.swir"
    src.write_text(HOSTILE)
    out = tmp_path / "work" / "out"
    out.parent.mkdir()
    r = subprocess.run([str(Path(sys.executable).with_name("swir-cg")), str(src), "-o", str(out)],
                       capture_output=True, text=True, cwd=tmp_path / "work")
    assert r.returncode == 0, r.stderr
    m = parse_module(HOSTILE, "<hostile>")
    program = emulate.build(out, m.name)
    assert program.parent == out
    x = np.array([[1.0, -2.0]], dtype=np.float32)
    f = m.lookup("main")
    run = emulate.run(program, [x], [f.params[0].type], f.result_types)
    (want,) = interpreter_for(m, tmp_path).run("main", [x])
    np.testing.assert_array_equal(run.outputs[0], want)
    # Nothing ran, nothing was written outside out/.
    assert not list(tmp_path.rglob("PWNED"))
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["out"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.swir", "work"]
    # The stats file names the kernels by their swir names.
    assert all(name.isprintable() for name in run.stats["functions"])
