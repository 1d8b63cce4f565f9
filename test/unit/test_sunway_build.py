"""The Sunway build of a generated project, and swir's Sunway dialect check
(docs/codegen.md, "On a real Sunway machine"): the Makefile states the C dialect
(the CPE front end, GCC 4.1, defaults to gnu89), links libm and libm_slave, and
has a `make run` that submits the program with bsub; the emulation's headers
and the check's (test/sunway/include) declare the athread calls with the real
headers' prototypes; the stand-in for sw5cc (test/sunway/sw5cc) checks the
Makefile's flags and refuses a missing dialect, C11, an unguarded _Float16 and
a call the real prototypes reject; and generated projects pass it, through
emulate.build as every test's project does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import swir
from swir.codegen import emulate, templates
from swir.codegen.project import TARGET_HEADER
from swir.target import SW26010

ROOT = Path(__file__).resolve().parents[2]
SW5CC = ROOT / "test" / "sunway" / "sw5cc"
CHECK_INCLUDE = ROOT / "test" / "sunway" / "include"
RUNTIME = Path(swir.__file__).parent / "codegen" / "runtime"
SWIR_CG = str(Path(sys.executable).with_name("swir-cg"))
CC = shutil.which("cc")

pytestmark = pytest.mark.skipif(CC is None or shutil.which("make") is None,
                                reason="needs a host C compiler (cc) and make")


def sw5cc(cwd: Path, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess:
    return subprocess.run([str(SW5CC), *args], capture_output=True, text=True, cwd=cwd,
                          check=False, env={**os.environ, **(env or {})}, timeout=60)


def emu_compile(cwd: Path, name: str) -> subprocess.CompletedProcess:
    """``name`` compiled as `make emu` compiles a project's sources, against the
    emulation's headers (syntax only), with the target header swir-cg writes beside them."""
    (cwd / TARGET_HEADER).write_text(SW26010.c_defines())
    return subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DSWIR_EMU",
                           f"-I{RUNTIME}", "-I.", "-fsyntax-only", name], capture_output=True,
                          text=True, cwd=cwd, check=False, timeout=60)


