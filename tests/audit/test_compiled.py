"""Compiled code in an audit (``--backend cpu``): artifacts rebuilt byte for byte in a second
process, differential runs within each op's bound, repeated by ``--check``; an op a backend gets
wrong is a finding at that op."""

from __future__ import annotations

import os

import numpy as np
import pytest

from .helpers import audit_into
from mind.verify.audit.bundle import check_bundle

pytest.importorskip("mlir.ir")
pytest.importorskip("llvmlite.binding")

# one op, so that the conformance cases the audit runs on the backend (those covering exp) are few
PROGRAM = """func @main(%x: f32[N]) -> (f32[N]) where N >= 2 {
  %0 = exp(%x) : f32[N]
  return %0
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "mind-cache"))


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("prog") / "p.mir"
    path.write_text(PROGRAM, encoding="utf-8")
    return str(path)


def test_cpu_artifacts_rebuild_identically_and_agree_with_the_reference(program, tmp_path):
    out = str(tmp_path / "b")
    doc = audit_into(program, out, backends=("cpu",))
    assert doc["summary"]["verdict"] == "pass", doc["findings"]
    (entry,) = doc["compiled"][0]["functions"]
    assert entry["sizes"] == {"N": 3}
    names = {a["file"] for a in entry["artifacts"]}
    assert {"cpu-main-kernel.so", "cpu-main-kernel.h", "cpu-main-manifest.json"} <= names
    assert all(a["rebuild_identical"] for a in entry["artifacts"])
    for a in entry["artifacts"]:
        assert os.path.getsize(os.path.join(out, a["file"])) == a["bytes"]
    assert [r["inputs"] for r in entry["runs"]] == ["random", "edge"]
    for run in entry["runs"]:
        assert run["ops_checked"] == 1 and run["ops_out_of_bound"] == []
        assert [r["within_bound"] for r in run["results"]] == [True]
    assert doc["traceability"]["implementations"] == ["reference", "cpu"]
    rep = check_bundle(out)
    assert rep.ok, rep.problems
    assert rep.checked["differential runs repeated"] == 2
    so = os.path.join(out, "cpu-main-kernel.so")
    with open(so, "r+b") as fh:
        fh.seek(100)
        b = fh.read(1)
        fh.seek(100)
        fh.write(bytes([b[0] ^ 0xFF]))
    assert ("cpu-main-kernel.so" in {f for f, _ in check_bundle(out, rerun=False).problems})


def test_an_op_outside_its_bound_is_a_finding_at_that_op(program, tmp_path, monkeypatch):
    import mind.backends as backends

    real = backends.compile_for

    def off_by_much(fn, backend="cpu", **options):
        runner = real(fn, backend, **options)

        def run(args):
            values = runner(args)
            if fn.ops and fn.ops[0].op == "exp":  # the probe returns exp's value first
                values[0] = values[0] * np.float32(1.001)
            return values
        return run

    monkeypatch.setattr(backends, "compile_for", off_by_much)
    doc = audit_into(program, str(tmp_path / "b"), backends=("cpu",))
    bad = [f for f in doc["findings"] if f["section"] == "compiled"]
    assert bad and bad[0]["rule"] == "exp.accuracy" and "%0 = exp" in bad[0]["message"]
    assert bad[0]["location"]["line"] == 2
