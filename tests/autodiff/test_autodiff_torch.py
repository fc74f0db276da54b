"""Optional: the transform's gradients of the MLP loss match PyTorch's (skipped without torch)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_mlp_gradients_match_torch():
    from mind.compiler.autodiff import grad_function
    from mind.loader import load_module
    from mind.reference.interpreter import run_function

    spec = importlib.util.spec_from_file_location("train_mlp_example", os.path.join(ROOT, "examples", "train_mlp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    module, _ = load_module(os.path.join(ROOT, "examples", "train_mlp.mir"))
    fn = module.function("loss")
    g = grad_function(fn, wrt=["w1", "b1", "w2", "b2"])
    x, y = mod.make_data(32)
    params = mod.init_params()
    ours = run_function(g, [x, y] + params)
    tp = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    h = torch.relu(torch.tensor(x, dtype=torch.float64) @ tp[0] + tp[1])
    logits = h @ tp[2] + tp[3]
    loss = -(torch.tensor(y, dtype=torch.float64) * torch.log_softmax(logits, 1)).sum() / 32
    loss.backward()
    # f32 program vs f64 torch: per-element tolerance from f32 rounding over dot products of length ≤ 784
    np.testing.assert_allclose(ours[0], loss.item(), rtol=1e-5)
    for o, t in zip(ours[1:], tp):
        ref = t.grad.numpy()
        tol = 784 * 2.0 ** -24 * 4 * (np.abs(ref).max() + 1e-3)
        assert np.max(np.abs(o - ref)) <= tol