def swir_cg(src: Path, out: Path, *flags: str) -> None:
    r = subprocess.run([SWIR_CG, *flags, "-q", str(src), "-o", str(out)], capture_output=True,
                       text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stderr


# -- the Makefile --------------------------------------------------------------------


def test_the_makefile_states_the_dialect_links_both_libms_and_runs_with_bsub():
    text = templates.makefile("net", "net.swir", 4096)
    assert "\nSWSTD = -std=gnu99\n" in text
    compiles = re.findall(r"^\t\$\(SW5CC\) -(host|slave) (.*)$", text, re.M)
    assert sorted(side for side, _ in compiles) == ["host", "host", "slave"]
    # the CPE code with the vector extensions on (simd.h needs -msimd)
    assert all(flags.startswith(("-msimd " if side == "slave" else "") + "$(SWSTD) $(SWFLAGS) -c ")
               for side, flags in compiles)
    assert "\nSWLIBS = -lm -lm_slave\n" in text
    assert "\t$(SW5CC) -hybrid $(SWFLAGS) -o $@ main.o layers.o layers_slave.o $(SWLIBS)\n" \
        in text
    assert "\nrun: $(PROGRAM)\n\t$(BSUB) $(BSUBFLAGS) ./$(PROGRAM) $(ARGS)\n" in text
    assert re.search(r"^BSUBFLAGS = -I -b -q \$\(QUEUE\) -n 1 -cgsp 64 ", text, re.M)
    assert "\nQUEUE = q_sw_expr\n" in text and "\nBSUB = bsub\n" in text
    assert re.search(r"^\.PHONY: .*\brun\b", text, re.M)


def test_make_run_builds_and_submits_the_program(tmp_path):
    swir_cg(ROOT / "examples" / "mlp.swir", tmp_path / "p", "-O0")
    r = subprocess.run(["make", "-s", "-n", "-C", str(tmp_path / "p"), "run", f"SW5CC={SW5CC}",
                        "QUEUE=q_sw_share", "ARGS=--input x.npy --output y.npy"],
                       capture_output=True, text=True, check=True, timeout=60)
    lines = r.stdout.strip().splitlines()
    assert any(f"{SW5CC} -hybrid " in line for line in lines[:-1])    # built first
    assert lines[-1] == ("bsub -I -b -q q_sw_share -n 1 -cgsp 64 -share_size 4096 "
                         "-host_stack 1024 ./mlp --input x.npy --output y.npy")


# -- the stand-in for sw5cc -----------------------------------------------------------

GOOD_SLAVE = r"""
#include <slave.h>
static __thread_local volatile int reply[1];
static __thread_local float buf[16];
void k(void *arg)
{
    float *const mem = (float *)arg;
    for (long i = 0; i < 16; i++)       /* C99 */
        buf[i] = 0;
    athread_get(PE_MODE, (void *)&mem[0], buf, 64, (void *)&reply[0], 0, 0, 0);
    while (reply[0] != 1) ;
    athread_put(PE_MODE, buf, (void *)&mem[16], 64, (void *)&reply[0], 0, 0);
}
"""


def test_a_cpe_source_in_the_stated_dialect_passes(tmp_path):
    (tmp_path / "k.c").write_text(GOOD_SLAVE)
    for std in ("-std=gnu99", "-std=c99"):
        r = sw5cc(tmp_path, "-slave", std, "-O2", "-msimd", "-c", "k.c", "-o", "k.o")
        assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.c"]       # writes nothing


@pytest.mark.parametrize("flags, message", [
    ((), ("-slave without -std=gnu99 or -std=c99: the Sunway front end (GCC 4.1) defaults "
          "to gnu89")),
    (("-std=gnu11",), "-std=gnu11: the Sunway front end is GCC 4.1, which knows no C11"),
    (("-std=c17",), "-std=c17: the Sunway front end is GCC 4.1, which knows no C11"),
    (("-std=gnu89",), "-std=gnu89: the generated C is C99"),
])
def test_a_missing_or_wrong_dialect_is_refused(tmp_path, flags, message):
    (tmp_path / "k.c").write_text(GOOD_SLAVE)
    r = sw5cc(tmp_path, "-slave", *flags, "-O2", "-c", "k.c", "-o", "k.o")
    assert r.returncode == 1
    assert r.stderr.startswith(f"sw5cc (swir check): error: {message}"), r.stderr
    assert r.stderr.count("\n") == 1


def test_the_generated_c_needs_the_dialect(tmp_path):
    """Why the Makefile states it: in gnu89, the old front end's default, the
    generated C99 does not compile."""
    swir_cg(ROOT / "examples" / "mlp.swir", tmp_path / "p", "-O0")
    r = subprocess.run([CC, "-std=gnu89", "-pedantic-errors", "-fsyntax-only",
                        f"-I{CHECK_INCLUDE}", "layers_slave.c"], capture_output=True, text=True,
                       cwd=tmp_path / "p", check=False)
    assert r.returncode != 0 and "C99" in r.stderr, r.stderr


@pytest.mark.parametrize("name, code", [
    ("static assert", '_Static_assert(sizeof(int) == 4, "int");'),
    ("anonymous struct", "struct s { struct { int a; }; int b; };"),
    ("generic", "#define T(x) _Generic((x), int: 1, default: 0)\nint t = T(1);"),
    ("alignas", "_Alignas(32) static float v[8];"),
    ("noreturn", "_Noreturn void stop(void);"),
    ("thread local", "static _Thread_local int n;"),
    ("unguarded _Float16", "static _Float16 h;"),
    ("_Float16 typedef without its guard", "typedef _Float16 f16;"),
])
def test_c11_and_unguarded_float16_are_refused(tmp_path, name, code):
    (tmp_path / "k.c").write_text(GOOD_SLAVE + code + "\n")
    r = sw5cc(tmp_path, "-slave", "-std=gnu99", "-c", "k.c")
    assert r.returncode == 1, name
    assert "error: ISO C" in r.stderr, r.stderr


def test_float16_inside_its_guard_passes(tmp_path):
    """The generated f16 typedef (templates.F16): _Float16 only under
    __FLT16_MAX__, marked __extension__ (there is none on Sunway: the #error)."""
    (tmp_path / "k.c").write_text(GOOD_SLAVE + templates.F16 + "swir_f16 half;\n")
    r = sw5cc(tmp_path, "-slave", "-std=gnu99", "-c", "k.c")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args, message", [
    (("-std=gnu99", "-c", "k.c"), "no -host, -slave or -hybrid"),
    (("-host", "-slave", "-std=gnu99", "-c", "k.c"), "both -host and -slave given"),
    (("-slave", "-std=gnu99", "k.c"), "-slave without -c"),
    (("-hybrid", "-o", "p", "a.o", "-lm_slave"), "the link has no -lm: the MPE code calls libm"),
    (("-hybrid", "-o", "p", "a.o", "-lm"), "the link has no -lm_slave: the CPE code calls libm"),
    (("-hybrid", "a.o", "-lm", "-lm_slave"), "-hybrid without -o PROGRAM"),
    (("-hybrid", "-o", "p", "k.c", "-lm", "-lm_slave"), "-hybrid links objects, not C sources"),
])
def test_the_stand_in_checks_how_sw5cc_is_called(tmp_path, args, message):
    (tmp_path / "k.c").write_text(GOOD_SLAVE)
    r = sw5cc(tmp_path, *args)
    assert r.returncode == 1 and r.stderr.startswith("sw5cc (swir check): error: "), r.stderr
    assert message in r.stderr


