"""Every VJP rule: sympy proofs (elementwise), adjoint identity (linear/structural, hypothesis),
Z3 shape proofs, and finite differences."""

from __future__ import annotations

import pytest

from mind.spec.ops import OPS
from mind.spec.ops.vjp import no_cotangent
from mind.verify import autodiff_adjoint, autodiff_fd, autodiff_sympy, autodiff_z3

# Every op whose rule can give a cotangent (all but compare and const), read from the op table so
# that a new op is covered without listing it here.
DIFFERENTIABLE = tuple(name for name, op in OPS.items() if op.vjp is not no_cotangent)


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_a_vjp_rule_and_text(name):
    assert OPS[name].vjp is not None
    assert OPS[name].vjp_text


@pytest.mark.parametrize("rule", autodiff_sympy.ELEMENTWISE_RULES)
def test_elementwise_rule_equals_sympy_diff(rule):
    verdict, detail = autodiff_sympy.prove_rule(rule)
    assert verdict == "proved", detail


def test_sympy_check_refutes_a_wrong_rule(monkeypatch):
    def wrong(b, op, g, wants):  # d exp = g (missing the factor exp(x))
        return [g]
    monkeypatch.setattr(OPS["exp"], "vjp", wrong)
    assert autodiff_sympy.prove_rule("exp")[0] == "refuted"


@pytest.mark.parametrize("rule", autodiff_adjoint.LINEAR_RULES)
def test_adjoint_identity(rule):
    verdict, detail = autodiff_adjoint.run_rule(rule, examples=15)
    assert verdict == "passed", detail


def test_adjoint_check_catches_a_wrong_rule(monkeypatch):
    def wrong(b, op, g, wants):  # the forward permutation instead of its inverse
        return [b.emit("transpose", g, permutation=tuple(op.attrs["permutation"]))]
    monkeypatch.setattr(OPS["transpose"], "vjp", wrong)
    case = autodiff_adjoint.LinearCase("transpose", [autodiff_adjoint._T((2, 3, 4))], {"permutation": (1, 2, 0)})
    with pytest.raises(Exception):
        ok, _, _ = autodiff_adjoint.check_adjoint(case)
        assert ok


@pytest.mark.parametrize("name,proof", autodiff_z3.all_proofs(), ids=[n for n, _ in autodiff_z3.all_proofs()])
def test_cotangent_shape_equals_operand_shape_z3(name, proof):
    verdict, detail = proof()
    assert verdict == "proved", detail


@pytest.mark.parametrize("case", autodiff_fd.rule_cases(), ids=lambda c: c.name)
def test_rule_against_finite_differences(case):
    res = autodiff_fd.check_case(case)
    assert res.ok, res


def test_every_differentiable_op_has_a_finite_difference_case():
    names = {c.name.split("/")[0] for c in autodiff_fd.rule_cases()}
    assert set(DIFFERENTIABLE) <= names
