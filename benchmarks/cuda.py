"""CUDA backend benchmark: MIND's kernels vs torch eager, torch.compile and jax.jit on the same GPU.

    python benchmarks/cuda.py prepare DIR            # here (MLIR + ptxas): mind build --target cuda per workload
    python benchmarks/cuda.py run DIR [--out FILE]   # on the GPU machine: numpy, cuda-bindings, torch, jax

``prepare`` builds each workload's artifact and records its cold build time (source -> artifact, in
this process: frontend, MLIR, ptxas for sm_80 and sm_90).  ``run`` (needs a GPU; it exits with a
message elsewhere) loads the artifacts with ``mind.runtime`` alone, feeds them torch tensors on the
device (zero-copy, ``__cuda_array_interface__``) and keeps results on the device, and times each
against torch eager, ``torch.compile`` (its first call timed too) and ``jax.jit``, all with TF32 off,
and against the device's limits measured in the same run: device-to-device copy bandwidth and
cuBLAS SGEMM (through torch).  It prints a table and writes ``benchmarks/results/cuda.json``.

The targets (issue 17): elementwise chains, softmax and layer norm at >= 80 % of the copy bandwidth;
matmul 4096^3 and batched matmul at >= 70 % of cuBLAS SGEMM; conv2d and an MLP train step no slower
than torch eager; a tiny program's call < 20 us; a cold build faster than torch.compile's first call.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# this file is named cuda.py: its folder on sys.path would hide cuda-python's ``cuda`` package
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.dirname(os.path.abspath(__file__))]
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from mind.checkout import use_checkout  # noqa: E402 - a plain copy of the repository (the GPU machine)

use_checkout(ROOT)


def _t(shape: str) -> str:
    return f"Tensor<f32, [{shape}]>"


def _programs() -> Any:
    """``benchmarks/programs.py`` (this folder is off ``sys.path``: see above)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mind_bench_programs", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "programs.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


EPS = 1e-5


N = 4096
WORKLOADS: dict[str, dict[str, Any]] = {
    "fused_chain": {"src": f"fn f(x: {_t(f'{N}, {N}')}) -> {_t(f'{N}, {N}')} {{ sigmoid(relu(x) * 2.0 + 1.0) }}",
                    "shapes": [(N, N)], "bytes": 2 * 4 * N * N},
    "softmax": {"src": f"fn f(x: {_t(f'{N}, {N}')}) -> {_t(f'{N}, {N}')} {{ softmax(x, axis=1) }}",
                "shapes": [(N, N)], "bytes": 2 * 4 * N * N},
    "layer_norm": {"src": f"fn f(x: {_t(f'{N}, {N}')}) -> {_t(f'{N}, {N}')} {{\n"
                          f"  let d = x - mean(x, axes=[1], keepdims=true);\n"
                          f"  d / sqrt(mean(d * d, axes=[1], keepdims=true) + 1e-5)\n}}",
                   "shapes": [(N, N)], "bytes": 2 * 4 * N * N},
    "matmul_4096": {"src": f"fn f(a: {_t(f'{N}, {N}')}, b: {_t(f'{N}, {N}')}) -> {_t(f'{N}, {N}')} {{ matmul(a, b) }}",
                    "shapes": [(N, N), (N, N)], "flops": 2 * N ** 3},
    "matmul_odd": {"src": f"fn f(a: {_t('1000, 1500')}, b: {_t('1500, 700')}) -> {_t('1000, 700')} {{ matmul(a, b) }}",
                   "shapes": [(1000, 1500), (1500, 700)], "flops": 2 * 1000 * 1500 * 700},
    "batched_matmul": {"src": f"fn f(a: {_t('16, 512, 512')}, b: {_t('16, 512, 512')}) -> {_t('16, 512, 512')} "
                              "{ matmul(a, b) }", "shapes": [(16, 512, 512), (16, 512, 512)], "flops": 2 * 16 * 512 ** 3},
    "conv2d_s1": {"src": f"fn f(x: {_t('8, 56, 56, 64')}, w: {_t('3, 3, 64, 64')}) -> {_t('8, 54, 54, 64')} "
                         "{ conv2d(x, w) }", "shapes": [(8, 56, 56, 64), (3, 3, 64, 64)], "stride": 1},
    "conv2d_s2": {"src": f"fn f(x: {_t('8, 56, 56, 64')}, w: {_t('3, 3, 64, 64')}) -> {_t('8, 27, 27, 64')} "
                         "{ conv2d(x, w, strides=[2, 2]) }", "shapes": [(8, 56, 56, 64), (3, 3, 64, 64)], "stride": 2},
    "tiny": {"src": f"fn f(x: {_t('4')}) -> {_t('4')} {{ x + x }}", "shapes": [(4,)]},
    "mlp_train": {"src": _programs().MLP_TRAIN.format(x=_t("512, 1024"), y=_t("512, 16"), w1=_t("1024, 1024"),
                                                      b1=_t("1024"), w2=_t("1024, 16"), b2=_t("16"), eps=EPS),
                  "fn": "train_step", "shapes": [(512, 1024), (512, 16), (1024, 1024), (1024,), (1024, 16), (16,)],
                  "flops": 3 * 2 * 512 * (1024 * 1024 + 1024 * 16)},
}


