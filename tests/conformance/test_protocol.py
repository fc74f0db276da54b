"""The runner against implementations that break the protocol in every way it names: each failure
costs its own case only, is reported with its kind, and the outcome does not depend on -j."""

from __future__ import annotations

import json
import os
import shlex
import sys

import pytest

from mind.cli.main import main as cli
from mind.conformance.report import junit_xml, results_json, validate_results
from mind.conformance.run import RunOptions, run
from mind.diagnostics import MindError

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_impl.py")
# a float success case, an integer success case, a negative case, an argument error
SMALL = ("edge/add_f32_specials", "edge/div_i32_total", "negative/matmul_c4", "errors/argument_shape")


def fake(mode: str, target: str = "") -> str:
    return "exec:" + shlex.join([sys.executable, FAKE, mode] + ([target] if target else []))


def outcomes(result) -> dict[str, tuple[str, str]]:
    return {c.entry.id: (c.outcome, c.kind) for c in result.cases}


def run_small(impl: str, **kw) -> object:
    return run(RunOptions(impl=impl, select=SMALL, timeout_s=kw.pop("timeout_s", 20.0), **kw))


def test_a_good_implementation_passes():
    r = run_small(fake("good"))
    assert set(outcomes(r).values()) == {("pass", "")}
    assert r.verdict == "pass" and r.identity.name == "fake-good"


@pytest.mark.parametrize("mode,kind", [
    ("crash", "crash"), ("garbage", "protocol"), ("wrong-id", "protocol"), ("wrong-count", "wrong-result"),
    ("wrong-dtype", "wrong-result"), ("wrong-shape", "wrong-result"), ("nan", "wrong-result"),
    ("unsupported", "unsupported"), ("stray-stdout", "protocol"),
])
def test_each_failure_costs_one_case(mode, kind):
    r = run_small(fake(mode, "add_f32"))
    got = outcomes(r)
    assert got["edge/add_f32_specials"] == ("fail", kind), r.cases[0].message
    # the implementation is restarted: the other cases still pass
    assert all(got[c] == ("pass", "") for c in SMALL[1:]), got
    assert r.verdict == "fail"


def test_nan_class_mismatch_is_reported_with_the_element():
    r = run_small(fake("nan", "add_f32"))
    c = r.cases[0]
    assert "index [1]" in c.details[0] and "actual nan, expected -0.0" in c.details[0]


def test_a_hang_is_a_timeout_of_that_case():
    r = run_small(fake("hang", "div_i32"), timeout_s=2.0)
    got = outcomes(r)
    assert got["edge/div_i32_total"] == ("fail", "timeout")
    assert got["edge/add_f32_specials"] == ("pass", "") and got["negative/matmul_c4"] == ("pass", "")


def test_wrong_error_and_missing_error():
    r = run_small(fake("good"))
    case = next(c for c in r.cases if c.entry.id == "negative/matmul_c4")
    assert case.outcome == "pass"
    from mind.conformance.verdict import Answer, judge

    neg = r.suite.case(case.entry)
    assert judge(neg, Answer("error", code="E3003", label="matmul.C5")).kind == "wrong-error"
    assert judge(neg, Answer("ok", [])).kind == "missing-error"
    assert judge(neg, Answer("error", code="E3003", label="matmul.C4", stage="run")).kind == "wrong-error"


def test_a_failed_handshake_is_a_coded_error():
    with pytest.raises(MindError) as ei:
        run_small(fake("bad-version"))
    assert ei.value.codes == ["E6002"] and "handshake" in str(ei.value)
    with pytest.raises(MindError) as ei:
        run_small("exec:/nonexistent/impl")
    assert ei.value.codes == ["E6002"]
    with pytest.raises(MindError) as ei:
        run_small("cuda-that-is-not-there")
    assert ei.value.codes == ["E6002"]
    with pytest.raises(MindError) as ei:
        run_small("python:not a module")
    assert ei.value.codes == ["E7002"]