def test_a_link_with_both_libraries_passes_and_writes_nothing(tmp_path):
    r = sw5cc(tmp_path, "-hybrid", "-O2", "-o", "p", "a.o", "b.o", "-lm", "-lm_slave")
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_each_side_includes_its_own_header(tmp_path):
    (tmp_path / "m.c").write_text("#include <slave.h>\nint x;\n")
    r = sw5cc(tmp_path, "-host", "-std=gnu99", "-c", "m.c")
    assert r.returncode == 1 and "slave.h is the CPE header" in r.stderr, r.stderr
    (tmp_path / "s.c").write_text("#include <athread.h>\nint x;\n")
    r = sw5cc(tmp_path, "-slave", "-std=gnu99", "-c", "s.c")
    assert r.returncode == 1 and "athread.h is the MPE header" in r.stderr, r.stderr


VECTOR_KERNEL = r"""
#include <slave.h>
#include <simd.h>
float row[8] __attribute__((aligned(32)));
void k(void)
{
    floatv4 acc = simd_set_floatv4(0.0f, 0.0f, 0.0f, 0.0f);
    floatv4 x;
    simd_load(x, &row[0]);
    acc = simd_vmas(x, simd_set_floatv4(row[4], row[4], row[4], row[4]), acc);
    simd_storeu(acc + x, &row[1]);
}
"""


def test_simd_h_needs_msimd_and_types_the_vector_code(tmp_path):
    """The check's simd.h, like the real one, needs -msimd; with it, the
    vector code the micro-kernels use compiles, and a scalar where a vector
    is expected does not."""
    (tmp_path / "v.c").write_text(VECTOR_KERNEL)
    r = sw5cc(tmp_path, "-slave", "-std=gnu99", "-c", "v.c")
    assert r.returncode == 1 and "simd.h needs sw5cc -msimd" in r.stderr, r.stderr
    r = sw5cc(tmp_path, "-slave", "-msimd", "-std=gnu99", "-c", "v.c")
    assert r.returncode == 0, r.stderr
    (tmp_path / "w.c").write_text(VECTOR_KERNEL.replace("simd_vmas(x,", "simd_vmas(row[0],"))
    r = sw5cc(tmp_path, "-slave", "-msimd", "-std=gnu99", "-c", "w.c")
    assert r.returncode == 1 and "simd_vmas" in r.stderr, r.stderr


# -- exact prototypes ----------------------------------------------------------------

UNCAST_REPLY = r"""
#include <slave.h>
static __thread_local volatile int reply;
static __thread_local float buf[16];
void k(void *arg)
{
    athread_get(PE_MODE, arg, buf, 64, &reply, 0, 0, 0);   /* volatile int * -> void * */
}
"""

UNCAST_SOURCE = r"""
#include <slave.h>
static __thread_local volatile int reply;
static __thread_local float buf[16];
void k(void *arg)
{
    const float *src = (const float *)arg;
    athread_get(PE_MODE, src, buf, 64, (void *)&reply, 0, 0, 0);   /* const -> void * */
}
"""

