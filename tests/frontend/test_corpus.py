"""The corpus: our own programs in the styles of the public MIND material (the spec's examples, the
public compiler's examples, tests and benchmarks, the model zoo, the systems-language examples),
one construct of each kind found there (docs/frontend.md, "Corpus").

``corpus/accepted/*.mind`` compile, and every function listed in ``CASES`` gives, on the reference
interpreter, the value a NumPy transcription of it computes; ``corpus/refused/*.mind`` are refused
with the diagnostic their first line names (``// expect: CODE words of the message``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError
from mind.calling import run_reference

CORPUS = Path(__file__).parent / "corpus"
RNG = np.random.default_rng(2021)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _relu(x):
    return np.maximum(x, 0)


def _log_softmax(z, axis):
    m = z.max(axis=axis, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=axis, keepdims=True))


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _mlp_loss(x, t, w1, b1, w2, b2):
    d = _relu(x @ w1 + b1) @ w2 + b2 - t
    return np.mean(d * d)


def _mlp_grads(x, t, w1, b1, w2, b2):
    z = x @ w1 + b1
    h = _relu(z)
    d = h @ w2 + b2 - t
    n = d.size
    d_out = 2 * d / n
    gw2, gb2 = h.T @ d_out, d_out.sum(0)
    dz = (d_out @ w2.T) * (z > 0)
    return x.T @ dz, dz.sum(0), gw2, gb2


def _train(x, t, params):
    before = _mlp_loss(x, t, *params)
    for _ in range(3):
        params = [p - np.float32(0.05) * g for p, g in zip(params, _mlp_grads(x, t, *params))]
    return before, _mlp_loss(x, t, *params)


def _zoo(x, labels, w1, b1, w2, b2):
    def fwd(p):
        return _relu(x @ p[0] + p[1]) @ p[2] + p[3]

    def loss(logits):
        return -np.mean(_log_softmax(logits, 1)[np.arange(len(labels)), labels])

    def grads(p):
        z = x @ p[0] + p[1]
        h = _relu(z)
        logits = h @ p[2] + p[3]
        dl = (_softmax(logits, 1) - np.eye(4)[labels]) / len(labels)
        dz = (dl @ p[2].T) * (z > 0)
        return x.T @ dz, dz.sum(0), h.T @ dl, dl.sum(0)
    p = [w1, b1, w2, b2]
    first = loss(fwd(p))
    for _ in range(5):
        p = [a - np.float32(0.1) * g for a, g in zip(p, grads(p))]
    logits = fwd(p)
    return first, loss(logits), np.argmax(logits, 1).astype(np.int32)


def _lorenz(x0):
    x, y, z = x0, 1.0, 1.0
    for _ in range(50):
        dx, dy, dz = 10.0 * (y - x), x * (28.0 - z) - y, x * y - 2.666666666666667 * z
        x, y, z = x + 0.005 * dx, y + 0.005 * dy, z + 0.005 * dz
    return x + y + z


def _mandel(cr, ci):
    zr = zi = 0.0
    esc = 20
    for k in range(20):
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        if esc == 20 and zr * zr + zi * zi > 4.0:
            esc = k
    return esc


def _collatz(n=27):
    s = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        s += 1
    return s


def _conv(x, w, pads):
    (t, b), (l, r) = pads
    xp = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    kh, kw = w.shape[:2]
    oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = np.tensordot(xp[:, i:i + kh, j:j + kw, :], w, axes=([1, 2, 3], [0, 1, 2]))
    return out


A34, V4 = _f32(3, 4), _f32(4)
M223 = _f32(2, 2, 3)
BN = _f32(3, 2, 2, 4)
X155, W3334 = _f32(1, 5, 5, 3), _f32(3, 3, 3, 4)
MLP = [_f32(16, 4), _f32(16, 2), [_f32(4, 8) * 0.5, _f32(8) * 0.1, _f32(8, 2) * 0.5, _f32(2) * 0.1]]
ZOO = [_f32(32, 8), RNG.integers(0, 4, 32).astype(np.int32), _f32(8, 16) * 0.3, np.zeros(16, np.float32),
       _f32(16, 4) * 0.3, np.zeros(4, np.float32)]
X46 = _f32(4, 6)
T = np.linspace(-3, 3, 11)
Q, K, V = _f32(2, 3, 8), _f32(2, 3, 8), _f32(2, 3, 8)
G8, B8 = _f32(8), _f32(8)

#: (file, function, inputs, expected outputs)
CASES = [
    ("spec_broadcasting", "row_broadcast", [], [np.array([[2, 4, 6], [5, 7, 9]])]),
    ("spec_broadcasting", "column_broadcast", [], [np.array([[2, 3, 4], [6, 7, 8]])]),
    ("spec_broadcasting", "multidim", [(ma := _f32(4, 1, 3)), (mb := _f32(1, 5, 3))], [ma + mb * np.float32(4)]),
    ("spec_reductions", "stats", [M223], [M223.sum(), M223.sum((0, 1)), M223.sum(1, keepdims=True), M223.mean()]),
    ("spec_reductions", "batch_norm", [BN],
     [(BN - BN.mean(0, keepdims=True)) / np.sqrt(((BN - BN.mean(0, keepdims=True)) ** 2).mean(0, keepdims=True)
                                                  + np.float32(1e-5))]),
    ("spec_linear_algebra", "identity_matmul", [A34[:, :3]], [A34[:, :3]]),
    ("spec_linear_algebra", "matrix_vector", [A34, V4], [A34 @ V4]),
    ("spec_linear_algebra", "batched", [(ba := _f32(2, 1, 3, 4)), (bb := _f32(1, 5, 4, 6))], [ba @ bb]),
    ("spec_linear_algebra", "abt", [A34[:2, :3], A34[1:, :3]], [A34[:2, :3] @ A34[1:, :3].T]),
    ("spec_linear_algebra", "convs", [X155, W3334],
     [_conv(X155, W3334, ((0, 0), (0, 0))), _conv(X155, W3334, ((1, 1), (1, 1))),
      _conv(X155, W3334, ((2, 2), (3, 3)))]),
    ("spec_autodiff", "train", [MLP[0], MLP[1]] + MLP[2], list(_train(MLP[0], MLP[1], MLP[2]))),
    ("spec_autodiff", "pullback_demo", [np.array([1, 2, 3], np.float32), np.array([1, 0.5], np.float32)],
     [np.array([2.0, 1.5, 1.0])]),
    ("spec_autodiff", "binary_op_grad", [np.float32(2.0), np.float32(3.0)], [4.0, 2.0]),
    ("compiler_benchmarks", "simple_mlp", [], [np.zeros((32, 10))]),
    ("compiler_benchmarks", "reductions", [(r := _f32(128, 256))], [r.sum(0).mean()]),
    ("compiler_benchmarks", "reshape_ops", [(ro := _f32(32, 64))], [ro.reshape(64, 32).T]),
    ("compiler_benchmarks", "scalar_math", [], [5]),
    ("compiler_autodiff", "test_gradient", [], [6.0]),
    ("compiler_autodiff", "test_matmul_grad", [(ga := _f32(2, 3)), (gb := _f32(3, 4))],
     [np.ones((2, 4)) @ gb.T, ga.T @ np.ones((2, 4))]),
    ("compiler_autodiff", "reduction_grads", [M223[0]], [np.full((2, 3), 1 / 6), M223[0].sum(1)]),
    ("zoo_mlp", "train", ZOO, list(_zoo(*ZOO))),
    ("zoo_attention", "layer_norm", [Q, G8, B8],
     [(Q - Q.mean(2, keepdims=True)) / np.sqrt(((Q - Q.mean(2, keepdims=True)) ** 2).mean(2, keepdims=True)
                                                + np.float32(1e-5)) * G8 + B8]),
    ("zoo_attention", "attention", [Q, K, V], [_softmax(Q @ K.transpose(0, 2, 1) / np.sqrt(8.0), 2) @ V]),
    ("systems_style", "collatz_steps", [], [_collatz()]),
    ("systems_style", "lorenz", [np.float64(1.0)], [_lorenz(1.0)]),
    ("systems_style", "mandelbrot_escape", [np.float64(0.3), np.float64(0.5)], [_mandel(0.3, 0.5)]),
    ("systems_style", "mandelbrot_escape", [np.float64(-0.5), np.float64(0.1)], [_mandel(-0.5, 0.1)]),
    ("indexing_and_math", "features", [X46], [X46[1:3, ::2], X46[..., -1], X46[0, 0] + X46[-1, -1],
                                             (X46 * X46).sum(0)]),
    ("indexing_and_math", "waves", [T], [np.ones_like(T), np.abs(T) ** 1.5, np.floor(T) + np.log2(np.abs(T) + 1)]),
    ("indexing_and_math", "tables", [], [np.eye(3), np.arange(0, 10, 2), np.linspace(0, 1, 5),
                                        np.array([[1, 2, 3], [4, 5, 6]]), 24]),
]


def _function(name: str, fn: str):
    module = compile_source((CORPUS / "accepted" / f"{name}.mind").read_text(), f"{name}.mind")
    return next(f for f in module.functions if f.name == fn)


@pytest.mark.parametrize("name, fn, inputs, want", CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_accepted_programs_compute_the_numpy_values(name, fn, inputs, want):
    got = run_reference(_function(name, fn), [np.asarray(x) for x in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            tol = 1e-12 if g.dtype == np.float64 else 2e-5
            np.testing.assert_allclose(g, w.astype(np.float64), rtol=tol, atol=tol)


def test_every_accepted_program_compiles_whole():
    for path in sorted((CORPUS / "accepted").glob("*.mind")):
        compile_source(path.read_text(), path.name, verify=True)


REFUSED = sorted((CORPUS / "refused").glob("*.mind"))


@pytest.mark.parametrize("path", REFUSED, ids=[p.stem for p in REFUSED])
def test_refused_programs_name_the_construct(path):
    text = path.read_text()
    header = text.splitlines()[0]
    assert header.startswith("// expect: ")
    code, words = header[len("// expect: "):].split(" ", 1)
    with pytest.raises(MindError) as info:
        compile_source(text, path.name)
    d = info.value.diagnostics[0]
    assert d.code == code and words in d.message, d


def test_the_language_compiles_to_the_same_ir_whatever_the_hash_seed():
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    outs = []
    for seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed, MIND_FRONTEND_CACHE="0")
        r = subprocess.run([sys.executable, "-m", "mind.cli.main", "ir",
                            str(CORPUS / "accepted" / "spec_autodiff.mind"), "--hash"],
                           capture_output=True, env=env, cwd=root, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        outs.append(r.stdout)
    assert outs[0] == outs[1] and b"select" in outs[0]
