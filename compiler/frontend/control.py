"""Statements and control flow: what the compiler keeps static, and what becomes ``select``.

The design (``docs/frontend.md``, "Control flow"):

* A mutable local is SSA renaming: ``x = e`` binds ``x`` to a new value in the scope that holds
  it.  An assignment keeps the variable's type (dtype and shape; a literal takes the dtype), so a
  loop-carried tensor has the same type in every iteration.
* Loops run at compile time: ``for`` over a range with bounds known at compile time, over a tuple
  or over the rows of a tensor of static extent is unrolled; ``while`` and ``loop`` need a
  condition known at compile time in every iteration.  ``break`` and ``continue`` are allowed
  where they are reached unconditionally or under a condition known at compile time.
* ``if`` on a condition known at compile time elaborates one branch.  ``if`` on a rank-0 bool
  tensor elaborates both (they are pure) under a path condition, and joins every variable either
  branch assigns, and the two values, with ``select``; both sides must have the same type.
* ``return`` under a tensor condition is recorded with its path condition; the function's result
  is ``select(p1, r1, select(p2, r2, ... result))``, the earliest return first.

Everything here is a function of the ``Elaborator`` (``E``) and an AST node.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Value
from mind.spec.dims import format_dim
from mind.spec.dtypes import DType

from . import ast as A
from . import litexpr
from .indexing import index_update, take_row
from .litexpr import LITERALS, LitExpr
from .values import POISON, ArrLit, Closure, FnRef, Lit, Scope, StructVal, Tup, describe

#: Loop iterations run at compile time per function (all loops together), E1012 beyond.
MAX_LOOP_ITERATIONS = 100_000
_KINDS = {"int": lambda d: d.is_int, "float": lambda d: d.is_float, "bool": lambda d: d is DType.BOOL}


class Returns:
    """The ``return`` statements of one function body: the one reached unconditionally (if any)
    and those reached under a tensor path condition, in program order."""

    __slots__ = ("value", "conditional")

    def __init__(self) -> None:
        self.value: Any = None
        self.conditional: list[tuple[Value, Any, tuple[int, int]]] = []


# -- statements -------------------------------------------------------------------------------

def run(E: Any, stmts: Any) -> None:
    """Elaborate ``stmts`` in order until one transfers control (``return``/``break``/``continue``
    reached unconditionally): what follows it is not elaborated."""
    for s in stmts:
        if E.flow is not None:
            return
        t = type(s)
        if t is A.Let:
            E.let(s)
        elif t is A.ExprStmt:
            E.ev(s.expr)
        else:
            rule = _RULES.get(t)
            if rule is not None:
                rule(E, s)
            # FnDef, StructDef, ConstDef and Import were hoisted


def return_stmt(E: Any, s: A.Return) -> None:
    v = E.ev(s.value) if s.value is not None else Tup((), s.span)
    if E.path is None:
        E.returns.value = v
        E.flow = "return"
    else:
        E.returns.conditional.append((E.path, v, s.span))


def finish(E: Any, value: Any, off: tuple[int, int]) -> Any:
    """The function's result: the unconditional ``return`` (or ``value``, the body's tail),
    preceded by the returns under tensor conditions."""
    r = E.returns
    if E.flow == "return":
        value = r.value
    E.flow = None
    for pred, v, span in reversed(r.conditional):
        value = merge(E, pred, v, value, span, "this `return` and the function's other results")
    return value


def jump(E: Any, s: A.Stmt) -> None:
    word = "break" if type(s) is A.Break else "continue"
    if not E.loop_depth:
        E.report("E1010", f"`{word}` outside a loop", s.span, "`break` and `continue` belong in "
                 "the body of `for`, `while` or `loop`")
        return
    if E.path is not None:
        E.report("E2011", f"`{word}` under a condition computed at run time", s.span,
                 "loops run at compile time, so their trip count must be known then: compute the "
                 "condition from constants and loop indices, or keep iterating and choose values "
                 "with `if`/`where`")
        return
    E.flow = word


def assign(E: Any, s: A.Assign) -> None:
    target = s.target
    value_node = s.value if s.op is None else A.Binary(s.op, target, s.value, s.span)
    t = type(target)
    root = target
    while type(root) is not A.Name:  # `p.w[0] = ...`: the variable is the innermost name
        if type(root) not in (A.Attribute, A.Index):
            E.report("E1010", "only a name, a field `s.f` or an element `x[i]` can be assigned to",
                     root.span)
            return
        root = root.value
    scope = E.scope.owner(root.id)
    if scope is None:
        found, _ = E.scope.lookup(root.id)
        if found is not None:
            E.report("E2002", f"cannot assign to `{root.id}`: it belongs to an enclosing function",
                     root.span, f"make a new binding: `let {root.id} = ...`")
        else:
            E.report("E2002", f"cannot assign to `{root.id}`: it is not defined", root.span,
                     f"declare it first: `let mut {root.id} = ...`")
        E.ev(s.value)
        return
    new = E.ev(value_node)
    if new is POISON:
        return
    if t is not A.Name:
        new = _update(E, target, new)
        if new is POISON:
            return
    old = scope.names[root.id]
    try:
        new = keep_type(E, old, new, s.value.span, f"`{root.id}`")
    except E.Reported:
        return
    E.assign_var(scope, root.id, new)


def _update(E: Any, target: A.Expr, new: Any) -> Any:
    """The value of the variable at the root of ``target`` after ``target = new`` (a struct with
    one field replaced, a tensor with a window replaced), built from the inside out."""
    base = E.ev(target.value)
    if base is POISON:
        return POISON
    try:
        if type(target) is A.Attribute:
            if type(base) is not StructVal or target.attr not in base.info.fields:
                E.attribute(target)  # reports why
                return POISON
            old = base.field(target.attr)
            updated = base.replace(target.attr, keep_type(E, old, new, target.span, f"`{target.attr}`"))
        else:
            updated = index_update(E, base, target, new)
    except E.Reported:
        return POISON
    if type(target.value) is A.Name:
        return updated
    return _update(E, target.value, updated)


def keep_type(E: Any, old: Any, new: Any, off: tuple[int, int], what: str) -> Any:
    """``new`` as the next value of a variable holding ``old``: same dtype and shape (a literal
    takes the variable's dtype; a variable holding a literal may become a tensor of that kind)."""
    if old is POISON or new is POISON:
        return new
    to, tn = type(old), type(new)
    if to in LITERALS:
        if tn in LITERALS:
            if new.kind != old.kind and not (old.kind == "float" and new.kind == "int"):
                raise E.fail("E2004", f"{what} holds a {old.kind} literal; the new value is a "
                                      f"{new.kind} literal", off, "an assignment keeps the variable's type")
            return new
        if tn is Value and _KINDS[old.kind](new.type.dtype):
            return new
        if tn is ArrLit and (new.kind == old.kind or old.kind == "float"):
            return new
    elif to is Value:
        if tn in LITERALS or tn is ArrLit:
            new = E.materialize(new, old.type.dtype)
            if new.type.rank == 0 and old.type.rank:
                new = _broadcast(E, new, old, off)
            tn = Value
        if tn is Value:
            _same_type(E, old, new, off, what + " has type {a}; the new value has type {b}",
                       "an assignment keeps the variable's type; use `let` for a new variable")
            return new
    elif to is Tup and tn is Tup and len(old.items) == len(new.items):
        return Tup([keep_type(E, a, b, off, what) for a, b in zip(old.items, new.items)], new.span)
    elif to is StructVal and tn is StructVal and old.info is new.info:
        return StructVal(old.info, [keep_type(E, a, b, off, what) for a, b in zip(old.items, new.items)],
                         new.span)
    raise E.fail("E2001", f"{what} holds {describe(old)}; the new value is {describe(new)}", off,
                 "an assignment keeps the variable's type; use `let` for a new variable")


def _broadcast(E: Any, v: Value, like: Value, off: tuple[int, int]) -> Value:
    """The rank-0 ``v`` broadcast to the shape of ``like`` (``select`` broadcasts its operands)."""
    return E.emit("select", (E.const(True, DType.BOOL), v, like), off, "=")


def _same_type(E: Any, a: Value, b: Value, off: tuple[int, int], message: str, help: str) -> None:
    """E2001 unless ``a`` and ``b`` have the same dtype and shape; ``message`` is formatted with the
    two types (``{a}``, ``{b}``)."""
    ta, tb = a.type, b.type
    if ta.dtype is tb.dtype and ta.rank == tb.rank:
        arith = E.b.arith
        if all(arith.eq(x, y) is True for x, y in zip(ta.shape, tb.shape)):
            return
    raise E.fail("E2001", message.format(a=E.fmt_type(ta), b=E.fmt_type(tb)), off, help)


# -- if ---------------------------------------------------------------------------------------

def static_bool(E: Any, c: Any, node: A.Expr, what: str) -> bool | None:
    """The value of the condition ``c`` if it is known at compile time, ``None`` for a rank-0 bool
    tensor computed at run time; anything else is a diagnostic (raises ``Reported``)."""
    t = type(c)
    if t is LitExpr and c.kind == "bool":
        known = litexpr.constant(E, c)
        if known is not None:
            return bool(known)
        c = E.materialize(c)
        t = Value
    if t is Lit:
        if c.kind == "bool":
            return bool(c.value)
        raise E.fail("E2004", f"{what} must be a bool, found a {c.kind} literal", node.span,
                     "compare: `x != 0`")
    if t is Value:
        if c.type.dtype is not DType.BOOL:
            raise E.fail("E2004", f"{what} must be a bool, found {E.fmt_type(c.type)}", node.span,
                         "compare: `x > 0.0`")
        if c.type.rank != 0:
            raise E.fail("E3002", f"{what} must be a scalar, found {E.fmt_type(c.type)}", node.span,
                         "for an elementwise choice write `where(cond, a, b)`")
        known = E.static.of(c)
        return None if known is None else bool(known)
    raise E.fail("E2004", f"{what} must be a bool, found {describe(c)}", node.span)


def if_expr(E: Any, node: A.If) -> Any:
    c = E.ev(node.cond)
    if c is POISON:
        return POISON
    known = static_bool(E, c, node.cond, "the condition of `if`")
    if known is not None:
        branch = node.then if known else node.orelse
        return _eval_branch(E, branch, node.span)
    if E.b is None:  # pragma: no cover - always inside a function
        raise E.fail("E2011", "a condition computed at run time outside a function", node.span)
    outer = E.scope.chain()
    not_c = E.emit("compare", (c, E.const(False, DType.BOOL)), node.cond.span, "if", direction="eq")
    v1, w1 = _branch(E, node.then, _and(E, E.path, c, node), node.span, outer)
    v2, w2 = _branch(E, node.orelse, _and(E, E.path, not_c, node), node.span, outer)
    for key in list(w1) + [k for k in w2 if k not in w1]:
        scope, name = (w1.get(key) or w2[key])[:2]
        old = scope.names[name]
        a = w1[key][2] if key in w1 else old
        b = w2[key][2] if key in w2 else old
        E.assign_var(scope, name, merge(E, c, a, b, node.span, f"the values `{name}` gets in the "
                                                                 f"branches of `if`"))
    if type(v1) is Tup and type(v2) is Tup and not v1.items and not v2.items:
        return v1
    return merge(E, c, v1, v2, node.span, "the branches of `if`")


def _eval_branch(E: Any, branch: Any, off: tuple[int, int]) -> Any:
    if branch is None:
        return Tup((), off)
    if type(branch) is A.If:
        return if_expr(E, branch)
    return E.block(branch)


def _and(E: Any, path: Value | None, c: Value, node: A.If) -> Value:
    if path is None:
        return c
    return E.emit("select", (path, c, E.const(False, DType.BOOL)), node.cond.span, "if")


def _branch(E: Any, branch: Any, pred: Value, off: tuple[int, int],
            outer: set[int]) -> tuple[Any, dict]:
    """Elaborate one branch of a tensor ``if`` under the path condition ``pred``; its assignments
    to variables outside it are undone and returned as {key: (scope, name, new value)}."""
    saved_path, saved_log = E.path, E.assign_log
    E.path = pred
    log: list[tuple[Scope, str, Any]] = []
    E.assign_log = log
    try:
        value = _eval_branch(E, branch, off)
    finally:
        E.path, E.assign_log = saved_path, saved_log
    writes: dict[tuple[int, str], tuple[Scope, str, Any]] = {}
    for scope, name, old in reversed(log):
        key = (id(scope), name)
        if key not in writes:
            writes[key] = (scope, name, scope.names[name])
        scope.names[name] = old
    return value, {k: w for k, w in reversed(list(writes.items())) if k[0] in outer}


def merge(E: Any, c: Value, a: Any, b: Any, off: tuple[int, int], what: str) -> Any:
    """``select(c, a, b)`` for values of one type (tuples and structs item by item)."""
    if a is POISON or b is POISON:
        return POISON
    ta, tb = type(a), type(b)
    if ta is Tup and tb is Tup and len(a.items) == len(b.items):
        return Tup([merge(E, c, x, y, off, what) for x, y in zip(a.items, b.items)], off)
    if ta is StructVal and tb is StructVal and a.info is b.info:
        return StructVal(a.info, [merge(E, c, x, y, off, what) for x, y in zip(a.items, b.items)], off)
    if ta is Lit and tb is Lit and a.kind == b.kind and a.value == b.value and a.text == b.text:
        return a
    if ta in LITERALS and tb in LITERALS:
        chosen = litexpr.choose(c, a, b, off)
        if chosen is not None:
            return chosen
    if (ta is FnRef or ta is Closure) and a is b:
        return a
    if ta in (Lit, ArrLit, Value, LitExpr) and tb in (Lit, ArrLit, Value, LitExpr):
        try:
            x, y = E.pair(a, b, off)
        except E.Reported:
            return POISON
        if x is POISON or y is POISON:
            return POISON
        _same_type(E, x, y, off, what + " differ: {a} and {b}",
                   "both sides must have the same type: a condition computed at run time evaluates "
                   "both and selects")
        return E.emit("select", (c, x, y), off, "if")
    raise E.fail("E2001", f"{what} differ: {describe(a)} and {describe(b)}", off,
                 "both sides must have the same type")


# -- loops ------------------------------------------------------------------------------------

def for_stmt(E: Any, s: A.For) -> None:
    items = iteration_values(E, s.iter)
    if items is None:
        return
    for v in items:
        if not _iterate(E, s.body, s, lambda scope, v=v: E.bind_in(scope, s.target, v)):
            return


def while_stmt(E: Any, s: A.While) -> None:
    while True:
        c = E.ev(s.cond)
        if c is POISON:
            return
        try:
            known = static_bool(E, c, s.cond, "the condition of `while`")
        except E.Reported:
            return
        if known is None:
            E.report("E2011", "`while` needs a condition known at compile time; this one is "
                              "computed at run time", s.cond.span,
                     "loops run at compile time: iterate over a range with constant bounds, "
                     "`for i in 0..n { ... }`, and choose values with `if`/`where`")
            return
        if not known or not _iterate(E, s.body, s, None):
            return


def loop_stmt(E: Any, s: A.Loop) -> None:
    while _iterate(E, s.body, s, None):
        pass


def _iterate(E: Any, body: A.Block, s: A.Stmt, bind: Any) -> bool:
    """Run one iteration of a loop body; false when the loop ends (``break``, ``return``, an
    error or the iteration budget)."""
    E.loop_budget -= 1
    if E.loop_budget < 0:
        E.report("E1012", f"the loops of this function run more than {MAX_LOOP_ITERATIONS} "
                          f"iterations at compile time", s.span,
                 "loops are unrolled: use tensor operations over whole axes instead")
        return False
    n_diags = len(E.diags)
    saved = E.scope
    scope = Scope(saved)
    if bind is not None:
        bind(scope)
    E.scope = scope
    E.loop_depth += 1
    try:
        E.block(body)
    finally:
        E.scope = saved
        E.loop_depth -= 1
    flow = E.flow
    if flow == "break":
        E.flow = None
        return False
    if flow == "continue":
        E.flow = None
    return flow != "return" and len(E.diags) == n_diags


def iteration_values(E: Any, node: A.Expr) -> list[Any] | None:
    """What ``for`` iterates over: the integers of a range (``a..b``, ``a..=b``, ``range(...)``,
    with ``.rev()`` / ``.step_by(k)``), the items of a tuple, or the rows of a tensor of static
    extent.  ``None`` after a diagnostic."""
    try:
        return _iteration_values(E, node)
    except E.Reported:
        return None


def _iteration_values(E: Any, node: A.Expr) -> list[Any] | None:
    t = type(node)
    if t is A.Range:
        if node.start is None or node.stop is None:
            raise E.fail("E2011", "a loop range needs both bounds", node.span, "e.g. `0..n`")
        lo = loop_bound(E, node.start, "the start of the range")
        hi = loop_bound(E, node.stop, "the end of the range")
        return _ints(E, range(lo, hi + 1 if node.inclusive else hi), node)
    if t is A.Call and node.name == "range" and not node.kwargs and 1 <= len(node.args) <= 3:
        bounds = [loop_bound(E, a, "a bound of `range`") for a in node.args]
        if len(bounds) == 3 and bounds[2] == 0:
            raise E.fail("E3006", "the step of `range` cannot be 0", node.args[2].span)
        return _ints(E, range(*bounds), node)
    if t is A.Call and type(node.func) is A.Attribute and node.func.attr in ("rev", "step_by"):
        inner = _iteration_values(E, node.func.value)
        if inner is None:
            return None
        if node.func.attr == "rev" and not node.args:
            return inner[::-1]
        if node.func.attr == "step_by" and len(node.args) == 1:
            k = E.static_int(node.args[0], "the step")
            if k <= 0:
                raise E.fail("E3006", "`step_by` needs a positive step", node.args[0].span)
            return inner[::k]
    v = E.ev(node)
    if v is POISON:
        return None
    if type(v) is Tup:
        return list(v.items)
    if type(v) is ArrLit:
        v = E.materialize(v)
    if type(v) is Value and v.type.rank >= 1:
        n = v.type.shape[0]
        if type(n) is not int:
            raise E.fail("E2011", f"`for` over a tensor needs a static first extent, found "
                                  f"{format_dim(n)}", node.span,
                         "loops run at compile time: give the axis a concrete size")
        return [take_row(E, v, i, node.span) for i in range(n)]
    raise E.fail("E2011", f"`for` iterates over a range with bounds known at compile time, a tuple "
                          f"or a tensor; found {describe(v)}", node.span, "e.g. `for i in 0..n { ... }`")


def loop_bound(E: Any, node: A.Expr, what: str) -> int:
    """An integer known at compile time for a loop bound (E2011 for one computed at run time)."""
    v = E.ev(node)
    if v is POISON:
        raise E.Reported()
    if type(v) is Lit and v.kind == "int":
        return v.value
    if type(v) is Value and v.type.dtype.is_int and v.type.rank == 0:
        known = E.static.of(v)
        if known is not None:
            return int(known)
        raise E.fail("E2011", f"{what} is computed at run time; loops run at compile time", node.span,
                     "use a bound known at compile time (a literal, a `const`, a loop index), or "
                     "compute over whole axes with tensor operations")
    raise E.fail("E2009", f"{what} must be an integer, found {describe(v)}", node.span)


def _ints(E: Any, r: range, node: A.Expr) -> list[Lit]:
    if len(r) > MAX_LOOP_ITERATIONS:
        raise E.fail("E1012", f"the loop runs {len(r)} iterations; loops are unrolled at compile time "
                              f"(at most {MAX_LOOP_ITERATIONS})", node.span,
                     "use tensor operations over whole axes instead")
    span = node.span
    return [Lit(i, "int", span) for i in r]


_RULES = {A.Return: return_stmt, A.Assign: assign, A.For: for_stmt, A.While: while_stmt,
          A.Loop: loop_stmt, A.Break: jump, A.Continue: jump}
