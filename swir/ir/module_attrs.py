"""The module's attributes (``stage dma {ranks = 4, split = "data", ldm_size =
262144, target = "sw26010pro"}``): each one's meaning, type, default and
check, in one table. Readers ask ``module.attr(name)`` (the written value if
it is legal, else the default); the verifier reports illegal values by
:func:`attr_error`. docs/ir.md ("Module attributes") shows the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from swir.target import TARGETS, Target, default_target, target_of

SPLITS = ("data", "model")


def _positive_int(name: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            return None
        return f"{name} must be a positive integer, got {v!r}"
    return check


def _split(v: Any) -> str | None:
    if v in SPLITS:
        return None
    return _SHARED_BY_RANKS


def _target(v: Any) -> str | None:
    if isinstance(v, str) and v in TARGETS:
        return None
    return f"unknown target {v!r} (targets: {', '.join(TARGETS)})"


_SHARED_BY_RANKS = ("a module for several ranks says how they share it: "
                    "{ranks = N, split = \"data\"} or {ranks = N, split = \"model\"}")


@dataclass(frozen=True)
class ModuleAttr:
    name: str
    kind: str                       # its type, as docs/ir.md writes it
    doc: str
    written_by: str
    # The value when the module does not set it (or sets it illegally), given
    # the module's attributes: ldm_size's is its target's LDM.
    default: Callable[[Mapping[str, Any]], Any]
    check: Callable[[Any], str | None]   # why a written value is illegal, or None
    # What a reader gets for a legal written value (target: the Target it names).
    value: Callable[[Any], Any] = lambda v: v
    # Written together with this other attribute, or not at all; checked once
    # the other is legal (its error is then this one's check's).
    together_with: str | None = None

    def read(self, attrs: Mapping[str, Any]) -> Any:
        v = attrs.get(self.name)
        if v is None or self.check(v) is not None:
            return self.default(attrs)
        return self.value(v)

    def error(self, attrs: Mapping[str, Any]) -> str | None:
        """Why the module's value of this attribute is illegal, or None."""
        if self.together_with is not None and \
                (self.name in attrs) != (self.together_with in attrs):
            return self.check(None)
        return self.check(attrs[self.name]) if self.name in attrs else None


MODULE_ATTRS: dict[str, ModuleAttr] = {a.name: a for a in (
    ModuleAttr("target", "string", "the machine the module was planned for "
               "(swir/target.py)", "-ldm-plan (any target but the default)",
               default=lambda attrs: default_target(), check=_target,
               value=lambda name: TARGETS[name]),
    ModuleAttr("ranks", "integer >= 1", "how many ranks (MPI processes) run the module",
               "-distribute", default=lambda attrs: 1, check=_positive_int("ranks")),
    ModuleAttr("split", "\"data\" or \"model\"", "how the ranks share the module: each a "
               "slice of the batch, or of the weights", "-distribute",
               default=lambda attrs: "data", check=_split, together_with="ranks"),
    ModuleAttr("ldm_size", "integer >= 1", "the LDM bytes per CPE the module was planned "
               "for", "-ldm-plan", default=lambda attrs: read_attr(attrs, "target").ldm_bytes,
               check=_positive_int("ldm_size")),
)}


def read_attr(attrs: Mapping[str, Any], name: str) -> Any:
    """The module attribute ``name``: its value if written and legal, else its default."""
    return MODULE_ATTRS[name].read(attrs)


def attr_error(attrs: Mapping[str, Any], name: str) -> str | None:
    """Why the module's attribute ``name`` is illegal, or None (also when it is not written)."""
    return MODULE_ATTRS[name].error(attrs)


def module_target(inst: Any) -> Target:
    """The target of the module an instruction is in (its ``target``
    attribute, as :func:`swir.target.target_of` reads it; the default target
    outside a module): the machine an analysis of the instruction assumes."""
    f = inst.function
    module = f.module if f is not None else None
    return target_of(module.attrs if module is not None else {})
