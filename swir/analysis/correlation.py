"""Tensor / loop-variable correlation (swTVM Algorithm 4) and the variable
classification with UPDATE (Algorithm 5), from the affine subscripts of a
loop nest.

Dimensions are numbered as in the paper: from the lowest (innermost,
contiguous) one, 0, upward. A tensor's *current buffered dimension* is the
dimension up to which its LDM buffer covers whole rows; a variable is a
*sizevar* if it appears in some tensor's current buffered dimension (a larger
buffer for it makes each DMA longer), a *numvar* if it appears only in higher
dimensions (it sets how many DMAs happen), a *compvar* if both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from swir.ir.affine import Expr
from swir.ir.core import Value

SIZE, NUM, COMP = "sizevar", "numvar", "compvar"


@dataclass
class TensorDims:
    """One tensor of a nest: the loop variables in each dimension's subscript,
    ``dims[0]`` the lowest dimension."""

    name: str
    dims: list[set[Value]]
    cur_buf_dim: int = 0


def correlation(subscripts: dict[str, list[Expr]], loop_vars: Iterable[Value]
                ) -> dict[str, TensorDims]:
    """Algorithm 4: for each tensor (name -> its subscript, outermost dimension
    first), the loop variables of each dimension."""
    loops = set(loop_vars)
    out = {}
    for name, subs in subscripts.items():
        dims = [{v for v in e.values() if v in loops} for e in reversed(subs)]
        out[name] = TensorDims(name, dims)
    return out


def vars_of(t: TensorDims) -> set[Value]:
    """VarsSet(tensor): every loop variable the tensor's subscripts use."""
    return set().union(*t.dims) if t.dims else set()


@dataclass
class Classification:
    """Algorithm 5's state: the variables whose buffer does not yet cover
    their range (``free``) and each tensor's current buffered dimension."""

    tensors: dict[str, TensorDims]
    free: set[Value] = field(default_factory=set)
    order: list[Value] = field(default_factory=list)  # loop variables, outermost first

    def __post_init__(self) -> None:
        for t in self.tensors.values():
            t.cur_buf_dim = 0
            self._climb(t)

    def vartype(self, var: Value) -> str | None:
        """VARTYPE; None for a variable no tensor's current or higher
        dimension uses (the paper raises an error; here it is simply not a
        candidate)."""
        size = num = False
        for t in self.tensors.values():
            if t.cur_buf_dim < len(t.dims) and var in t.dims[t.cur_buf_dim]:
                size = True
            if any(var in d for d in t.dims[t.cur_buf_dim + 1:]):
                num = True
        if size:
            return COMP if num else SIZE
        return NUM if num else None

    def classify(self) -> dict[str, list[Value]]:
        """CLASSIFY over the free variables: {sizevar: [...], numvar: [...], compvar: [...]}."""
        out: dict[str, list[Value]] = {SIZE: [], NUM: [], COMP: []}
        pos = {v: i for i, v in enumerate(self.order)}
        for v in sorted(self.free, key=lambda v: (pos.get(v, len(pos)), v.name or "")):
            kind = self.vartype(v)
            if kind is not None:
                out[kind].append(v)
        return out

    def tensors_using(self, var: Value) -> int:
        return sum(1 for t in self.tensors.values() if var in vars_of(t))

    def update(self, var: Value, up: bool) -> None:
        """UPDATE: ``var``'s buffer now covers its range (UP) or no longer does
        (DOWN); move each tensor's current buffered dimension accordingly."""
        if up:
            self.free.discard(var)
            for t in self.tensors.values():
                self._climb(t)
        else:
            self.free.add(var)
            for t in self.tensors.values():
                for d in range(t.cur_buf_dim):
                    if var in t.dims[d]:
                        t.cur_buf_dim = d
                        break

    def _climb(self, t: TensorDims) -> None:
        """Move up past dimensions whose variables are all fully buffered."""
        while t.cur_buf_dim < len(t.dims) and not (t.dims[t.cur_buf_dim] & self.free):
            t.cur_buf_dim += 1
