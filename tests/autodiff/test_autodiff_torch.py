"""Optional: gradients of the MLP loss from MIND match PyTorch's (skipped without torch).

The program is ``examples/train_mlp.mind``'s ``loss``, differentiated in the language
(``grad(l, wrt=[w1, b1, w2, b2])``), run on the reference backend; and the same loss as Core IR
(``examples/train_mlp.mir``) through the Python API (``grad_function``).  PyTorch computes the same
loss in float64 with ``backward()``.

Tolerance (derived from ``mind.spec.accuracy``, not tuned).  Every gradient element is a chain of
sums and dot products; to first order its rounding error is at most γ(n)·S, where γ is the spec's
``gamma``, n the longest chain of accumulations along the path (forward 784 + 256 + 10, backward
10 + 256 + batch, plus the elementwise ops) and S the same gradient computed on absolute values
(the spec's ``abs_sum`` carried through the backward pass, including the effect of the logits'
error on the softmax: |δp| ≤ 2p·|δz|).  As in ``accuracy.check``, both sides' bounds are allowed.
"""

from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = 32

GRADS_FN = """
fn loss_and_grads(x: Tensor<f32, [B, 784]>, y_onehot: Tensor<f32, [B, 10]>,
                  w1: Tensor<f32, [784, 256]>, b1: Tensor<f32, [256]>,
                  w2: Tensor<f32, [256, 10]>, b2: Tensor<f32, [10]>)
    -> (f32, Tensor<f32, [784, 256]>, Tensor<f32, [256]>, Tensor<f32, [256, 10]>, Tensor<f32, [10]>) {
    let l = loss(x, y_onehot, w1, b1, w2, b2);
    let (g_w1, g_b1, g_w2, g_b2) = grad(l, wrt=[w1, b1, w2, b2]);
    (l, g_w1, g_b1, g_w2, g_b2)
}
"""


def _example():
    spec = importlib.util.spec_from_file_location("train_mlp_example_torch", os.path.join(ROOT, "examples", "train_mlp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _inputs(dtype):
    mod = _example()
    x, y = mod.make_data(BATCH, dtype=dtype)
    params = mod.init_params(dtype=dtype)
    rng = np.random.default_rng(5)  # non-zero biases, so every parameter's gradient is exercised
    params[1] = (0.1 * rng.standard_normal(params[1].shape)).astype(dtype)
    params[3] = (0.1 * rng.standard_normal(params[3].shape)).astype(dtype)
    return x, y, params


def _torch_grads(x, y, params):
    tp = [torch.tensor(np.asarray(p, np.float64), requires_grad=True) for p in params]
    tx, ty = torch.tensor(np.asarray(x, np.float64)), torch.tensor(np.asarray(y, np.float64))
    h = torch.relu(tx @ tp[0] + tp[1])
    logits = h @ tp[2] + tp[3]
    loss = -(ty * torch.log_softmax(logits, 1)).sum(1).mean()
    loss.backward()
    return loss.item(), [t.grad.numpy() for t in tp]


def _bounds(x, y, params, dtype):
    """Per-element error bounds γ(n)·S for (loss, g_w1, g_b1, g_w2, g_b2), one implementation."""
    from mind.spec.accuracy import gamma

    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    w1, b1, w2, b2 = (np.asarray(p, np.float64) for p in params)
    batch = x.shape[0]
    pre = x @ w1 + b1
    h = np.maximum(pre, 0)
    z = h @ w2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    h_abs = np.abs(x) @ np.abs(w1) + np.abs(b1)           # abs_sum of the hidden pre-activations
    z_abs = (np.abs(h) + h_abs) @ np.abs(w2) + np.abs(b2)  # ... of the logits, with h's own error
    s_dl = (p + y) * (1 + 2 * z_abs.max(1, keepdims=True)) / batch
    s_w2 = (np.abs(h) + h_abs).T @ s_dl
    s_b2 = s_dl.sum(0)
    s_dh = (s_dl @ np.abs(w2).T) * (pre > 0)
    s_w1 = np.abs(x).T @ s_dh
    s_b1 = s_dh.sum(0)
    s_loss = float(np.sum(y * (np.abs(np.log(p)) + 2 * z_abs.max(1, keepdims=True)))) / batch
    n = w1.shape[0] + w1.shape[1] + w2.shape[1] + w2.shape[1] + w1.shape[1] + batch + 20
    g = float(gamma(n, dtype))
    return [g * s for s in (s_loss, s_w1, s_b1, s_w2, s_b2)]


def _compare(ours, x, y, params, ours_dtype):
    ref_loss, ref_grads = _torch_grads(x, y, params)
    mine = _bounds(x, y, params, ours_dtype)
    theirs = _bounds(x, y, params, "f64")
    report = []
    for name, o, r, bm, bt in zip(["loss", "w1", "b1", "w2", "b2"], ours, [ref_loss] + ref_grads, mine, theirs):
        o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
        tol = np.asarray(bm + bt)
        err = np.abs(o - r)
        bad = err > tol
        assert not bad.any(), (f"{name}: |mind - torch| = {err[bad].max():.3g} above the bound "
                               f"{tol[bad][np.argmax(err[bad])]:.3g} ({int(bad.sum())} elements)")
        report.append((name, float(err.max()), float(np.max(err / np.maximum(tol, 1e-300))),
                       float(np.max(np.abs(r)))))
    for name, err, frac, mag in report:
        print(f"  {name:4s} max |mind - torch| = {err:.3g}  (max |torch| = {mag:.3g}, "
              f"at most {frac:.2e} of the bound)")
    if ours_dtype == "f64":
        # the f64 comparison is the meaningful one: the bound is far below the gradients.  In f32,
        # worst-case bounds chained through 784- and 256-long dot products exceed max |g| (the
        # bound is sound but says little; the observed error is printed above, ~1e-7 relative).
        for (name, _e, _f, mag), b in zip(report[1:], mine[1:]):
            assert float(np.max(b)) < 1e-6 * mag, (name, float(np.max(b)), mag)
    return report


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_mind_mlp_gradients_match_torch(dtype):
    """The .mind program (grad in the language) against torch.autograd; f64 runs the same source
    with f32 → f64, so the comparison is tight (γ for f64)."""
    from mind.compiler.frontend.api import compile_source
    from mind.calling import run_reference

    with open(os.path.join(ROOT, "examples", "train_mlp.mind"), encoding="utf-8") as f:
        text = f.read() + GRADS_FN
    np_dtype = np.float32
    if dtype == "f64":
        text, np_dtype = re.sub(r"\bf32\b", "f64", text), np.float64
    fn = compile_source(text, "train_mlp.mind", verify=True).function("loss_and_grads")
    x, y, params = _inputs(np_dtype)
    ours = run_reference(fn, [x, y] + params)
    print(f"\n.mind loss + grad ({dtype}) vs torch (f64):")
    _compare(ours, x, y, params, dtype)


def test_mir_mlp_gradients_match_torch():
    """The same loss as Core IR (examples/train_mlp.mir, batch 32), via the Python API."""
    from mind.compiler.autodiff import grad_function
    from mind.loader import load_module
    from mind.calling import run_reference

    module, _ = load_module(os.path.join(ROOT, "examples", "train_mlp.mir"))
    g = grad_function(module.function("loss"), wrt=["w1", "b1", "w2", "b2"])
    x, y, params = _inputs(np.float32)
    ours = run_reference(g, [x, y] + params)
    print("\n.mir grad_function (f32) vs torch (f64):")
    _compare(ours, x, y, params, "f32")
