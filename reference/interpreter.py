"""The reference interpreter: runs a Core IR function on NumPy arrays, op by op.

It takes bound arguments: the arrays already checked against the parameter types and the symbol
values they gave (``mind.calling.bind_arguments``, which every backend's front door runs), and it
walks any function-shaped object (``reference.program``).  A probe, if given, is called with every
parameter and intermediate value in program order (``mind run --probe DIR`` saves them, for
bisecting mismatches between implementations); the interpreter itself writes no files.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from mind.reference.memory import REFERENCE_VIEWS, check_memory, memory_error, value_bytes
from mind.reference.ops import OP_FUNCTIONS
from mind.reference.program import FunctionLike, OperationLike, ValueLike
from mind.spec.dims import evaluate

__all__ = ["evaluate_function", "Probe"]


Probe = Callable[[ValueLike, str, np.ndarray], None]
"""``probe(value, op, array)``: ``op`` is the op that computed ``value`` (``"param"`` for a parameter)."""


def evaluate_function(fn: FunctionLike, arrays: Sequence[np.ndarray], env: Mapping[str, int], *,
                      probe: Probe | None = None) -> list[np.ndarray]:
    """Evaluate ``fn`` on the bound ``arrays`` (one per parameter, C-ordered, bools 0/1) with the
    symbol values ``env``; returns one array per result.

    Before any op runs, the values' sizes are checked against the memory available
    (``memory.check_memory``: E6004 at the op where the need peaks); an op whose allocation fails
    all the same is E6004 at that op.  A value is dropped after its last use."""
    check_memory(fn, env, _materializes, "reference")
    values: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.params, arrays)}
    if probe is not None:
        for p, a in zip(fn.params, arrays):
            probe(p, "param", a)
    last_use = {id(v): i for i, op in enumerate(fn.ops) for v in op.operands}
    keep = {id(v) for v in fn.results}
    for i, op in enumerate(fn.ops):
        attrs = dict(op.attrs)
        for key in ("shape", "start", "stop"):  # dims attributes: symbols take their bound values
            if key in attrs:
                attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
        operands = [values[id(v)] for v in op.operands]
        try:
            out = OP_FUNCTIONS[op.op](*operands, **attrs)
        except MemoryError:
            raise memory_error(fn, env, op, value_bytes(op.result.type, env), None, "reference") from None
        values[id(op.result)] = out
        if probe is not None:
            probe(op.result, op.op, out)
        for v in op.operands:
            if last_use[id(v)] == i and id(v) not in keep:
                values.pop(id(v), None)
        del operands
    return [values[id(v)] for v in fn.results]


def _materializes(op: OperationLike) -> bool:
    """The values the interpreter allocates (see ``memory``): all but possible views."""
    return op.op not in REFERENCE_VIEWS
