"""Train the MLP of ``examples/train_mlp.mind`` (784 → 256 → 10, softmax cross-entropy) with SGD.

The whole training step is MIND: ``train_step`` in the .mind file computes the loss, its gradients
with ``grad(l, wrt=[w1, b1, w2, b2])`` (generated at compile time, as ordinary Core IR) and the SGD
update.  This driver only compiles it (``compile_source``), picks a backend (``compile_for``),
makes a synthetic, learnable data set (10 Gaussian clusters in 784 dimensions, fixed seed) and
loops, feeding the updated parameters back in.

    python examples/train_mlp.py [--steps 300] [--lr 0.05] [--batch 32] [--backend reference|cpu]
                                 [--log-every 25] [--print-ir]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "train_mlp.mind")
N_IN, N_HIDDEN, N_OUT = 784, 256, 10
PARAMS = ("w1", "b1", "w2", "b2")


def load_program(path: str = SOURCE, text: str | None = None):
    """Compile the .mind file (or ``text``) and return its Module (functions ``loss``, ``train_step``)."""
    from mind.compiler.frontend.api import compile_source

    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return compile_source(text, path, verify=True)


def make_data(n: int, seed: int = 0, n_in: int = N_IN, n_out: int = N_OUT, dtype=np.float32,
              sample_seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters projected to ``n_in`` dims: class k has a centre in a 16-d latent space
    (σ = 1), a point is its centre + latent noise (σ = 0.8), mapped through a fixed random
    projection to ``n_in`` dims, plus per-dimension noise (σ = 1).  ``seed`` fixes the clusters
    and the projection; ``sample_seed`` (default ``seed``) the points, so a held-out set is
    ``make_data(n, seed, sample_seed=other)``.  Returns ``x`` [n, n_in] and one-hot ``y`` [n, n_out]."""
    rng = np.random.default_rng(seed)
    latent = 16
    centres = rng.standard_normal((n_out, latent))
    proj = rng.standard_normal((latent, n_in)) / np.sqrt(latent)
    if sample_seed is not None:
        rng = np.random.default_rng([seed, sample_seed])
    labels = rng.integers(0, n_out, size=n)
    z = centres[labels] + 0.8 * rng.standard_normal((n, latent))
    x = z @ proj + 1.0 * rng.standard_normal((n, n_in))
    y = np.eye(n_out)[labels]
    return x.astype(dtype), y.astype(dtype)


def init_params(seed: int = 1, n_in: int = N_IN, n_hidden: int = N_HIDDEN, n_out: int = N_OUT,
                dtype=np.float32) -> list[np.ndarray]:
    """He-initialised weights, zero biases."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((n_in, n_hidden)) * np.sqrt(2.0 / n_in)
    w2 = rng.standard_normal((n_hidden, n_out)) * np.sqrt(2.0 / n_hidden)
    return [w1.astype(dtype), np.zeros(n_hidden, dtype), w2.astype(dtype), np.zeros(n_out, dtype)]


def compile_train_step(backend: str = "reference", module=None):
    """The runner of ``train_step`` on ``backend`` and the IR function."""
    from mind.backends import compile_for

    fn = (module or load_program()).function("train_step")
    return compile_for(fn, backend), fn


def accuracy(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Held-out accuracy of the trained parameters (NumPy forward pass, for the report only)."""
    w1, b1, w2, b2 = params
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    return float(np.mean(logits.argmax(1) == y.argmax(1)))


def train(steps: int = 300, lr: float = 0.05, batch: int = 32, seed: int = 0, log_every: int = 25,
          backend: str = "reference", verbose: bool = True):
    """Run ``steps`` SGD steps; returns the per-step losses and the IR of ``train_step``."""
    step_fn, fn = compile_train_step(backend)
    x, y = make_data(batch * 64, seed)
    params = init_params(seed + 1)
    rate = np.float32(lr)
    losses: list[float] = []
    for step in range(steps):
        i = (step * batch) % len(x)
        out = step_fn([x[i:i + batch], y[i:i + batch], *params, rate])
        losses.append(float(out[0]))
        params = [np.asarray(p) for p in out[1:]]
        if verbose and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.4f}", flush=True)
    if verbose:
        xt, yt = make_data(1000, seed, sample_seed=1)
        print(f"held-out accuracy {accuracy(params, xt, yt):.3f}")
    return losses, fn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--backend", default="reference", help="reference (default) or cpu")
    ap.add_argument("--print-ir", action="store_true", help="print the IR of train_step")
    args = ap.parse_args(argv)
    from mind.diagnostics import MindError

    t0 = time.perf_counter()
    try:
        losses, fn = train(args.steps, args.lr, args.batch, log_every=args.log_every, backend=args.backend)
    except MindError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.print_ir:
        from mind.ir.printer import print_function

        print(print_function(fn))
    k = min(5, len(losses))
    first, last = float(np.mean(losses[:k])), float(np.mean(losses[-k:]))
    ratio = first / last
    print(f"loss {first:.4f} → {last:.4f} (mean of first/last {k} steps): {ratio:.1f}× lower, "
          f"{time.perf_counter() - t0:.1f}s on `{args.backend}`, {len(fn.ops)} ops in train_step")
    return 0 if ratio >= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
