"""Every spec example is a test; every constraint label has a negative test."""

from __future__ import annotations


import numpy as np
import pytest

from mind.conformance.encoding import from_literal
from mind.conformance.generate.handwritten import negative_irs
from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.ir.verify import check_module
from mind.reference.accuracy import accumulation
from mind.calling import run_reference, select_function
from mind.spec import accuracy
from mind.spec.errors import CODES
from mind.spec.ops import OPS



NEGATIVE = negative_irs()

EXAMPLES = [(op.name, k, ex) for op in OPS.values() for k, ex in enumerate(op.examples)]
LABELS = [f"{op.name}.{c.label}" for op in OPS.values() for c in op.constraints]


def test_every_op_has_an_example():
    assert {name for name, _, _ in EXAMPLES} == set(OPS)


@pytest.mark.parametrize("name,k,ex", EXAMPLES, ids=[f"{n}_{k}" for n, k, _ in EXAMPLES])
def test_spec_example(name, k, ex):
    module = parse_module(ex.ir)
    assert check_module(module) == []
    fn = select_function(module, None)
    params = {p.name: p for p in fn.params}
    args = {}
    for pname, lit in ex.inputs.items():
        arr = from_literal(lit, params[pname].type.dtype)
        shape = params[pname].type.shape
        if arr.size == 0 and all(isinstance(d, int) for d in shape):
            arr = arr.reshape(shape)
        args[pname] = arr
    got = run_reference(fn, args)
    assert len(got) == len(ex.expected)
    producers = {id(op.result): op for op in fn.ops}
    for i, (res, lit, t) in enumerate(zip(got, ex.expected, fn.result_types)):
        want = from_literal(lit, t.dtype).reshape(res.shape) if np.size(lit) == 0 else from_literal(lit, t.dtype)
        op = producers.get(id(fn.results[i]))
        cls = OPS[op.op].accuracy if op is not None else "exact"
        extra = {}
        if accuracy.get(cls).kind == "sum" and t.dtype.is_float:
            operands = [args[v.name] if v.name in args else None for v in op.operands]
            if all(o is not None for o in operands):
                extra["n"], extra["abs_sum"] = accumulation(op.op, operands, op.attrs)
            else:
                cls = "exact"
        mismatch = accuracy.check(cls, t.dtype, res, want, **extra)
        assert mismatch is None, f"result {i}: {mismatch}"


def test_every_label_has_a_negative_ir():
    assert sorted(NEGATIVE) == sorted(LABELS)


def test_every_constraint_code_exists():
    for op in OPS.values():
        for c in op.constraints:
            assert c.code in CODES, (op.name, c.label)


_KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("label", [pytest.param(l, marks=pytest.mark.xfail(strict=True, reason=_KNOWN[l]))
                                   if l in _KNOWN else l for l in LABELS])
def test_negative_case_per_label(label):
    opname, c = label.split(".")
    cdef = OPS[opname].constraint(c)
    try:
        module = parse_module(NEGATIVE[label])
        diags = check_module(module)
    except MindError as exc:
        diags = exc.diagnostics
    assert diags, f"{label}: the IR was accepted"
    assert len(diags) == 1, [d.message for d in diags]
    assert diags[0].code == cdef.code
    assert diags[0].label == label
    if opname != "const":  # verifier diagnostics also quote the constraint
        assert any(label in n for n in diags[0].notes)
