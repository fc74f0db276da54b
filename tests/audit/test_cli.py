"""``mind audit`` from the command line: bundles byte-identical across processes and hash seeds,
exit statuses, usage errors and folders MIND may not write."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .helpers import REFUTED, ROOT
from mind.cli.main import main


def _mind(args: list[str], env: dict[str, str] | None = None, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mind.cli.main", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=600)


def _files(folder: str) -> dict[str, bytes]:
    out = {}
    for n in sorted(os.listdir(folder)):
        with open(os.path.join(folder, n), "rb") as fh:
            out[n] = fh.read()
    return out


def test_bundles_are_byte_identical_across_processes(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ra = _mind(["audit", "examples/train_mlp.mind", "--out", a], {"PYTHONHASHSEED": "1", "SOURCE_DATE_EPOCH": "1700000000"})
    rb = _mind(["audit", "examples/train_mlp.mind", "--out", b], {"PYTHONHASHSEED": "4242", "SOURCE_DATE_EPOCH": "1700000000"})
    assert ra.returncode == rb.returncode == 0, ra.stderr + rb.stderr
    fa, fb = _files(a), _files(b)
    assert fa.keys() == fb.keys()
    assert [n for n in fa if fa[n] != fb[n]] == []
    assert json.loads(fa["audit.json"])["created"] == "2023-11-14T22:13:20Z"
    check = _mind(["audit", "--check", a])
    assert check.returncode == 0 and "intact and reproduced" in check.stdout


def test_findings_exit_1_and_still_write_the_bundle(tmp_path, capsys):
    program = tmp_path / "bad.mir"
    program.write_text(REFUTED, encoding="utf-8")
    out = str(tmp_path / "b")
    assert main(["audit", str(program), "--out", out]) == 1
    err = capsys.readouterr().err
    assert "E7013" in err and "matmul.C4" in err and "2 |   %0 = matmul(%a, %b)" in err
    assert os.path.isfile(os.path.join(out, "audit.html"))
    assert main(["audit", "--check", out]) == 1  # intact, but the audit it records fails
    assert "intact and reproduced" in capsys.readouterr().out


def test_json_output(tmp_path, capsys):
    assert main(["audit", os.path.join(ROOT, "examples", "affine.mir"), "--out", str(tmp_path / "b"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["summary"]["verdict"] == "pass"
    assert main(["audit", "--check", str(tmp_path / "b"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["intact"] and rep["problems"] == []


@pytest.mark.parametrize("argv, words", [
    (["audit"], "nothing to audit"),
    (["audit", "examples/affine.mir"], "--out"),
    (["audit", "examples/affine.mir", "--check", "x"], "not both"),
    (["audit", "--check", "x", "--backend", "cpu"], "no other option"),
    (["audit", "examples/affine.mir", "--out", "x", "--backend", "tpu"], "not a backend"),
    (["audit", "examples/affine.mir", "--out", "x", "--backend", "reference"], "no audit support"),
    (["audit", "examples/affine.mir", "--out", "x", "--rlimit", "0"], "--rlimit"),
])
def test_usage_errors(argv, words, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "E7002" in err and words in err


def test_bad_source_date_epoch(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert main(["audit", os.path.join(ROOT, "examples", "affine.mir"), "--out", str(tmp_path / "b")]) == 2
    assert "SOURCE_DATE_EPOCH" in capsys.readouterr().err


def test_a_folder_mind_may_not_write_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("a user's file")
    assert main(["audit", os.path.join(ROOT, "examples", "affine.mir"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "E7003" in err and "notes.txt" in err
    assert sorted(os.listdir(out)) == ["notes.txt"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert main(["audit", os.path.join(ROOT, "examples", "affine.mir"), "--out", str(link)]) == 2
    assert not (tmp_path / "elsewhere").exists()


def test_a_second_audit_replaces_the_first(tmp_path):
    out = str(tmp_path / "b")
    assert main(["audit", os.path.join(ROOT, "examples", "affine.mir"), "--out", out, "--timings"]) == 0
    assert "timings.json" in os.listdir(out)
    assert main(["audit", os.path.join(ROOT, "examples", "affine.mir"), "--out", out]) == 0
    assert "timings.json" not in os.listdir(out)  # a folder holds one run's files
    assert main(["audit", "--check", out]) == 0


def test_a_syntax_error_is_a_diagnostic_without_a_bundle(tmp_path, capsys):
    bad = tmp_path / "bad.mir"
    bad.write_text("func @main( {", encoding="utf-8")
    out = tmp_path / "b"
    assert main(["audit", str(bad), "--out", str(out)]) == 1
    assert "E1010" in capsys.readouterr().err
    assert not out.exists()
