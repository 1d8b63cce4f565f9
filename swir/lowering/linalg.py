"""matmul, conv2d and conv_transpose2d: output loops around reduction loops,
accumulating through the output buffer (TVM's plain IR)."""

from __future__ import annotations

from swir.ir.affine import Expr
from swir.ir.core import Instruction, Value
from swir.lowering import lowering
from swir.lowering.kernel import KernelBuilder, broadcast_index


@lowering("matmul", inputs=("A", "B"), outputs=("C",))
def lower_matmul(k: KernelBuilder, inst: Instruction, ins: list[Value],
                 outs: list[Value]) -> None:
    """numpy.matmul: C[..., m, n] = sum_k A[..., m, k] * B[..., k, n]; batch
    dimensions broadcast; a 1-D operand has no m (or n) dimension."""
    a, b = ins
    (c,) = outs
    out_shape = inst.results[0].type.shape
    a_shape, b_shape = inst.args[0].type.shape, inst.args[1].type.shape
    kdim = a_shape[-1]
    nbatch = len(out_shape) - (len(a_shape) > 1) - (len(b_shape) > 1)
    names = [f"b{d}" for d in range(nbatch)] + ["x"] * (len(a_shape) > 1) + \
        ["y"] * (len(b_shape) > 1)
    zero = k.const(0.0 if c.type.element.is_float else 0, c.type.element)
    with k.loops(out_shape, names) as ivs:
        idx = [Expr.of(v) for v in ivs]
        batch = idx[:nbatch]

        def side(shape: tuple[int, ...], inner: list[Expr]) -> list[Expr]:
            if len(shape) == 1:
                return inner
            return broadcast_index(shape[:-2], batch, out_shape[:nbatch]) + inner

        m = [idx[nbatch]] if len(a_shape) > 1 else []
        n = [idx[-1]] if len(b_shape) > 1 else []

        def term(rivs: list[Value]) -> Value:
            kk = Expr.of(rivs[0])
            av = k.load(a, side(a_shape, m + [kk]))
            bv = k.load(b, side(b_shape, [kk] + n))
            return k.op("mul", av, bv)

        k.reduce(c, idx, zero, [kdim], ["k"], term)
