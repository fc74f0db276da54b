"""print → parse → print is byte-identical and the hash is stable, on generated modules."""

from __future__ import annotations

import os
import sys

from hypothesis import given, settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ir_strategies import OPS_USED, modules
from mind.ir.parser import parse_module
from mind.ir.printer import print_module
from mind.ir.verify import check_module
from mind.spec.ops import OPS


@given(modules())
def test_print_parse_print_is_identical(module):
    assert check_module(module) == []
    text = print_module(module)
    again = parse_module(text)
    assert check_module(again) == []
    assert print_module(again) == text
    assert again.sha256() == module.sha256()
    assert parse_module(print_module(again)).sha256() == module.sha256()


@settings(max_examples=300)
@given(modules())
def test_generator_reaches_every_op(module):
    # (runs first among the roundtrip tests' consumers of OPS_USED below; a cheap property on its own)
    assert module.functions


def test_every_op_was_generated():
    missing = set(OPS) - OPS_USED
    assert not missing, f"the module strategy never emitted {sorted(missing)}"
