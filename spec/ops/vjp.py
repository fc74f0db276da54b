"""Building blocks of the VJP rules: zeros, negation, un-broadcasting, and the attribute arithmetic
of the structural rules.

The rules themselves are part of each op's definition (``OpDef.vjp`` in this package), as the shape
rules are; this module is to them what ``common.py`` is to the shape rules.  Everything here emits
ops through a ``VjpBuilder`` (so every result type comes from the spec's shape rules) and uses only
the 19 Core IR ops.  The autodiff transform (``mind.compiler.autodiff``) and the VJP checkers
(``mind.verify.autodiff_*``) import it from here.

Zeros of a symbolic shape.  A ``const`` needs a concrete shape, and ``mul(x, 0)`` is *not* a zero
(``0 * inf = NaN``, ``0 * NaN = NaN``).  Two NaN-free forms are used instead:

* a rank-0 zero broadcast by the consumer (``add(g, 0)``/``select(p, g, 0)`` broadcast a rank-0
  operand to the other operand's shape), which is what most rules do, and
* where a tensor of the shape of some value ``x`` is needed, ``select(compare(x, x, eq), 0, 0)``:
  the result has ``shape(x)`` and is 0 whatever ``x`` holds (NaN only changes which 0 is taken).

The attribute functions (``slice_vjp_params``, ``pad_vjp_params``, ``conv_window``) are written
against the spec's ``Arith`` interface, so the same code computes concrete attributes in the
transform (``SymArith``) and symbolic ones in the Z3 proofs of ``verify/autodiff_z3.py``.

A rule that cannot differentiate an op on the shapes it is given raises E5004 through
``mind.diagnostics``, which belongs to the spec layer (see "Layers" in ``docs/architecture.md``).
"""

from __future__ import annotations

from typing import Any, Sequence

from mind.diagnostics import error
from mind.spec.dims import Arith, format_dim
from mind.spec.dtypes import DType
from mind.spec.ops.base import TensorType, VjpBuilder, VjpOp, VjpValue
from mind.spec.ops.common import fmt_shape, show_dim

# --------------------------------------------------------------------------------------------
# small emitters
# --------------------------------------------------------------------------------------------