def prepare(folder: str) -> int:
    from mind.calling import select_function
    from mind.compiler.build import build_artifact
    from mind.compiler.frontend.api import compile_source
    from mind.diagnostics import MindError

    os.makedirs(folder, exist_ok=False)
    builds: dict[str, Any] = {}
    for name, w in WORKLOADS.items():
        start = time.perf_counter()
        try:
            fn = select_function(compile_source(w["src"], name), w.get("fn", "f"))
            files = build_artifact(fn, "cuda")
        except MindError as e:
            builds[name] = {"error": f"{e.diagnostics[0].code}: {e.diagnostics[0].message}"}
            print(f"{name}: not built ({builds[name]['error']})")
            continue
        builds[name] = {"cold_build_s": time.perf_counter() - start}
        os.makedirs(os.path.join(folder, name))
        for file, data in files.items():
            with open(os.path.join(folder, name, file), "xb") as fh:
                fh.write(data)
        print(f"{name}: built in {builds[name]['cold_build_s']:.2f} s")
    with open(os.path.join(folder, "builds.json"), "w", encoding="utf-8") as fh:
        json.dump(builds, fh, indent=1, sort_keys=True)
    return 0


def _median_time(f: Callable[[], Any], sync: Callable[[], None], repeats: int = 20) -> float:
    f()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _torch_fn(name: str, torch: Any) -> Callable[..., Any]:
    F = torch.nn.functional
    table: dict[str, Callable[..., Any]] = {
        "fused_chain": lambda x: torch.sigmoid(torch.relu(x) * 2.0 + 1.0),
        "softmax": lambda x: torch.softmax(x, dim=1),
        "layer_norm": lambda x: F.layer_norm(x, x.shape[1:], eps=1e-5),
        "matmul_4096": torch.matmul, "matmul_odd": torch.matmul, "batched_matmul": torch.matmul,
        "conv2d_s1": lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1)),
        "conv2d_s2": lambda x, w: F.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), stride=2),
        "tiny": lambda x: x + x,
        "mlp_train": lambda *a: _torch_train(torch, *a),
    }
    return table[name]


def _torch_train(torch: Any, x: Any, y: Any, *params: Any) -> tuple[Any, ...]:
    """The MLP train step of ``programs.MLP_TRAIN`` in torch eager (autograd)."""
    leaves = [p.detach().requires_grad_() for p in params]
    w1, b1, w2, b2 = leaves
    hp = x @ w1 + b1
    d = hp - hp.mean(1, keepdim=True)
    h = torch.relu(d / torch.sqrt((d * d).mean(1, keepdim=True) + EPS))
    loss = (-(y * torch.log_softmax(h @ w2 + b2, -1)).sum(1)).mean()
    grads = torch.autograd.grad(loss, leaves)
    return (loss.detach(), *(p - 0.01 * g for p, g in zip(params, grads)))


def _jax_train(jax: Any, x: Any, y: Any, *params: Any) -> tuple[Any, ...]:
    jnp = jax.numpy

    def loss(w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        hp = x @ w1 + b1
        d = hp - hp.mean(1, keepdims=True)
        h = jax.nn.relu(d / jnp.sqrt((d * d).mean(1, keepdims=True) + EPS))
        return (-(y * jax.nn.log_softmax(h @ w2 + b2, -1)).sum(1)).mean()

    value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3))(*params)
    return (value, *(p - 0.01 * g for p, g in zip(params, grads)))


