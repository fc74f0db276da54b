"""Concatenations: sums of pads whose windows are disjoint, written as one tensor.

Core IR has no concatenation: ``concat`` and ``stack`` are a pad of each operand into its place,
padded with the additive identity (-0.0 for floats, 0 for integers), and the pads added
(``frontend.builtins.concat_tensors``).  Lowered as written, that is a fill and a copy per operand,
then adds that read every result element once per operand: a concat of two 2000-row matrices along
their rows ran 3.3x slower than torch eager's, a stack of three 1000x1000 matrices 7x
(``docs/backend-cpu.md``, Measurements: concatenations as one tensor).

The sum is exactly the join: in an operand's window the other pads hold the identity, and
``x + (-0.0)`` is ``x`` for every float (+0.0, -0.0 and NaN included), ``x + 0`` for every integer;
outside every window the sum is the identity itself.  So a tree of such adds whose pads (and inner
adds) have no other user is emitted as one tensor: each operand copied into its window, the rest
filled with the identity (``Emitter.join``).
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from mind.ir.core import Function, Value
from mind.spec.dtypes import DType
from mind.spec.record import FrozenRecord

__all__ = ["Join", "find_joins"]


class Join(FrozenRecord):
    """An add tree to emit as one tensor: ``pieces`` (each an operand and its window's low corner)
    over the identity ``fill`` (the pads' value operand, a constant)."""

    __slots__ = ("fill", "pieces")

    fill: Value
    pieces: tuple[tuple[Value, tuple[int, ...]], ...]

    def __init__(self, fill: Value, pieces: tuple[tuple[Value, tuple[int, ...]], ...]) -> None:
        object.__setattr__(self, "fill", fill)
        object.__setattr__(self, "pieces", pieces)


def _is_identity(value: np.ndarray, dtype: DType) -> bool:
    """Whether the scalar ``value`` is, bit for bit, ``dtype``'s additive identity
    (``DType.add_identity``; not for bool, whose concatenations are ``select``s)."""
    want = np.asarray(dtype.add_identity, dtype=dtype.numpy)
    return dtype.is_numeric and np.asarray(value, dtype=dtype.numpy).reshape(-1)[:1].tobytes() == want.tobytes()


Shape = Callable[[Value], tuple[int, ...]]


def _disjoint(a: Sequence[tuple[Value, tuple[int, ...]]], b: Sequence[tuple[Value, tuple[int, ...]]],
              shape: Shape) -> bool:
    """Whether no window of ``a`` overlaps a window of ``b`` (separated along some axis)."""
    def apart(x: Value, lo: tuple[int, ...], y: Value, lo2: tuple[int, ...]) -> bool:
        return any(l1 + n1 <= l2 or l2 + n2 <= l1 for l1, n1, l2, n2 in zip(lo, shape(x), lo2, shape(y)))
    return all(apart(x, lo, y, lo2) for x, lo in a for y, lo2 in b)


def find_joins(fn: Function, shape: Shape) -> tuple[dict[int, Join], set[int]]:
    """The add trees of ``fn`` to emit as joins: (the root add's result id -> its ``Join``, the ids
    of the results folded into them, which are not emitted).  ``shape``: a value's extents with the
    function's symbols given values (``emit_mlir`` specializes a function per call shape)."""
    users: dict[int, int] = {}
    for op in fn.ops:
        for v in op.operands:
            users[id(v)] = users.get(id(v), 0) + 1
    for v in fn.results:
        users[id(v)] = users.get(id(v), 0) + 1
    consts: Mapping[int, np.ndarray] = {id(op.result): op.attrs["value"] for op in fn.ops if op.op == "const"}
    partial: dict[int, Join] = {}  # pads and add trees that may join
    roots: dict[int, Join] = {}
    folded: set[int] = set()
    for op in fn.ops:
        result = op.result
        if op.op == "pad":
            x, value = op.operands
            if not any(op.attrs["interior"]) and id(value) in consts and \
                    _is_identity(np.asarray(consts[id(value)]), result.type.dtype):
                partial[id(result)] = Join(value, ((x, tuple(int(n) for n in op.attrs["lo"])),))
        elif op.op == "add":
            a, b = op.operands
            ja, jb = partial.get(id(a)), partial.get(id(b))
            if ja is None or jb is None or a is b or users[id(a)] != 1 or users[id(b)] != 1:
                continue
            if not _same_constant(consts, ja.fill, jb.fill) or not _disjoint(ja.pieces, jb.pieces, shape):
                continue
            join = Join(ja.fill, ja.pieces + jb.pieces)
            partial[id(result)] = join
            roots[id(result)] = join
            for v in (a, b):
                folded.add(id(v))
                roots.pop(id(v), None)
    return roots, folded


def _same_constant(consts: Mapping[int, np.ndarray], a: Value, b: Value) -> bool:
    """Whether two constants are the same bits (-0.0 is not +0.0)."""
    return a is b or (a.type == b.type and np.asarray(consts[id(a)]).tobytes() == np.asarray(consts[id(b)]).tobytes())

