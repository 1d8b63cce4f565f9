"""Fuzz the generated C program's input readers (the .npy header parser and
the raw reader of swir/codegen/program.c) under AddressSanitizer and
UndefinedBehaviorSanitizer.

One small project is compiled once (examples/mlp.swir by default: swir-cg,
then ``make emu-asan``) and its program is run on mutated inputs: .npy files
whose header dictionary is rewritten (dtype, order, shape, quotes, keys
dropped, doubled or left at the header's very end), whose header length,
version or magic is corrupted, whose bytes are flipped, truncated or
extended, with NULs, missing quotes, colons and parentheses, huge shapes;
raw files of every wrong size; weights files of wrong sizes. Each case runs
the program once (``--input FILE``, with ``--output`` to a file or no output,
when the program prints its results) and must either succeed (exit 0,
nothing on stderr, the output written) or fail cleanly (exit 1, exactly one
line ``PROGRAM: error: ...`` on stderr, no output file and no temporary
left). Anything else is a failure: a sanitizer report, a death by signal,
another exit status, a message of several lines, a case over the time bound.

    python bench/fuzz_program.py --cases 10000 --seed 1 --jobs 2

Cases run in parallel (--jobs processes at a time). Every case is derived
from (seed, case number) alone, so ``--only N`` reruns case N; --save keeps
each failing case's files. test/unit/test_program_hardening.py runs a
bounded campaign (a few hundred cases) in CI.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MODEL = ROOT / "examples" / "mlp.swir"
INPUT = ROOT / "examples" / "mlp_input.npy"
# Every report fatal and recognizable; a leak at exit is a report too.
ENV = {"ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0:exitcode=86",
       "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=86"}
REPORTS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")
TIME_BOUND = 30.0       # seconds per case; a valid case takes about 0.1 s under ASan


@dataclass
class Program:
    """The program under test and what a valid run of it reads."""

    path: Path
    weights: Path
    valid: np.ndarray           # a valid input (its dtype and shape are the port's)


def build(work: Path, model: Path = MODEL, valid_input: Path = INPUT,
          target: str = "emu-asan") -> Program:
    """swir-cg -O0 MODEL -o WORK/project; make TARGET; the program."""
    project = work / "project"
    cg = shutil.which("swir-cg", path=str(BIN)) or "swir-cg"
    subprocess.run([cg, "-O0", "-q", str(model), "-o", str(project), "--force"], check=True)
    subprocess.run(["make", "-s", "-C", str(project), target], check=True,
                   capture_output=True)
    suffix = {"emu": "_emu", "emu-asan": "_emu_asan"}[target]
    path = next(p for p in project.iterdir() if p.name.endswith(suffix) and p.is_file())
    return Program(path, project / "weights.bin", np.load(valid_input))


# -- .npy files, well and badly formed ------------------------------------------------------

def npy(header: bytes, data: bytes, version: int = 1, length: int | None = None,
        magic: bytes = b"\x93NUMPY", minor: int = 0) -> bytes:
    size = 2 if version == 1 else 4
    n = len(header) if length is None else length
    return (magic + bytes([version & 0xff, minor]) + (n % (1 << 8 * size)).to_bytes(size, "little")
            + header + data)


def padded(text: bytes, version: int = 1) -> bytes:
    """A header as numpy writes it: spaces and a newline to 64 bytes."""
    pre = 10 if version == 1 else 12
    total = -(-(pre + len(text) + 1) // 64) * 64
    return text + b" " * (total - pre - len(text) - 1) + b"\n"


def shape_text(dims: list[int]) -> str:
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


DESCRS = ["'<f4'", "'<f4'", "'<f4'", "'<f8'", "'|b1'", "'>f4'", "'<i4'", "'f4'", "'float32'",
          "''", "'<f4", "<f4", "'<f4\"", "\"<f4\"", "'<f4\n'", "'<\x00f4'", "'" + "x" * 300 + "'",
          "'\xff\xfe'", "'<f4' '", "('<f4',)", "'<c8'", "'<U4'", "'O'", ""]
ORDERS = ["False", "False", "True", "false", "0", "None", "Fals", "", "'False'"]


def shape_choice(rng: random.Random, n: int) -> str:
    """A shape's text: the port's own (n elements) or another, often hostile."""
    choices = [
        lambda: shape_text([1, n]), lambda: shape_text([n]), lambda: shape_text([1, n, 1]),
        lambda: shape_text([1] * rng.randint(0, 70) + [n]),
        lambda: shape_text([rng.choice([0, 1, 2, 8, n, -1, 2 ** 31, 2 ** 62, 2 ** 63 - 1,
                                        2 ** 63, 2 ** 64, 10 ** 30])
                            for _ in range(rng.randint(0, 6))]),
        lambda: shape_text([rng.randint(0, 2 ** 20) for _ in range(rng.randint(1, 80))]),
        lambda: "()", lambda: "(,)", lambda: f"({n}", lambda: f"1, {n})", lambda: f"[1, {n}]",
        lambda: f"(1L, {n}L)", lambda: f"( 1 ,{n} ,)", lambda: f"(1,,{n})", lambda: f"(+1, {n})",
        lambda: f"(1, {n}))", lambda: "(" + "9" * rng.randint(19, 400) + ",)",
        lambda: f"(1, 0x{n:x})", lambda: f"(1,\t{n})", lambda: f"(1, {n}e0)",
        lambda: "(" + ", ".join(["1"] * rng.randint(60, 70)) + ")",
    ]
    return rng.choice(choices)()


def header_dict(rng: random.Random, n: int) -> bytes:
    """A header dictionary with every field chosen at random (often valid)."""
    fields = {"descr": rng.choice(DESCRS), "fortran_order": rng.choice(ORDERS),
              "shape": shape_choice(rng, n) if rng.random() < 0.7 else shape_text([1, n])}
    keys = list(fields)
    rng.shuffle(keys)
    if rng.random() < 0.15:
        keys.remove(rng.choice(keys))                   # a key missing
    if rng.random() < 0.1:
        keys.append(rng.choice(list(fields)))           # a key twice
    q = rng.choice(["'", "'", '"'])
    sep = rng.choice([": ", ":", " : ", ":  "])
    items = [f"{q}{k}{q}{sep}{fields[k]}" for k in keys]
    if rng.random() < 0.1:
        items.insert(rng.randint(0, len(items)), "'extra': 1")
    text = "{" + ", ".join(items) + rng.choice([", }", "}", ",}", "", " "])
    return text.encode("latin-1")


def valid_header(n: int) -> bytes:
    return f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text([1, n])}, }}" \
        .encode()


# Each mutator: (rng, program) -> (suffix, bytes). -----------------------------------------

def m_dict(rng, prog):
    n = prog.valid.size
    text = header_dict(rng, n)
    return ".npy", npy(padded(text) if rng.random() < 0.7 else text, prog.valid.tobytes())


def m_syntax(rng, prog):
    """A valid header with quotes, colons, commas, parentheses, braces dropped
    or added."""
    text = bytearray(valid_header(prog.valid.size))
    for _ in range(rng.randint(1, 4)):
        marks = [i for i, c in enumerate(text) if chr(c) in "'\":,(){} "]
        if rng.random() < 0.6 and marks:
            del text[rng.choice(marks)]
        else:
            text.insert(rng.randint(0, len(text)), ord(rng.choice("'\":,(){}")))
    body = bytes(text)
    return ".npy", npy(padded(body) if rng.random() < 0.5 else body, prog.valid.tobytes())


def m_end_key(rng, prog):
    """The header ends at a key or inside its value (the reported overflow:
    a header ending in `'descr':`)."""
    n = prog.valid.size
    fields = {"descr": "'descr': '<f4'", "fortran_order": "'fortran_order': False",
              "shape": f"'shape': {shape_text([1, n])}"}
    key = rng.choice(list(fields))
    keep = [v for k, v in fields.items() if k != key]     # the other two, mostly
    rng.shuffle(keep)
    if rng.random() < 0.3:
        keep = keep[:rng.randint(0, 1)]
    q = rng.choice(["'", '"'])
    tail = rng.choice([f"{q}{key}{q}:", f"{q}{key}{q}: ", f"{q}{key}{q}", f"{q}{key}",
                       f"{q}{key}{q}: '", f"{q}{key}{q}: '<f", f"{q}{key}{q}: (",
                       f"{q}{key}{q}: (1,", f"{q}{key}{q}: (1, {n}", f"{q}{key}{q}: F"])
    text = ("{" + ", ".join(keep + [tail])).encode()
    data = prog.valid.tobytes() if rng.random() < 0.5 else b""
    return ".npy", npy(text, data)


def m_nul(rng, prog):
    text = bytearray(padded(valid_header(prog.valid.size)))
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text))
        if rng.random() < 0.5:
            text[at] = 0
        else:
            text.insert(at, 0)
    return ".npy", npy(bytes(text), prog.valid.tobytes())


def m_length(rng, prog):
    header = padded(valid_header(prog.valid.size))
    real = len(header)
    length = rng.choice([0, 1, real - 1, real + 1, real - rng.randint(1, 60),
                         real + rng.randint(1, 300), 65535, 65536, rng.randrange(65536)])
    return ".npy", npy(header, prog.valid.tobytes(), length=length)


def m_version(rng, prog):
    version = rng.choice([0, 1, 2, 3, 4, 255])
    minor = rng.choice([0, 0, 1, 255])
    header = padded(valid_header(prog.valid.size), version if version in (1, 2, 3) else 1)
    length = None if rng.random() < 0.6 else rng.choice([0, 65537, 2 ** 31, 2 ** 32 - 1])
    return ".npy", npy(header, prog.valid.tobytes(), version=version, length=length,
                       minor=minor)


def m_magic(rng, prog):
    good = npy(padded(valid_header(prog.valid.size)), prog.valid.tobytes())
    data = bytearray(good)
    choice = rng.randrange(4)
    if choice == 0:
        data[rng.randrange(6)] ^= 1 << rng.randrange(8)
    elif choice == 1:
        return ".npy", bytes(data[:rng.randrange(11)])
    elif choice == 2:
        return ".npy", b"NUMPY" + bytes(data[6:])
    else:
        return ".npy", bytes(rng.randrange(256) for _ in range(rng.randrange(0, 400)))
    return ".npy", bytes(data)


def m_truncate(rng, prog):
    good = npy(padded(valid_header(prog.valid.size)), prog.valid.tobytes())
    head = len(good) - prog.valid.nbytes
    cut = rng.choice([rng.randrange(head), head + rng.randrange(prog.valid.nbytes),
                      len(good) - rng.randint(1, 4)])
    return ".npy", good[:cut]


def m_extend(rng, prog):
    good = npy(padded(valid_header(prog.valid.size)), prog.valid.tobytes())
    more = rng.choice([1, 3, 4, prog.valid.nbytes, rng.randint(1, 5000)])
    return ".npy", good + bytes(rng.randrange(256) for _ in range(more))


def m_flip(rng, prog):
    data = bytearray(npy(padded(valid_header(prog.valid.size)), prog.valid.tobytes()))
    head = len(data) - prog.valid.nbytes
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(head) if rng.random() < 0.85 else rng.randrange(len(data))
        if rng.random() < 0.5:
            data[at] ^= 1 << rng.randrange(8)
        else:
            data[at] = rng.randrange(256)
    return ".npy", bytes(data)


def m_huge(rng, prog):
    dims = [rng.choice([2 ** 62, 2 ** 63 - 1, 2 ** 63, 2 ** 64 + 64, 10 ** 19, 4611686018427387904,
                        3037000500, 1, 64]) for _ in range(rng.randint(1, 5))]
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text(dims)}, }}"
    return ".npy", npy(padded(text.encode()), prog.valid.tobytes())


def m_dtype(rng, prog):
    """Another array numpy writes: another dtype, order or shape."""
    x = prog.valid
    arrays = [x.astype(np.float64), x.astype(np.int32), x.astype(">f4"), x.reshape(-1),
              x.reshape(-1)[: x.size // 2], np.asfortranarray(np.stack([x.reshape(-1)] * 2)),
              np.zeros(0, np.float32), np.float32(1.0), x.astype(np.complex64),
              np.array(["a" * 64]), x.reshape((1,) * rng.randint(1, 30) + (x.size,))]
    buf = io.BytesIO()
    np.save(buf, arrays[rng.randrange(len(arrays))])
    return ".npy", buf.getvalue()


def m_raw(rng, prog):
    """A raw (not .npy) input: every size but the right one, and .npy bytes
    under a raw name."""
    n = prog.valid.nbytes
    size = rng.choice([0, 1, n - 4, n - 1, n + 1, n + 4, 2 * n, rng.randrange(4 * n)])
    choice = rng.randrange(3)
    if choice == 0:
        return ".bin", bytes(rng.randrange(256) for _ in range(size))
    if choice == 1:
        return rng.choice(["", ".npz", ".NPY", ".npy.bin"]), \
            npy(padded(valid_header(prog.valid.size)), prog.valid.tobytes())
    data = prog.valid.tobytes()
    return ".bin", data[:size] if size < n else data + bytes(size - n)


def m_weights(rng, prog):
    """A weights file (raw, read by every program) of the wrong size."""
    return "weights", b""      # the size is chosen in make_case


def m_valid(rng, prog):
    if rng.random() < 0.5:
        return ".bin", prog.valid.tobytes()
    return ".npy", npy(padded(valid_header(prog.valid.size)), prog.valid.tobytes())


MUTATORS = {"dict": m_dict, "syntax": m_syntax, "end-key": m_end_key, "nul": m_nul,
            "length": m_length, "version": m_version, "magic": m_magic, "truncate": m_truncate,
            "extend": m_extend, "flip": m_flip, "huge-shape": m_huge, "numpy": m_dtype,
            "raw": m_raw, "weights": m_weights, "valid": m_valid}
# How often each runs (the header parser gets most of the cases).
WEIGHTS = {"dict": 6, "syntax": 4, "end-key": 3, "nul": 2, "length": 2, "version": 2, "magic": 1,
           "truncate": 2, "extend": 1, "flip": 4, "huge-shape": 1, "numpy": 1, "raw": 2,
           "weights": 1, "valid": 1}


# -- running a case -------------------------------------------------------------------------

@dataclass
class Outcome:
    number: int                 # the case's number in its campaign
    kind: str
    status: int
    seconds: float
    failure: str = ""           # empty: the property holds
    detail: str = ""
    numpy: bool | None = None   # whether numpy reads the .npy input as the port's array


def numpy_reads(data: bytes, valid: np.ndarray) -> bool:
    """Whether numpy loads `data` as an array of the port's dtype, in C order,
    with its shape up to dimensions of 1, and nothing after the data (what
    the program accepts). For the report only: the program's parser is more
    lenient about the dictionary's syntax than Python's literal_eval."""
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
                (3, 0): np.lib.format.read_array_header_2_0}[version]
        shape, fortran, dtype = read(f)
    except Exception:
        return False
    want = [d for d in valid.shape if d != 1]
    return (dtype == valid.dtype and not (fortran and sum(d != 1 for d in shape) > 1)
            and [d for d in shape if d != 1] == want
            and len(data) - f.tell() == valid.nbytes)


def case_rng(seed: int, number: int) -> random.Random:
    return random.Random(seed * 1_000_003 + number)


def run_case(prog: Program, seed: int, number: int, work: Path, save: Path | None = None
             ) -> Outcome:
    """Case `number` of the campaign of `seed`, in a folder of its own under work."""
    rng = case_rng(seed, number)
    kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    suffix, data = MUTATORS[kind](rng, prog)
    d = work / f"case{number}"
    d.mkdir()
    args = [str(prog.path)]
    if kind == "weights":
        w = prog.weights.read_bytes()
        cut = rng.choice([0, 1, len(w) - 1, len(w) + 1, rng.randrange(2 * len(w) + 2)])
        (d / "w.bin").write_bytes(w[:cut] if cut <= len(w) else w + bytes(cut - len(w)))
        args += ["--weights", str(d / "w.bin")]
        suffix, data = ".bin", prog.valid.tobytes()
    inp = d / f"in{suffix}"
    inp.write_bytes(data)
    args += ["--input", str(inp)]
    output = rng.choice([None, "y.npy", "y.bin"])
    if output:
        args += ["--output", str(d / output)]
    start = time.monotonic()
    try:
        p = subprocess.run(args, capture_output=True, timeout=TIME_BOUND, cwd=d,
                           env={**os.environ, **ENV})
    except subprocess.TimeoutExpired:
        return _keep(Outcome(number, kind, -999, TIME_BOUND, "hang", f"over {TIME_BOUND} s"),
                     d, save, args)
    seconds = time.monotonic() - start
    out = Outcome(number, kind, p.returncode, seconds,
                  numpy=numpy_reads(data, prog.valid) if suffix == ".npy" else None)
    err = p.stderr.decode("utf-8", "replace")
    left = sorted(f.name for f in d.iterdir()) if d.exists() else []
    left = [f for f in left if f not in (inp.name, "w.bin")]
    if any(r in err for r in REPORTS):
        out.failure, out.detail = "sanitizer", err[:3000]
    elif p.returncode < 0:
        out.failure, out.detail = "signal", f"killed by signal {-p.returncode}\n{err[:2000]}"
    elif p.returncode not in (0, 1):
        out.failure, out.detail = "status", f"exit {p.returncode}\n{err[:2000]}"
    elif p.returncode == 1 and (err.count("\n") != 1 or not err.endswith("\n")
                                or ": error: " not in err):
        out.failure, out.detail = "message", err[:2000]
    elif p.returncode == 1 and left:
        out.failure, out.detail = "left files", f"{left}\n{err}"
    elif p.returncode == 0 and err:
        out.failure, out.detail = "stderr on success", err[:2000]
    elif p.returncode == 0 and output and left != [output]:
        out.failure, out.detail = "no output", f"{left}"
    elif p.returncode == 0 and not output and not p.stdout.startswith(b"result 1 ("):
        out.failure, out.detail = "no results printed", p.stdout[:200].decode("latin-1")
    return _keep(out, d, save, args)


def _keep(out: Outcome, d: Path, save: Path | None, args: list[str]) -> Outcome:
    if out.failure and save is not None:
        dest = save / d.name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(d, dest)
        (dest / "command").write_text(" ".join(args) + "\n")
        (dest / "report").write_text(f"{out.failure}\n{out.detail}\n")
    shutil.rmtree(d, ignore_errors=True)
    return out


@dataclass
class Campaign:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[tuple[int, Outcome]]:
        return [(o.number, o) for o in self.outcomes if o.failure]

    def table(self) -> str:
        rows = ["| kind | cases | accepted (0) | rejected (1) | failures "
                "| accepted, numpy refuses | refused, numpy reads |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        kinds = Counter(o.kind for o in self.outcomes)
        for kind in [k for k in MUTATORS if k in kinds] + ["all"]:
            os_ = [o for o in self.outcomes if kind in ("all", o.kind)]
            acc = sum(o.status == 0 for o in os_)
            rej = sum(o.status == 1 for o in os_)
            fail = sum(bool(o.failure) for o in os_)
            lax = sum(o.status == 0 and o.numpy is False for o in os_)
            strict = sum(o.status == 1 and o.numpy is True for o in os_)
            name = "**all**" if kind == "all" else kind
            rows.append(f"| {name} | {len(os_):,} | {acc:,} | {rej:,} | {fail} | {lax:,} "
                        f"| {strict:,} |")
        return "\n".join(rows)


def campaign(prog: Program, cases: int, seed: int = 1, jobs: int = 2,
             save: Path | None = None, only: list[int] | None = None) -> Campaign:
    """Run the cases (in parallel, `jobs` at a time)."""
    numbers = only if only else list(range(cases))
    result = Campaign()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="swir-fuzz-program-") as tmp, \
            warnings.catch_warnings():
        # numpy_reads: numpy's note on headers in Python 2's style ('1L').
        warnings.simplefilter("ignore", UserWarning)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            result.outcomes = list(pool.map(
                lambda n: run_case(prog, seed, n, Path(tmp), save), numbers))
    result.seconds = time.monotonic() - start
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Fuzz the generated C program's .npy and raw input readers under "
                    "AddressSanitizer and UndefinedBehaviorSanitizer: compile one project "
                    "(make emu-asan), run it on mutated inputs, count the failures "
                    "(a sanitizer report, a death by signal, an exit status other than 0 "
                    "or 1, an exit 1 without exactly one line on stderr, files left behind).",
        epilog="example: python bench/fuzz_program.py --cases 10000 --seed 1 --jobs 2")
    ap.add_argument("--cases", type=int, default=10000, metavar="N",
                    help="how many mutated inputs to run (default 10000)")
    ap.add_argument("--seed", type=int, default=1,
                    help="the campaign's seed: case K is derived from (seed, K) alone "
                         "(default 1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, metavar="J",
                    help="cases run at once (default: the number of CPUs)")
    ap.add_argument("--model", type=Path, default=MODEL,
                    help="the module to compile (one input; default examples/mlp.swir)")
    ap.add_argument("--valid-input", type=Path, default=INPUT,
                    help="a valid .npy input of the model, the mutations' seed "
                         "(default examples/mlp_input.npy)")
    ap.add_argument("--only", type=int, nargs="+", metavar="K",
                    help="run only these case numbers (to reproduce a failure)")
    ap.add_argument("--save", type=Path, metavar="DIR",
                    help="copy each failing case's files, command and report here")
    ap.add_argument("--work", type=Path, metavar="DIR",
                    help="build the project here (default: a temporary folder)")
    ap.add_argument("--program", type=Path, metavar="PATH",
                    help="run this program (built from --model, weights.bin beside it) "
                         "instead of building one")
    a = ap.parse_args(argv)
    if a.save:
        a.save.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="swir-fuzz-build-") as tmp:
        work = a.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        prog = Program(a.program.resolve(), a.program.resolve().parent / "weights.bin",
                       np.load(a.valid_input)) if a.program \
            else build(work, a.model, a.valid_input)
        built = time.monotonic() - t
        c = campaign(prog, a.cases, a.seed, a.jobs, a.save, a.only)
    print(f"program: {prog.path.name} ({built:.1f} s to build)")
    print(f"seed {a.seed}, {len(c.outcomes):,} cases, {a.jobs} at a time, "
          f"{c.seconds:.1f} s ({len(c.outcomes) / max(c.seconds, 1e-9):.0f} cases/s); "
          f"slowest case {max((o.seconds for o in c.outcomes), default=0):.2f} s")
    print(c.table())
    for number, o in c.failures[:20]:
        print(f"\nFAILURE in case {number} ({o.kind}): {o.failure}\n{o.detail}")
    print(f"\n{len(c.failures)} failures")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
