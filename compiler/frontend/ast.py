"""The MIND surface AST: slotted dataclasses, one class per construct, to be treated as immutable.

Nodes are not ``frozen`` (a frozen dataclass's ``__init__`` goes through ``object.__setattr__``
for every field, which made node construction the largest cost of parsing), but they must be
treated as immutable all the same: never assign to a field of a node that another part of the
compiler may hold.  Equality and hashing are unchanged: both compare the fields (``unsafe_hash``
gives exactly the field-based ``__hash__`` that ``frozen=True`` gave), ``Module.source`` excluded.

Every node has a ``span``: the half-open ``(start, end)`` character offsets of the construct in
its source text.  Offsets are cheap to build in the parser; ``Module.source.span(node.span)``
(a ``lexer.SourceMap``) turns them into the 1-based line/column ``mind.diagnostics.Span`` that
diagnostics carry, only when a diagnostic is actually made.

The tree is syntax only: names are not resolved, calls are not classified, ``tensor.relu`` and
``relu`` are both just calls (``Call.name`` gives the dotted callee name when there is one).  Both
surface syntaxes produce the same nodes; ``TensorType.style`` remembers which spelling was used.

Node families (base classes, for ``isinstance`` in a later checker):

* ``Type``: ``ScalarType``, ``TensorType`` (with ``Dim``\\ s), ``TupleType``
* ``Expr``: ``IntLit``, ``FloatLit``, ``BoolLit``, ``StrLit``, ``Name``, ``Attribute``, ``Unary``,
  ``Binary``, ``Call`` (with ``Keyword``\\ s), ``TupleExpr``, ``ArrayLit``, ``Closure``
  (with ``Param``\\ s)
* ``Pattern``: ``NamePattern``, ``TuplePattern``
* ``Stmt``: ``Let``, ``Assign``, ``Return``, ``ExprStmt``, ``FnDef``, ``Import``
* ``Block`` (a function body), ``Module`` (a file)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Union

__all__ = [
    "Offsets", "Node", "Type", "Expr", "Stmt", "Pattern",
    "ScalarType", "Dim", "TensorType", "TupleType",
    "IntLit", "FloatLit", "BoolLit", "StrLit", "Name", "Attribute", "Unary", "Binary", "Keyword",
    "Call", "TupleExpr", "ArrayLit", "Param", "Closure",
    "NamePattern", "TuplePattern",
    "Let", "Assign", "Return", "ExprStmt", "Block", "FnDef", "Import", "Module",
    "SCALAR_TYPES", "BINARY_OPS", "UNARY_OPS", "dump", "walk", "iter_children",
]

Offsets = tuple[int, int]  # (start, end) character offsets, end exclusive

#: Scalar type names, which are also the dtypes a tensor type may name.
SCALAR_TYPES: frozenset[str] = frozenset({"i32", "i64", "f32", "f64", "bool"})
#: Binary operators by precedence level (higher binds tighter); all are left-associative except
#: comparisons, which do not chain.
BINARY_OPS: dict[str, int] = {
    "||": 1, "&&": 2,
    "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
    "+": 4, "-": 4,
    "*": 5, "/": 5, "@": 5,
}
UNARY_OPS: frozenset[str] = frozenset({"-", "!"})


class Node:
    """Base of all nodes."""

    __slots__ = ()
    span: Offsets


class Type(Node):
    __slots__ = ()


class Expr(Node):
    __slots__ = ()


class Stmt(Node):
    __slots__ = ()


class Pattern(Node):
    __slots__ = ()


_node = dataclass(slots=True, unsafe_hash=True)

# ---------------------------------------------------------------------------------------------
# Types


@_node
class ScalarType(Type):
    """``i32``, ``i64``, ``f32``, ``f64`` or ``bool``."""

    name: str
    span: Offsets


@_node
class Dim(Node):
    """One dimension of a tensor type: an ``int``, a symbol (``str``), or ``None`` for ``?``."""

    value: int | str | None
    span: Offsets


@_node
class TensorType(Type):
    """A tensor type in any spelling.

    ``style`` is ``"angle"`` for ``Tensor<f32, [2, 3]>``, ``"legacy"`` for ``Tensor[f32,(2,3)]``,
    ``"compact"`` for ``tensor<f32[2,3]>``.  ``diff`` is true for ``diff <tensor type>``.
    """

    dtype: str
    dims: tuple[Dim, ...]
    diff: bool
    style: str
    span: Offsets


@_node
class TupleType(Type):
    """``(T, U, ...)``; ``()`` is the unit type, ``(T,)`` a one-element tuple."""

    elts: tuple[Type, ...]
    span: Offsets


# ---------------------------------------------------------------------------------------------
# Expressions


@_node
class IntLit(Expr):
    value: int
    span: Offsets


@_node
class FloatLit(Expr):
    value: float
    text: str  # the literal as written (for exact re-parsing as f32/f64 later)
    span: Offsets


@_node
class BoolLit(Expr):
    value: bool
    span: Offsets


@_node
class StrLit(Expr):
    value: str  # escapes already decoded
    span: Offsets


@_node
class Name(Expr):
    id: str
    span: Offsets


@_node
class Attribute(Expr):
    """``value.attr`` (``tensor.matmul`` is ``Attribute(Name("tensor"), "matmul")``)."""

    value: Expr
    attr: str
    span: Offsets


@_node
class Unary(Expr):
    op: str  # "-" or "!"
    operand: Expr
    span: Offsets


@_node
class Binary(Expr):
    op: str  # a key of BINARY_OPS
    left: Expr
    right: Expr
    span: Offsets


@_node
class Keyword(Node):
    """A keyword argument ``name=value`` of a call."""

    name: str
    value: Expr
    span: Offsets


@_node
class Call(Expr):
    """``func(args..., name=value...)``.

    ``name`` is the dotted callee name (``"tensor.matmul"``, ``"relu"``) when ``func`` is a name or
    a chain of attributes on a name, else ``None`` (``grad(f)(x)``, ``(|a| a)(x)``).
    Positional arguments always precede keyword arguments.
    """

    func: Expr
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    name: str | None
    span: Offsets

    def kwarg(self, name: str) -> Expr | None:
        for kw in self.kwargs:
            if kw.name == name:
                return kw.value
        return None


@_node
class TupleExpr(Expr):
    """``(a, b)``, ``(a,)`` or ``()``."""

    elts: tuple[Expr, ...]
    span: Offsets


@_node
class ArrayLit(Expr):
    """``[a, b, ...]``: an array / tensor literal, an axis list or a shape (nested for rank > 1)."""

    elts: tuple[Expr, ...]
    span: Offsets


@_node
class Param(Node):
    """A function parameter ``name: type``, or a closure parameter with an optional type."""

    name: str
    type: Type | None
    span: Offsets


@_node
class Closure(Expr):
    """``|a, b| body`` (reserved for autodiff: ``grad(|p| loss(x, p))``)."""

    params: tuple[Param, ...]
    body: Expr
    span: Offsets


# ---------------------------------------------------------------------------------------------
# Patterns and statements


@_node
class NamePattern(Pattern):
    name: str  # "_" is a wildcard
    span: Offsets


@_node
class TuplePattern(Pattern):
    elts: tuple[Pattern, ...]
    span: Offsets


@_node
class Let(Stmt):
    """``let target [: type] = value``."""

    target: Pattern
    type: Type | None
    value: Expr
    span: Offsets


@_node
class Assign(Stmt):
    """``name = value`` (rebinding an existing name)."""

    target: str
    value: Expr
    span: Offsets
    target_span: Offsets


@_node
class Return(Stmt):
    value: Expr | None
    span: Offsets


@_node
class ExprStmt(Stmt):
    expr: Expr
    span: Offsets


@_node
class Block(Node):
    """``{ stmts; tail }``.

    ``tail`` is the final statement when it is an expression statement (the value of the block);
    as in the public compiler, a ``;`` after it does not discard it.  ``stmts`` excludes the tail.
    """

    stmts: tuple[Stmt, ...]
    tail: Expr | None
    span: Offsets


@_node
class FnDef(Stmt):
    """``fn name(params) [-> ret] { body }``; may appear at top level or inside a block."""

    name: str
    params: tuple[Param, ...]
    ret: Type | None
    body: Block
    span: Offsets
    name_span: Offsets


@_node
class Import(Stmt):
    """``import a::b::c`` (``path=("a","b","c")``, ``names=None``) or
    ``import a::b::{c, d}`` (``path=("a","b")``, ``names=("c","d")``); ``.`` may replace ``::``."""

    path: tuple[str, ...]
    names: tuple[str, ...] | None
    span: Offsets


@_node
class Module(Node):
    """A source file: top-level statements in order and the program result.

    ``result`` is the final top-level statement when it is an expression statement (the public
    compiler's "last expression is the result" rule); ``stmts`` excludes it.  ``source`` maps
    offsets to line/column spans (see ``lexer.SourceMap``).
    """

    stmts: tuple[Stmt, ...]
    result: Expr | None
    span: Offsets
    source: Any = field(compare=False, repr=False)

    @property
    def functions(self) -> tuple[FnDef, ...]:
        return tuple(s for s in self.stmts if isinstance(s, FnDef))

    @property
    def imports(self) -> tuple[Import, ...]:
        return tuple(s for s in self.stmts if isinstance(s, Import))

    def function(self, name: str) -> FnDef | None:
        for s in self.stmts:
            if isinstance(s, FnDef) and s.name == name:
                return s
        return None


AnyNode = Union[Node, tuple, str, int, float, bool, None]

# ---------------------------------------------------------------------------------------------
# Generic traversal and a span-free dump (for golden tests and debugging)

_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in fields(cls)
                      if f.name not in ("span", "name_span", "target_span", "source"))
        _FIELDS[cls] = names
    return names


def iter_children(node: Node) -> Iterator[Node]:
    """The direct child nodes of ``node``, in source order."""
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, Node):
                    yield v


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree rooted at ``node``, pre-order (iterative, so depth is no issue)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(iter_children(n))))


def dump(node: Any) -> str:
    """A compact S-expression of the tree without spans, e.g. ``(Binary + (IntLit 1) (Name a))``."""
    if isinstance(node, StrLit):
        return f"(StrLit {node.value!r})"
    if isinstance(node, Node):
        parts = [type(node).__name__]
        for name in _child_fields(type(node)):
            parts.append(dump(getattr(node, name)))
        return "(" + " ".join(parts) + ")"
    if isinstance(node, tuple):
        return "[" + " ".join(dump(v) for v in node) + "]"
    if isinstance(node, str):
        return node if node and (node.isidentifier() or all(c in "+-*/@<>=!&|." for c in node)) \
            else repr(node)
    return repr(node)
