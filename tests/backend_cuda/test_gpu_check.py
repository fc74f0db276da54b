"""``tools/gpu_check.py``: prepare here, run on a GPU machine, compare here.  Without a GPU the run
step reports the diagnostic per case; the comparison is checked on results the reference stands in
for (the GPU's own are what a GPU session brings back)."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from mind.bisect import probe_function
from mind.calling import run_reference
from mind.compiler.backend.cuda.ptxas import find_ptxas
from mind.ir.parser import parse_module
from mind.ir.printer import print_function

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="no ptxas")


def _tool():
    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "tools", "gpu_check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stand_in_run(folder, out, tamper=None):
    """What ``run`` writes, with the reference's values in place of the GPU's."""
    from mind.conformance.suite import load_suite

    suite = load_suite()
    index = json.loads((folder / "index.json").read_text())
    status = {}
    for c in index["cases"]:
        fn = parse_module(suite.case(suite.entry(c["id"]))["ir"]).functions[0]
        inputs = [np.load(folder / c["dir"] / f"in{i}.npy") for i in range(c["inputs"])]
        values = run_reference(probe_function(fn), inputs)
        (out / c["dir"]).mkdir(parents=True)
        for i, v in enumerate(values):
            if tamper == c["id"] and i == 0:
                v = np.asarray(v) + np.asarray(1, v.dtype)
            np.save(out / c["dir"] / f"r{i}.npy", v)
        status[c["id"]] = {"status": "ok", "values": len(values)}
    (out / "status.json").write_text(json.dumps(status))
    return index


def test_prepare_run_compare(tmp_path, capsys):
    tool = _tool()
    folder = tmp_path / "prep"
    assert tool.main(["prepare", str(folder), "--select", "gen/add/*", "--limit", "3"]) == 0
    assert tool.main(["run", str(folder), "--out", str(tmp_path / "gpu")]) == 0  # E6002 per case without a GPU
    index = _stand_in_run(folder, tmp_path / "ok")
    assert len(index["cases"]) == 3
    assert tool.main(["compare", str(folder), str(tmp_path / "ok")]) == 0
    assert "passed 3" in capsys.readouterr().out
    bad = index["cases"][1]["id"]
    _stand_in_run(folder, tmp_path / "bad", tamper=bad)
    assert tool.main(["compare", str(folder), str(tmp_path / "bad"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["failed"] == 1 and report["failures"][0]["id"] == bad
    assert "add" in report["failures"][0]["first_divergence"]


@pytest.mark.parametrize("argv_of", [
    lambda t: ["prepare", str(t)],                                   # an existing folder
    lambda t: ["run", str(t / "none"), "--out", str(t / "out")],     # not a prepared folder
    lambda t: ["compare", str(t / "none"), str(t / "res")],
])
def test_wrong_folders_are_usage_errors(tmp_path, capsys, argv_of):
    with pytest.raises(SystemExit) as exc:
        _tool().main(argv_of(tmp_path))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def _stand_in_differential(folder, out, tamper=None):
    """``run``'s output for a differential folder, with the reference's values in place of the GPU's."""
    index = json.loads((folder / "index.json").read_text())
    status = {}
    for c in index["cases"]:
        fn = parse_module((folder / c["dir"] / "program.mir").read_text()).functions[0]
        inputs = [np.load(folder / c["dir"] / f"in{i}.npy") for i in range(c["inputs"])]
        with np.errstate(all="ignore"):
            values = run_reference(fn, inputs)
        (out / c["dir"]).mkdir(parents=True)
        for i, v in enumerate(values):
            v = np.asarray(v)
            if tamper == c["id"] and i == len(values) - 1:
                v = np.full_like(v, 3)  # the last op's value only: every op before it still agrees
            np.save(out / c["dir"] / f"r{i}.npy", v)
        status[c["id"]] = {"status": "ok", "values": len(values)}
    (out / "status.json").write_text(json.dumps(status))
    return index


def test_differential_programs_prepare_and_compare(tmp_path, capsys):
    """``prepare --differential`` draws the cpu differential test's programs reproducibly (the same
    seed, the same programs), and ``compare`` names the first op of a program whose value is wrong."""
    tool = _tool()
    folder = tmp_path / "prep"
    assert tool.main(["prepare", str(folder), "--differential", "8", "--seed", "5"]) == 0
    index = json.loads((folder / "index.json").read_text())
    assert [c["kind"] for c in index["cases"]] == ["differential"] * len(index["cases"])
    assert {c["id"].split("/")[1] for c in index["cases"]} == {"small", "tiled"}
    again = [p for _, p, _ in tool._draw_differential(8, 5)]
    assert [(folder / c["dir"] / "program.mir").read_text() for c in index["cases"]] == \
        [print_function(fn) for fn in again if fn.ops]
    assert (folder / "interop" / "manifest.json").is_file()
    _stand_in_differential(folder, tmp_path / "ok")
    assert tool.main(["compare", str(folder), str(tmp_path / "ok")]) == 0
    assert f"passed {len(index['cases'])}, failed 0" in capsys.readouterr().out
    bad = index["cases"][-1]
    _stand_in_differential(folder, tmp_path / "bad", tamper=bad["id"])
    assert tool.main(["compare", str(folder), str(tmp_path / "bad"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    last = len(parse_module((folder / bad["dir"] / "program.mir").read_text()).functions[0].ops) - 1
    assert report["counts"]["failed"] == 1 and report["failures"][0]["why"].startswith(f"first divergence at op #{last} ")


def test_interop_checks_without_a_gpu_say_so(tmp_path):
    """Without a GPU the interop step records one failing check with the reason (CI's case); on a GPU
    each driver path is its own record (``tools/gpu_interop.py``)."""
    from mind.runtime.cuda import unavailable

    if unavailable() is None:
        pytest.skip("a GPU is present: the interop checks run for real in tools/gpu_check.py run")
    spec = importlib.util.spec_from_file_location("gpu_interop", os.path.join(ROOT, "tools", "gpu_interop.py"))
    interop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(interop)
    interop.prepare(str(tmp_path / "a"))
    records = interop.check(str(tmp_path / "a"))
    assert [(r["name"], r["ok"]) for r in records] == [("device", False)] and "no GPU" in records[0]["detail"]


def test_compare_reads_the_cuda_expectations(tmp_path, capsys):
    """A case that ``conformance/expectations/cuda.expect`` lists counts as ``xfailed`` when it
    fails; when it passes (here: the reference's own values) it is ``xpassed``, and the comparison
    fails, as the conformance runner's strict expectations do."""
    tool = _tool()
    folder = tmp_path / "prep"
    assert tool.main(["prepare", str(folder), "--select", "gen/matmul/f64/extreme/2"]) == 0
    _stand_in_run(folder, tmp_path / "ok")
    capsys.readouterr()
    assert tool.main(["compare", str(folder), str(tmp_path / "ok"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["xpassed"] == 1 and "cuda.expect" in report["failures"][0]["why"]


@pytest.mark.parametrize("argv", [["--differential", "0"], ["--differential", "-3"], ["--jobs", "0"], ["--limit", "x"]])
def test_bad_counts_are_usage_errors(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as exc:
        _tool().main(["prepare", str(tmp_path / "p")] + argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err and not (tmp_path / "p").exists()