def no_cotangent(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    """The rule of an op whose operands receive no cotangent (a bool result, or no operands)."""
    return [None] * len(op.operands)


def is_concrete(shape: Sequence[Any]) -> bool:
    return all(isinstance(d, int) and not isinstance(d, bool) for d in shape)


def scalar(b: VjpBuilder, value: float, dtype: DType) -> VjpValue:
    """A rank-0 constant (broadcast by its consumer)."""
    return b.const(value, dtype)


def zeros_like(b: VjpBuilder, x: VjpValue, dtype: DType | None = None) -> VjpValue:
    """A zero tensor of ``shape(x)`` (dtype of ``x`` unless given), NaN-free for symbolic shapes."""
    dtype = dtype or x.type.dtype
    if is_concrete(x.type.shape):
        return b.splat(0, dtype, x.type.shape)
    z = scalar(b, 0, dtype)
    p = b.emit("compare", x, x, direction="eq")
    return b.emit("select", p, z, z)


def neg(b: VjpBuilder, x: VjpValue) -> VjpValue:
    """Exact IEEE negation (signed zeros and NaN included): ``mul(x, -1)``."""
    return b.emit("mul", x, scalar(b, -1, x.type.dtype))


def same_shape(A: Arith, a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x == y if type(x) is type(y) else A.eq(x, y) is True
                                    for x, y in zip(a, b))


def reshape_to(b: VjpBuilder, x: VjpValue, shape: Sequence[Any]) -> VjpValue:
    if same_shape(b.arith, x.type.shape, shape):
        return x
    return b.emit("reshape", x, shape=tuple(shape))


def unbroadcast(b: VjpBuilder, g: VjpValue, target: TensorType, span: Any = None) -> VjpValue:
    """Sum ``g`` (of a broadcast result shape) back to ``target`` with ``reduce_sum`` over the
    broadcast axes and a ``reshape``."""
    A = b.arith
    gs, ts = tuple(g.type.shape), tuple(target.shape)
    lead = len(gs) - len(ts)
    if lead < 0:
        raise error("E5004", f"cotangent of shape {fmt_shape(gs)} has lower rank than the operand "
                             f"{fmt_shape(ts)}", span)
    axes = list(range(lead))
    for i, t in enumerate(ts):
        o = gs[lead + i]
        if type(o) is type(t) and o == t:
            continue
        if A.eq(o, t) is True:
            continue
        if A.eq(t, 1) is True:
            axes.append(lead + i)
            continue
        raise error("E5004", f"cannot decide whether axis {i} of {fmt_shape(ts)} was broadcast to "
                             f"{format_dim(o)}", span,
                    help="add an assumption (`where ...`) that decides the extent, or make it concrete")
    out = g
    if axes:
        out = b.emit("reduce_sum", out, axes=tuple(axes), keepdims=False)
    return reshape_to(b, out, ts)


def broadcast_like(b: VjpBuilder, g_keep: VjpValue, like: VjpValue) -> VjpValue:
    """Broadcast ``g_keep`` (keepdims form: extent 1 on the reduced axes) to ``shape(like)``."""
    if same_shape(b.arith, g_keep.type.shape, like.type.shape):
        return g_keep
    if is_concrete(like.type.shape):
        return b.emit("add", g_keep, b.splat(0, g_keep.type.dtype, like.type.shape))
    p = b.emit("compare", like, like, direction="eq")
    return b.emit("select", p, g_keep, g_keep)


def keep_shape(shape: Sequence[Any], axes: Sequence[int]) -> tuple[Any, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def need_int(x: Any, what: str, span: Any = None) -> int:
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    raise error("E5004", f"the gradient needs {what} to be a concrete integer, but it is {show_dim(x)}", span,
                help="make the dimension concrete, or add assumptions that fix it")


# --------------------------------------------------------------------------------------------
# attribute arithmetic of the structural rules (written against ``Arith``)
# --------------------------------------------------------------------------------------------


def slice_vjp_params(A: Arith, n: Any, start: Any, step: int, m: Any) -> tuple[Any, Any, Any, bool]:
    """For one axis of ``slice`` (operand extent ``n``, result extent ``m``): the ``pad`` that puts
    the (reversed, if ``step < 0``) cotangent back in place: ``(lo, hi, interior, reversed)``.

    step > 0 reads start, start + step, …, last = start + (m - 1) * step:
        lo = start, hi = n - 1 - last, interior = step - 1.
    step < 0 reads start, start - |step|, …, last; reversed, that is last, last + |step|, …:
        lo = last, hi = n - 1 - start, interior = |step| - 1.
    (Valid for m ≥ 1; for m = 0 only step = ±1 … see ``slice`` VJP: empty windows give no cotangent.)
    """
    last = start + (m - 1) * step
    if step > 0:
        return start, n - 1 - last, step - 1, False
    return last, n - 1 - start, -step - 1, True


def pad_vjp_params(A: Arith, n: Any, lo: int, interior: int) -> tuple[Any, Any, int]:
    """For one axis of ``pad``: the ``slice`` (start, stop, step) that reads the operand's
    positions lo, lo + (interior + 1), …: stop = lo + n * (interior + 1) - interior, which gives
    exactly n elements for every n ≥ 0 (``ceildiv(n * s - i, s) = n`` with s = i + 1)."""
    s = interior + 1
    return lo, lo + n * s - interior, s


def conv_window(A: Arith, n: Any, dil: int, offset: Any, length: Any) -> tuple[Any, Any, Any, Any]:
    """A source axis of extent ``n``, dilated by ``dil`` and placed at ``offset + h * dil``, seen
    through the window [0, length): the source range [h0, h1) that lands in the window and the
    padding (lo, hi) around its dilation so that the padded sequence is exactly ``length`` long.

    h0 = max(0, ceil(-offset / dil)), h1 = min(n, floor((length - 1 - offset) / dil) + 1),
    lo = offset + h0 * dil, hi = length - lo - (h1 - h0 - 1) * dil - 1.  Meaningful when h1 > h0.
    """
    h0 = A.max(0, A.ceildiv(0 - offset, dil))
    h1 = A.min(n, A.floordiv(length - 1 - offset, dil) + 1)
    lo = offset + h0 * dil
    hi = length - lo - (h1 - h0 - 1) * dil - 1
    return h0, h1, lo, hi
