"""What the reference reads of a Core IR function: its shape as protocols, not the IR's classes.

Why protocols: the reference layer sits below the IR (``mind.ir``), so it never imports the IR's
classes; it walks any object with these fields.  ``mind.ir.core``'s ``Value``, ``Operation`` and
``Function`` have them (``tests/reference/test_program_protocol.py`` checks that they do), and so
does the printer's input.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from mind.spec.ops import TensorType

__all__ = ["ValueLike", "OperationLike", "FunctionLike"]


class ValueLike(Protocol):
    """An SSA value: a parameter or an op's result, identified by the object itself."""

    name: str
    type: TensorType
    span: Any  # ``mind.diagnostics.Span`` or None


class OperationLike(Protocol):
    """One op application: the op's name, operand values, attributes (spec order), result."""

    op: str
    operands: Sequence[ValueLike]
    result: ValueLike
    span: Any

    @property
    def attrs(self) -> Mapping[str, Any]: ...


class FunctionLike(Protocol):
    """A function: parameters, an SSA list of ops, results, and the assumptions on its symbols."""

    name: str
    params: Sequence[ValueLike]
    ops: Sequence[OperationLike]
    results: Sequence[ValueLike]
    assumptions: Sequence[Any]

    @property
    def span(self) -> Any: ...
