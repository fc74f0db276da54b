"""Time to generate gradient IR (compile time, no execution): the example MLP and large_network.

    python benchmarks/autodiff.py [--reps 20]

Prints a table and writes benchmarks/results/autodiff.json (median/min over ``--reps`` runs of
``grad_function``: copy + reverse sweep + canonicalization + IR verification).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def mlp_forward():
    from mind.loader import load_module

    module, _ = load_module(os.path.join(ROOT, "examples", "train_mlp.mir"))
    return module.function("loss")


def large_network(batch: int = 128):
    """784 → 512 → 256 → 10 with ReLU, batch 128; loss = Σ out² (as examples/bench/large_network.mind)."""
    from mind.ir.builder import FunctionBuilder
    from mind.spec.dtypes import DType
    from mind.spec.ops import TensorType

    f32 = DType.F32
    b = FunctionBuilder("large_network")
    x = b.param("x", TensorType(f32, (batch, 784)))
    sizes = [(784, 512), (512, 256), (256, 10)]
    ws = [(b.param(f"w{i + 1}", TensorType(f32, s)), b.param(f"b{i + 1}", TensorType(f32, (s[1],))))
          for i, s in enumerate(sizes)]
    zero = b.const(0.0, f32)
    h = x
    for i, (w, bias) in enumerate(ws):
        h = b.emit("add", b.emit("matmul", h, w), bias)
        if i < len(ws) - 1:
            h = b.emit("select", b.emit("compare", h, zero, direction="gt"), h, zero)
    loss = b.emit("reduce_sum", b.emit("mul", h, h), axes=(0, 1), keepdims=False)
    return b.finish([loss])


def bench(fn, reps: int) -> dict:
    from mind.compiler.autodiff import grad_function

    times = []
    g = None
    for _ in range(reps):
        t0 = time.perf_counter()
        g = grad_function(fn)
        times.append(time.perf_counter() - t0)
    return {"function": fn.name, "forward_ops": len(fn.ops), "gradient_ops": len(g.ops),
            "wrt": [p.name for p in fn.params if p.type.dtype.is_float],
            "median_ms": round(statistics.median(times) * 1e3, 3), "min_ms": round(min(times) * 1e3, 3),
            "reps": reps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "autodiff.json"))
    args = ap.parse_args(argv)
    rows = [bench(mlp_forward(), args.reps), bench(large_network(), args.reps)]
    print(f"{'program':<16}{'fwd ops':>9}{'grad fn ops':>13}{'median ms':>11}{'min ms':>9}")
    for r in rows:
        print(f"{r['function']:<16}{r['forward_ops']:>9}{r['gradient_ops']:>13}{r['median_ms']:>11.2f}{r['min_ms']:>9.2f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump({"benchmark": "autodiff_gradient_generation", "python": platform.python_version(),
                   "machine": platform.machine(), "results": rows}, fh, indent=2, sort_keys=True)
        fh.write("\n")
    print(f"wrote {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
