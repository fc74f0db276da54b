"""The MIND surface AST: slotted classes, one class per construct, to be treated as immutable.

Nodes are plain classes with ``__slots__`` and an explicit ``__init__`` (not dataclasses: building
some thirty dataclasses was the largest cost of importing the frontend, and a frozen one's
``__init__`` goes through ``object.__setattr__`` for every field).  They are not frozen, but they
must be treated as immutable all the same: never assign to a field of a node that another part of
the compiler may hold.  Equality and hashing are those of a dataclass with ``unsafe_hash=True``:
nodes of the same class compare and hash by their fields (``Node._fields``), ``Module.source``
excluded, and ``repr`` shows the same fields.

Every node has a ``span``: the half-open ``(start, end)`` character offsets of the construct in
its source text.  Offsets are cheap to build in the parser; ``Module.source.span(node.span)``
(a ``lexer.SourceMap``) turns them into the 1-based line/column ``mind.diagnostics.Span`` that
diagnostics carry, only when a diagnostic is actually made.

The tree is syntax only: names are not resolved, calls are not classified, ``tensor.relu`` and
``relu`` are both just calls (``Call.name`` gives the dotted callee name when there is one).  Both
surface syntaxes produce the same nodes; ``TensorType.style`` remembers which spelling was used.

Node families (base classes, for ``isinstance`` in a later checker):

* ``Type``: ``ScalarType``, ``TensorType`` (with ``Dim``\\ s), ``TupleType``, ``TypeName``
* ``Expr``: ``IntLit``, ``FloatLit``, ``BoolLit``, ``StrLit``, ``Name``, ``Attribute``, ``Unary``,
  ``Binary``, ``Call`` (with ``Keyword``\\ s), ``TupleExpr``, ``ArrayLit``, ``Closure``
  (with ``Param``\\ s), ``Index`` (with ``SliceItem``\\ s and ``EllipsisItem``), ``Range``,
  ``Cast``, ``If``, ``BlockExpr``, ``StructLit``
* ``Pattern``: ``NamePattern``, ``TuplePattern``
* ``Stmt``: ``Let``, ``Assign``, ``Return``, ``ExprStmt``, ``FnDef``, ``Import``, ``StructDef``,
  ``ConstDef``, ``For``, ``While``, ``Loop``, ``Break``, ``Continue``
* ``Block`` (a function or loop body, a branch), ``Module`` (a file)
"""

from __future__ import annotations

from typing import Any, Iterator, Union

from mind.spec.record import Record

__all__ = [
    "Offsets", "Node", "Type", "Expr", "Stmt", "Pattern",
    "ScalarType", "Dim", "TensorType", "TupleType",
    "IntLit", "FloatLit", "BoolLit", "StrLit", "Name", "Attribute", "Unary", "Binary", "Keyword",
    "Call", "TupleExpr", "ArrayLit", "Param", "Closure",
    "NamePattern", "TuplePattern",
    "Let", "Assign", "Return", "ExprStmt", "Block", "FnDef", "Import", "Module",
    "TypeName", "Index", "SliceItem", "EllipsisItem", "Range", "Cast", "If", "BlockExpr", "StructLit",
    "StructDef", "ConstDef", "For", "While", "Loop", "Break", "Continue",
    "SCALAR_TYPES", "BINARY_OPS", "UNARY_OPS", "ASSIGN_OPS", "dump", "walk", "iter_children",
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
    "*": 5, "/": 5, "%": 5, "@": 5,
}
#: Compound assignment operators and the binary operator each applies (``x += e`` is ``x = x + e``).
ASSIGN_OPS: dict[str, str] = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%"}
UNARY_OPS: frozenset[str] = frozenset({"-", "!"})


class Node(Record):
    """Base of all nodes.

    ``_fields`` names a node's fields in order (its ``__slots__``, less ``Module.source``): they are
    what ``==``, ``hash``, ``repr`` and pickling look at, as a dataclass's fields would be (derived
    by ``mind.spec.record.Record``).
    """

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    span: Offsets


