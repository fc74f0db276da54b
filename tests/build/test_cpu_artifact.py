"""`mind build --target cpu` and `mind.runtime.load`: the artifact runs like the reference, from
Python (NumPy only) and from C; two builds in two processes are byte-identical; a changed byte is
refused before anything is loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mind
import mind.runtime
from mind.calling import run_reference
from mind.cli.main import main
from mind.diagnostics import MindError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "examples", "spec_style_mlp.mind")

# every boundary dtype: f32 (matmul), f64, i32 (integer division), i64, bool in and out
PROGRAM = """\
func @mixed(%x: f32[3, 4], %w: f32[4, 2], %a: i32[5], %b: i32[5], %d: f64[2, 2], %n: i64[3], %m: bool[3]) \
-> (f32[3, 2], i32[5], f64[2, 2], bool[3], i64[3]) {
  %0 = matmul(%x, %w) : f32[3, 2]
  %1 = exp(%0) : f32[3, 2]
  %2 = div(%a, %b) : i32[5]
  %3 = exp(%d) : f64[2, 2]
  %4 = const {value = 0} : i64[]
  %5 = compare(%n, %4) {direction = gt} : bool[3]
  %6 = mul(%n, %n) : i64[3]
  %7 = select(%m, %6, %n) : i64[3]
  return %1, %2, %3, %5, %7
}
"""
SYMBOLIC = """\
func @scale(%x: f32[B, 3]) -> (f32[B, 3]) {
  %0 = add(%x, %x) : f32[B, 3]
  return %0
}
"""


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mind.cli.main", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=600)


def _inputs(artifact) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = []
    for spec in artifact.signature.inputs:
        if spec.dtype == "bool":
            out.append(rng.integers(0, 2, spec.shape).astype(bool))
        elif spec.dtype.startswith("int"):
            out.append(rng.integers(-50, 50, spec.shape).astype(spec.dtype))
        else:
            out.append(rng.standard_normal(spec.shape).astype(spec.dtype))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("build")
    src = d / "mixed.mir"
    src.write_text(PROGRAM)
    out = d / "artifact"
    assert main(["build", str(src), "--out", str(out)]) == 0
    return src, out


def test_artifact_files_and_manifest(built):
    _, out = built
    names = sorted(n for n in os.listdir(out) if not n.startswith("."))
    assert names == ["function.mir", "kernel.h", "kernel.so", "manifest.json", "plan.json"]
    manifest = json.loads((out / "manifest.json").read_text())
    from mind.spec.version import SPEC_VERSION
    from mind.runtime.artifact import sha256

    assert manifest["spec_version"] == SPEC_VERSION and manifest["target"] == "cpu"
    assert manifest["options"]["cpu"] == "generic" and manifest["options"]["threads"] == 1
    assert manifest["core_ir_sha256"] == sha256((out / "function.mir").read_bytes())
    for name, digest in manifest["files"].items():
        assert sha256((out / name).read_bytes()) == digest
    assert manifest["toolchain"]["compiler"] and manifest["toolchain"]["linker"]


def test_runtime_matches_reference_for_every_dtype(built):
    _, out = built
    art = mind.runtime.load(str(out))
    args = _inputs(art)
    args[3][args[3] == 0] = 1
    args[3][0] = 0  # integer division by zero: the spec's total semantics (0)
    got = art(*args)
    want = run_reference(art.function, args)
    assert len(got) == len(want) == 5
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)
    by_name = art.run({p.name: a for p, a in zip(art.function.params, args)})
    np.testing.assert_array_equal(by_name[1], got[1])


def test_runtime_refuses_wrong_arguments(built):
    _, out = built
    art = mind.runtime.load(str(out))
    args = _inputs(art)
    with pytest.raises(MindError) as e:
        art(*args[:-1])
    assert e.value.diagnostics[0].code == "E6010"
    with pytest.raises(MindError) as e:
        art(*([args[0].astype(np.float64)] + args[1:]))
    assert e.value.diagnostics[0].code == "E6009"


def test_symbolic_sizes(tmp_path):
    src = tmp_path / "scale.mir"
    src.write_text(SYMBOLIC)
    r = _cli("build", str(src), "--out", str(tmp_path / "no"))
    assert r.returncode == 1 and "E6003" in r.stderr and "--shapes" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "no" / "manifest.json").exists()
    assert main(["build", str(src), "--shapes", "x=f32[2,3]", "--out", str(tmp_path / "a")]) == 0
    art = mind.runtime.load(str(tmp_path / "a"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(art(x), x + x)
    with pytest.raises(MindError) as e:
        art(np.zeros((3, 3), np.float32))
    assert e.value.diagnostics[0].code == "E6009"
    from mind.compiler.build import build_artifact
    from mind.ir.parser import parse_module

    files = build_artifact(parse_module(SYMBOLIC).functions[0], "cpu", {"B": 2})
    assert json.loads(files["plan.json"])["sizes"] == {"B": 2}


def _copy(out, tmp_path, name="copy"):
    dst = tmp_path / name
    shutil.copytree(out, dst)
    return dst


@pytest.mark.parametrize("name", ["kernel.so", "plan.json", "function.mir", "kernel.h"])
def test_changed_byte_is_refused(built, tmp_path, name):
    _, out = built
    dst = _copy(out, tmp_path)
    data = bytearray((dst / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (dst / name).write_bytes(bytes(data))
    with pytest.raises(MindError) as e:
        mind.runtime.load(str(dst))
    assert e.value.diagnostics[0].code == "E7014" and name in e.value.diagnostics[0].message


def test_missing_linked_or_foreign_files_are_refused(built, tmp_path):
    _, out = built
    gone = _copy(out, tmp_path, "gone")
    (gone / "kernel.so").unlink()
    linked = _copy(out, tmp_path, "linked")
    os.replace(linked / "plan.json", tmp_path / "plan.json")
    os.symlink(tmp_path / "plan.json", linked / "plan.json")
    garbled = _copy(out, tmp_path, "garbled")
    (garbled / "manifest.json").write_text("{not json")
    other = _copy(out, tmp_path, "other")
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["files"]["../x"] = manifest["files"].pop("kernel.h")
    (other / "manifest.json").write_text(json.dumps(manifest))
    for folder in (gone, linked, garbled, other):
        with pytest.raises(MindError) as e:
            mind.runtime.load(str(folder))
        assert e.value.diagnostics[0].code == "E7014", folder
    with pytest.raises(MindError) as e:
        mind.runtime.load(str(tmp_path / "absent"))
    assert e.value.diagnostics[0].code == "E7001"
    tpu = _copy(out, tmp_path, "tpu")
    manifest = json.loads((tpu / "manifest.json").read_text())
    manifest["target"] = "tpu"
    (tpu / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(MindError) as e:
        mind.runtime.load(str(tpu))
    assert e.value.diagnostics[0].code == "E6002"


def test_output_folder_rules(built, tmp_path):
    src, _ = built
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    r = _cli("build", str(src), "--out", str(busy), "--json")
    assert r.returncode == 2 and "E7003" in r.stdout and (busy / "notes.txt").read_text() == "mine"
    again = tmp_path / "again"
    assert main(["build", str(src), "--out", str(again)]) == 0
    assert main(["build", str(src), "--out", str(again)]) == 0  # an earlier build's folder is replaced
    mind.runtime.load(str(again))


def test_two_processes_build_identical_bytes(built, tmp_path):
    """Determinism: the same input in two fresh processes (different hash seeds) gives the same bytes,
    every file, the manifest included."""
    src, out = built
    digests = []
    for seed in ("0", "random"):
        d = tmp_path / f"seed-{seed}"
        r = _cli("build", str(src), "--out", str(d), env={"PYTHONHASHSEED": seed, "MIND_CACHE": "off"})
        assert r.returncode == 0, r.stderr
        digests.append({n: (d / n).read_bytes() for n in sorted(os.listdir(d))})
    assert digests[0] == digests[1]
    assert digests[0]["manifest.json"] == (out / "manifest.json").read_bytes()


RUN_ALONE = """
import sys, json, numpy as np
import mind
import mind.runtime
art = mind.runtime.load(sys.argv[1])
x = np.arange(12, dtype=np.float32).reshape(3, 4)
res = art(x, np.ones((4, 2), np.float32), np.arange(1, 6, dtype=np.int32), np.full(5, 2, np.int32),
          np.eye(2), np.arange(3), np.array([True, False, True]))
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mlir", "llvmlite", "z3", "sympy")
               or m.startswith(("mind.compiler", "mind.verify", "mind.conformance")))