def _stable(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["run"].pop("date"), doc["run"].pop("jobs")
    for c in doc["cases"]:
        c.pop("duration_s")
    return doc


def test_results_do_not_depend_on_jobs():
    sel = ("edge/*", "negative/*", "errors/*")
    one = run(RunOptions(impl=fake("crash", "mul_i64"), select=sel, jobs=1))
    three = run(RunOptions(impl=fake("crash", "mul_i64"), select=sel, jobs=3))
    a, b = results_json(one), results_json(three)
    validate_results(a)
    assert _stable(a) == _stable(b)
    assert [c["id"] for c in a["cases"]] == [e.id for e in one.suite.entries if e.id.split("/")[0] in
                                             ("edge", "negative", "errors")]
    assert one.count("fail") >= 1


def test_expectations_xfail_skip_and_strict_xpass(tmp_path):
    exp = tmp_path / "fake.expect"
    exp.write_text("# departures of the fake\n"
                   "xfail edge/add_f32_specials add.edge_cases  returns NaN where the spec says otherwise\n"
                   "skip  edge/div_i32_total   div.edge_cases  not run here\n"
                   "xfail negative/matmul_c4   matmul.C4       stale: it passes\n"
                   "xfail nothing/matches/*    add.semantics   unused\n")
    r = run_small(fake("nan", "add_f32"), expect=str(exp))
    got = outcomes(r)
    assert got["edge/add_f32_specials"][0] == "xfail"
    assert got["edge/div_i32_total"][0] == "skip"
    assert got["negative/matmul_c4"][0] == "xpass"
    assert not r.clean and r.verdict == "fail"
    assert [e.pattern for e in r.expectations.unused()] == ["nothing/matches/*"]


def test_malformed_expectations_have_locations(tmp_path):
    exp = tmp_path / "bad.expect"
    exp.write_text("xfail edge/x add.semantics fine\nfail edge/y add.semantics kind\n"
                   "xfail edge/z add.nonsense reason\nxfail edge/w add.semantics\n")
    with pytest.raises(MindError) as ei:
        run_small(fake("good"), expect=str(exp))
    err = ei.value
    assert err.codes == ["E7004"] * 3
    assert [(d.span.line, d.span.col) for d in err.diagnostics] == [(2, 1), (3, 14), (4, 1)]
    assert "^^^^" in str(err)


def test_profiles_not_supported_are_not_failures():
    r = run(RunOptions(impl=fake("good"), profiles=("core",), select=SMALL, timeout_s=20))
    got = outcomes(r)
    assert got["negative/matmul_c4"][0] == "unsupported"  # a diagnostics case
    assert got["edge/add_f32_specials"][0] == "pass"
    assert r.verdict == "pass"


def test_junit_and_report_files(tmp_path):
    r = run_small(fake("wrong-count", "div_i32"))
    xml = junit_xml(r)
    assert '<failure message="2 results, expected 1" type="wrong-result">' in xml
    assert "reproduce: mind conformance run --impl" in xml


def test_cli_run_report_and_verify_submission(tmp_path, capsys):
    rep = tmp_path / "rep"
    code = cli(["conformance", "run", "--impl", fake("good"), "--select", "edge/*", "--report", str(rep)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert sorted(os.listdir(rep)) == ["junit.xml", "results.json", "status.html", "status.md"]
    assert "| `add` |" in (rep / "status.md").read_text()
    # a selection is not a claim
    assert cli(["conformance", "verify-submission", str(rep)]) == 2
    assert "restricted with --select" in capsys.readouterr().err


def test_cli_usage_errors(capsys):
    assert cli(["conformance", "run", "--impl", "reference", "-j", "0"]) == 2
    assert "E7002" in capsys.readouterr().err
    assert cli(["conformance", "run", "--impl", "reference", "--profile", "f64"]) == 2
    assert "must include `core`" in capsys.readouterr().err
    assert cli(["conformance", "run", "--impl", "reference", "--cases", "/nonexistent"]) == 2
    assert "E7001" in capsys.readouterr().err
    assert cli(["conformance", "labels"]) == 0
    assert "matmul.C4" in capsys.readouterr().out


def test_draft_expectations_name_the_label_of_each_failure(tmp_path, capsys):
    rep = tmp_path / "rep"
    assert cli(["conformance", "run", "--impl", fake("nan", "add_f32"), "--select", SMALL[0], "--select", SMALL[1],
                "--report", str(rep)]) == 1
    capsys.readouterr()
    assert cli(["conformance", "draft-expectations", str(rep)]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("xfail")]
    assert len(lines) == 1 and lines[0].split()[1:3] == ["edge/add_f32_specials", "add.edge_cases"]
    drafted = tmp_path / "fake.expect"
    drafted.write_text("\n".join(lines) + "\n")
    r = run_small(fake("nan", "add_f32"), expect=str(drafted))
    assert r.verdict == "pass-with-expectations"
