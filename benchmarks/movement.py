"""Movement ops and transposes feeding matmuls on shapes the suite does not have, against NumPy,
torch eager and ``jax.jit`` in this one process.

    python benchmarks/movement.py [--threads N] [--only WORD] [--out FILE.json]

Rows: transposes of odd and 3-D shapes (permutations (0, 2, 1) and (2, 1, 0)) and f64; slices with
step 2 and -1 on the last and a middle axis, steps 2, 3, 4 and -1 on the last axis of 2-D and 3-D
shapes (f32, f64, i32); pads of odd widths on 3-D and 4-D tensors, rows shorter than a vector; matmuls with
a transposed lhs or rhs (512x1024x768), an attention score ``q @ k^T`` and an MLP's gradients (the
weight gradients are ``x^T @ g``, the input gradient ``g @ w^T``).  Every result is checked against
torch's.  Columns: the median per call of each implementation (calls repeated for about 0.25 s after
two warm calls), ``x torch`` and ``x jax`` (peer time / MIND time, > 1: MIND is faster) and ``GB/s``
(operands and results once, over MIND's time).  NumPy and torch run on ``--threads`` threads, XLA's
Eigen pool too; the load average before and after is printed: on a shared machine every figure moves.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np


def _t(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


def _cases(torch: Any, jax: Any, jnp: Any) -> list[tuple[str, str, str, list[np.ndarray], Any, Any, Any]]:
    """(name, MIND source, function, arguments, numpy, torch, jax.jit) of each row."""
    rng = np.random.default_rng(0)

    def arr(*shape: int, dt: str = "f32") -> np.ndarray:
        if dt == "i32":
            return rng.integers(-1000, 1000, shape, dtype=np.int32)
        return rng.standard_normal(shape).astype(np.float32 if dt == "f32" else np.float64)
    rows: list[tuple[str, str, str, list[np.ndarray], Any, Any, Any]] = []
    for shape, perm, dt in [((1000, 3000), (1, 0), "f32"), ((3, 4096, 513), (0, 2, 1), "f32"),
                            ((3, 4096, 513), (2, 1, 0), "f32"), ((1000, 3000), (1, 0), "f64"),
                            ((96, 200), (1, 0), "f32")]:
        out = tuple(shape[p] for p in perm)
        p = list(perm)
        rows.append((f"transpose_{dt}_{'x'.join(map(str, shape))}_{''.join(map(str, perm))}",
                     f"fn f(x: {_t(dt, *shape)}) -> {_t(dt, *out)} {{ transpose(x, permutation={p}) }}", "f",
                     [arr(*shape, dt=dt)], lambda x, p=p: np.ascontiguousarray(x.transpose(p)),
                     lambda x, p=p: x.permute(*p).contiguous(), jax.jit(lambda x, p=p: jnp.transpose(x, p))))
    for shape, axis, step, dt in [((2000, 3000), 1, 2, "f32"), ((2000, 3000), 1, -1, "f32"),
                                  ((64, 512, 256), 1, 2, "f32"), ((64, 512, 256), 1, -1, "f32"),
                                  ((64, 512, 256), 2, 2, "f64")]:
        n = shape[axis]
        out = list(shape)
        out[axis] = len(range(0, n, step) if step > 0 else range(n - 1, -1, step))
        start, end = (0, n) if step > 0 else (n - 1, -n - 1)
        sl = tuple(slice(None, None, step) if a == axis else slice(None) for a in range(len(shape)))
        rows.append((f"slice_{dt}_{'x'.join(map(str, shape))}_axis{axis}_step{step}",
                     f"fn f(x: {_t(dt, *shape)}) -> {_t(dt, *out)} {{ slice_stride(x, {axis}, {start}, {end}, {step}) }}",
                     "f", [arr(*shape, dt=dt)], lambda x, sl=sl: np.ascontiguousarray(x[sl]),
                     (lambda x, sl=sl: x[sl].contiguous()) if step > 0 else (lambda x, axis=axis: x.flip(axis)),
                     jax.jit(lambda x, sl=sl: x[sl])))
    for shape, step, dt in [(shape, step, dt) for shape in ((1609, 208), (4096, 1001), (3, 500, 77))
                            for step in (2, 3, 4, -1) for dt in ("f32",)] + [((1609, 208), 2, "f64"),
                                                                             ((4096, 1001), -1, "i32")]:
        # a step along the contiguous (last) axis: strided and reversed rows
        axis, n = len(shape) - 1, shape[-1]
        out = list(shape)
        out[axis] = len(range(0, n, step) if step > 0 else range(n - 1, -1, step))
        start, end = (0, n) if step > 0 else (n - 1, -n - 1)
        sl = (Ellipsis, slice(None, None, step))
        rows.append((f"slice_{dt}_{'x'.join(map(str, shape))}_last_step{step}",
                     f"fn f(x: {_t(dt, *shape)}) -> {_t(dt, *out)} {{ slice_stride(x, {axis}, {start}, {end}, {step}) }}",
                     "f", [arr(*shape, dt=dt)], lambda x, sl=sl: np.ascontiguousarray(x[sl]),
                     (lambda x, sl=sl: x[sl].contiguous()) if step > 0 else (lambda x, axis=axis: x.flip(axis)),
                     jax.jit(lambda x, sl=sl: x[sl])))
    for shape, pads, dt in [((63, 255, 129), [[1, 2], [3, 0], [5, 1]], "f32"),
                            ((8, 61, 61, 32), [[0, 0], [1, 2], [2, 1], [0, 3]], "f32"),
                            ((30, 1001, 77), [[2, 1], [0, 0], [3, 4]], "f64"),
                            ((125, 182, 27), [[0, 0], [1, 2], [3, 0]], "f32"),
                            ((125, 182, 27), [[0, 0], [1, 2], [3, 0]], "f64"),
                            ((125, 182, 27), [[0, 0], [1, 2], [3, 0]], "i32"),
                            ((8, 61, 61, 3), [[0, 0], [1, 2], [2, 1], [0, 0]], "f32"),
                            ((8, 61, 61, 3), [[0, 0], [1, 1], [1, 1], [0, 1]], "f32")]:
        out = [s + a + b for s, (a, b) in zip(shape, pads)]
        flat = [q for pr in reversed(pads) for q in pr]
        rows.append((f"pad_{dt}_{'x'.join(map(str, shape))}_{''.join(str(q) for pr in pads for q in pr)}",
                     f"fn f(x: {_t(dt, *shape)}) -> {_t(dt, *out)} {{ pad(x, pads={pads}) }}", "f",
                     [arr(*shape, dt=dt)], lambda x, pads=pads: np.pad(x, pads),
                     lambda x, flat=flat: torch.nn.functional.pad(x, flat), jax.jit(lambda x, pads=pads: jnp.pad(x, pads))))
    m, k, n = 512, 1024, 768
    rows.append(("matmul_transposed_lhs_512x1024x768",
                 f"fn f(a: {_t('f32', k, m)}, b: {_t('f32', k, n)}) -> {_t('f32', m, n)} {{ matmul(transpose(a), b) }}",
                 "f", [arr(k, m), arr(k, n)], lambda a, b: a.T @ b, lambda a, b: a.T @ b, jax.jit(lambda a, b: a.T @ b)))
    rows.append(("matmul_transposed_rhs_512x1024x768",
                 f"fn f(a: {_t('f32', m, k)}, b: {_t('f32', n, k)}) -> {_t('f32', m, n)} {{ matmul(a, transpose(b)) }}",
                 "f", [arr(m, k), arr(n, k)], lambda a, b: a @ b.T, lambda a, b: a @ b.T, jax.jit(lambda a, b: a @ b.T)))
    rows.append(("matmul_512x1024x768",
                 f"fn f(a: {_t('f32', m, k)}, b: {_t('f32', k, n)}) -> {_t('f32', m, n)} {{ matmul(a, b) }}",
                 "f", [arr(m, k), arr(k, n)], lambda a, b: a @ b, lambda a, b: a @ b, jax.jit(lambda a, b: a @ b)))
    q = _t("f32", 8, 384, 64)
    rows.append(("scores_q_kT_8x384x64",
                 f"fn f(q: {q}, k: {q}) -> {_t('f32', 8, 384, 384)} {{ matmul(q, transpose(k, permutation=[0, 2, 1])) }}",
                 "f", [arr(8, 384, 64), arr(8, 384, 64)], lambda a, b: a @ b.transpose(0, 2, 1),
                 lambda a, b: a @ b.transpose(1, 2), jax.jit(lambda a, b: a @ b.transpose(0, 2, 1))))
    b_, d, h, c = 256, 512, 1024, 256
    xs, w1s, w2s = _t("f32", b_, d), _t("f32", d, h), _t("f32", h, c)
    mlp = (f"fn loss(x: {xs}, w1: {w1s}, w2: {w2s}) -> f32 {{\n  let y = matmul(relu(matmul(x, w1)), w2);\n"
           f"  sum(y * y, axes=[0, 1], keepdims=false)\n}}\n"
           f"fn g(x: {xs}, w1: {w1s}, w2: {w2s}) -> ({w1s}, {w2s}) {{\n  let l = loss(x, w1, w2);\n  grad(l, wrt=[w1, w2])\n}}")

    def torch_grads(x: Any, w1: Any, w2: Any) -> Any:
        w1, w2 = w1.detach().requires_grad_(), w2.detach().requires_grad_()
        y = torch.relu(x @ w1) @ w2
        return torch.autograd.grad((y * y).sum(), [w1, w2])
    jg = jax.jit(jax.grad(lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2), argnums=(0, 1)))
    rows.append((f"mlp_gradients_{b_}x{d}x{h}x{c}", mlp, "g", [arr(b_, d) * 0.1, arr(d, h) * 0.05, arr(h, c) * 0.05],
                 None, torch_grads, lambda x, w1, w2: jg(w1, w2, x)))
    return rows


def _median_call(f: Callable[..., Any], args: list[Any]) -> float:
    def run() -> Any:
        r = f(*args)
        for v in (r if isinstance(r, tuple) else (r,)):
            if hasattr(v, "block_until_ready"):
                v.block_until_ready()
    run()
    run()
    t0 = time.perf_counter()
    run()
    reps = max(5, min(200, int(0.25 / max(time.perf_counter() - t0, 1e-6))))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fmt(t: float | None) -> str:
    return "-" if t is None else (f"{t * 1e6:.0f}µs" if t < 1e-3 else f"{t * 1e3:.2f}ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen={'true' if a.threads > 1 else 'false'} "
                          f"intra_op_parallelism_threads={a.threads}")
    import jax
    import jax.numpy as jnp
    import torch

    import mind
    torch.set_num_threads(a.threads)
    jax.config.update("jax_enable_x64", True)
    print(f"threads {a.threads}, load average before {os.getloadavg()}")
    print(f"{'workload':40s} {'MIND':>9s} {'numpy':>9s} {'torch':>9s} {'jax.jit':>9s} {'x torch':>8s} {'x jax':>6s} {'GB/s':>6s}")
    results = {}
    for name, src, fn, args, npf, tf, jf in _cases(torch, jax, jnp):
        if a.only not in name:
            continue
        f = mind.compile(src, fn=fn, threads=a.threads)
        outs = f(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        want = tf(*[torch.from_numpy(x) for x in args])
        for o, w in zip(outs, want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(o, w.numpy(), rtol=2e-4, atol=1e-3)
        tm = _median_call(f, args)
        tn = _median_call(npf, args) if npf else None
        tt = _median_call(tf, [torch.from_numpy(x) for x in args])
        tj = _median_call(jf, [jnp.asarray(x) for x in args])
        moved = sum(x.nbytes for x in args) + sum(o.nbytes for o in outs)
        results[name] = {"mind_s": tm, "numpy_s": tn, "torch_s": tt, "jax_s": tj}
        print(f"{name:40s} {_fmt(tm):>9s} {_fmt(tn):>9s} {_fmt(tt):>9s} {_fmt(tj):>9s} {tt / tm:8.2f} {tj / tm:6.2f} "
              f"{moved / tm / 1e9:6.1f}", flush=True)
    print(f"load average after {os.getloadavg()}")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"threads": a.threads, "results": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