SYN_AND_SCOPE = r"""
#include <slave.h>
void k(void *arg)
{
    scope s = ARRAY_SCOPE;                 /* the real header's typedef */
    int r = athread_syn(s, 0xffff);        /* returns int */
    (void)arg;
    (void)r;
}
"""


@pytest.mark.parametrize("code, error", [
    (UNCAST_REPLY, "discards 'volatile' qualifier"),
    (UNCAST_SOURCE, "discards 'const' qualifier"),
])
def test_a_call_the_real_prototypes_reject_fails_the_check_and_the_emulation(
        tmp_path, code, error):
    (tmp_path / "k.c").write_text(code)
    r = sw5cc(tmp_path, "-slave", "-std=gnu99", "-c", "k.c", env={"LC_ALL": "C"})
    assert r.returncode == 1 and error in r.stderr.replace("\u2018", "'").replace("\u2019", "'"), \
        r.stderr
    r = emu_compile(tmp_path, "k.c")
    assert r.returncode != 0 and "qualifier" in r.stderr, r.stderr


def test_the_real_types_and_return_values_compile_against_both(tmp_path):
    (tmp_path / "k.c").write_text(SYN_AND_SCOPE)
    r = sw5cc(tmp_path, "-slave", "-std=gnu99", "-c", "k.c")
    assert r.returncode == 0, r.stderr
    r = emu_compile(tmp_path, "k.c")
    assert r.returncode == 0, r.stderr


SPAWN = r"""
#include <athread.h>
struct para { float *x; };
extern void SLAVE_FUN(k)(void *);
void go(float *x)
{
    static struct para p;
    p.x = x;
    athread_init();
    athread_spawn(k, &p);
    athread_join();
    athread_halt();
}
"""


def test_spawn_goes_through_slave_naming_and_a_void_pointer(tmp_path):
    (tmp_path / "m.c").write_text(SPAWN)
    assert sw5cc(tmp_path, "-host", "-std=gnu99", "-c", "m.c").returncode == 0
    assert emu_compile(tmp_path, "m.c").returncode == 0
    # Without SLAVE_FUN(k) declared, the real macro names an undeclared slave_k.
    (tmp_path / "m.c").write_text(SPAWN.replace("extern void SLAVE_FUN(k)(void *);",
                                                "extern void k(void *);"))
    r = sw5cc(tmp_path, "-host", "-std=gnu99", "-c", "m.c")
    assert r.returncode == 1 and "slave_k" in r.stderr, r.stderr
    # A const argument converts to the prototype's void * only with a warning.
    (tmp_path / "m.c").write_text(SPAWN.replace("static struct para p;",
                                                "static struct para p;\n"
                                                "    const struct para *q = &p;")
                                  .replace("athread_spawn(k, &p);", "athread_spawn(k, q);"))
    assert sw5cc(tmp_path, "-host", "-std=gnu99", "-c", "m.c").returncode == 1
    assert emu_compile(tmp_path, "m.c").returncode != 0


def _prototypes(header: Path) -> dict[str, str]:
    """The athread functions a header declares, each prototype on one line
    with single spaces and no `extern`."""
    text = re.sub(r"/\*.*?\*/", " ", header.read_text(), flags=re.S)
    out = {}
    for m in re.finditer(r"(?:extern\s+)?(int|void)\s+(athread_\w+)\s*\(([^)]*)\)\s*;", text):
        out[m.group(2)] = " ".join(f"{m.group(1)} {m.group(2)}({m.group(3)})".split())
    return out


def test_the_emulation_and_the_check_declare_the_same_prototypes():
    emu = _prototypes(RUNTIME / "athread.h") | _prototypes(RUNTIME / "slave.h")
    check = _prototypes(CHECK_INCLUDE / "athread.h") | _prototypes(CHECK_INCLUDE / "slave.h")
    assert emu == {name: check[name] for name in emu}
    assert emu == {
        "athread_init": "int athread_init(void)",
        "athread_join": "int athread_join(void)",
        "athread_halt": "int athread_halt(void)",
        "athread_get_id": "int athread_get_id(int core)",
        "athread_syn": "int athread_syn(scope scp, int mask)",
        "athread_get": "int athread_get(dma_mode mode, void *src, void *dest, int len, "
                       "void *reply, char mask, int stride, int bsize)",
        "athread_put": "int athread_put(dma_mode mode, void *src, void *dest, int len, "
                       "void *reply, int stride, int bsize)",
    }
    for text in ((RUNTIME / "slave.h").read_text(), (CHECK_INCLUDE / "slave.h").read_text()):
        assert "typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE } scope;" in text
        assert "typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;" \
            in text


