"""What the adapters share: MIND's own front end for the IR text, and a walk over the ops.

Every adapter reads the case's IR with MIND's parser and verifier (so a negative case is rejected
with MIND's diagnostic, at its stage), binds symbolic dims from the arguments, and then hands each
op to the system under test.  The translation maps each op to that system's closest primitive with
the same meaning on ordinary inputs, and adds no guard of its own at the edges (division by zero,
out-of-range indices or conversions, NaN, empty tensors): how the system behaves there is what the
suite measures, and each adapter's expectations file records where it departs from the spec.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from mind.conformance.implementations import frontend
from mind.conformance.protocol import CodedError, Unsupported


class Adapter:
    """An in-process adapter (the ``python:`` contract): ``prepare`` reads the IR with MIND's front
    end; each call specializes the function to its arguments' shapes and hands it to ``execute``."""

    profiles = ("core", "i64", "f64", "symbolic", "diagnostics")

    def prepare(self, ir: str, function: str) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
        fn = frontend(ir, function)
        return lambda inputs: [np.asarray(r) for r in self.execute(concrete(fn, inputs), inputs)]

    def execute(self, fn: Any, inputs: Mapping[str, np.ndarray]) -> list[Any]:
        """Run the concrete function ``fn`` on ``inputs`` (by parameter name)."""
        raise NotImplementedError


def concrete(fn: Any, inputs: Mapping[str, np.ndarray]) -> Any:
    """``fn`` specialized to the shapes of ``inputs`` (argument errors are MIND's, at stage run)."""
    from mind.compiler.export.common import bind_from_arrays, specialize
    from mind.diagnostics import MindError

    try:
        return specialize(fn, bind_from_arrays(fn, inputs))
    except MindError as exc:
        raise CodedError.from_mind(exc, "run") from None


def exported(export: Callable[[Any], Any], fn: Any) -> Any:
    """``export(fn)``; what the target cannot express (E6003) is Unsupported."""
    from mind.diagnostics import MindError

    try:
        return export(fn)
    except MindError as exc:
        if exc.codes[0] == "E6003":
            raise Unsupported(exc.diagnostics[0].message) from None
        raise


def walk(fn: Any, args: Mapping[str, Any], table: Mapping[str, Callable[..., Any]]) -> list[Any]:
    """Evaluate ``fn`` op by op with ``table[op](operands, attrs, result_type)``."""
    values: dict[int, Any] = {id(p): args[p.name] for p in fn.params}
    for op in fn.ops:
        values[id(op.result)] = table[op.op]([values[id(v)] for v in op.operands], dict(op.attrs), op.result.type)
    return [values[id(v)] for v in fn.results]


def result_shape(t: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)
