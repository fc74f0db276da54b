"""Compile-time values of tensors computed only from constants.

Control flow that the compiler resolves (an ``if`` condition, a ``while`` condition, a loop bound,
an index) may be a literal or a tensor computed from constants only, e.g.
``let n: i64 = 3; for i in 0..n``.  ``StaticValues.of(v)`` evaluates such a value with the reference
interpreter's op functions (the semantics of every op), walking back through the producers of ``v``
in the function being built; it gives ``None`` as soon as a parameter (or a large tensor) is
involved.  Results are cached per value, so a loop counter that grows by one op per iteration
costs one op per iteration.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Operation, Value

#: Values with more elements than this are not evaluated (conditions and indices are scalars).
MAX_STATIC_ELEMENTS = 4096


class StaticValues:
    """The constant-only values of one function being built (``ops`` is its growing op list)."""

    __slots__ = ("ops", "_scanned", "_producer", "_cache")

    def __init__(self, ops: list[Operation]) -> None:
        self.ops = ops
        self._scanned = 0
        self._producer: dict[int, Operation] = {}
        self._cache: dict[int, Any] = {}

    def _op(self, v: Value) -> Operation | None:
        ops = self.ops
        if self._scanned < len(ops):
            producer = self._producer
            for op in ops[self._scanned:]:
                producer[id(op.result)] = op
            self._scanned = len(ops)
        return self._producer.get(id(v))

    def of(self, v: Value) -> Any:
        """The NumPy value of ``v`` if it is computed from constants only, else ``None``."""
        cache = self._cache
        key = id(v)
        if key in cache:
            return cache[key]
        # iterative post-order over the producers (chains may be long: a loop counter)
        stack: list[tuple[Value, bool]] = [(v, False)]
        while stack:
            x, ready = stack.pop()
            kx = id(x)
            if kx in cache:
                continue
            op = self._op(x)
            if op is None or not _small(x):
                cache[kx] = None
                continue
            if op.op == "const":
                cache[kx] = op.attrs["value"]
                continue
            if not ready:
                stack.append((x, True))
                stack.extend((o, False) for o in op.operands if id(o) not in cache)
                continue
            args = [cache.get(id(o)) for o in op.operands]
            if any(a is None for a in args):
                cache[kx] = None
                continue
            import numpy as np

            from mind.reference.ops import OP_FUNCTIONS

            with np.errstate(all="ignore"):
                cache[kx] = np.asarray(OP_FUNCTIONS[op.op](*[np.asarray(a) for a in args], **op.attrs))
        return cache[key]


def _small(v: Value) -> bool:
    n = 1
    for d in v.type.shape:
        if type(d) is not int:
            return False
        n *= d
    return n <= MAX_STATIC_ELEMENTS
