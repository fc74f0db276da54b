"""The conformance cases: schema-valid, in step with their generator, and passing on the reference."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from mind.conformance import runner
from mind.conformance.values import decode, encode
from mind.spec.ops import OPS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATHS = runner.case_paths()
IDS = [os.path.relpath(p, runner.CASES_DIR)[:-5] for p in PATHS]

# Cases that fail on the reference because of known bugs (StableHLO-style: the reason is in the file).
KNOWN_FAILURES: dict[str, str] = {}


def _load_gen():
    spec = importlib.util.spec_from_file_location("gen_conformance", os.path.join(ROOT, "tools", "gen_conformance.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_there_are_cases_of_every_category():
    cats = {i.split("/")[0] for i in IDS}
    assert cats == {"examples", "edge", "reference", "negative", "errors"}
    assert len(PATHS) >= 150


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_case_is_schema_valid(path):
    case = runner.load_case(path)
    runner.validate(case)
    assert case["id"] == os.path.relpath(path, runner.CASES_DIR)[:-5]
    assert case["category"] == case["id"].split("/")[0]


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[i]))
                                  if i in KNOWN_FAILURES else p for p, i in zip(PATHS, IDS)], ids=IDS)
def test_case_passes_on_reference(path):
    outcome = runner.run_case(path)
    assert outcome.passed, str(outcome)


def test_every_constraint_label_has_a_negative_case():
    labels = {f"{op.name}.{c.label}" for op in OPS.values() for c in op.constraints}
    have = set()
    for p in PATHS:
        case = runner.load_case(p)
        if case["category"] == "negative":
            have.add(case["expected"]["label"])
    assert have == labels


def test_every_spec_example_has_a_case():
    want = {f"examples/{op.name}_{k}" for op in OPS.values() for k in range(len(op.examples))}
    assert want <= set(IDS)


def test_cases_are_in_step_with_the_generator():
    gen = _load_gen()
    files = gen.rendered()
    on_disk = {os.path.relpath(p, runner.CASES_DIR): open(p, encoding="utf-8").read() for p in PATHS}
    stale = sorted(k for k in files if on_disk.get(k) != files[k])
    extra = sorted(set(on_disk) - set(files))
    assert not stale and not extra, (f"conformance cases out of step (run tools/gen_conformance.py): "
                                     f"stale {stale[:5]}, not generated {extra[:5]}")


def test_runner_detects_wrong_results_and_wrong_errors():
    case = runner.load_case(os.path.join(runner.CASES_DIR, "edge", "div_i32_total.json"))
    case["expected"]["results"][0]["values"][0] = 4
    out = runner.run_case(case)
    assert not out.passed and "results differ" in out.message and "histogram" not in str(out)
    neg = runner.load_case(os.path.join(runner.CASES_DIR, "negative", "matmul_c4.json"))
    neg["expected"]["label"] = "matmul.C5"
    assert not runner.run_case(neg).passed
    flt = runner.load_case(os.path.join(runner.CASES_DIR, "reference", "exp_f32.json"))
    flt["expected"]["results"][0]["values"][0] *= 1.001
    out = runner.run_case(flt)
    assert not out.passed and ">=4: 1" in str(out)


def test_runner_unknown_backend_fails_cleanly():
    out = runner.run_case(os.path.join(runner.CASES_DIR, "edge", "div_i32_total.json"), backend="nope")
    assert not out.passed and "E6002" in out.message


def test_runner_cli(tmp_path):
    sub = tmp_path / "cases"
    sub.mkdir()
    for name in ("edge/div_i32_total.json", "negative/matmul_c4.json"):
        (sub / os.path.basename(name)).write_text(open(os.path.join(runner.CASES_DIR, name)).read())
    r = subprocess.run([sys.executable, "-m", "mind.conformance.runner", str(sub)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "2 passed, 0 failed" in r.stdout
    assert runner.main([str(tmp_path / "missing")]) == 2


def test_values_round_trip_specials():
    arr = np.array([[-0.0, np.nan], [np.inf, -np.inf]], dtype=np.float32)
    obj = encode(arr)
    text = json.dumps(obj)
    assert '-0.0' in text and '"nan"' in text and '"-inf"' in text
    back = decode(json.loads(text))
    assert back.dtype == np.float32 and back.shape == (2, 2)
    assert math.copysign(1, back[0, 0]) == -1 and np.isnan(back[0, 1]) and back[1, 1] == -np.inf
    empty = decode({"dtype": "i32", "shape": [2, 0], "values": [[], []]})
    assert empty.shape == (2, 0)
    for bad in ({"dtype": "i32", "shape": [2], "values": [1]}, {"dtype": "i32", "shape": [1], "values": [2**40]},
                {"dtype": "bool", "shape": [1], "values": [1]}, {"dtype": "f32", "shape": [1], "values": ["NaN"]}):
        with pytest.raises(ValueError):
            decode(bad)
