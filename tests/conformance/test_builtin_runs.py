"""The whole suite on MIND's own implementations, through the same protocol as any other: the
reference passes every case; the cpu backend passes every case except the departures its
expectations file names (strict: a departure that is fixed must be removed from the file)."""

from __future__ import annotations

import json
import os

import pytest

from mind.cli.main import main as cli
from mind.conformance.report import results_json
from mind.conformance.run import RunOptions, run
from mind.conformance.submission import load_results, verify
from mind.conformance.suite import HERE, load_suite


@pytest.fixture(scope="module")
def reference_report(tmp_path_factory):
    rep = tmp_path_factory.mktemp("reference")
    code = cli(["conformance", "run", "--impl", "reference", "-j", "2", "--report", str(rep)])
    return code, rep


def test_reference_passes_every_case(reference_report):
    code, rep = reference_report
    doc = json.loads((rep / "results.json").read_text())
    assert code == 0
    assert doc["summary"]["verdict"] == "pass", [c for c in doc["cases"] if c["outcome"] != "pass"][:3]
    assert doc["summary"]["pass"] == doc["summary"]["total"] == len(load_suite().entries)


def test_reference_results_are_a_valid_claim(reference_report, capsys):
    _code, rep = reference_report
    capsys.readouterr()
    assert cli(["conformance", "verify-submission", str(rep)]) == 0
    assert "conforms to mind-core-ir" in capsys.readouterr().out
    doc = load_results(str(rep))
    # any edit breaks the claim: an outcome, a case's hash, the counts
    forged = json.loads(json.dumps(doc))
    forged["cases"][0]["sha256"] = "0" * 64
    assert "SHA-256 differs" in " ".join(verify(forged, load_suite()).problems)
    forged = json.loads(json.dumps(doc))
    forged["cases"].pop()
    assert any("no result for case" in p for p in verify(forged, load_suite()).problems)
    forged = json.loads(json.dumps(doc))
    forged["cases"][3]["outcome"] = "skip"
    assert any("summary" in p for p in verify(forged, load_suite()).problems)


def test_cpu_backend_departs_only_where_its_expectations_say():
    expect = os.path.join(HERE, "expectations", "cpu.expect")
    result = run(RunOptions(impl="cpu", jobs=2, expect=expect))
    unexpected = [(c.entry.id, c.outcome, c.message) for c in result.cases if c.outcome in ("fail", "xpass")]
    assert unexpected == []
    assert result.expectations.unused() == []
    assert result.verdict == ("pass-with-expectations" if result.expectations.entries else "pass")
    doc = results_json(result)
    assert doc["summary"]["xfail"] == len(result.expectations.entries)


def test_a_backend_without_its_device_is_e6002_before_any_case(tmp_path, capsys, monkeypatch):
    """Regression: `--impl cuda` on a machine without a GPU ran all 2,528 cases, each failing with
    E6002.  The runner now asks the backend's device check once, first."""
    import mind.backends as backends
    from mind.diagnostics import error

    calls = []

    def no_device() -> None:
        calls.append(1)
        raise error("E6002", "no such device here")

    monkeypatch.setitem(backends.BACKENDS, "nodevice", "mind.backends:reference_runner")
    monkeypatch.setitem(backends.DEVICE_CHECKS, "nodevice", "tests_device_check:check")
    module = type(os)("tests_device_check")
    module.check = no_device
    monkeypatch.setitem(__import__("sys").modules, "tests_device_check", module)
    report = tmp_path / "rep"
    assert cli(["conformance", "run", "--impl", "nodevice", "--report", str(report)]) == 2
    assert calls == [1] and "error[E6002]: no such device here" in capsys.readouterr().err
    assert not report.exists()
