"""The caches as the `mind` command shows them: a warm run (frontend and kernels from the cache) says
exactly what a cold one says; an unsafe cache folder is E7010 (exit 2) with a way out; a rebuilt
entry is one coded warning, on stderr or in ``--json``; ``MIND_CACHE=off`` writes nothing."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from mind.cli.main import main
from mind.compiler.frontend import cache as fcache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "train_mlp.mind")
QUICK = os.path.join(ROOT, "examples", "quickstart.mind")
SPEC_MLP = os.path.join(ROOT, "examples", "spec_style_mlp.mind")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    fcache.clear()  # a new process would not have the in-memory entries either
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


COMMANDS = [
    ("check", TRAIN),
    ("check", SPEC_MLP, "--json"),
    ("ir", TRAIN, "--fn", "train_step", "--hash"),
    ("grad", TRAIN, "--fn", "loss", "--hash"),
    ("grad", TRAIN, "--fn", "loss", "--wrt", "nothing"),  # E5005 at the function's span
    ("grad", TRAIN, "--fn", "loss", "--loss", "3", "--json"),  # E5006, as data
    ("run", QUICK, "--backend", "reference"),
    ("run", QUICK, "--json"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(os.path.basename(a) for a in c) for c in COMMANDS])
def test_a_warm_run_says_what_a_cold_one_says(cache_root, capsys, argv):
    cold = _run(capsys, *argv)
    assert glob.glob(str(cache_root / "frontend" / "*" / "*.mir")), "the cold run stored the frontend's module"
    warm = _run(capsys, *argv)
    assert warm == cold
    assert "warning" not in warm[2]


def test_an_unsafe_cache_folder_is_refused_with_a_way_out(cache_root, capsys):
    os.makedirs(cache_root, mode=0o700)
    os.chmod(cache_root, 0o777)
    code, out, err = _run(capsys, "run", QUICK)
    assert code == 2 and out == ""
    assert "error[E7010]" in err and "writable by group and others" in err
    assert f"chmod 700 {cache_root}" in err and "MIND_CACHE_DIR" in err and "MIND_CACHE=off" in err
    code, out, _ = _run(capsys, "check", QUICK, "--json")
    data = json.loads(out)
    assert code == 2 and not data["ok"] and [d["code"] for d in data["diagnostics"]] == ["E7010"]
    assert os.listdir(cache_root) == []  # nothing was written into it


def test_a_rebuilt_entry_is_one_warning_on_stderr_or_in_json(cache_root, capsys):
    assert _run(capsys, "check", TRAIN)[0] == 0
    (entry,) = glob.glob(str(cache_root / "frontend" / "*" / "*.mir"))
    for as_json in (False, True):
        with open(entry, "wb") as f:
            f.write(b"mind-frontend-v2 0\nnot what MIND wrote")
        code, out, err = _run(capsys, "check", TRAIN, *(["--json"] if as_json else []))
        assert code == 0
        if as_json:
            warnings = json.loads(out)["warnings"]
            assert [(w["code"], w["severity"]) for w in warnings] == [("E7011", "warning")] and err == ""
        else:
            assert err.count("warning[E7011]") == 1 and entry in err
        assert _run(capsys, "check", TRAIN)[2] == ""  # rebuilt: the next run is quiet


def test_cache_off_writes_nothing_and_a_bad_setting_is_e7002(cache_root, capsys, monkeypatch):
    monkeypatch.setenv("MIND_CACHE", "off")
    assert _run(capsys, "run", QUICK)[0] == 0
    assert not cache_root.exists()
    monkeypatch.setenv("MIND_CACHE", "false")
    code, _, err = _run(capsys, "run", QUICK)
    assert code == 2 and "error[E7002]" in err and "MIND_CACHE='false'" in err


def test_warnings_are_never_raised_even_under_w_error(cache_root):
    env = dict(os.environ, MIND_CACHE_DIR=str(cache_root), PYTHONWARNINGS="error")
    cmd = [sys.executable, "-m", "mind.cli.main", "check", TRAIN]
    assert subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120).returncode == 0
    (entry,) = glob.glob(str(cache_root / "frontend" / "*" / "*.mir"))
    with open(entry, "wb") as f:
        f.write(b"junk")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "warning[E7011]" in r.stderr and "Traceback" not in r.stderr
