"""Soundness of `mind verify` against a concrete oracle.

Random dumps with symbolic dims and assumptions (``dump_strategies``; some wrong on purpose) are
verified, then checked at every small binding of their symbols with plain ints:

* VALID ⇒ every binding the premises allow passes the IR verifier on plain ints;
* every counterexample shown is allowed by the premises and fails on plain ints.

``MIND_HYPOTHESIS_PROFILE=thorough`` runs 2,000 dumps; the statistics (``--hypothesis-show-statistics``)
count the verdicts.
"""

from __future__ import annotations

from hypothesis import event, example, given

from mind.verify.dump import verify_text

from .dump_strategies import allowed, bindings, concrete_problems, dump_texts, function_symbols

WRONG_RESHAPE = """func @main(%p0: f32[A * B]) -> (f32[A, B + 1]) where A >= 1 {
  %v0 = reshape(%p0) {shape = [A, B + 1]} : f32[A, B + 1]
  return %v0
}
"""

RELATION = """func @main(%p0: f32[A, 2], %p1: f32[B, 2]) -> (f32[A, 2]) where A == B {
  %v0 = add(%p0, %p1) : f32[A, 2]
  return %v0
}
"""


@example(WRONG_RESHAPE)
@example(RELATION)
@given(dump_texts())
def test_verdicts_agree_with_plain_ints(text):
    rep = verify_text(text, "gen.mir")
    assert not any(f.diag.code.startswith(("E1", "E7")) for f in rep.findings), \
        [f.diag.message for f in rep.findings]
    if rep.module is None:  # a literal negative dim in a declared type: refused while parsing
        event("refused by the parser")
        assert not rep.ok
        return
    fn = rep.module.functions[0]
    names = function_symbols(fn)
    if rep.ok:
        event("VALID, proved by the solver" if rep.stats.z3_queries else "VALID")
        for env in bindings(names):
            if allowed(fn, env):
                assert concrete_problems(fn, env) == [], (env, text)
        return
    shown = [f for f in rep.findings if f.counterexample]
    event("INVALID with a counterexample" if shown else "INVALID without a counterexample")
    for f in shown:
        env = {**{n: 0 for n in names}, **f.counterexample}
        assert allowed(fn, env), (f.diag.message, text)
        assert concrete_problems(fn, env), (f.diag.message, env, text)
