"""The record base classes (spec/record.py) and the value classes built on them."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from mind.compiler.frontend import ast as A
from mind.compiler.frontend.parser import parse
from mind.diagnostics import Diagnostic, Span
from mind.ir.core import Assumption
from mind.spec.dims import Atom, DimExpr, Facts, Unknown
from mind.spec.dtypes import DType
from mind.spec.errors import ErrorCode
from mind.spec.ops import OPS
from mind.spec.ops.base import AttrDef, ConstraintDef, Example, OperandDef, TensorType
from mind.spec.record import FrozenRecord, Record


class Point(FrozenRecord):
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: int = 0) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)


class Point3(Point):
    __slots__ = ("z",)

    def __init__(self, x: int, y: int = 0, z: int = 0) -> None:
        super().__init__(x, y)
        object.__setattr__(self, "z", z)


class SubPoint(Point):
    __slots__ = ()


class One(Record):
    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v


class Empty(Record):
    __slots__ = ()


class Box(Record):
    _fields = ("items",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, items: list[int]) -> None:
        self.items = items
        self.cache = "not a field"


def test_fields_from_slots_and_inheritance():
    assert Point._fields == ("x", "y")
    assert Point3._fields == ("x", "y", "z")
    assert SubPoint._fields == ("x", "y")
    assert One._fields == ("v",)
    assert Empty._fields == ()
    assert Box._fields == ("items",)
    assert Point3(1, 2, 3)._values() == (1, 2, 3)
    assert One(5)._values() == (5,)
    assert Empty()._values() == ()


def test_eq_and_hash_by_fields():
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(2, 1)
    assert hash(Point(1, 2)) == hash((1, 2))
    assert hash(One("a")) == hash(("a",))
    assert hash(Empty()) == hash(())
    assert Empty() == Empty()
    assert len({Point(1, 2), Point(1, 2), Point(1, 3)}) == 2


def test_eq_needs_the_exact_class():
    assert Point(1, 2).__eq__(SubPoint(1, 2)) is NotImplemented
    assert Point(1, 2) != SubPoint(1, 2)
    assert Point(1, 2).__eq__((1, 2)) is NotImplemented
    assert Point(1, 2) != (1, 2)
    assert One(1) != Box([1])


def test_repr():
    assert repr(Point(1, "a")) == "Point(x=1, y='a')"
    assert repr(Point3(1)) == "Point3(x=1, y=0, z=0)"
    assert repr(Empty()) == "Empty()"
    assert repr(Box([1])) == "Box(items=[1])"


def test_frozen():
    p = Point(1, 2)
    with pytest.raises(AttributeError, match="cannot assign to field 'x'"):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'y'"):
        del p.y
    with pytest.raises(AttributeError, match="cannot assign to field 'other'"):
        p.other = 1  # type: ignore[attr-defined]
    assert p == Point(1, 2)


def test_mutable_record():
    b = Box([1])
    b.items = [2]
    assert b == Box([2])
    with pytest.raises(TypeError):
        hash(b)
    o = One(1)
    o.v = 2
    assert o == One(2)


@pytest.mark.parametrize("value", [Point(1, 2), Point3(1, 2, 3), SubPoint(4), One((1, 2)), Empty(),
                                   Box([1, 2])])
def test_pickle_and_copy_round_trip(value: Record):
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(value, protocol))
        assert type(back) is type(value) and back == value
    assert copy.copy(value) == value
    assert copy.deepcopy(value) == value


# The classes of the compiler that are records: same behaviour as the dataclasses they replaced.

B = DimExpr.symbol("B")
SPAN = Span("f.mind", 1, 2, 3, 4)
VALUES: list[Any] = [
    Atom("sym", "B"), Atom("max", "", (B, 2)), Unknown("B == 2", B - 2), Unknown("x"),
    ErrorCode("E3001", "title"), TensorType(DType.F32, (2, B)), OperandDef("x", "doc"),
    AttrDef("axis", "int", "doc"), AttrDef("mode", "enum", "doc", ("a", "b")),
    ConstraintDef("C1", "E3001", "text"), Example("t", "ir", (("x", 1),), ((1,),)),
    SPAN, Span("f", 1, 2), Diagnostic("E3001", "msg", SPAN, "matmul.C2", "help", ("n",)),
    Assumption(B, ">=", 1), Facts({"B": (1, 4)}),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_compiler_records(value: Any):
    assert value == value.__class__(*value._values())
    back = pickle.loads(pickle.dumps(value))
    assert back == value and repr(back) == repr(value)
    if type(value).__hash__ is not None:
        assert hash(value) == hash(value._values())
        assert hash(back) == hash(value)
    if isinstance(value, FrozenRecord):
        with pytest.raises(AttributeError, match="cannot assign to field"):
            setattr(value, value._fields[0], None)
        with pytest.raises(AttributeError, match="cannot delete field"):
            delattr(value, value._fields[0])
    assert value.__eq__(object()) is NotImplemented


def test_compiler_record_reprs():
    assert repr(Atom("sym", "B")) == "Atom(kind='sym', name='B', args=())"
    assert repr(Span("f", 1, 2)) == "Span(file='f', line=1, col=2, end_line=None, end_col=None)"
    assert repr(Unknown("x")) == "Unknown(text='x', diff=None, formula=None)"
    assert repr(ErrorCode("E3001", "t")) == "ErrorCode(code='E3001', title='t')"
    assert repr(TensorType(DType.F32, (2,))) == f"TensorType(dtype={DType.F32!r}, shape=(2,))"
    assert repr(Assumption(1, ">=", 0)) == "Assumption(lhs=1, rel='>=', rhs=0)"
    assert repr(Facts({})) == "Facts(bounds={})"
    assert repr(Diagnostic("E3001", "m")) == ("Diagnostic(code='E3001', message='m', span=None, label=None, "
                                             "help=None, notes=(), severity='error')")


def test_match_args_kept():
    match Atom("sym", "B"):
        case Atom(kind, name, args):
            assert (kind, name, args) == ("sym", "B", ())
    assert TensorType.__match_args__ == ("dtype", "shape")
    assert Assumption.__match_args__ == ("lhs", "rel", "rhs")
    assert Unknown.__match_args__ == ("text", "diff", "formula")


def test_opdef_is_an_unhashable_record():
    op = next(iter(OPS.values()))
    assert op == op and repr(op).startswith("OpDef(name=")
    with pytest.raises(TypeError):
        hash(op)


def test_ast_nodes_are_records():
    m = parse("fn f(x: i32) -> i32 { let y = x; y = -y + 1; y }\nf(2)", "t.mind")
    assert m._fields == ("stmts", "result", "span") and "source" not in repr(m)
    again = parse("fn f(x: i32) -> i32 { let y = x; y = -y + 1; y }\nf(2)", "other.mind")
    assert m == again and hash(m) == hash(again)  # the source map is not compared
    back = pickle.loads(pickle.dumps(m))
    assert back == m and back.source is not None
    nodes = list(A.walk(m))
    assert any(isinstance(n, A.Assign) for n in nodes)
    for n in nodes:
        assert pickle.loads(pickle.dumps(n)) == n
        assert hash(n) == hash(n._values())
    extra = [A.StrLit("s", (0, 1)), A.ExprStmt(A.IntLit(1, (0, 1)), (0, 1))]
    for n in extra:
        assert pickle.loads(pickle.dumps(n)) == n
    assert A.IntLit(1, (0, 1)) != A.BoolLit(1, (0, 1))  # exact class
    assert repr(A.IntLit(1, (0, 1))) == "IntLit(value=1, span=(0, 1))"