print(json.dumps({"heavy": heavy, "div": res[1].tolist()}))
"""


def test_runtime_imports_nothing_of_the_compiler(built):
    _, out = built
    r = subprocess.run([sys.executable, "-c", RUN_ALONE, str(out)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["heavy"] == [] and doc["div"] == [0, 1, 1, 2, 2]


C_DRIVER = r"""
#include <stdio.h>
#include "kernel.h"
int main(void) {
    float x[3 * 4], w[4 * 2], r0[3 * 2];
    int32_t a[5] = {7, -7, 9, 1, 4}, b[5] = {2, 2, 0, -3, 4}, r1[5];
    double d[4] = {0.0, 1.0, -1.0, 0.5}, r2[4];
    int64_t n[3] = {3, -4, 5}, r4[3];
    uint8_t m[3] = {1, 0, 1}, r3[3];
    for (int i = 0; i < 12; i++) x[i] = (float)i / 4.0f - 1.0f;
    for (int i = 0; i < 8; i++) w[i] = (float)(i % 3) - 0.5f;
    mind_mixed_call(x, w, a, b, d, n, m, r0, r1, r2, r3, r4);
    for (int i = 0; i < 6; i++) printf("%.9g ", r0[i]);
    for (int i = 0; i < 5; i++) printf("%d ", r1[i]);
    for (int i = 0; i < 4; i++) printf("%.17g ", r2[i]);
    for (int i = 0; i < 3; i++) printf("%d ", r3[i]);
    for (int i = 0; i < 3; i++) printf("%lld ", (long long)r4[i]);
    printf("\n");
    return 0;
}
"""


def test_c_driver_against_the_header(built, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine")
    _, out = built
    (tmp_path / "driver.c").write_text(C_DRIVER)
    exe = tmp_path / "driver"
    r = subprocess.run([cc, "-std=c99", "-Wall", "-Werror", "-I", str(out), "-o", str(exe), str(tmp_path / "driver.c"),
                        str(out / "kernel.so"), f"-Wl,-rpath,{out}", "-lm"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    values = r.stdout.split()
    art = mind.runtime.load(str(out))
    x = (np.arange(12, dtype=np.float32) / np.float32(4) - np.float32(1)).reshape(3, 4)
    w = (np.arange(8) % 3 - 0.5).astype(np.float32).reshape(4, 2)
    args = [x, w, np.array([7, -7, 9, 1, 4], np.int32), np.array([2, 2, 0, -3, 4], np.int32),
            np.array([[0.0, 1.0], [-1.0, 0.5]]), np.array([3, -4, 5], np.int64), np.array([True, False, True])]
    want = run_reference(art.function, args)
    np.testing.assert_allclose(np.array(values[:6], np.float32).reshape(3, 2), want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.array(values[6:11], np.int32), want[1])
    np.testing.assert_allclose(np.array(values[11:15], np.float64).reshape(2, 2), want[2], rtol=1e-15)
    np.testing.assert_array_equal(np.array(values[15:18], np.int64).astype(bool), want[3])
    np.testing.assert_array_equal(np.array(values[18:21], np.int64), want[4])


def test_example_mlp_forward_builds_and_runs(tmp_path):
    out = tmp_path / "mlp"
    assert main(["build", MLP, "--fn", "forward", "--shapes", "x=f32[4,784]", "--out", str(out)]) == 0
    art = mind.runtime.load(str(out))
    args = _inputs(art)
    same = mind.compile(art.function, backend="cpu", cpu="generic", threads=1)(*args)  # the same code
    for g, c, w in zip(art(*args), same, run_reference(art.function, args)):
        np.testing.assert_array_equal(g, c)
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)


def test_mind_run_runs_an_artifact_folder(tmp_path):
    src = tmp_path / "scale.mir"
    src.write_text(SYMBOLIC)
    art = tmp_path / "a"
    assert main(["build", str(src), "--shapes", "x=f32[2,3]", "--out", str(art)]) == 0
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    r = _cli("run", str(art), "--input", f"x={tmp_path / 'x.npy'}", "--out", str(tmp_path / "res"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["values"] == [[2.0] * 3] * 2
    np.testing.assert_array_equal(np.load(tmp_path / "res" / "result0.npy"), np.full((2, 3), 2, np.float32))
    r = _cli("run", str(art), "--backend", "cpu", "--input", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 2 and "E7002" in r.stderr and "Traceback" not in r.stderr
