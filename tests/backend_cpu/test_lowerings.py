"""The op lowering table of the target-neutral middle: one lowering per op of the spec, each writing
MLIR that parses and verifies (a new op of the spec fails here until it has a lowering)."""

from __future__ import annotations

import pytest

from mind.compiler.backend.linalg.emit import emit_mlir
from mind.compiler.backend.linalg.lowerings import LOWERINGS
from mind.calling import select_function
from mind.ir.parser import parse_module
from mind.spec.ops import OPS


def test_the_table_has_one_lowering_per_op_of_the_spec():
    assert list(LOWERINGS) == list(OPS)


@pytest.mark.parametrize("op", list(OPS))
def test_each_lowering_writes_mlir_that_verifies(op):
    """Every op's own examples in the spec (``OpDef.examples``), lowered alone and parsed by MLIR."""
    from mlir import ir
    examples = OPS[op].examples
    assert examples, f"{op} has no example"
    for ex in examples:
        fn = select_function(parse_module(ex.ir, f"{op} example"), None)
        text, _name = emit_mlir(fn, {})
        assert f"// {op} -> " in text
        with ir.Context(), ir.Location.unknown():
            assert ir.Module.parse(text).operation.verify()