class Type(Node):
    __slots__ = ()


class Expr(Node):
    __slots__ = ()


class Stmt(Node):
    __slots__ = ()


class Pattern(Node):
    __slots__ = ()


# ---------------------------------------------------------------------------------------------
# Types


class ScalarType(Type):
    """``i32``, ``i64``, ``f32``, ``f64`` or ``bool``."""

    __slots__ = _fields = ("name", "span")

    def __init__(self, name: str, span: Offsets) -> None:
        self.name = name
        self.span = span


class Dim(Node):
    """One dimension of a tensor type: an ``int``, a symbol (``str``), or ``None`` for ``?``."""

    __slots__ = _fields = ("value", "span")

    def __init__(self, value: int | str | None, span: Offsets) -> None:
        self.value = value
        self.span = span


class TensorType(Type):
    """A tensor type in any spelling.

    ``style`` is ``"angle"`` for ``Tensor<f32, [2, 3]>``, ``"legacy"`` for ``Tensor[f32,(2,3)]``,
    ``"compact"`` for ``tensor<f32[2,3]>``.  ``diff`` is true for ``diff <tensor type>``.
    """

    __slots__ = _fields = ("dtype", "dims", "diff", "style", "span")

    def __init__(self, dtype: str, dims: tuple[Dim, ...], diff: bool, style: str, span: Offsets) -> None:
        self.dtype = dtype
        self.dims = dims
        self.diff = diff
        self.style = style
        self.span = span


class TypeName(Type):
    """A named type: a ``struct`` (``MLPParams``), or a name that is not a type (diagnosed later)."""

    __slots__ = _fields = ("name", "span")

    def __init__(self, name: str, span: Offsets) -> None:
        self.name = name
        self.span = span


class TupleType(Type):
    """``(T, U, ...)``; ``()`` is the unit type, ``(T,)`` a one-element tuple."""

    __slots__ = _fields = ("elts", "span")

    def __init__(self, elts: tuple[Type, ...], span: Offsets) -> None:
        self.elts = elts
        self.span = span


# ---------------------------------------------------------------------------------------------
# Expressions


class IntLit(Expr):
    __slots__ = _fields = ("value", "span")

    def __init__(self, value: int, span: Offsets) -> None:
        self.value = value
        self.span = span


class FloatLit(Expr):
    __slots__ = _fields = ("value", "text", "span")

    def __init__(self, value: float, text: str, span: Offsets) -> None:
        self.value = value
        self.text = text  # the literal as written (for exact re-parsing as f32/f64 later)
        self.span = span


class BoolLit(Expr):
    __slots__ = _fields = ("value", "span")

    def __init__(self, value: bool, span: Offsets) -> None:
        self.value = value
        self.span = span


class StrLit(Expr):
    __slots__ = _fields = ("value", "span")

    def __init__(self, value: str, span: Offsets) -> None:
        self.value = value  # escapes already decoded
        self.span = span


class Name(Expr):
    __slots__ = _fields = ("id", "span")

    def __init__(self, id: str, span: Offsets) -> None:
        self.id = id
        self.span = span


class Attribute(Expr):
    """``value.attr`` (``tensor.matmul`` is ``Attribute(Name("tensor"), "matmul")``)."""

    __slots__ = _fields = ("value", "attr", "span")

    def __init__(self, value: Expr, attr: str, span: Offsets) -> None:
        self.value = value
        self.attr = attr
        self.span = span


class Unary(Expr):
    __slots__ = _fields = ("op", "operand", "span")

    def __init__(self, op: str, operand: Expr, span: Offsets) -> None:
        self.op = op  # "-" or "!"
        self.operand = operand
        self.span = span


