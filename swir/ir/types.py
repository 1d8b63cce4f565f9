"""swir types: scalars, tensors (graph stage), main-memory buffers and LDM buffers.

Spelling: ``f32``, ``<1 x 64 x f32>``, ``buf<1 x 64 x f32>``, ``ldm<64 x 128 x f32>``.
Types are immutable and compared by value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from swir.target import default_target

FLOAT_TYPES = ("f16", "f32", "f64")
INT_TYPES = ("i1", "i8", "i16", "i32", "i64")
SCALAR_NAMES = FLOAT_TYPES + INT_TYPES + ("index",)
_BYTES = {"f16": 2, "f32": 4, "f64": 8, "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
          "index": 8}


class Type:
    """Base of all swir types."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ScalarType(Type):
    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.name in FLOAT_TYPES

    @property
    def is_int(self) -> bool:
        return self.name in INT_TYPES or self.name == "index"

    @property
    def bytes(self) -> int:
        return _BYTES[self.name]


F16, F32, F64 = ScalarType("f16"), ScalarType("f32"), ScalarType("f64")
I1, I8, I16, I32, I64 = (ScalarType(n) for n in INT_TYPES)
INDEX = ScalarType("index")
_SCALARS = {t.name: t for t in (F16, F32, F64, I1, I8, I16, I32, I64, INDEX)}


@dataclass(frozen=True, slots=True)
class ShapedType(Type):
    """A statically shaped aggregate of scalars; subclasses say where it lives."""

    shape: tuple[int, ...]
    element: ScalarType

    prefix = ""

    def __str__(self) -> str:
        dims = "".join(f"{d} x " for d in self.shape)
        return f"{self.prefix}<{dims}{self.element}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        return self.num_elements * self.element.bytes


# The largest tensor or buffer swir accepts, in bytes. The generated C holds
# sizes, offsets and loop bounds in a signed 64-bit long; 2^62 leaves room for
# the index arithmetic around them (a tile's end, the next tile's start) to stay
# below 2^63 (docs/ir.md, "Limits").
MAX_BYTES = 1 << 62


# The most dimensions a type may have: numpy 1.x's limit (NPY_MAXDIMS; numpy 2
# allows 64), which the interpreters and .npy files share. Far above any
# model's (ONNX models stay below 8), and it keeps the passes' per-dimension
# analyses small: a dependence test per loop of a 1,000-dimension type took
# minutes (docs/ir.md, "Limits").
MAX_RANK = 32


def size_error(t: Type) -> str | None:
    """Why ``t`` is too large for swir (too many bytes or dimensions), or None."""
    if isinstance(t, ShapedType) and len(t.shape) > MAX_RANK:
        return (f"type {_short(t)} has {len(t.shape)} dimensions, over swir's limit of "
                f"{MAX_RANK}")
    if isinstance(t, ShapedType) and t.bytes > MAX_BYTES:
        return (f"type {_short(t)} is too large: about 2^{t.bytes.bit_length() - 1} bytes, over "
                "swir's limit of 2^62 bytes per tensor or buffer")
    return None


def _short(t: ShapedType) -> str:
    """The type's text, with dimensions of more than 20 digits abbreviated,
    and the middle of a long list of dimensions."""
    shape = [str(d) if d < 10**20 else f"({len(str(d))} digits)" for d in t.shape]
    if len(shape) > 8:
        shape = shape[:3] + [f"... ({len(shape)} dimensions) ..."] + shape[-2:]
    dims = "".join(f"{d} x " for d in shape)
    return f"{t.prefix}<{dims}{t.element}>"


@dataclass(frozen=True, slots=True)
class TensorType(ShapedType):
    """A value-semantics tensor of the graph stage."""


@dataclass(frozen=True, slots=True)
class BufType(ShapedType):
    """A buffer in main memory (loop stage and later)."""

    prefix = "buf"


@dataclass(frozen=True, slots=True)
class LDMType(ShapedType):
    """A buffer in a CPE's local data memory (buffered stage and later)."""

    prefix = "ldm"

    @property
    def slot_bytes(self) -> int:
        """The LDM the buffer takes on the default target: its bytes rounded
        up to the target's dma_align, as every buffer starts so aligned."""
        return ldm_slot(self.bytes)


def ldm_slot(nbytes: int, align: int | None = None) -> int:
    """``nbytes`` of LDM buffer rounded up to ``align`` (what it occupies).
    Every LDM buffer starts at a multiple of the target's dma_align (the
    default): the SW26010's aligned vector loads and stores (simd_load /
    simd_store of a floatv4 or doublev4) need 32-byte addresses, and aligned
    DMA blocks stream best (docs/codegen.md, "On a real Sunway machine")."""
    align = default_target().dma_align if align is None else align
    return -(-nbytes // align) * align


_SHAPED = {"": TensorType, "buf": BufType, "ldm": LDMType}
_SHAPED_RE = re.compile(r"^(buf|ldm)?<\s*((?:\d+\s*x\s*)*)([A-Za-z_]\w*)\s*>$")


def scalar(name: str) -> ScalarType:
    return _SCALARS[name]


def parse_type(text: str) -> Type:
    """Parse one type token; raises ValueError with a message for a user."""
    if text in _SCALARS:
        return _SCALARS[text]
    m = _SHAPED_RE.match(text)
    if not m:
        raise ValueError(f"malformed type '{text}': expected e.g. <1 x 64 x f32>")
    prefix, dims_text, elem = m.group(1) or "", m.group(2), m.group(3)
    if elem not in _SCALARS:
        raise ValueError(f"unknown element type '{elem}' in '{text}'")
    dims = tuple(int(d) for d in re.findall(r"\d+", dims_text))
    if any(d <= 0 for d in dims):
        raise ValueError(f"dimension sizes must be positive in '{text}'")
    if prefix and not dims:
        raise ValueError(f"a {prefix} buffer needs at least one dimension: '{text}'")
    t = _SHAPED[prefix](dims, _SCALARS[elem])
    too_large = size_error(t)
    if too_large:
        raise ValueError(too_large)
    return t
