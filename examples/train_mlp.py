"""Train the MLP of ``examples/train_mlp.mir`` (784 → 256 → 10, softmax cross-entropy) with SGD.

``train_step`` is built as Core IR: the forward loss from the example file, its gradient generated
at compile time by the autodiff transform (``grad_values``), and the SGD update — one function
returning the loss and the updated parameters.  It runs on the reference backend on a synthetic,
learnable data set (10 Gaussian clusters in 784 dimensions, fixed seed) and prints the loss.

    python examples/train_mlp.py [--steps 300] [--lr 0.1] [--print-ir]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, N_IN, N_HIDDEN, N_OUT = 32, 784, 256, 10


def build_train_step(lr: float = 0.1):
    from mind.compiler.autodiff import grad_values, inline_function
    from mind.compiler.autodiff.canon import canonicalize
    from mind.ir.builder import FunctionBuilder
    from mind.ir.core import Module
    from mind.ir.verify import verify_module
    from mind.loader import load_module
    from mind.spec.dtypes import DType

    module, _ = load_module(os.path.join(HERE, "train_mlp.mir"))
    loss_fn = module.function("loss")
    b = FunctionBuilder("train_step")
    params = [b.param(p.name, p.type) for p in loss_fn.params]
    (loss,) = inline_function(b, loss_fn, params)
    weights = params[2:]  # w1, b1, w2, b2
    grads = grad_values(b, loss, weights)
    rate = b.const(lr, DType.F32)
    updated = [b.emit("sub", w, b.emit("mul", g, rate), name=f"new_{w.name}") for w, g in zip(weights, grads)]
    fn = canonicalize(b.finish([loss] + updated))
    verify_module(Module([fn]))
    return fn


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters: class k is centred on a random unit-scale point; noise σ = 1."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((N_OUT, N_IN)).astype(np.float32) * 0.15
    labels = rng.integers(0, N_OUT, size=n)
    x = centres[labels] + rng.standard_normal((n, N_IN)).astype(np.float32) * 0.3
    y = np.eye(N_OUT, dtype=np.float32)[labels]
    return x.astype(np.float32), y


def init_params(seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((N_IN, N_HIDDEN)) * np.sqrt(2.0 / N_IN)).astype(np.float32)
    w2 = (rng.standard_normal((N_HIDDEN, N_OUT)) * np.sqrt(2.0 / N_HIDDEN)).astype(np.float32)
    return [w1, np.zeros(N_HIDDEN, np.float32), w2, np.zeros(N_OUT, np.float32)]


def train(steps: int = 300, lr: float = 0.1, seed: int = 0, log_every: int = 50, verbose: bool = True):
    from mind.reference.interpreter import run_function

    fn = build_train_step(lr)
    x, y = make_data(BATCH * 64, seed)
    params = init_params(seed + 1)
    losses = []
    for step in range(steps):
        i = (step * BATCH) % len(x)
        out = run_function(fn, [x[i:i + BATCH], y[i:i + BATCH]] + params)
        losses.append(float(out[0]))
        params = [np.asarray(p) for p in out[1:]]
        if verbose and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
    return losses, fn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--print-ir", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    losses, fn = train(args.steps, args.lr)
    if args.print_ir:
        from mind.ir.printer import print_function

        print(print_function(fn))
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    print(f"loss {first:.4f} → {last:.4f} ({first / last:.1f}× lower) in {time.perf_counter() - t0:.1f}s, "
          f"{len(fn.ops)} ops in train_step")
    return 0 if first / last >= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