class Binary(Expr):
    __slots__ = _fields = ("op", "left", "right", "span")

    def __init__(self, op: str, left: Expr, right: Expr, span: Offsets) -> None:
        self.op = op  # a key of BINARY_OPS
        self.left = left
        self.right = right
        self.span = span


class Keyword(Node):
    """A keyword argument ``name=value`` of a call."""

    __slots__ = _fields = ("name", "value", "span")

    def __init__(self, name: str, value: Expr, span: Offsets) -> None:
        self.name = name
        self.value = value
        self.span = span


class Call(Expr):
    """``func(args..., name=value...)``.

    ``name`` is the dotted callee name (``"tensor.matmul"``, ``"relu"``) when ``func`` is a name or
    a chain of attributes on a name, else ``None`` (``grad(f)(x)``, ``(|a| a)(x)``).
    Positional arguments always precede keyword arguments.
    """

    __slots__ = _fields = ("func", "args", "kwargs", "name", "span")

    def __init__(self, func: Expr, args: tuple[Expr, ...], kwargs: tuple[Keyword, ...], name: str | None,
                 span: Offsets) -> None:
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.name = name
        self.span = span

    def kwarg(self, name: str) -> Expr | None:
        for kw in self.kwargs:
            if kw.name == name:
                return kw.value
        return None


class TupleExpr(Expr):
    """``(a, b)``, ``(a,)`` or ``()``."""

    __slots__ = _fields = ("elts", "span")

    def __init__(self, elts: tuple[Expr, ...], span: Offsets) -> None:
        self.elts = elts
        self.span = span


class ArrayLit(Expr):
    """``[a, b, ...]``: an array / tensor literal, an axis list or a shape (nested for rank > 1).

    A large numeric literal read in bulk (``literals.DenseArray``, in ``dense``) builds its
    element nodes only when ``elts`` is first read, with ``expand(dense)`` (the parser's
    ``parse_dense``, handed in so that the literal reader does not import the parser)."""

    __slots__ = ("_elts", "span", "dense", "_expand")
    _fields = ("elts", "span")

    def __init__(self, elts: tuple[Expr, ...] | None, span: Offsets, dense: Any = None,
                 expand: Any = None) -> None:
        self._elts = elts
        self.span = span
        self.dense = dense
        self._expand = expand

    @property
    def elts(self) -> tuple[Expr, ...]:
        elts = self._elts
        if elts is None:
            elts = self._elts = self._expand(self.dense)
        return elts


class Param(Node):
    """A function parameter ``name: type``, or a closure parameter with an optional type."""

    __slots__ = _fields = ("name", "type", "span")

    def __init__(self, name: str, type: Type | None, span: Offsets) -> None:
        self.name = name
        self.type = type
        self.span = span


class Closure(Expr):
    """``|a, b| body`` (reserved for autodiff: ``grad(|p| loss(x, p))``)."""

    __slots__ = _fields = ("params", "body", "span")

    def __init__(self, params: tuple[Param, ...], body: Expr, span: Offsets) -> None:
        self.params = params
        self.body = body
        self.span = span


class SliceItem(Node):
    """``start:stop:step`` inside ``x[...]``; each part may be omitted (``None``)."""

    __slots__ = _fields = ("start", "stop", "step", "span")

    def __init__(self, start: Expr | None, stop: Expr | None, step: Expr | None, span: Offsets) -> None:
        self.start = start
        self.stop = stop
        self.step = step
        self.span = span


class EllipsisItem(Node):
    """``...`` inside ``x[...]``: as many full slices as needed."""

    __slots__ = _fields = ("span",)

    def __init__(self, span: Offsets) -> None:
        self.span = span


class Index(Expr):
    """``value[item, ...]``: each item an ``Expr`` (an index), a ``SliceItem`` or an ``EllipsisItem``."""

    __slots__ = _fields = ("value", "items", "span")

    def __init__(self, value: Expr, items: tuple[Node, ...], span: Offsets) -> None:
        self.value = value
        self.items = items
        self.span = span


