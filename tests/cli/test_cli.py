"""The `mind` command: results, --out, --json, spec, probe, and coded errors (never a traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mind.cli.main import main
from mind.spec.ops import OPS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUICK = os.path.join(ROOT, "examples", "quickstart.mind")
AFFINE = os.path.join(ROOT, "examples", "affine.mir")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mind.cli.main", *args], capture_output=True, text=True, cwd=ROOT)


def test_subprocess_run_quickstart():
    r = _cli("run", QUICK)
    assert r.returncode == 0, r.stderr
    assert "result0: f32[2, 2]" in r.stdout and "Traceback" not in r.stderr


def test_subprocess_missing_file_exits_2():
    r = _cli("run", "does/not/exist.mir")
    assert r.returncode == 2 and "E7001" in r.stderr and "Traceback" not in r.stderr


def test_subprocess_bad_usage_exits_2():
    r = _cli("run")
    assert r.returncode == 2 and "E7002" in r.stderr and "Traceback" not in r.stderr


def test_subprocess_malformed_ir_exits_1(tmp_path):
    bad = tmp_path / "bad.mir"
    bad.write_text("func @main() -> () {\n  %0 = tanh : f32[]\n  return\n}\n")
    r = _cli("ir", "--check", str(bad))
    assert r.returncode == 1 and "E4006" in r.stderr and f"{bad}:2:8" in r.stderr and "Traceback" not in r.stderr


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_run_out_writes_results(tmp_path):
    out = tmp_path / "out"
    src = _write(tmp_path, "two.mir", "func @main() -> (i32[2], f64[]) {\n  %0 = const {value = [1, 2]} : i32[2]\n"
                                      "  %1 = const {value = -0.0} : f64[]\n  return %0, %1\n}\n")
    assert main(["run", src, "--out", str(out)]) == 0
    r0, r1 = np.load(out / "result0.npy"), np.load(out / "result1.npy")
    assert r0.dtype == np.int32 and r0.tolist() == [1, 2]
    assert r1.dtype == np.float64 and np.signbit(r1)
    assert sorted(os.listdir(out)) == [".mind-outputs.json", "result0.npy", "result1.npy"]


def test_run_json(capsys):
    assert main(["run", QUICK, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["results"][0]["dtype"] == "f32" and data["results"][0]["shape"] == [2, 2]


def test_run_with_inputs_and_probe(tmp_path, capsys):
    for name, arr in (("x", np.ones((4, 3), np.float32)), ("w", np.ones((3, 2), np.float32)),
                      ("b", np.zeros(2, np.float32))):
        np.save(tmp_path / f"{name}.npy", arr)
    probe = tmp_path / "probe"
    args = ["run", AFFINE, "--probe", str(probe)] + [f"--input={n}={tmp_path / n}.npy" for n in "xwb"]
    assert main(args) == 0
    assert "result0: f32[4, 2]" in capsys.readouterr().out
    manifest = json.loads((probe / "manifest.json").read_text())
    files = sorted(p for p in os.listdir(probe) if p.endswith(".npy"))
    assert len(files) == len(manifest["values"]) == 3 + 5


@pytest.mark.parametrize("argv,code,status", [
    (["run", AFFINE], "E6010", 1),
    (["run", AFFINE, "--input", "x"], "E7002", 2),
    (["run", AFFINE, "--input", "x=/nonexistent.npy"], "E7001", 2),
    (["run", QUICK, "--fn", "nope"], "E4003", 1),
    (["run", QUICK, "--backend", "nope"], "E7002", 2),
    (["ir", "--check", os.path.join(ROOT, "README.md")], "E7002", 2),
    (["spec", "--op", "tanh"], "E4006", 1),
    (["frobnicate"], "E7002", 2),
])
def test_coded_errors(argv, code, status, capsys):
    assert main(argv) == status
    err = capsys.readouterr().err
    assert f"error[{code}]" in err and "Traceback" not in err


def test_wrong_input_dtype_and_shape(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.ones((4, 3), np.int32))
    np.save(tmp_path / "w.npy", np.ones((3, 5), np.float32))
    np.save(tmp_path / "b.npy", np.ones(2, np.float32))
    argv = ["run", AFFINE, "--json"] + [f"--input={n}={tmp_path / n}.npy" for n in "xwb"]
    assert main(argv) == 1
    data = json.loads(capsys.readouterr().out)
    assert not data["ok"] and {d["code"] for d in data["diagnostics"]} == {"E6009"}


def test_unreadable_npy(tmp_path, capsys):
    (tmp_path / "x.npy").write_text("not an array")
    assert main(["run", AFFINE, f"--input=x={tmp_path / 'x.npy'}"]) == 2
    assert "E6011" in capsys.readouterr().err


def test_json_errors_have_the_same_codes(tmp_path, capsys):
    src = _write(tmp_path, "bad.mir", "func @main(%x: f32[2], %y: f64[2]) -> (f32[2]) {\n"
                                      "  %0 = add(%x, %y) : f32[2]\n  return %0\n}\n")
    assert main(["ir", "--check", src]) == 1
    text_err = capsys.readouterr().err
    assert main(["ir", "--check", src, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    d = data["diagnostics"][0]
    assert d["code"] == "E2004" and d["label"] == "add.C1" and f"error[{d['code']}]" in text_err
    assert d["span"]["file"] == src and d["span"]["line"] == 2


def test_ir_check_prints_canonical_text(capsys):
    assert main(["ir", "--check", AFFINE, "--hash"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("func @main(%x: f32[B, 3]") and "// sha256: " in out
    assert main(["ir", AFFINE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and len(data["sha256"]) == 64


def test_spec_table_and_json(capsys):
    assert main(["spec"]) == 0
    text = capsys.readouterr().out
    for name in OPS:
        assert name in text
    assert main(["spec", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in data["ops"]] == list(OPS)
    labels = {c["label"] for o in data["ops"] for c in o["constraints"]}
    assert labels == {f"{op.name}.{c.label}" for op in OPS.values() for c in op.constraints}
    assert main(["spec", "--op", "matmul"]) == 0
    assert "matmul.C4" in capsys.readouterr().out


def test_non_utf8_source(tmp_path, capsys):
    p = tmp_path / "bin.mir"
    p.write_bytes(b"func @main() -> () {\n\xff\n}\n")
    assert main(["ir", str(p)]) == 2
    assert "E1001" in capsys.readouterr().err


def test_run_out_to_an_unwritable_place_is_e7003(capsys):
    assert main(["run", QUICK, "--out", "/proc/mind-cannot-create-this"]) == 2
    assert "E7003" in capsys.readouterr().err


def test_ir_emit_mlir_of_a_symbolic_function_takes_shapes(tmp_path, capsys):
    from mind.cli.main import main

    path = tmp_path / "sym.mind"
    path.write_text("fn f(x: Tensor<f32, [B, 3]>) -> Tensor<f32, [B, 3]> { x * 2.0 }\n")
    assert main(["ir", str(path), "--emit", "mlir"]) == 1
    assert "--shapes x=f32[4,3]" in capsys.readouterr().err
    assert main(["ir", str(path), "--emit", "mlir", "--shapes", "x=f32[4,3]"]) == 0
    assert "tensor<4x3xf32>" in capsys.readouterr().out
    assert main(["ir", str(path), "--shapes", "x=f32[4,2]"]) == 2
    assert "extent 2 where @f declares 3" in capsys.readouterr().err


def test_argument_shape_errors_read_naturally(tmp_path, capsys):
    import numpy as np

    from mind.cli.main import main

    src = tmp_path / "s.mind"
    src.write_text("fn f(x: Tensor<f32, [B, 3]>, y: Tensor<f32, [B]>) -> Tensor<f32, [B, 3]> { x }\n")
    np.save(tmp_path / "x.npy", np.ones((4, 4), np.float32))
    np.save(tmp_path / "y.npy", np.ones(5, np.float32))
    assert main(["run", str(src), "--backend", "reference", "--input", f"x={tmp_path / 'x.npy'}",
                 "--input", f"y={tmp_path / 'y.npy'}"]) == 1
    err = capsys.readouterr().err
    assert "has extent 4, expected 3\n" in err and "has extent 5, expected B = 4" in err
