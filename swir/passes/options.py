"""Options several passes share, declared once with their checks.

-ldm-plan plans LDM tiles with them; -layout, -fuse and -fold-batchnorm take
the same options for their trial lowerings, so a value -ldm-plan refuses is
refused by all of them, with the same message. The options whose defaults are
figures of the machine (``ldm-size``, ``cpes``, ``-mem-plan``'s ``align``)
are declared ``from_target``: each pass takes the figure of the target its
context carries, and ``--help`` prints the target's value.
"""

from __future__ import annotations

from typing import Any

from swir.passes.manager import at_least, from_target, in_range, option
from swir.target import Target


def _reserve_value(v: int) -> str | None:
    return None if v >= -1 else "must be at least 0 (or -1: ldm-size / 16)"


def ldm_size(help: str = "LDM bytes per CPE") -> Any:
    # a C int in the generated Makefile and runtime
    return option(from_target("ldm_bytes"), help, check=in_range(1, 2**31 - 1))


def ldm_reserve(help: str = "LDM bytes kept for the CPE stack and statics "
                            "(default -1: ldm-size / 16, i.e. 4 KB of 64 KB)") -> Any:
    return option(-1, help, check=_reserve_value)


def ldm_init(help: str = "initial buffer size in elements (Algorithm 1)") -> Any:
    return option(64, help, check=at_least(1))


def cpes(help: str = "CPEs to spread the parallel loop over") -> Any:
    return option(from_target("cpes"), help, check=in_range(1, from_target("cpes")))


def mem_align(help: str, check: Any = None) -> Any:
    return option(from_target("mem_align"), help, check=check)


def jobs(help: str = "processes measuring trial lowerings at once (0: one per core); the "
                     "decisions are the same for any number") -> Any:
    return option(0, help, check=at_least(0))


def reserve_bytes(size: int, reserve: int, target: Target) -> int:
    """The LDM bytes kept back: ``reserve``, or for -1 the target's default
    (ldm-size / 16 on both targets)."""
    if reserve != -1:
        return reserve
    return target.default_reserve(size)


def check_reserve(pass_name: str, size: int, reserve: int, target: Target
                  ) -> list[tuple[str, str]]:
    """ldm-size must leave some LDM after the reserve."""
    kept = reserve_bytes(size, reserve, target)
    if kept < size:
        return []
    return [("ldm-reserve", f"-{pass_name}: option ldm-reserve must be below ldm-size, so that "
                            f"some LDM is left for tiles, got {kept} of {size}")]
