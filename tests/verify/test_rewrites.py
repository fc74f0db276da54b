"""The rewrite rules: every one proved, wrong ones refuted, and each one the rule the canonicalizer runs."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

z3 = pytest.importorskip("z3")

from mind.cli.main import main  # noqa: E402
from mind.compiler.passes import canonicalize  # noqa: E402
from mind.compiler.passes.rewrite import rewrite  # noqa: E402
from mind.compiler.passes.simplify import rule_for, simplify_rule  # noqa: E402
from mind.ir import rewrite_rules as R  # noqa: E402
from mind.ir.parser import parse_module  # noqa: E402
from mind.ir.rewrite_rules import (BY_NAME, COMMUTE, RULES, AttrFn, Build, Cond, Lit, Op, Rule, Var,  # noqa: E402
                                   all_equal, same_type)
from mind.calling import run_reference  # noqa: E402
from mind.spec.dtypes import ALL_DTYPES, FLOAT_DTYPES, NUMERIC_DTYPES  # noqa: E402
from mind.verify.equiv import check_equiv  # noqa: E402
from mind.verify.rewrites import Prover, prove_rules  # noqa: E402

THOROUGH = os.environ.get("MIND_HYPOTHESIS_PROFILE") == "thorough"
RANK_BOUND = 6 if THOROUGH else 3  # every rule and dtype either way; ranks ≤ 6 under `thorough`


@pytest.fixture(scope="module")
def report():
    return prove_rules(RULES, rank_bound=RANK_BOUND)


def test_every_rule_is_proved(report):
    bad = [(v.rule.name, [p.to_json() for p in v.parts if p.status != "proved"]) for v in report.verdicts
           if v.status != "proved"]
    assert not bad
    assert {v.rule.name for v in report.verdicts} == set(BY_NAME)
    for v in report.verdicts:  # a scalar lemma for every dtype the rule applies to, and the index proof
        names = [p.name for p in v.parts]
        assert names == [f"scalar {d.value}" for d in v.rule.dtypes] + [f"index ranks ≤ {RANK_BOUND}"]
        assert all(p.cases >= 1 for p in v.parts)


def test_report_is_deterministic(report):
    again = prove_rules([BY_NAME["transpose-transpose"], BY_NAME["add-negzero-right"]], rank_bound=2)
    first = prove_rules([BY_NAME["transpose-transpose"], BY_NAME["add-negzero-right"]], rank_bound=2)
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(first.to_json(), sort_keys=True)


# ------------------------------------------------------------------------------------------------
# planted wrong rules
# ------------------------------------------------------------------------------------------------

x, y, v, w = Var("x"), Var("y"), Var("v"), Var("w")


def test_planted_float_add_zero_is_refuted_and_fails_on_the_reference():
    """``x + 0 → x`` for floats is false for x = -0.0: refuted, and the model really fails."""
    wrong = Rule("add-poszero", Op("add", x, Lit("+0.0")), x, FLOAT_DTYPES, (same_type("x"),))
    verdict = Prover(rank_bound=1).prove(wrong)
    assert verdict.status == "refuted"
    for part, dtype in zip(verdict.parts, ("f32", "f64")):
        assert part.name == f"scalar {dtype}" and part.status == "refuted"
        cex = part.counterexample
        arr = np.array([int(cex["x"]["bits"], 16)], dtype=np.uint32 if dtype == "f32" else np.uint64)
        xval = arr.view(np.float32 if dtype == "f32" else np.float64).reshape(())
        fn = parse_module(f"func @main(%x: {dtype}[]) -> ({dtype}[]) {{\n  %z = const {{value = 0.0}} : {dtype}[]\n"
                          f"  %0 = add(%x, %z) : {dtype}[]\n  return %0\n}}\n").functions[0]
        got = run_reference(fn, [xval])[0]
        assert got.tobytes() != xval.tobytes()  # source and target differ on the reference
        assert got.tobytes() == np.asarray(float(cex["source"]["value"]), dtype=got.dtype).tobytes()


def _pad_pad(lo, interior_cond=True):
    src = Op("pad", Op("pad", x, v, lo="l1", hi="h1", interior="i1"), v, lo="l2", hi="h2", interior="i2")
    res = Build("pad", x, v, lo=AttrFn("", lo), hi=AttrFn("", R._sum_attrs("h1", "h2")), interior=AttrFn("", R._attr("i1")))
    return Rule("planted", src, res, ALL_DTYPES, (all_equal(0, "i2"),) if interior_cond else ())


_SLICES = Op("slice", Op("slice", x, start="b1", stop="e1", step="s1"), start="b2", stop="e2", step="s2")
_NONEMPTY = (Cond("m ≥ 1", lambda A, b: A.and_(*[A.ge(m, 1) for m in b.shape("result")])),)
_TT = Op("transpose", Op("transpose", x, permutation="p"), permutation="q")

PLANTED = {
    "pad-pad keeps only the inner low padding": (_pad_pad(R._attr("l1")), "the shapes differ on axis 0"),
    "pad-pad without interior = 0": (_pad_pad(R._sum_attrs("l1", "l2"), False), "the shapes differ on axis 0"),
    "pad-pad with two padding values": (
        Rule("planted", Op("pad", Op("pad", x, v, lo="l1", hi="h1", interior="i1"), w, lo="l2", hi="h2", interior="i2"),
             _pad_pad(R._sum_attrs("l1", "l2")).result, ALL_DTYPES, (all_equal(0, "i2"),)), "the elements differ"),
    "slice-slice stopping one step late": (
        Rule("planted", _SLICES, Build("slice", x, start=AttrFn("", R._slice_start), step=AttrFn("", R._slice_step),
                                       stop=AttrFn("", lambda A, b: tuple(s + m * t for s, t, m in zip(
                                           R._slice_start(A, b), R._slice_step(A, b), b.shape("result"))))),
             ALL_DTYPES, _NONEMPTY), "the target violates its constraint C3"),
    "slice-slice on empty results": (
        Rule("planted", _SLICES, BY_NAME["slice-slice"].result, ALL_DTYPES, ()), "the target violates its constraint C3"),
    "transpose-transpose composed the wrong way": (
        Rule("planted", _TT, Build("transpose", x, permutation=AttrFn("", lambda A, b: tuple(
            R.pick(A, tuple(b.attr("q")), p) for p in b.attr("p")))), ALL_DTYPES), "the shapes differ on axis 0"),
    "mul-one without the type condition": (
        Rule("planted", Op("mul", x, Lit("1")), x, NUMERIC_DTYPES), "the target has type"),
    "select-true choosing the false branch": (
        Rule("planted", Op("select", Lit("true"), x, y), y, ALL_DTYPES, (same_type("y"),)), None),
    "sub treated as commutative": (
        Rule("planted", Op("sub", x, y), Build("sub", y, x), NUMERIC_DTYPES, kind=COMMUTE), None),
}


@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_wrong_rule_is_refuted(name):
    rule, reason = PLANTED[name]
    verdict = Prover(rank_bound=3).prove(rule)
    assert verdict.status == "refuted"
    part = verdict.first("refuted")
    if reason is None:  # a scalar lemma fails, with the input values
        assert part.name.startswith("scalar") and part.counterexample
    else:
        assert part.name.startswith("index") and part.reason.startswith(reason)


def test_refuted_index_counterexample_is_minimized():
    rule, _ = PLANTED["pad-pad keeps only the inner low padding"]
    part = Prover(rank_bound=1).prove(rule).first("refuted")
    # rank 1 suffices; the smallest witness is an empty tensor padded by one on the outside
    assert part.case == "x: bool, rank 1; v: bool, rank 0"
    assert part.counterexample == {"x.d0": 0, "l10": 0, "h10": 0, "i10": 0, "l20": 1, "h20": 0, "i20": 0, "i0": 0}


def test_vacuous_rule_is_refuted():
    """Conditions that no tensor meets would prove everything else: the rule is refuted."""
    never = Rule("never", Op("transpose", x, permutation="p"), x, ALL_DTYPES,
                 (Cond("some extent of x < 0", lambda A, b: A.or_(*[A.lt(d, 0) for d in b.shape("x")])),))
    verdict = Prover(rank_bound=2).prove(never)
    assert verdict.status == "refuted"
    assert all(p.status == "refuted" and "never hold" in p.reason for p in verdict.parts)


# ------------------------------------------------------------------------------------------------
# the table is what runs: every rule fires in the canonicalizer, and its rewrite is validated
# ------------------------------------------------------------------------------------------------

def _fn(params: str, results: str, body: str) -> str:
    return f"func @main({params}) -> ({results}) {{\n" + "".join(f"  {line}\n" for line in body.split(";")) + "}\n"


EXAMPLES = {
    "mul-one-right": _fn("%x: f32[2, 3]", "f32[2, 3]", "%c = const {value = 1.0} : f32[];%0 = mul(%x, %c) : f32[2, 3];return %0"),
    "mul-one-left": _fn("%x: i32[4]", "i32[4]", "%c = const {value = 1} : i32[];%0 = mul(%c, %x) : i32[4];return %0"),
    "add-negzero-right": _fn("%x: f64[3]", "f64[3]", "%c = const {value = -0.0} : f64[];%0 = add(%x, %c) : f64[3];return %0"),
    "add-negzero-left": _fn("%x: f32[2]", "f32[2]", "%c = const {value = [-0.0, -0.0]} : f32[2];%0 = add(%c, %x) : f32[2];return %0"),
    "add-zero-right": _fn("%x: i64[2]", "i64[2]", "%c = const {value = 0} : i64[];%0 = add(%x, %c) : i64[2];return %0"),
    "add-zero-left": _fn("%x: i32[2]", "i32[2]", "%c = const {value = 0} : i32[];%0 = add(%c, %x) : i32[2];return %0"),
    "sub-poszero": _fn("%x: f32[2]", "f32[2]", "%c = const {value = 0.0} : f32[];%0 = sub(%x, %c) : f32[2];return %0"),
    "sub-zero": _fn("%x: i32[2]", "i32[2]", "%c = const {value = 0} : i32[];%0 = sub(%x, %c) : i32[2];return %0"),
    "div-one": _fn("%x: i64[3]", "i64[3]", "%c = const {value = 1} : i64[];%0 = div(%x, %c) : i64[3];return %0"),
    "convert-same": _fn("%x: f32[2]", "f32[2]", "%0 = convert(%x) {dtype = f32} : f32[2];return %0"),
    "reshape-same": _fn("%x: f32[2, 3]", "f32[2, 3]", "%0 = reshape(%x) {shape = [2, 3]} : f32[2, 3];return %0"),
    "reshape-reshape": _fn("%x: f32[2, 3]", "f32[6]", "%0 = reshape(%x) {shape = [3, 2]} : f32[3, 2];"
                           "%1 = reshape(%0) {shape = [6]} : f32[6];return %1"),
    "transpose-identity": _fn("%x: i32[2, 3]", "i32[2, 3]", "%0 = transpose(%x) {permutation = [0, 1]} : i32[2, 3];return %0"),
    "transpose-transpose-inverse": _fn("%x: f32[2, 3, 4]", "f32[2, 3, 4]",
                                       "%0 = transpose(%x) {permutation = [1, 2, 0]} : f32[3, 4, 2];"
                                       "%1 = transpose(%0) {permutation = [2, 0, 1]} : f32[2, 3, 4];return %1"),
    "transpose-transpose": _fn("%x: f32[2, 3, 4]", "f32[3, 4, 2]",
                               "%0 = transpose(%x) {permutation = [1, 0, 2]} : f32[3, 2, 4];"
                               "%1 = transpose(%0) {permutation = [0, 2, 1]} : f32[3, 4, 2];return %1"),
    "slice-full": _fn("%x: f64[4]", "f64[4]", "%0 = slice(%x) {start = [0], stop = [4], step = [1]} : f64[4];return %0"),
    "slice-slice": _fn("%x: f32[7, 5]", "f32[2, 3]", "%0 = slice(%x) {start = [6, 0], stop = [-1, 5], step = [-2, 1]} : f32[4, 5];"
                       "%1 = slice(%0) {start = [1, 4], stop = [3, -1], step = [1, -2]} : f32[2, 3];return %1"),
    "pad-none": _fn("%x: i32[3], %v: i32[]", "i32[3]", "%0 = pad(%x, %v) {lo = [0], hi = [0], interior = [0]} : i32[3];return %0"),
    "pad-pad": _fn("%x: f32[3, 2], %v: f32[]", "f32[8, 8]", "%0 = pad(%x, %v) {lo = [1, 0], hi = [0, 2], interior = [1, 1]} : f32[6, 5];"
                   "%1 = pad(%0, %v) {lo = [2, 1], hi = [0, 2], interior = [0, 0]} : f32[8, 8];return %1"),
    "reduce-sum-none": _fn("%x: f32[2]", "f32[2]", "%0 = reduce_sum(%x) {axes = [], keepdims = false} : f32[2];return %0"),
    "reduce-max-none": _fn("%x: bool[2]", "bool[2]", "%0 = reduce_max(%x) {axes = [], keepdims = true} : bool[2];return %0"),
    "select-same": _fn("%c: bool[2], %x: f32[2]", "f32[2]", "%0 = select(%c, %x, %x) : f32[2];return %0"),
    "select-true": _fn("%x: i64[2], %y: i64[2]", "i64[2]", "%c = const {value = true} : bool[];"
                       "%0 = select(%c, %x, %y) : i64[2];return %0"),
    "select-false": _fn("%x: f64[2], %y: f64[]", "f64[2]", "%c = const {value = [false, false]} : bool[2];"
                        "%0 = select(%c, %y, %x) : f64[2];return %0"),
}


def test_every_rewrite_rule_has_an_example():
    assert set(EXAMPLES) == {r.name for r in RULES if r.kind == R.REWRITE}


def _random_inputs(fn, rng):
    out = []
    for p in fn.params:
        shape, dt = tuple(p.type.shape), p.type.dtype.numpy
        if dt.kind == "f":
            a = rng.choice(np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-45, 3e38]), size=shape)
        elif dt.kind == "b":
            a = rng.integers(0, 2, size=shape).astype(bool)
        else:
            a = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=shape, endpoint=True)
        out.append(np.asarray(a, dtype=dt))
    return out


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_rule_fires_in_the_canonicalizer(name):
    fn = parse_module(EXAMPLES[name]).functions[0]
    fired: list[str] = []

    def recording(op, xs, ctx):
        rule = rule_for(op, xs, ctx)
        if rule is not None:
            fired.append(rule.name)
        return simplify_rule(op, xs, ctx)

    rewrite(fn, recording)
    assert fired[:1] == [name]
    out = canonicalize(fn)
    assert len(out.ops) < len(fn.ops)
    assert check_equiv(fn, out).verdict == ("refines" if name == "reduce-sum-none" else "equal")
    rng = np.random.default_rng(7)
    for _ in range(5):
        args = _random_inputs(fn, rng)
        for a, b in zip(run_reference(fn, args), run_reference(out, args)):
            assert a.tobytes() == b.tobytes() or (a.dtype.kind == "f" and np.array_equal(a, b, equal_nan=True))


def test_commutativity_rules_are_what_cse_merges():
    from mind.compiler.passes.cse import COMMUTATIVE

    assert COMMUTATIVE == {r.source.op for r in RULES if r.kind == COMMUTE} == {"add", "mul"}
    fn = parse_module(_fn("%x: f32[2, 3], %y: f32[3]", "f32[2, 3], f32[2, 3]",
                          "%0 = mul(%x, %y) : f32[2, 3];%1 = mul(%y, %x) : f32[2, 3];return %0, %1")).functions[0]
    out = canonicalize(fn)
    assert len(out.ops) == 1 and out.results[0] is out.results[1]


# ------------------------------------------------------------------------------------------------
# the command
# ------------------------------------------------------------------------------------------------

def test_cli_rewrites_json_is_deterministic(capsys, tmp_path):
    args = ["verify", "--rewrites", "--rule", "pad-pad", "--rule", "mul-one-right", "--rank-bound", "2", "--json"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args + ["--smt2", str(tmp_path / "smt")]) == 0
    assert capsys.readouterr().out == first
    data = json.loads(first)
    assert data["ok"] and [r["rule"] for r in data["rules"]] == ["pad-pad", "mul-one-right"]
    files = sorted(os.listdir(tmp_path / "smt"))
    assert files and all(f.endswith(".smt2") for f in files)
    assert "(set-option :rlimit" in (tmp_path / "smt" / files[0]).read_text()


def test_cli_rewrites_text(capsys):
    assert main(["verify", "--rewrites", "--rule", "select-same", "--rank-bound", "1"]) == 0
    out = capsys.readouterr().out
    assert "select-same" in out and "1 rules: 1 proved, 0 refuted, 0 unknown" in out


def test_cli_unknown_rule_is_a_usage_error(capsys):
    assert main(["verify", "--rewrites", "--rule", "x-plus-zero"]) == 2
    assert "E7002" in capsys.readouterr().err


def test_docs_table_is_in_step(report):
    """docs/rewrites.md's table is generated from the rules and their verdicts (tools/gen_rewrites.py)."""
    from pathlib import Path

    from mind.verify.rewrites import TABLE_BEGIN, TABLE_END, markdown_table

    text = (Path(__file__).resolve().parents[2] / "docs" / "rewrites.md").read_text()
    table = text[text.index(TABLE_BEGIN):text.index(TABLE_END) + len(TABLE_END)]
    assert table == markdown_table(report)


def test_each_query_runs_in_a_context_of_its_own():
    """A query's solver works on a copy of it in a fresh Z3 context, so that its search does not
    depend on the terms the process made before (Z3's main context numbers terms in the order they
    are made; a test run's random examples once left the f64 ``mul-commute`` lemma out of resources).
    Its verdicts and models are the same after many unrelated terms as before."""
    import z3

    prover = Prover(rank_bound=1)
    x = z3.FP("x", z3.Float64())
    verdict, solver, _reason = prover._check(z3.Not(x * 2.0 == x + x), "doubling")
    assert verdict == "unsat" and solver.ctx is not z3.main_ctx()
    first = prover.prove(BY_NAME["mul-commute"]).to_json()
    junk = [z3.FP(f"junk{i}", z3.Float64()) * z3.FPVal(i, z3.Float64()) for i in range(2000)]
    assert z3.simplify(junk[-1]) is not None
    assert Prover(rank_bound=1).prove(BY_NAME["mul-commute"]).to_json() == first
    refuted = Prover(rank_bound=1).prove(PLANTED["sub treated as commutative"][0])
    assert refuted.status == "refuted"  # its counterexample's values read from the query's own context