def _jax_fn(name: str, jax: Any) -> Callable[..., Any]:
    jnp = jax.numpy
    dn = ("NHWC", "HWIO", "NHWC")
    table: dict[str, Callable[..., Any]] = {
        "fused_chain": lambda x: jax.nn.sigmoid(jax.nn.relu(x) * 2.0 + 1.0),
        "softmax": lambda x: jax.nn.softmax(x, axis=1),
        "layer_norm": lambda x: (x - x.mean(1, keepdims=True)) / jnp.sqrt(x.var(1, keepdims=True) + 1e-5),
        "matmul_4096": jnp.matmul, "matmul_odd": jnp.matmul, "batched_matmul": jnp.matmul,
        "conv2d_s1": lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=dn),
        "conv2d_s2": lambda x, w: jax.lax.conv_general_dilated(x, w, (2, 2), "VALID", dimension_numbers=dn),
        "tiny": lambda x: x + x,
        "mlp_train": lambda *a: _jax_train(jax, *a),
    }
    return jax.jit(table[name])


def run(folder: str, out: str) -> int:
    import mind.runtime
    from mind.runtime.cuda import unavailable

    reason = unavailable()
    if reason is not None:
        print(f"benchmarks/cuda.py run needs a GPU: {reason}")
        return 2
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # IEEE FP32 everywhere: the spec's f32 bound forbids TF32
    torch.backends.cudnn.allow_tf32 = False
    try:
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
    except ImportError:
        jax = None
    sync = torch.cuda.synchronize
    with open(os.path.join(folder, "builds.json"), encoding="utf-8") as fh:
        builds = json.load(fh)
    big = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    copy_s = _median_time(lambda: big.clone(), sync)
    limits = {"copy_GBps": 2 * big.numel() * 4 / copy_s / 1e9}
    a = torch.randn(N, N, device="cuda")
    limits["sgemm_TFLOPs"] = 2 * N ** 3 / _median_time(lambda: torch.mm(a, a), sync) / 1e12
    del big, a
    rows = {}
    for name, w in WORKLOADS.items():
        if "error" in builds.get(name, {"error": "not prepared"}):
            rows[name] = {"error": builds.get(name, {}).get("error", "not prepared")}
            continue
        f = mind.runtime.load(os.path.join(folder, name))
        args = [torch.randn(*s, device="cuda") for s in w["shapes"]]
        row: dict[str, Any] = {"cold_build_s": builds[name]["cold_build_s"]}
        row["mind_s"] = _median_time(lambda: f(*args, device_results=True), sync)
        tf = _torch_fn(name, torch)
        row["torch_s"] = _median_time(lambda: tf(*args), sync)
        compiled = torch.compile(tf)
        start = time.perf_counter()
        compiled(*args)
        sync()
        row["torch_compile_first_call_s"] = time.perf_counter() - start
        row["torch_compile_s"] = _median_time(lambda: compiled(*args), sync)
        if jax is not None:
            jf = _jax_fn(name, jax)
            jargs = [jax.device_put(np.random.default_rng(0).standard_normal(s).astype(np.float32)) for s in w["shapes"]]
            row["jax_s"] = _median_time(lambda: jax.block_until_ready(jf(*jargs)), lambda: None)
        if "bytes" in w:
            row["GBps"] = w["bytes"] / row["mind_s"] / 1e9
            row["of_copy_bandwidth"] = row["GBps"] / limits["copy_GBps"]
        if "flops" in w:
            row["TFLOPs"] = w["flops"] / row["mind_s"] / 1e12
            row["of_sgemm"] = row["TFLOPs"] / limits["sgemm_TFLOPs"]
        rows[name] = row
        print(name, {k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in row.items()})
    doc = {"device": torch.cuda.get_device_name(), "limits": limits, "workloads": rows}
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("prepare")
    a.add_argument("folder")
    b = sub.add_parser("run")
    b.add_argument("folder")
    b.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "cuda.json"))
    args = p.parse_args(argv)
    return prepare(args.folder) if args.command == "prepare" else run(args.folder, args.out)


if __name__ == "__main__":
    sys.exit(main())