class Range(Expr):
    """``start..stop`` or ``start..=stop`` (the loop ranges of ``for``)."""

    __slots__ = _fields = ("start", "stop", "inclusive", "span")

    def __init__(self, start: Expr | None, stop: Expr | None, inclusive: bool, span: Offsets) -> None:
        self.start = start
        self.stop = stop
        self.inclusive = inclusive
        self.span = span


class Cast(Expr):
    """``value as type``."""

    __slots__ = _fields = ("value", "type", "span")

    def __init__(self, value: Expr, type: Type, span: Offsets) -> None:
        self.value = value
        self.type = type
        self.span = span


class If(Expr):
    """``if cond { ... } [else { ... } | else if ...]``: ``orelse`` is a ``Block``, an ``If`` or ``None``."""

    __slots__ = _fields = ("cond", "then", "orelse", "span")

    def __init__(self, cond: Expr, then: "Block", orelse: "Block | If | None", span: Offsets) -> None:
        self.cond = cond
        self.then = then
        self.orelse = orelse
        self.span = span


class BlockExpr(Expr):
    """A block ``{ ...; tail }`` used as an expression."""

    __slots__ = _fields = ("block", "span")

    def __init__(self, block: "Block", span: Offsets) -> None:
        self.block = block
        self.span = span


class StructLit(Expr):
    """``Name { field: value, ... }`` (``field`` alone is ``field: field``)."""

    __slots__ = _fields = ("name", "fields", "span")

    def __init__(self, name: str, fields: tuple[Keyword, ...], span: Offsets) -> None:
        self.name = name
        self.fields = fields
        self.span = span


# ---------------------------------------------------------------------------------------------
# Patterns and statements


class NamePattern(Pattern):
    __slots__ = _fields = ("name", "span")

    def __init__(self, name: str, span: Offsets) -> None:
        self.name = name  # "_" is a wildcard
        self.span = span


class TuplePattern(Pattern):
    __slots__ = _fields = ("elts", "span")

    def __init__(self, elts: tuple[Pattern, ...], span: Offsets) -> None:
        self.elts = elts
        self.span = span


class Let(Stmt):
    """``let [mut] target [: type] = value``."""

    __slots__ = _fields = ("target", "type", "value", "span", "mutable")

    def __init__(self, target: Pattern, type: Type | None, value: Expr, span: Offsets,
                 mutable: bool = False) -> None:
        self.target = target
        self.type = type
        self.value = value
        self.mutable = mutable
        self.span = span


class Assign(Stmt):
    """``target = value`` or ``target op= value`` (``op`` one of ``ASSIGN_OPS``, else ``None``).

    ``target`` is a ``Name`` (rebinding), an ``Attribute`` (a struct field) or an ``Index``
    (an element or a window of a tensor); each assignment gives the target a new value."""

    __slots__ = _fields = ("target", "op", "value", "span")

    def __init__(self, target: Expr, op: str | None, value: Expr, span: Offsets) -> None:
        self.target = target
        self.op = op
        self.value = value
        self.span = span


class Return(Stmt):
    __slots__ = _fields = ("value", "span")

    def __init__(self, value: Expr | None, span: Offsets) -> None:
        self.value = value
        self.span = span


class ExprStmt(Stmt):
    __slots__ = _fields = ("expr", "span")

    def __init__(self, expr: Expr, span: Offsets) -> None:
        self.expr = expr
        self.span = span


class Block(Node):
    """``{ stmts; tail }``.

    ``tail`` is the final statement when it is an expression statement (the value of the block);
    as in the public compiler, a ``;`` after it does not discard it.  ``stmts`` excludes the tail.
    """

    __slots__ = _fields = ("stmts", "tail", "span")

    def __init__(self, stmts: tuple[Stmt, ...], tail: Expr | None, span: Offsets) -> None:
        self.stmts = stmts
        self.tail = tail
        self.span = span


