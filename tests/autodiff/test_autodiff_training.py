"""The training example: train_step = forward + generated gradient + SGD, loss falls ≥ 5×;
and the gradient-generation benchmark runs."""

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


def test_training_loss_falls_fivefold():
    mod = _load("examples/train_mlp.py", "train_mlp_example")
    losses, fn = mod.train(steps=60, lr=0.1, verbose=False)
    assert np.mean(losses[:3]) / np.mean(losses[-3:]) >= 5
    assert [v.name for v in fn.params] == ["x", "y", "w1", "b1", "w2", "b2"]
    assert len(fn.results) == 5


def test_benchmark_writes_results(tmp_path):
    mod = _load("benchmarks/autodiff.py", "autodiff_bench")
    out = tmp_path / "autodiff.json"
    assert mod.main(["--reps", "2", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {r["function"] for r in data["results"]} == {"loss", "large_network"}