# -- generated projects --------------------------------------------------------------

HALF = """module "half"
stage graph

func @main(%a: <4 x 8 x f32>) -> <4 x 8 x f32> {
'entry:
  %h = cast %a {to = f16} : <4 x 8 x f16>
  %m = mul %h, %h : <4 x 8 x f16>
  %e = exp %m : <4 x 8 x f16>
  %r = cast %e {to = f32} : <4 x 8 x f32>
  return %r
}
"""


@pytest.mark.parametrize("model", ["mlp", "half", "host-branches", "cpe-call-chain"])
def test_generated_projects_pass_the_check(tmp_path, model):
    if model == "mlp":
        src = ROOT / "examples" / "mlp.swir"
    elif model == "half":
        src = tmp_path / "half.swir"
        src.write_text(HALF)
    else:
        src = ROOT / "test" / "Inputs" / "codegen" / f"{model}.swir"
    out = tmp_path / "p"
    swir_cg(src, out)
    before = sorted(p.name for p in out.iterdir())
    start = time.perf_counter()
    r = subprocess.run(["make", "-B", "-C", str(out), "all", f"SW5CC={SW5CC}"],
                       capture_output=True, text=True, check=False, timeout=120)
    seconds = time.perf_counter() - start
    assert r.returncode == 0, r.stdout + r.stderr
    # MPE and CPE sources compiled separately, each with the dialect; one link.
    assert len(re.findall(r" -host -std=gnu99 .*-c (main|layers)\.c", r.stdout)) == 2
    assert len(re.findall(r" -slave -msimd -std=gnu99 .*-c layers_slave\.c", r.stdout)) == 1
    assert re.search(r" -hybrid .* -lm -lm_slave$", r.stdout, re.M)
    assert sorted(p.name for p in out.iterdir()) == before          # nothing written
    assert seconds < 30        # about 0.3 s; cheap enough for every generated project


def test_emulate_build_runs_the_check(tmp_path, monkeypatch):
    swir_cg(ROOT / "examples" / "mlp.swir", tmp_path / "p", "-O0")
    make = tmp_path / "p" / "Makefile"
    make.write_text(make.read_text().replace("\nSWSTD = -std=gnu99\n", "\nSWSTD =\n"))
    monkeypatch.setenv(emulate.SW5CC_CHECK, str(SW5CC))
    with pytest.raises(emulate.EmulationError, match=r"(?s)the Sunway dialect check .*"
                       r"-host without -std=gnu99 or -std=c99"):
        emulate.build(tmp_path / "p", "mlp")
    monkeypatch.setenv(emulate.SW5CC_CHECK, "")     # off: only make emu
    assert emulate.build(tmp_path / "p", "mlp").is_file()
    assert emulate.sunway_check(tmp_path / "p") is False


def test_the_tests_run_the_check():
    """conftest.py turns the check on for every test: in this run it names
    an executable stand-in (the environment may choose another, but the suite
    as CI runs it never turns the check off)."""
    sw5cc = os.environ.get(emulate.SW5CC_CHECK)
    assert sw5cc and os.access(sw5cc, os.X_OK), sw5cc


# -- the intrinsics generated code may call -------------------------------------------

# The names the check's headers declare: each one public SW26010 code shows
# to exist (test/sunway/include/simd.h cites where), and only those swir needs:
# a subset of the public header (which has more, e.g. simd_vcpyf), so a call
# outside it fails the check even when the real header would take it.
SIMD_NAMES = {
    "simd_load", "simd_loadu", "simd_store", "simd_storeu", "simd_loade",
    "simd_set_floatv4", "simd_set_doublev4",
    "simd_vmas", "simd_vmss", "simd_vnmas", "simd_vnmss",
    "simd_vmad", "simd_vmsd", "simd_vnmad", "simd_vnmsd",
    "simd_vfcmpeq", "simd_vfcmple", "simd_vfcmplt", "simd_vfcmpun",
    "simd_vseleq", "simd_vsellt", "simd_vselle",
    "simd_putr", "simd_putc", "simd_getr", "simd_getc",
}
CALL = re.compile(r"\b((?:simd|athread|dma)_\w+)\s*\(")


