"""Outputs go where they should: `--out`, `--probe` and `verify --emit-core` never write through a
link or onto anything but a regular file, never create missing parents, and an output folder holds
exactly one run's files (regressions of issue 22)."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from mind.cli.main import main
from mind.output_dir import RECORD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AFFINE = os.path.join(ROOT, "examples", "affine.mir")
TWO = "func @main() -> (i32[2], f64[]) {\n  %0 = const {value = [1, 2]} : i32[2]\n  %1 = const {value = 2.0} : f64[]\n  return %0, %1\n}\n"
ONE = "func @main() -> (i32[]) {\n  %0 = const {value = 7} : i32[]\n  return %0\n}\n"


def _src(tmp_path, text, name="p.mir"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _affine_inputs(tmp_path):
    for name, arr in (("x", np.ones((4, 3), np.float32)), ("w", np.ones((3, 2), np.float32)),
                      ("b", np.zeros(2, np.float32))):
        np.save(tmp_path / f"{name}.npy", arr)
    return [f"--input={n}={tmp_path / n}.npy" for n in "xwb"]


def _error(capsys, code):
    err = capsys.readouterr().err
    assert f"error[{code}]" in err and "Traceback" not in err, err
    return err


def test_out_removes_an_earlier_runs_stale_results(tmp_path):
    out = tmp_path / "out"
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 0
    assert main(["run", _src(tmp_path, ONE, "one.mir"), "--out", str(out)]) == 0
    assert sorted(os.listdir(out)) == [RECORD, "result0.npy"]
    assert np.load(out / "result0.npy").tolist() == 7
    assert json.loads((out / RECORD).read_text())["files"] == ["result0.npy"]


def test_out_refuses_a_folder_with_files_mind_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 2
    assert "notes.txt" in _error(capsys, "E7003")
    assert sorted(os.listdir(out)) == ["notes.txt"]


def test_out_refuses_a_missing_parent_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "no" / "such" / "out"
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 2
    assert "does not exist" in _error(capsys, "E7003")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_out_refuses_what_is_not_a_folder(tmp_path, capsys, kind):
    target = tmp_path / "real"
    target.mkdir()
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("x")
    else:
        out.symlink_to(target)
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 2
    assert ("a symbolic link" if kind == "symlink" else "a regular file") in _error(capsys, "E7003")
    assert os.listdir(target) == []


def test_out_refuses_a_link_planted_among_its_own_files(tmp_path, capsys):
    out = tmp_path / "out"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 0
    os.unlink(out / "result0.npy")
    os.symlink(victim, out / "result0.npy")  # a file the record lists, now a link
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 2
    assert "symbolic link" in _error(capsys, "E7003")
    assert victim.read_text() == "precious" and os.path.islink(out / "result0.npy")


def test_out_cleans_up_after_a_killed_run(tmp_path):
    out = tmp_path / "out"
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 0
    (out / ".mind-tmp-12345-1-0").write_bytes(b"half")  # what kill -9 leaves
    assert main(["run", _src(tmp_path, ONE, "one.mir"), "--out", str(out)]) == 0
    assert sorted(os.listdir(out)) == [RECORD, "result0.npy"]


def test_out_refuses_a_record_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / RECORD).write_text('{"format": "mind-outputs-v1", "files": ["../../etc/passwd"]}')
    assert main(["run", _src(tmp_path, TWO), "--out", str(out)]) == 2
    assert "not a record" in _error(capsys, "E7003")


def test_probe_does_not_write_through_a_planted_link(tmp_path, capsys):
    """Regression: a symlink named like a probe file made --probe overwrite an unrelated file."""
    probe = tmp_path / "probe"
    probe.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, probe / "00000_x.npy")
    assert main(["run", AFFINE, "--probe", str(probe), *_affine_inputs(tmp_path)]) == 2
    _error(capsys, "E7003")
    assert victim.read_text() == "precious"


def test_probe_onto_a_regular_file_is_e7003(tmp_path, capsys):
    """Regression: `--probe FILE` was an internal error (E7009)."""
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert main(["run", AFFINE, "--probe", str(f), *_affine_inputs(tmp_path)]) == 2
    assert "not a folder" in _error(capsys, "E7003")
    assert f.read_text() == "x"


def test_probe_twice_into_one_folder_holds_one_run(tmp_path):
    probe = tmp_path / "probe"
    args = ["run", AFFINE, "--probe", str(probe), *_affine_inputs(tmp_path)]
    assert main(args) == 0
    first = sorted(os.listdir(probe))
    small = _src(tmp_path, "func @main(%x: f32[2]) -> (f32[2]) {\n  return %x\n}\n", "small.mir")
    np.save(tmp_path / "x2.npy", np.ones(2, np.float32))
    assert main(["run", small, "--probe", str(probe), f"--input=x={tmp_path / 'x2.npy'}"]) == 0
    manifest = json.loads((probe / "manifest.json").read_text())
    files = sorted(os.listdir(probe))
    assert files == sorted([RECORD, "manifest.json", *(e["file"] for e in manifest["values"])])
    assert len(first) > len(files)


def test_a_refused_folder_is_reported_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    probe = tmp_path / "probe"
    assert main(["run", AFFINE, "--backend", "reference", "--out", str(out), "--probe", str(probe),
                 *_affine_inputs(tmp_path)]) == 2
    _error(capsys, "E7003")
    assert not probe.exists()


def test_out_and_probe_in_one_folder_is_a_usage_error(tmp_path, capsys):
    d = str(tmp_path / "d")
    assert main(["run", AFFINE, "--out", d, "--probe", d, *_affine_inputs(tmp_path)]) == 2
    _error(capsys, "E7002")


# -- mind verify --emit-core ---------------------------------------------------------------------

def _emit(tmp_path, target):
    return main(["verify", AFFINE, "--emit-core", str(target)])


def test_emit_core_writes_and_replaces_a_regular_file(tmp_path, capsys):
    target = tmp_path / "core.mir"
    target.write_text("old")
    assert _emit(tmp_path, target) == 0
    assert target.read_text().startswith("func @main(")


def test_emit_core_refuses_a_symlink_and_leaves_it(tmp_path, capsys):
    """Regression: the link was replaced by a regular file (as root, /dev/stdout was)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "core.mir"
    link.symlink_to(victim)
    assert _emit(tmp_path, link) == 2
    assert "symbolic link" in _error(capsys, "E7003")
    assert os.path.islink(link) and victim.read_text() == "precious"


def test_emit_core_refuses_special_files(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _emit(tmp_path, fifo) == 2
    assert "FIFO" in _error(capsys, "E7003")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _emit(tmp_path, tmp_path) == 2
    assert "a folder" in _error(capsys, "E7003")


def test_emit_core_does_not_create_missing_folders(tmp_path, capsys):
    assert _emit(tmp_path, tmp_path / "new" / "core.mir") == 2
    assert "does not exist" in _error(capsys, "E7003")
    assert not (tmp_path / "new").exists()
