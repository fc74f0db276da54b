"""The gradient-generation benchmark runs and writes its results (training: test_train_example.py)."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_benchmark_writes_results(tmp_path):
    mod = _load("benchmarks/autodiff.py", "autodiff_bench")
    out = tmp_path / "autodiff.json"
    assert mod.main(["--reps", "2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {r["function"] for r in data["results"]} == {"loss", "large_network"}
