"""swir-opt: read IR, run passes in command-line order, verify, print IR.

    swir-opt [options] [-PASS[{opt=value,...}] ...] [IN.swir | -] [-o OUT.swir]

Pass flags take one dash (LLVM style) and run in the order given. A pass
option may be given on the pass (``-ldm-plan{ldm-size=32768}``) or globally
(``--ldm-size=32768``, applied to every pass that declares it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from swir import __version__, files
from swir.diagnostics import Diagnostic
from swir.ir.constants import load_weights_outside
from swir.parser import parse_module, read_source
from swir.passes import all_pass_classes
from swir.passes.manager import (
    Pass,
    PassFailure,
    PassManager,
    option_default,
    option_flag,
)
from swir.passes.pipelines import OPT_LEVELS
from swir.printer import WeightSink, print_module
from swir.progress import for_terminal
from swir.target import TARGETS, Target, default_target
from swir.verifier import VerificationError, verify
from swir.api.passes import (
    PASS_RE,
    build_passes as build_pass_list,
    field_type,
    global_option,
    pass_flag,
    run_passes,
    target_option,
)

from .driver import (
    WEIGHTS_FROM_HELP,
    command_line_error,
    run_tool,
    take_weights_from,
    use_cache,
    write_files,
    write_output,
)

PROG = "swir-opt"
_FLAGS = {
    "verify-each": "verify the IR after every pass (default on; --no-verify-each)",
    "print-after-all": "print the IR after every pass (to stderr)",
    "print-ir-after-failure": "when a pass fails, print the IR as it was before it, "
                              "with the command that reproduces the failure",
    "time-passes": "report the time each pass took and whether it changed the IR",
    "stats": "report each pass's statistics and whether it changed the IR",
    "split-input-file": "treat each '// -----'-separated chunk of the input as its own "
                        "module (diagnostics keep the file's line numbers)",
    "quiet": "no progress bar (it is drawn only when stderr is a terminal)",
}


@dataclass
class Options:
    input: str = "-"
    output: str | None = None
    passes: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    flags: dict[str, bool] = field(default_factory=lambda: {"verify-each": True})
    globals: dict[str, tuple[str, int]] = field(default_factory=dict)
    target: Target = field(default_factory=default_target)


def usage(target: Target) -> str:
    """The help, with the option defaults of ``target`` (the one given before --help)."""
    lines = [f"usage: {PROG} [options] [-PASS ...] [IN.swir | -] [-o OUT.swir]", "",
             "Reads swir IR (stdin if no file or '-'), runs the passes in the order given,",
             "verifies, and prints the IR (stdout unless -o). A pass option is given on",
             "the pass, -PASS{name=value,...}, or globally, --name=value.", "", "Passes:"]
    for cls in all_pass_classes():
        if cls.__module__ == "swir.passes.testing":
            continue            # swir's own tests' faulty passes, not for users
        lines.append(f"  -{cls.name:<24} {cls.summary}")
        for f in cls.options():
            flag = f"--{option_flag(f.name)}=<{field_type(f).__name__}>"
            lines.append(f"      {flag:<22} {f.metadata.get('help', '')} (default: {option_default(f, target)})")
    lines += ["", "Pipelines (expand in place, in order):"]
    for level, names in OPT_LEVELS.items():
        lines.append(f"  -{level:<24} " + (" ".join(f"-{n}" for n in names)
                                            or "(no graph optimisation)"))
    lines += ["", "Options:",
              "  -o FILE                    write the output IR to FILE (only on success)",
              "  --target NAME              the machine the passes plan for: "
              + ", ".join(TARGETS) + f" (default: {default_target().name});",
              "                             it sets the defaults of --ldm-size and --cpes",
              "  " + WEIGHTS_FROM_HELP,
              "  --help                     show this help and exit",
              "  --version                  show the version and exit"]
    for name, text in _FLAGS.items():
        lines.append(f"  --{name:<25}{text}")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str]) -> Options:
    o = Options()
    seen_input = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            sys.stdout.write(usage(o.target))
            raise SystemExit(0)
        if a == "--version":
            print(f"{PROG} {__version__}")
            raise SystemExit(0)
        if a == "-o" or a == "--output":
            if i + 1 >= len(argv):
                raise command_line_error(PROG, argv, i, f"'{a}' needs a file name")
            o.output = argv[i + 1]
            i += 2
            continue
        if a[1:] in OPT_LEVELS:
            o.passes += [(name, {}, i) for name in OPT_LEVELS[a[1:]]]
        elif a.startswith("-o") and len(a) > 2 and not PASS_RE.match(a):
            o.output = a[2:]
        elif a == "--target" or a.startswith("--target="):
            o.target, i = target_option(PROG, argv, i)
            continue
        elif a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name in _FLAGS and not eq:
                o.flags[name] = True
            elif name.startswith("no-") and name[3:] in _FLAGS and not eq:
                o.flags[name[3:]] = False
            else:
                global_option(a, i, o.globals)
        elif a == "-" or not a.startswith("-"):
            if seen_input:
                raise command_line_error(PROG, argv, i, f"more than one input file ('{a}')")
            o.input, seen_input = a, True
        else:
            pass_flag(PROG, argv, i, o)
        i += 1
    return o


def build_passes(o: Options, argv: list[str], prog: str = PROG) -> list[Pass]:
    """The passes of ``o``, with their options (errors point into ``argv``)."""
    return build_pass_list(o, argv, prog)  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    argv = take_weights_from(PROG, argv)
    try:
        o = parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    passes = build_passes(o, argv)
    use_cache(None)
    text = read_source(o.input)
    name = "<stdin>" if o.input == "-" else o.input
    if not o.flags.get("split-input-file"):
        sink = weight_sink(o.output, o.target)
        out, manager = process(text, name, passes, o, sink)
        if sink is not None and sink.data:
            write_files([(o.output, out.encode()), (sidecar_path(o.output), bytes(sink.data))])
        else:
            write_output(o.output, out)
        _report(manager, o)
        return 0
    outputs, managers, failed = [], [], False
    for chunk in split_chunks(text):
        try:
            out, manager = process(chunk, name, build_passes(o, argv), o)
            outputs.append(out)
            managers.append(manager)
        except (Diagnostic, VerificationError, PassFailure) as e:
            failed = True
            for d in getattr(e, "diagnostics", [e]):
                print(d.render(), file=sys.stderr)
    if failed:
        return 1
    write_output(o.output, "// -----\n".join(outputs))
    for manager in managers:
        _report(manager, o)
    return 0


def split_chunks(text: str) -> list[str]:
    """Split at '// -----' lines; each chunk is padded with the newlines before
    it, so line numbers in diagnostics are those of the whole file."""
    chunks, current, offset = [], [], 0
    for lineno, line in enumerate(text.split("\n")):
        if line.strip() == "// -----":
            chunks.append("\n" * offset + "\n".join(current))
            current, offset = [], lineno + 1
        else:
            current.append(line)
    chunks.append("\n" * offset + "\n".join(current))
    return chunks


def weight_sink(output: str | None, target: Target) -> WeightSink | None:
    """Constants computed by the passes (folded weights, new layouts) go to a
    sidecar ``OUT.swir.weights`` beside ``-o OUT.swir``, aligned as ``target``
    aligns main memory; on stdout, a device or a FIFO they are printed inline."""
    if output is None or output == "-" or files.is_stream(output):
        return None
    return WeightSink(os.path.basename(sidecar_path(output)), target.mem_align)




def sidecar_path(output: str) -> str:
    return output + ".weights"


def process(text: str, name: str, passes: list[Pass], o: Options,
            sink: WeightSink | None = None) -> tuple[str, PassManager]:
    """Parse, verify, run the pipeline, verify again; return the printed module
    (with ``sink``, as it reads from -o's folder: sidecar weight files the
    input names relative to its own folder are named relative to that one)."""
    module = parse_module(text, name)
    verify(module)
    manager = run_passes(module, passes, o.target, name, o.flags.get("verify-each", True),
                         o.flags.get("print-after-all", False),
                         o.flags.get("print-ir-after-failure", False), sys.stderr,
                         for_terminal(o.flags.get("quiet", False)))
    if sink is not None:    # written to a file: its weight files named from there
        folder = os.path.dirname(o.output or "") or "."
        load_weights_outside(module, folder)    # those elsewhere go to its sidecar
        module.move_weight_files(folder)
    return print_module(module, sink), manager


def _report(manager: PassManager, o: Options) -> None:
    sys.stdout.flush()
    if o.flags.get("time-passes"):
        print_pass_times(manager, "swir-opt")
    if o.flags.get("stats"):
        print("===-- swir-opt statistics --===", file=sys.stderr)
        print_statistics(manager)


def print_pass_times(manager: PassManager, prog: str) -> None:
    """Each pass's seconds, share and whether it changed the IR, to stderr."""
    total = sum(r.seconds for r in manager.records)
    print(f"===-- {prog} pass timing --===", file=sys.stderr)
    print(f"  {'seconds':>9}  {'%':>6}  {'changed':<7}  pass", file=sys.stderr)
    for r in manager.records:
        pct = 100 * r.seconds / total if total else 0.0
        print(f"  {r.seconds:9.4f}  {pct:5.1f}%  {'yes' if r.changed else 'no':<7}  -{r.name}",
              file=sys.stderr)
    print(f"  {total:9.4f}  100.0%           total", file=sys.stderr)


def print_statistics(manager: PassManager) -> None:
    """Each pass's statistics and whether it changed the IR, to stderr."""
    for r in manager.records:
        stats = ", ".join(f"{k}: {v}" for k, v in sorted(r.statistics.items()))
        print(f"  -{r.name}: {'changed' if r.changed else 'unchanged'}"
              + (f" ({stats})" if stats else ""), file=sys.stderr)


def entry() -> None:
    sys.exit(run_tool(PROG, main))


if __name__ == "__main__":
    entry()
