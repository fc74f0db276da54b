"""The VJP rules need nothing but the spec's ``VjpBuilder`` protocol, and the IR layer's
``FunctionBuilder``, ``Value`` and ``Operation`` provide everything the protocols promise."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from mind.ir.builder import FunctionBuilder
from mind.ir.parser import parse_module
from mind.spec.ops import OPS, TensorType
from mind.spec.ops.base import VjpBuilder, VjpOp, VjpValue
from mind.spec.ops.vjp import same_shape


def _members(protocol: type) -> set[str]:
    """The attributes and methods a protocol declares (its own, not ``Protocol``'s)."""
    own = vars(protocol)
    return set(own.get("__annotations__", {})) | {
        name for name, v in own.items() if not name.startswith("_") and (callable(v) or isinstance(v, property))}


class ProtocolOnly:
    """A builder with exactly ``VjpBuilder``'s members, delegating to a ``FunctionBuilder``: a rule
    that reaches for anything else (``b.ops``, ``b.param``, …) fails with AttributeError."""

    __slots__ = ("_b",)

    def __init__(self, b: FunctionBuilder) -> None:
        self._b = b

    @property
    def arith(self) -> Any:
        return self._b.arith

    def emit(self, op: str, *operands: Any, span: Any = None, name: str | None = None, **attrs: Any) -> Any:
        return self._b.emit(op, *operands, span=span, name=name, **attrs)

    def const(self, value: Any, dtype: Any, span: Any = None) -> Any:
        return self._b.const(value, dtype, span)

    def splat(self, scalar: Any, dtype: Any, shape: Any, span: Any = None) -> Any:
        return self._b.splat(scalar, dtype, shape, span)


def test_protocol_only_builder_has_exactly_the_protocol():
    assert _members(ProtocolOnly) == _members(VjpBuilder) == {"arith", "emit", "const", "splat"}


def test_function_builder_implements_the_protocol():
    for name in _members(VjpBuilder):
        declared, actual = getattr(VjpBuilder, name), getattr(FunctionBuilder, name)
        assert isinstance(actual, property) == isinstance(declared, property), name
        if isinstance(declared, property):
            continue
        params = inspect.signature(actual).parameters
        for p in inspect.signature(declared).parameters.values():
            assert p.name in params and params[p.name].kind == p.kind, (name, p.name)


def _example_ops():
    """Every op application in every op's examples, as (op name, example function)."""
    for opdef in OPS.values():
        for ex in opdef.examples:
            for fn in parse_module(ex.ir, f"<{opdef.name} example>").functions:
                yield opdef.name, fn


@pytest.mark.parametrize("name,fn", list(_example_ops()), ids=lambda x: x if isinstance(x, str) else "")
def test_each_rule_runs_on_the_protocol_alone(name, fn):
    """Each rule, applied to each op of its examples through ``ProtocolOnly``, returns per operand
    None or a cotangent of the operand's type; so the rules use nothing outside the protocol, and
    ``Value``/``Operation`` carry what ``VjpValue``/``VjpOp`` declare."""
    b = FunctionBuilder(fn.name, fn.assumptions)
    copies = {id(p): b.param(p.name, p.type) for p in fn.params}
    for op in fn.ops:
        copies[id(op.result)] = b.emit(op.op, *(copies[id(v)] for v in op.operands), **op.attrs)
    for op in list(b.ops):
        if op.op != name:
            continue
        assert all(hasattr(op, m) for m in _members(VjpOp)) and all(hasattr(op.result, m) for m in _members(VjpValue))
        g = b.param(f"g{len(b.params)}", op.result.type)
        cotangents = OPS[name].vjp(ProtocolOnly(b), op, g, tuple(True for _ in op.operands))
        assert len(cotangents) == len(op.operands)
        for v, c in zip(op.operands, cotangents):
            if c is not None:
                assert isinstance(c.type, TensorType) and c.type.dtype is v.type.dtype
                assert same_shape(b.arith, c.type.shape, v.type.shape), (name, c.type, v.type)


def test_every_rule_is_exercised_by_an_example():
    assert {name for name, _ in _example_ops()} == set(OPS)
