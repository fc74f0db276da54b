"""The training example written in MIND (``examples/train_mlp.mind``): its ``train_step`` — loss,
``grad(l, wrt=[w1, b1, w2, b2])`` and the SGD update, all in the language — trains the MLP (the
loss falls ≥ 5×), and its gradients agree with central finite differences in float64.

The finite-difference check runs the same source text with the sizes shrunk (784 → 6, 256 → 5,
10 → 3) and f32 → f64, so it checks the example's program, not a copy of it."""

from __future__ import annotations

import importlib.util
import os
import re

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "examples", "train_mlp.mind")
TINY = {"784": 6, "256": 5, "10": 3}


def _example():
    spec = importlib.util.spec_from_file_location("train_mlp_mind_example", os.path.join(ROOT, "examples", "train_mlp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tiny_f64_source() -> str:
    with open(SOURCE, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"\b(784|256|10)\b", lambda m: str(TINY[m.group(1)]), text)
    return re.sub(r"\bf32\b", "f64", text)


def test_example_compiles_with_symbolic_batch():
    mod = _example()
    module = mod.load_program()
    fn = module.function("train_step")
    assert [p.name for p in fn.params] == ["x", "y_onehot", "w1", "b1", "w2", "b2", "lr"]
    assert str(fn.params[0].type) == "f32[B, 784]"
    assert [str(t) for t in (r.type for r in fn.results)] == ["f32[]", "f32[784, 256]", "f32[256]", "f32[256, 10]", "f32[10]"]
    # the gradient is ordinary Core IR inside train_step
    assert {op.op for op in fn.ops} >= {"matmul", "transpose", "reduce_sum", "select", "exp", "log"}


def test_short_training_loss_falls_fivefold():
    mod = _example()
    losses, fn = mod.train(steps=60, verbose=False)
    assert all(np.isfinite(losses))
    first, last = np.mean(losses[:3]), np.mean(losses[-3:])
    assert first / last >= 5, (first, last)


def test_train_step_is_sgd_on_loss():
    """train_step's first result is `loss`, and a step with lr = 0 leaves the parameters unchanged."""
    from mind.backends import compile_for

    mod = _example()
    module = mod.load_program()
    x, y = mod.make_data(8)
    params = mod.init_params()
    (l,) = compile_for(module.function("loss"))([x, y, *params])
    out = compile_for(module.function("train_step"))([x, y, *params, np.float32(0.0)])
    assert float(out[0]) == float(l)
    for p, q in zip(params, out[1:]):
        np.testing.assert_array_equal(p, q)


def _avoid_kinks(rng, batch):
    """Inputs whose hidden pre-activations stay ≥ 0.05 from ReLU's kink and whose logits have a
    unique maximum per row (margin ≥ 0.05), so no finite-difference step crosses either."""
    n_in, n_h, n_out = TINY["784"], TINY["256"], TINY["10"]
    for _ in range(1000):
        x = rng.standard_normal((batch, n_in))
        y = np.eye(n_out)[rng.integers(0, n_out, batch)]
        w1, w2 = rng.standard_normal((n_in, n_h)), rng.standard_normal((n_h, n_out))
        b1, b2 = 0.5 * rng.standard_normal(n_h), 0.5 * rng.standard_normal(n_out)
        pre = x @ w1 + b1
        logits = np.maximum(pre, 0) @ w2 + b2
        top2 = np.sort(logits, axis=1)[:, -2:]
        if np.min(np.abs(pre)) >= 0.05 and np.min(top2[:, 1] - top2[:, 0]) >= 0.05 and (pre > 0).any(0).all():
            return [x, y, w1, b1, w2, b2]
    pytest.fail("could not draw inputs away from the kinks")


def test_train_step_gradients_match_finite_differences_f64():
    """Gradients recovered from train_step (lr = 1: new = w - g) against central differences of
    train_step's own loss, with the error model of verify/autodiff_fd.py (tolerance derived from
    mind.spec.accuracy.gamma and a Richardson estimate of the truncation error, not tuned)."""
    from mind.backends import compile_for
    from mind.compiler.frontend.api import compile_source
    from mind.spec.accuracy import gamma

    module = compile_source(_tiny_f64_source(), "train_mlp_tiny_f64.mind", verify=True)
    fn = module.function("train_step")
    assert str(fn.params[0].type) == "f64[B, 6]"
    run = compile_for(fn)
    rng = np.random.default_rng(3)
    args = _avoid_kinks(rng, batch=4)
    one = np.float64(1.0)
    out = run([*args, one])
    grads = [w - new for w, new in zip(args[2:], out[1:])]

    def loss(a):
        return float(run([*a, one])[0])

    n_ops = len(fn.ops) + 2
    f0, fabs = loss(args), loss([np.abs(a) for a in args])
    u_round = float(gamma(n_ops, "f64")) * max(1.0, abs(f0), abs(fabs))
    gmax = max(float(np.max(np.abs(g))) for g in grads)
    # the gradient program's rounding, plus recovering g from w - (w - g): one more rounding of |w|
    g_round = 4 * float(gamma(n_ops, "f64")) * max(1.0, gmax, max(float(np.max(np.abs(w))) for w in args[2:]))
    h = 2.0 ** -14
    max_err = max_tol = 0.0
    checked = 0
    for k, g in enumerate(grads):
        i = k + 2
        for j in np.ndindex(g.shape):
            def d(step):
                ap, am = [a.copy() for a in args], [a.copy() for a in args]
                ap[i][j] += step
                am[i][j] -= step
                return (loss(ap) - loss(am)) / (2 * step)
            d1, d2 = d(h), d(2 * h)
            tol = 4 * (abs(d2 - d1) / 3 + u_round / h + g_round)
            err = abs(float(g[j]) - d1)
            assert err <= tol, f"d loss / d {['w1', 'b1', 'w2', 'b2'][k]}{list(j)}: train_step {g[j]!r}, FD {d1!r}"
            max_err, max_tol = max(max_err, err), max(max_tol, tol)
            checked += 1
    print(f"max |grad - FD| = {max_err:.3g}, max tolerance = {max_tol:.3g}, max |grad| = {gmax:.3g}")
    assert checked == 6 * 5 + 5 + 5 * 3 + 3
    assert max_tol < 1e-6 * max(gmax, 1.0), "tolerance too loose for a meaningful check"
    assert gmax > 1e-3  # the gradients are not trivially zero
