"""`mind conformance run-public`: the public MIND spec's YAML conformance cases, read unchanged and
run through MIND.  The cases here are our own, in the public format (``public_yaml/``: ``pass/``
must pass, ``fail/`` fail and ``not_applicable/`` be not applicable, each for the reasons below),
plus files that are not cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mind.cli.main import main
from mind.cli.public_cases import run_case
from mind.conformance.public_cases import (MAX_CASE_BYTES, Observation, PublicCase, ResultSpec, judge,
                                           load_cases)
from mind.diagnostics import MindError

CASES = Path(__file__).parent / "public_yaml"
OUTCOME_OF_FOLDER = {"pass": "pass", "fail": "fail", "not_applicable": "not-applicable"}

#: case id -> the reasons its verdict gives (in order)
REASONS = {
    "fail/wrong_values": ["values differ (tolerance 1e-06): at [2]: 6.0, expected 6.5"],
    "fail/wrong_dtype_shape": ["dtype i32, expected f32", "shape [2], expected [2, 1]"],
    "fail/wrong_error": ["code E2004 (dtype mismatch), expected E2001",
                         "message '`+`: operand dtypes differ: f32 and i32' does not contain 'Type mismatch'",
                         "line 2, expected 3", "column 5, expected 9"],
    "fail/no_error": ["expected error E3001, but the program compiled and ran"],
    "fail/unexpected_error": ["expected success, got E3001 at 4:5: `+`: shapes [2] and [3] do not broadcast: "
                              "axis -1 has extents 2 and 3"],
    "fail/ir_differs": ["the canonical IR differs: first at line 2: '  %0 = const {value = 2.0} : f32[]', "
                        "expected '  %0 = add(%x, %x) : f32[3]'"],
    "not_applicable/gpu_profile": ["profile 'gpu': MIND runs the public spec's cpu profile"],
    "not_applicable/unknown_field": ["the case checks `expected.output.stdout`, which this runner does not know"],
    "not_applicable/nothing_to_run": ["the program has no function without parameters, so there is nothing to "
                                      "run without arguments"],
    "not_applicable/unknown_pattern": ["values_pattern 'increasing' is not one this runner knows "
                                       "(all_zeros, all_ones)"],
}


@pytest.fixture(scope="module")
def verdicts():
    return {c.id: run_case(c, "reference") for c in load_cases(str(CASES))}


def test_every_case_has_the_outcome_of_its_folder(verdicts):
    assert len(verdicts) == sum(1 for _ in CASES.rglob("*.yaml"))
    for case_id, v in verdicts.items():
        assert v.outcome == OUTCOME_OF_FOLDER[case_id.split("/")[0]], (case_id, v.reasons)
        if v.outcome == "pass":
            assert v.reasons == []


@pytest.mark.parametrize("case_id", sorted(REASONS))
def test_reasons(verdicts, case_id):
    assert verdicts[case_id].reasons == REASONS[case_id]


def test_every_field_is_read():
    """Each field of the format is read into the case (the fixtures use every one of them)."""
    cases = {c.id: c for c in load_cases(str(CASES))}
    add = cases["pass/add_values"]
    assert (add.description, add.category, add.profile, add.kind, add.status) == \
        ("Elementwise add of two literals, checked within a tolerance", "runtime", "cpu", "source", "success")
    assert add.result == ResultSpec("f32", (2, 2), [[1.5, 2.25], [3.125, 4.1]], None, 1e-6)
    esc = cases["pass/bad_escape"].error
    assert (esc.code, esc.message_contains, esc.line, esc.column) == ("E1004", "Invalid escape sequence", 2, 17)
    assert cases["pass/zeros_pattern"].result.pattern == "all_zeros"
    assert cases["pass/conv_channels"].kind == "ir_module" and cases["pass/conv_channels"].error.column is None
    assert cases["pass/canonical_ir"].ir.startswith("func @double") and cases["pass/canonical_ir"].profile == "cpu"
    assert cases["not_applicable/gradient_module"].gradient_module.startswith("func @f_grad")


def test_the_command(capsys):
    assert main(["conformance", "run-public", str(CASES), "--backend", "reference"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "19 public cases on the reference backend: 7 passed, 6 failed, 6 not applicable"
    assert "FAIL  fail/wrong_values: values differ (tolerance 1e-06): at [2]: 6.0, expected 6.5" in out
    assert main(["conformance", "run-public", str(CASES), "--backend", "reference", "--select", "pass/*",
                 "--select", "not_applicable/*"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("13 public cases")
    assert main(["conformance", "run-public", str(CASES / "fail" / "no_error.yaml"), "--backend", "reference",
                 "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["summary"] == {"pass": 0, "fail": 1, "not-applicable": 0, "total": 1} and not data["ok"]
    assert data["cases"][0]["id"] == "no_error" and data["cases"][0]["observed"]["status"] == "success"


def test_on_the_default_backend(capsys):
    """The cpu backend, as `mind run` uses by default."""
    assert main(["conformance", "run-public", str(CASES), "--select", "pass/add_values",
                 "--select", "pass/ir_module_runs"]) == 0
    assert "2 public cases on the cpu backend: 2 passed" in capsys.readouterr().out


def test_an_internal_error_fails_its_case_only(monkeypatch):
    from mind.compiler.frontend import api

    def broken(text, path="<input>", **kw):
        raise RuntimeError("a bug")
    monkeypatch.setattr(api, "compile_source", broken)
    verdicts = [run_case(c, "reference") for c in load_cases(str(CASES), ("pass/*",))]
    by_id = {v.case.id: v for v in verdicts}
    assert by_id["pass/add_values"].outcome == "fail"
    assert by_id["pass/add_values"].reasons == ["expected success, got E7009: internal compiler error: "
                                                "RuntimeError: a bug"]
    assert by_id["pass/conv_channels"].outcome == "pass"  # an IR module does not use the frontend


def _case(**result) -> PublicCase:
    return PublicCase("c", "c.yaml", "", "", "cpu", "source", "", "success", ResultSpec(**result))


@pytest.mark.parametrize("got, values, tolerance, ok", [
    ([1.0, 2.0], [1.0, 2.0], 0.0, True),
    ([1.0, 2.0000001], [1.0, 2.0], 0.0, False),  # no tolerance: exact
    ([1.0, 2.000001], [1.0, 2.0], 1e-6, True),  # relative beyond 1
    ([1000.0005], [1000.0], 1e-6, True),
    ([0.0000015], [0.0], 1e-6, False),  # absolute below 1
    ([np.nan, np.inf, -np.inf], [np.nan, np.inf, -np.inf], 1e-6, True),
    ([np.nan], [0.0], 1.0, False),
    ([np.inf], [1e300], 1.0, False),
    ([-0.0], [0.0], 0.0, True),
])
def test_values_and_tolerance(got, values, tolerance, ok):
    case = _case(dtype="f64", shape=(len(values),), values=values, pattern=None, tolerance=tolerance)
    v = judge(case, Observation(results=[np.array(got, np.float64)]))
    assert (v.outcome == "pass") == ok, v.reasons


def test_ints_and_bools_compare_exactly():
    case = _case(dtype="bool", shape=(2,), values=[1.0, 0.0], pattern=None, tolerance=0.0)
    assert judge(case, Observation(results=[np.array([True, False])])).outcome == "pass"
    case = _case(dtype="i32", shape=(1,), values=[3.0], pattern=None, tolerance=0.0)
    assert judge(case, Observation(results=[np.array([4], np.int32)])).reasons == \
        ["values differ (tolerance 0): at [0]: 4.0, expected 3.0"]
    assert judge(case, Observation(results=[np.array([3], np.int32), np.array([3], np.int32)])).reasons == \
        ["2 results, the case describes one"]


NOT_CASES = [
    ("input: [1\n", "not YAML that a case may use", 2, 1),
    ("expected: {status: success}\n", "a case has `input` and `expected`", 1, 1),
    ("input: {source: 'x'}\nexpected: {status: maybe}\n", "`status` is `success` or `error`", 2, 20),
    ("input: {source: 'x', ir_module: 'y'}\nexpected: {status: success}\n", "input: one of `source` (MIND source) and `ir_module`", 1, 8),
    ("input: {source: 'x'}\nexpected: {status: error}\n", "`status: error` needs an `error`", 2, 11),
    ("input: {source: 'x'}\nexpected:\n  status: success\n  output:\n    result:\n      values: [[1, 2], [3]]\n",
     "not a rectangular array", 6, 15),
    ("input: {source: 'x'}\nexpected:\n  status: success\n  output:\n    result:\n      shape: [2]\n"
     "      values: [1, 2, 3]\n", "the values have shape [3], the case says [2]", 7, 15),
    ("input: {source: 'x'}\nexpected:\n  status: success\n  output:\n    result:\n      tolerance: -1\n",
     "a tolerance is a number ≥ 0", 6, 18),
    ("input: {source: 'x'}\nexpected:\n  status: success\n  output:\n    result:\n      values: [one]\n",
     "`one` is not a number", 6, 15),
    ("input: {source: 12}\nexpected: {status: success}\n", "input.source: expected text", 1, 17),
    ("input: {source: 'x'}\nexpected:\n  status: error\n  error:\n    code: E1\n    location: {line: top}\n",
     "expected.error.location.line: expected an integer", 6, 22),
    ("input: {source: 'x'}\ninput: {source: 'y'}\nexpected: {status: success}\n", "`input` appears twice", 2, 1),
    ("a: &x [1, 2]\ninput: {source: 'x'}\nexpected: {status: success, output: {result: {values: *x}}}\n",
     "aliases (`*name`) are not allowed", 3, 55),
    ("", "the file is empty", 1, 1),
    ("!!python/object:os.system {}\n", "not YAML that a case may use", 1, 1),
]


@pytest.mark.parametrize("text, words, line, column", NOT_CASES)
def test_a_file_that_is_not_a_case_is_e7004_where_it_goes_wrong(tmp_path, capsys, text, words, line, column):
    (tmp_path / "good.yaml").write_text((CASES / "pass" / "add_values.yaml").read_text())
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["conformance", "run-public", str(tmp_path), "--backend", "reference"]) == 2
    out = capsys.readouterr()
    assert out.out == ""  # nothing ran
    assert "error[E7004]" in out.err and words in out.err and f"{bad}:{line}:{column}" in out.err, out.err


def test_files_and_folders_that_cannot_be_read(tmp_path, capsys):
    assert main(["conformance", "run-public", str(tmp_path / "missing")]) == 2
    assert "error[E7001]" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("no cases here")
    assert main(["conformance", "run-public", str(tmp_path)]) == 2
    assert "holds no public conformance case" in capsys.readouterr().err
    big = tmp_path / "big.yaml"
    big.write_text("#" * (MAX_CASE_BYTES + 1))
    with pytest.raises(MindError) as e:
        load_cases(str(tmp_path))
    assert e.value.codes == ["E7004"] and "a case file has at most" in e.value.diagnostics[0].message
    big.write_bytes(b"description: \xff\n")
    with pytest.raises(MindError) as e:
        load_cases(str(tmp_path))
    assert e.value.codes == ["E1001"]
    assert main(["conformance", "run-public", str(CASES), "--backend", "nope"]) == 2
    assert "error[E7002]" in capsys.readouterr().err


def test_ids_are_paths_in_a_stable_order(tmp_path):
    for name in ("b/z.yaml", "a.yml", "b/a.yaml"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text((CASES / "pass" / "add_values.yaml").read_text())
    (tmp_path / "c").symlink_to(tmp_path / "b")  # a linked folder is not followed
    assert [c.id for c in load_cases(str(tmp_path))] == ["a", "b/a", "b/z"]
    assert [c.id for c in load_cases(str(tmp_path), ("b/*",))] == ["b/a", "b/z"]
