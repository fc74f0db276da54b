"""The decision procedure (``mind.ir.decide``): sampling first, Z3 only for what is left, memoized,
lazy about importing Z3, deterministic, and never showing a counterexample that does not
reproduce."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mind.ir.core import Assumption, Function, Operation, Value
from mind.ir.decide import DEFAULT_LIMITS, Decider
from mind.ir.parser import parse_module
from mind.ir.verify import operation_findings
from mind.spec.dims import Decision, Facts, SymArith, sym
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A, B = sym("A"), sym("B")


def _fn(*assumptions: Assumption) -> Function:
    params = [Value("a", TensorType(DType.F32, (A,))), Value("b", TensorType(DType.F32, (B,)))]
    return Function("f", params, [], [], list(assumptions))


def test_sampling_finds_a_counterexample_and_a_witness_without_the_solver():
    fn = _fn()
    arith = fn.arith()
    d = arith.decide(arith.eq(A, B))
    assert d.status == "depends" and d.assignment["A"] != d.assignment["B"]
    assert arith.decider.stats.solver_calls == 0 and arith.decider.stats.sampled == 1


def test_the_solver_proves_what_sampling_cannot_and_is_asked_once():
    fn = _fn(Assumption(A, "==", B))
    arith = fn.arith()
    cond = arith.or_(arith.eq(A, B), arith.eq(A, 1))
    assert arith.decide(cond).status == "holds"
    calls = arith.decider.stats.solver_calls
    assert calls >= 1 and arith.decide(cond).status == "holds"
    assert arith.decider.stats.solver_calls == calls  # remembered


def test_fails_for_every_allowed_value_beyond_the_interval_bounds():
    fn = _fn(Assumption(A, "==", B))
    arith = fn.arith()
    cond = arith.le(A + 1, B)
    assert isinstance(arith.facts, Facts) and not isinstance(cond, bool)  # the cheap path is undecided
    d = arith.decide(cond)
    assert d.status == "fails" and d.assignment["A"] == d.assignment["B"]
    assert arith.truth(cond) is False


def test_without_a_decider_nothing_is_settled():
    fn = _fn(Assumption(A, "==", B))
    arith = fn.arith(limits=None)
    assert arith.decider is None and arith.decide(arith.eq(A, B)).status == "unknown"


class _Lying:
    """A decider whose counterexample is ``env`` whatever it is asked."""

    def __init__(self, fn: Function, env: dict[str, int]):
        self.real = fn.arith().decider
        self.env = env

    def __call__(self, cond):
        return Decision("depends", self.env)

    def allowed(self, env):
        return self.real.allowed(env)


def test_a_counterexample_that_does_not_reproduce_is_never_shown():
    fn = _fn(Assumption(A, "<=", 5))
    x, y = fn.params
    op = Operation("add", (x, y), {}, Value("0", TensorType(DType.F32, (A,))))
    for env in ({"A": 3, "B": 3}, {"A": 9, "B": 2}):  # no failure there; outside the premises
        (f,) = operation_findings(op, SymArith(fn.facts(), _Lying(fn, env)))
        assert f.diag.code == "E3011" and f.counterexample is None
        assert "did not reproduce" in f.diag.message
    (g,) = operation_findings(op, fn.arith())
    assert g.counterexample is not None and g.counterexample["A"] != g.counterexample["B"]


def test_the_first_question_already_respects_the_premises():
    # the premises' symbols are fixed before sampling, whichever question comes first
    fn = _fn(Assumption(A, "==", B))
    arith = fn.arith()
    assert arith.decide(arith.le(A + 1, B)).status == "fails"


def test_premises_with_a_witness_only_the_solver_finds():
    fn = _fn(Assumption(A, "==", B + 100))
    dec = Decider(fn.params, fn.assumptions, fn.facts(), DEFAULT_LIMITS)
    sat = dec.satisfiable()
    assert sat.status == "holds" and sat.assignment["A"] == sat.assignment["B"] + 100


SAMPLED_ONLY = """func @main(%a: f32[B, 3], %b: f32[N, 3]) -> (f32[B, 3]) where B >= 1 {
  %0 = add(%a, %b) : f32[B, 3]
  return %0
}
"""


def test_z3_is_imported_only_when_sampling_cannot_decide():
    code = ("import sys\nfrom mind.ir.parser import parse_module\nfrom mind.ir.verify import check_module\n"
            f"d = check_module(parse_module({SAMPLED_ONLY!r}))\n"
            "print(d[0].code, 'z3' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["E3011", "False"]


NEEDS_Z3 = """func @main(%a: f32[B, 3], %b: f32[N, 3]) -> (f32[B * N]) where B == N + 2 {
  %0 = add(%a, %b) : f32[B, 3]
  %1 = reshape(%0) {shape = [B * N]} : f32[B * N]
  return %1
}
"""


def test_verdicts_do_not_depend_on_the_process(tmp_path):
    path = tmp_path / "d.mir"
    path.write_text(NEEDS_Z3)
    outs = []
    for seed in ("0", "1", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-m", "mind.cli.main", "verify", str(path), "--json"],
                           capture_output=True, text=True, cwd=ROOT, env=env)
        assert r.returncode == 1, r.stderr
        data = json.loads(r.stdout)
        del data["stats"]["seconds"]
        outs.append(data)
    assert outs[0] == outs[1] == outs[2]
    assert {d["label"] for d in outs[0]["diagnostics"]} == {"add.C3", "reshape.C2"}


def test_parse_then_check_is_the_one_checker():
    from mind.ir.verify import check_module

    assert [d.code for d in check_module(parse_module(NEEDS_Z3))] == ["E3011", "E3011"]