class FnDef(Stmt):
    """``fn name(params) [-> ret] { body }``; may appear at top level or inside a block."""

    __slots__ = _fields = ("name", "params", "ret", "body", "span", "name_span")

    def __init__(self, name: str, params: tuple[Param, ...], ret: Type | None, body: Block, span: Offsets,
                 name_span: Offsets) -> None:
        self.name = name
        self.params = params
        self.ret = ret
        self.body = body
        self.span = span
        self.name_span = name_span


class StructDef(Stmt):
    """``struct Name { field: Type, ... }``: a named tuple of tensors."""

    __slots__ = _fields = ("name", "fields", "span", "name_span")

    def __init__(self, name: str, fields: tuple[Param, ...], span: Offsets, name_span: Offsets) -> None:
        self.name = name
        self.fields = fields
        self.span = span
        self.name_span = name_span


class ConstDef(Stmt):
    """``const NAME [: type] = value``: a named constant, visible in every function after it."""

    __slots__ = _fields = ("name", "type", "value", "span", "name_span")

    def __init__(self, name: str, type: Type | None, value: Expr, span: Offsets, name_span: Offsets) -> None:
        self.name = name
        self.type = type
        self.value = value
        self.span = span
        self.name_span = name_span


class For(Stmt):
    """``for target in iter { body }``."""

    __slots__ = _fields = ("target", "iter", "body", "span")

    def __init__(self, target: Pattern, iter: Expr, body: Block, span: Offsets) -> None:
        self.target = target
        self.iter = iter
        self.body = body
        self.span = span


class While(Stmt):
    """``while cond { body }``."""

    __slots__ = _fields = ("cond", "body", "span")

    def __init__(self, cond: Expr, body: Block, span: Offsets) -> None:
        self.cond = cond
        self.body = body
        self.span = span


class Loop(Stmt):
    """``loop { body }`` (left with ``break``)."""

    __slots__ = _fields = ("body", "span")

    def __init__(self, body: Block, span: Offsets) -> None:
        self.body = body
        self.span = span


class Break(Stmt):
    __slots__ = _fields = ("span",)

    def __init__(self, span: Offsets) -> None:
        self.span = span


class Continue(Stmt):
    __slots__ = _fields = ("span",)

    def __init__(self, span: Offsets) -> None:
        self.span = span


class Import(Stmt):
    """``import a::b::c`` (``path=("a","b","c")``, ``names=None``) or
    ``import a::b::{c, d}`` (``path=("a","b")``, ``names=("c","d")``); ``.`` may replace ``::``."""

    __slots__ = _fields = ("path", "names", "span")

    def __init__(self, path: tuple[str, ...], names: tuple[str, ...] | None, span: Offsets) -> None:
        self.path = path
        self.names = names
        self.span = span


class Module(Node):
    """A source file: top-level statements in order and the program result.

    ``result`` is the final top-level statement when it is an expression statement (the public
    compiler's "last expression is the result" rule); ``stmts`` excludes it.  ``source`` maps
    offsets to line/column spans (see ``lexer.SourceMap``); it is not one of the ``_fields`` (not
    compared, hashed or shown).
    """

    __slots__ = ("stmts", "result", "span", "source")
    _fields = ("stmts", "result", "span")

    def __init__(self, stmts: tuple[Stmt, ...], result: Expr | None, span: Offsets, source: Any) -> None:
        self.stmts = stmts
        self.result = result
        self.span = span
        self.source = source

    def __reduce__(self) -> tuple:
        # ``source`` is no field, but the constructor needs it (and a pickle should keep it).
        return (type(self), (self.stmts, self.result, self.span, self.source))

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


def _child_fields(cls: type[Node]) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(name for name in cls._fields if name not in ("span", "name_span", "target_span"))
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
        return node if node and (node.isidentifier() or all(c in "+-*/%@<>=!&|." for c in node)) \
            else repr(node)
    return repr(node)