def _declared(header: Path) -> set[str]:
    """The simd_ / athread_ / dma_ names ``header`` declares: functions and
    function-like macros (comments dropped)."""
    text = re.sub(r"/\*.*?\*/", " ", header.read_text(), flags=re.S)
    macros = re.findall(r"^#define\s+((?:simd|athread|dma)_\w+)\(", text, re.M)
    functions = re.findall(r"^extern\s+[\w ]+?\b((?:simd|athread|dma)_\w+)\s*\(", text, re.M)
    return set(macros) | set(functions)


def test_the_check_declares_exactly_the_public_intrinsics_each_cited():
    simd_h = CHECK_INCLUDE / "simd.h"
    assert _declared(simd_h) == SIMD_NAMES
    text = simd_h.read_text()
    # each group of declarations follows a comment naming its public source
    for group in re.split(r"\n\n", text.split("#pragma GCC diagnostic", 1)[1]):
        names = [n for n in SIMD_NAMES if re.search(rf"\b{n}\b", group.split("*/")[-1])]
        if names:
            assert "header:" in group, group
    for gone in ("simd_reduc_pluss", "simd_reduc_plusd", "simd_smaxs", "simd_smins",
                 "simd_smaxd", "simd_smind"):
        assert gone not in _declared(simd_h) and gone not in _declared(RUNTIME / "simd.h")


# simd_smaxs and simd_reduc_pluss are absent from the public SW26010 simd.h;
# simd_vcpyf is in it, but not in the subset swir may call.
@pytest.mark.parametrize("call", ["simd_smaxs(x, x)", "simd_reduc_pluss(x)",
                                  "simd_vcpyf(x)"])
def test_an_intrinsic_outside_the_list_fails_the_check(tmp_path, call):
    """An undeclared call is an implicit declaration: an error in the check's
    C99 with -pedantic-errors -Werror."""
    (tmp_path / "v.c").write_text(VECTOR_KERNEL.replace(
        "simd_storeu(acc + x, &row[1]);", f"simd_storeu(acc + x, &row[1]);\n    (void){call};"))
    r = sw5cc(tmp_path, "-slave", "-msimd", "-std=gnu99", "-c", "v.c", env={"LC_ALL": "C"})
    name = call.split("(")[0]
    assert r.returncode == 1 and f"implicit declaration of function '{name}'" in \
        r.stderr.replace("\u2018", "'").replace("\u2019", "'"), r.stderr


LIT_INPUTS = sorted(p for p in (ROOT / "test" / "CodeGen").glob("*.swir")
                    if p.name not in ("swir-cg-errors.swir", "ldm-overflow.swir"))


def test_generated_code_calls_only_the_declared_intrinsics(tmp_path):
    """Every simd_ / athread_ / dma_ name the C of the lit inputs and the
    examples calls is one the check's headers declare (the lit tests and
    every emulate.build also compile them through the check, where an
    undeclared one fails as an implicit declaration)."""
    declared = set().union(*(_declared(CHECK_INCLUDE / h)
                             for h in ("athread.h", "slave.h", "simd.h")))
    called: dict[str, set[str]] = {}
    for src in [*LIT_INPUTS, ROOT / "examples" / "resnet.swir"]:
        out = tmp_path / src.stem
        swir_cg(src, out)
        for c in out.glob("*.c"):
            for name in CALL.findall(re.sub(r"/\*.*?\*/", " ", c.read_text(), flags=re.S)):
                called.setdefault(name, set()).add(f"{src.name}:{c.name}")
    assert {"simd_loade", "simd_vfcmplt", "simd_vfcmpun", "simd_vseleq", "athread_get"} \
        <= set(called)                     # the inputs exercise the vector forms
    outside = {n: sorted(w) for n, w in called.items() if n not in declared}
    assert not outside, outside
    # a splat is simd_loade, never four equal lanes through simd_set_*
    for c in tmp_path.glob("*/*.c"):
        assert not re.search(r"simd_set_\w+\(([^,]+), \1, \1, \1\)", c.read_text()), c
