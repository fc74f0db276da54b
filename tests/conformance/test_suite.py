"""The suite as shipped: versioned, hashed, schema-valid, ordered, complete, and exactly what its
generator produces in any process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mind.conformance import encoding
from mind.conformance.coverage import Coverage, constraint_labels
from mind.conformance.generate.suite_files import check_released, parse_released
from mind.conformance.suite import SUITE_DIR, SUITE_VERSION, all_labels, load_suite, validate_case
from mind.diagnostics import MindError
from mind.spec.version import SPEC_VERSION

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = load_suite()
CASES = list(SUITE.cases())


def test_manifest_names_the_suite_and_spec_version():
    assert (SUITE.version, SUITE.spec_version) == (SUITE_VERSION, SPEC_VERSION)
    assert len(SUITE.entries) == len(CASES) >= 2500
    generated = [e for e in SUITE.entries if e.id.startswith(("gen/", "prog/"))]
    assert len(generated) >= 2000


def test_every_case_is_schema_valid_and_described_by_its_entry():
    labels = set(all_labels())
    for e, c in zip(SUITE.entries, CASES):
        validate_case(c)
        assert (c["ops"], c["labels"], c["profiles"], c["depth"]) == (list(e.ops), list(e.labels),
                                                                      list(e.profiles), e.depth)
        assert set(c["labels"]) <= labels, c["id"]


def test_run_order_single_ops_then_programs_then_diagnostics():
    keys = [(0 if e.status == "success" and e.depth <= 1 else 1 if e.status == "success" else 2)
            for e in SUITE.entries]
    assert keys == sorted(keys)


def test_coverage_is_complete():
    cov = Coverage(CASES)
    assert cov.missing_cells() == []
    assert cov.missing_labels() == []
    assert set(cov.negative) == set(constraint_labels())


def test_released_ids_are_immutable():
    text = open(os.path.join(SUITE_DIR, "released.txt"), encoding="utf-8").read()
    released = parse_released(text)
    current = [(e.id, e.sha256) for e in SUITE.entries]
    assert check_released(released, current) == []
    assert set(released) == {cid for cid, _ in current}, "new cases: regenerate to record them in released.txt"
    changed = dict(current)
    changed[current[0][0]] = "0" * 64
    assert check_released(released, changed.items()) != []


def test_a_tampered_case_is_refused(tmp_path):
    import shutil

    shutil.copytree(SUITE_DIR, tmp_path / "suite")
    path = tmp_path / "suite" / "cases" / "edge.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[0] = lines[0].replace('"7fc00000"', '"7fc00001"', 1) if '"7fc00000"' in lines[0] else lines[0] + " "
    path.write_text("\n".join(lines), encoding="utf-8")
    suite = load_suite(str(tmp_path / "suite"))
    entry = next(e for e in suite.entries if e.file == "cases/edge.jsonl" and e.line == 1)
    with pytest.raises(MindError) as ei:
        suite.case(entry)
    assert ei.value.codes == ["E7004"] and "SHA-256" in str(ei.value)
    (tmp_path / "suite" / "manifest.json").write_text("{}")
    with pytest.raises(MindError) as ei:
        load_suite(str(tmp_path / "suite"))
    assert ei.value.codes == ["E7004"]


def test_generator_output_is_byte_identical_in_another_process():
    """The files on disk are exactly what generation gives, here in a fresh process with another
    hash seed (so no set or dict order leaks into the bytes)."""
    env = dict(os.environ, PYTHONHASHSEED="4242")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_conformance.py"), "--check"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_expected_exp_and_log_are_correctly_rounded():
    from mind.conformance.generate import exact
    from mind.spec.dtypes import DType

    # exp(1) and log(2) to the nearest double; ties and overflow at the ends of the range
    assert exact.exp(1.0, DType.F64) == 2.718281828459045
    assert exact.log(2.0, DType.F64) == 0.6931471805599453
    assert exact.exp(709.79, DType.F64) == float("inf") and exact.exp(709.78, DType.F64) < float("inf")
    assert exact.exp(-745.2, DType.F64) == 0.0 and exact.exp(-745.1, DType.F64) == 5e-324
    assert np.float32(exact.exp(88.72284, DType.F32)) == np.inf
    assert exact.exp(1000.0, DType.F32) == float("inf")


def test_encoding_round_trips_bits_and_nan_class():
    a = np.array([-0.0, np.nan, np.inf, 1e-45, 0.1], dtype=np.float32)
    obj = encoding.encode(a)
    assert obj["data"] == ["80000000", "7fc00000", "7f800000", "00000001", "3dcccccd"]
    assert encoding.encode(a, nan_class=True)["data"][1] == "nan"
    back = encoding.decode(obj)
    assert back.tobytes() == a.tobytes()
    i = np.array([-2**63, 2**63 - 1], dtype=np.int64)
    assert encoding.decode(encoding.encode(i)).tolist() == i.tolist()
    assert encoding.encode(np.array([True, False]))["data"] == ["1", "0"]
    assert np.isnan(encoding.decode({"dtype": "f32", "shape": [1], "data": ["nan"]}, allow_nan_class=True)[0])
    for bad in ({"dtype": "f32", "shape": [1], "data": ["nan"]},          # the class is for expected values
                {"dtype": "f32", "shape": [2], "data": ["00000000"]},     # count
                {"dtype": "i32", "shape": [1], "data": ["0000000g"]},     # not hex
                {"dtype": "i32", "shape": [1], "data": ["000000001"]},    # width
                {"dtype": "bool", "shape": [1], "data": ["2"]},           # range
                {"dtype": "f16", "shape": [1], "data": ["0000"]},         # dtype
                {"dtype": "f32", "shape": [-1], "data": []}):             # shape
        with pytest.raises(encoding.EncodingError):
            encoding.decode(bad)


def test_manifest_is_one_entry_per_line():
    text = open(os.path.join(SUITE_DIR, "manifest.json"), encoding="utf-8").read()
    doc = json.loads(text)
    assert doc["case_count"] == len(doc["cases"])
    assert text.count('{"classes"') == len(doc["cases"])
