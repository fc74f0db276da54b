"""CPU backend benchmark: MIND (MLIR -> LLVM) vs numpy, PyTorch eager, torch.compile and jax.jit.

    python benchmarks/cpu.py            # prints the table, writes benchmarks/results/cpu.json
    python benchmarks/cpu.py --quick    # fewer repetitions

One process prints one table; cold and warm start are measured in fresh subprocesses (that is what
they mean): *cold* = MIND source -> first result with an empty ``MIND_CACHE_DIR`` (frontend, MLIR
schedule + lowering, LLVM codegen, link, load, call); *warm* = the same in a new process whose disk
cache is populated (``warm`` includes the frontend; ``warm_be`` is compile_function + first call on the
already parsed Core IR).  Imports are not included (reported separately).  *per call* is the median
steady-state time of ``compile_function(fn)(args)`` (argument binding + allocation + kernel).

The seed programs in examples/bench/ take constant fills as inputs, so the frontend folds most of
them to constants (scalar_math, small/medium/large_matmul fold entirely); the benchmark therefore runs
the same computations written as functions of their inputs.  Peers that are not installed (jax) are
skipped.  numpy/torch run with their default thread count, MIND with ``default_threads()`` (2 here
with an OpenMP runtime); the matmul GFLOP/s rows are measured at 1 and 2 threads for both, each in a
fresh process (numpy measured before MIND's OpenMP runtime is loaded).  ``KMP_BLOCKTIME`` defaults
to 0 here so that Intel OpenMP's spinning threads do not slow the peers measured in this process.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

# Intel OpenMP threads spin for 200 ms after each parallel region by default, which starves
# OpenBLAS/torch threads measured in the same process; sleep at once instead (MIND pays a wake-up).
os.environ.setdefault("KMP_BLOCKTIME", "0")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

F32 = np.float32


def _t(shape: str) -> str:
    return f"Tensor<f32, [{shape}]>"


SOURCES = {
    "scalar_math": ("fn f(a: f32, b: f32, c: f32, d: f32) -> f32 { a + b * c - d / 2.0 }", "f"),
    "small_matmul": (f"fn f(a: {_t('10, 20')}, b: {_t('20, 30')}) -> {_t('10, 30')} {{ matmul(a, b) }}", "f"),
    "medium_matmul": (f"fn f(a: {_t('128, 256')}, b: {_t('256, 512')}) -> {_t('128, 512')} {{ matmul(a, b) }}", "f"),
    "large_matmul": (f"fn f(a: {_t('512, 1024')}, b: {_t('1024, 512')}) -> {_t('512, 512')} {{ matmul(a, b) }}", "f"),
    "simple_mlp": (f"fn f(x: {_t('32, 784')}, w1: {_t('784, 256')}, b1: {_t('256')}, w2: {_t('256, 10')}, "
                   f"b2: {_t('10')}) -> {_t('32, 10')} {{\n  let h1 = relu(matmul(x, w1) + b1);\n"
                   f"  matmul(h1, w2) + b2\n}}", "f"),
    "conv2d": (f"fn f(x: {_t('8, 56, 56, 64')}, w: {_t('3, 3, 64, 64')}, b: {_t('64')}) -> {_t('8, 54, 54, 64')} "
               f"{{ relu(conv2d(x, w) + b) }}", "f"),
    "fused_chain": (f"fn f(x: {_t('4096, 4096')}) -> {_t('4096, 4096')} {{ sigmoid(relu(x) * 2.0 + 1.0) }}", "f"),
    "train_step": (None, "train_step"),  # examples/train_mlp.mind
}
ORDER = list(SOURCES)
FLOPS = {"small_matmul": 2 * 10 * 20 * 30, "medium_matmul": 2 * 128 * 256 * 512,
         "large_matmul": 2 * 512 * 1024 * 512}
BATCH = 32


def source_of(name: str) -> tuple[str, str]:
    src, fn = SOURCES[name]
    if src is None:
        with open(os.path.join(ROOT, "examples", "train_mlp.mind")) as f:
            src = f.read()
    return src, fn


def inputs_of(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)

    def r(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(F32)
    if name == "scalar_math":
        return [np.array(v, dtype=F32) for v in (1.0, 2.0, 3.0, 4.0)]
    if name == "small_matmul":
        return [r(10, 20), r(20, 30)]
    if name == "medium_matmul":
        return [r(128, 256), r(256, 512)]
    if name == "large_matmul":
        return [r(512, 1024), r(1024, 512)]
    if name == "simple_mlp":
        return [r(32, 784), r(784, 256, scale=0.05), r(256), r(256, 10, scale=0.05), r(10)]
    if name == "conv2d":
        return [r(8, 56, 56, 64), r(3, 3, 64, 64, scale=0.05), r(64)]
    if name == "fused_chain":
        return [r(4096, 4096)]
    if name == "train_step":
        y = np.zeros((BATCH, 10), dtype=F32)
        y[np.arange(BATCH), rng.integers(0, 10, BATCH)] = 1
        return [r(BATCH, 784), y, r(784, 256, scale=0.05), np.zeros(256, F32), r(256, 10, scale=0.05),
                np.zeros(10, F32), np.array(0.1, dtype=F32)]
    raise KeyError(name)


# ------------------------------------------------------------------------------------------ peers

def numpy_impls(name: str) -> dict[str, object]:
    if name == "scalar_math":
        return {"numpy": lambda a, b, c, d: a + b * c - d / F32(2)}
    if name.endswith("matmul"):
        return {"numpy": lambda a, b: a @ b}
    if name == "simple_mlp":
        return {"numpy": lambda x, w1, b1, w2, b2: np.maximum(x @ w1 + b1, 0) @ w2 + b2}
    if name == "conv2d":
        from numpy.lib.stride_tricks import sliding_window_view

        def conv(x, w, b):
            win = sliding_window_view(x, (3, 3), axis=(1, 2))  # n, oy, ox, c, kh, kw
            return np.maximum(np.einsum("nyxcij,ijco->nyxo", win, w, optimize=True) + b, 0)
        return {"numpy": conv}
    if name == "fused_chain":
        def expr(x):
            return 1 / (1 + np.exp(-(np.maximum(x, 0) * 2 + 1)))

        def best(x, out=None):
            out = np.empty_like(x) if out is None else out
            np.maximum(x, 0, out=out)
            out *= -2
            out -= 1
            np.exp(out, out=out)
            out += 1
            np.reciprocal(out, out=out)
            return out
        return {"numpy": expr, "numpy_best": best}
    if name == "train_step":
        def step(x, y, w1, b1, w2, b2, lr):
            hp = x @ w1 + b1
            h = np.maximum(hp, 0)
            logits = h @ w2 + b2
            m = logits.max(axis=1, keepdims=True)
            e = np.exp(logits - m)
            s = e.sum(axis=1, keepdims=True)
            lsm = logits - m - np.log(s)
            loss = -(y * lsm).sum(axis=1).mean()
            d = (e / s - y) / x.shape[0]
            gw2, gb2 = h.T @ d, d.sum(0)
            dh = (d @ w2.T) * (hp > 0)
            gw1, gb1 = x.T @ dh, dh.sum(0)
            return loss, w1 - lr * gw1, b1 - lr * gb1, w2 - lr * gw2, b2 - lr * gb2
        return {"numpy": step}
    return {}


def torch_fn(name: str):
    import torch
    F = torch.nn.functional
    if name == "scalar_math":
        return lambda a, b, c, d: a + b * c - d / 2
    if name.endswith("matmul"):
        return lambda a, b: a @ b
    if name == "simple_mlp":
        return lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2 + b2
    if name == "conv2d":
        # NHWC/HWIO as in MIND: channels_last tensors, permuted weights (layout views, not copies)
        return lambda x, w, b: torch.relu(F.conv2d(x, w, b))
    if name == "fused_chain":
        return lambda x: torch.sigmoid(torch.relu(x) * 2 + 1)
    if name == "train_step":
        def loss_fn(params, x, y):
            w1, b1, w2, b2 = params
            logits = torch.relu(x @ w1 + b1) @ w2 + b2
            return -(y * torch.log_softmax(logits, dim=-1)).sum(1).mean()

        def step(x, y, w1, b1, w2, b2, lr):
            g, loss = torch.func.grad_and_value(loss_fn)((w1, b1, w2, b2), x, y)
            return (loss,) + tuple(p - lr * gp for p, gp in zip((w1, b1, w2, b2), g))
        return step
    return None


def torch_inputs(name: str, arrays: list[np.ndarray]):
    import torch
    ts = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    if name == "conv2d":
        x, w, b = ts
        ts = [x.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last), w.permute(3, 2, 0, 1).contiguous(), b]
    if name == "train_step":
        ts[-1] = float(arrays[-1])
    return ts


def jax_fn(name: str):
    import jax
    import jax.numpy as jnp
    if name == "scalar_math":
        return lambda a, b, c, d: a + b * c - d / 2
    if name.endswith("matmul"):
        return lambda a, b: a @ b
    if name == "simple_mlp":
        return lambda x, w1, b1, w2, b2: jax.nn.relu(x @ w1 + b1) @ w2 + b2
    if name == "conv2d":
        return lambda x, w, b: jax.nn.relu(jax.lax.conv_general_dilated(
            x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b)
    if name == "fused_chain":
        return lambda x: jax.nn.sigmoid(jax.nn.relu(x) * 2 + 1)
    if name == "train_step":
        def loss_fn(params, x, y):
            w1, b1, w2, b2 = params
            logits = jax.nn.relu(x @ w1 + b1) @ w2 + b2
            return -(y * jax.nn.log_softmax(logits, axis=-1)).sum(1).mean()

        def step(x, y, w1, b1, w2, b2, lr):
            loss, g = jax.value_and_grad(loss_fn)((w1, b1, w2, b2), x, y)
            return (loss,) + tuple(p - lr * gp for p, gp in zip((w1, b1, w2, b2), g))
        return step
    _ = jnp
    return None


# ------------------------------------------------------------------------------------------ timing

def median_time(f, *, budget: float = 1.0, min_reps: int = 5, max_reps: int = 2000) -> float:
    f()  # warm-up
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def child_start(name: str) -> dict:
    """Run in a fresh process: source -> first result, with whatever cache MIND_CACHE_DIR holds."""
    arrays = inputs_of(name)
    t0 = time.perf_counter()
    from mind.compiler.backend.cpu.api import compile_function
    from mind.compiler.frontend.api import compile_source
    from mind.reference.interpreter import select_function
    t_import = time.perf_counter() - t0
    src, fn_name = source_of(name)
    t0 = time.perf_counter()
    mod = compile_source(src)
    mod = getattr(mod, "module", mod)
    fn = select_function(mod, fn_name)
    t1 = time.perf_counter()
    runner = compile_function(fn)
    out = runner(arrays)
    t2 = time.perf_counter()
    k = next(iter(runner._kernels.values()))
    return {"import_s": t_import, "frontend_s": t1 - t0, "backend_s": t2 - t1, "total_s": t2 - t0,
            "from_cache": k.from_cache, "scheduled": k.scheduled, "threads": k.threads,
            "checksum": float(np.sum(np.asarray(out[0], dtype=np.float64)))}


def child_jax_cold(name: str) -> dict:
    import jax
    arrays = inputs_of(name)
    f = jax.jit(jax_fn(name))
    t0 = time.perf_counter()
    jax.block_until_ready(f(*arrays))
    return {"total_s": time.perf_counter() - t0}


def child_gflops(threads: int) -> dict:
    from mind.compiler.backend.cpu.api import compile_function
    from mind.compiler.frontend.api import compile_source
    from mind.reference.interpreter import select_function
    src, fn_name = source_of("large_matmul")
    mod = compile_source(src)
    fn = select_function(getattr(mod, "module", mod), fn_name)
    a, b = inputs_of("large_matmul")
    out = np.empty((512, 512), F32)
    t_numpy = median_time(lambda: np.matmul(a, b, out=out), budget=1.5)  # before MIND's OpenMP loads
    run = compile_function(fn, threads=threads)
    np.testing.assert_allclose(run([a, b])[0], a @ b, rtol=2e-3, atol=2e-3)
    k = run.kernel({})
    t_kernel = median_time(lambda: k(a, b, out=[out]), budget=1.5)
    fl = FLOPS["large_matmul"]
    return {"threads": threads, "mind_threads": k.threads, "mind_gflops": fl / t_kernel / 1e9,
            "numpy_gflops": fl / t_numpy / 1e9}


def _run_child(args: list[str], env_extra: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.update(env_extra)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), *args], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=900)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"rc={r.returncode}"]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def have(mod: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(mod) is not None


# ------------------------------------------------------------------------------------------ main

def main(quick: bool = False) -> dict:
    budget = 0.3 if quick else 1.0
    has_torch, has_jax = have("torch"), have("jax")
    from mind.compiler.backend.cpu.api import compile_function
    from mind.compiler.frontend.api import compile_source
    from mind.reference.interpreter import select_function
    rows: dict[str, dict] = {}
    for name in ORDER:
        row: dict = {}
        with tempfile.TemporaryDirectory(prefix="mind-bench-cache-") as cache:
            cold = _run_child(["--child-start", name], {"MIND_CACHE_DIR": cache})
            warm = _run_child(["--child-start", name], {"MIND_CACHE_DIR": cache})
        row["cold"], row["warm"] = cold, warm
        arrays = inputs_of(name)
        src, fn_name = source_of(name)
        mod = compile_source(src)
        fn = select_function(getattr(mod, "module", mod), fn_name)
        run = compile_function(fn)
        outs = run(arrays)
        k = next(iter(run._kernels.values()))
        row["scheduled"], row["threads"] = k.scheduled, k.threads
        row["mind_s"] = median_time(lambda: run(arrays), budget=budget)
        for label, f in numpy_impls(name).items():
            if label == "numpy_best":
                buf = np.empty_like(arrays[0])
                row[label + "_s"] = median_time(lambda: f(arrays[0], buf), budget=budget)
            else:
                row[label + "_s"] = median_time(lambda: f(*arrays), budget=budget)
            ref = f(*arrays)
            ref0 = ref[0] if isinstance(ref, tuple) else ref
            err = float(np.max(np.abs(np.asarray(outs[0], np.float64) - np.asarray(ref0, np.float64)))) \
                if np.size(ref0) else 0.0
            row.setdefault("max_abs_diff_vs_numpy", err)
        if has_torch:
            import torch
            tf = torch_fn(name)
            targs = torch_inputs(name, arrays)
            with torch.no_grad() if name != "train_step" else torch.enable_grad():
                row["torch_s"] = median_time(lambda: tf(*targs), budget=budget)
                try:
                    cf = torch.compile(tf)
                    t0 = time.perf_counter()
                    cf(*targs)
                    row["torch_compile_first_s"] = time.perf_counter() - t0
                    row["torch_compile_s"] = median_time(lambda: cf(*targs), budget=budget)
                except Exception as e:  # noqa: BLE001 - a peer's failure is a table entry
                    row["torch_compile_error"] = f"{type(e).__name__}: {str(e)[:120]}"
        if has_jax:
            import jax
            jf = jax.jit(jax_fn(name))
            jargs = [jax.device_put(a) for a in arrays]
            row["jax_s"] = median_time(lambda: jax.block_until_ready(jf(*jargs)), budget=budget)
            row["jax_cold"] = _run_child(["--child-jax", name], {})
        rows[name] = row
        print(f"  measured {name}", file=sys.stderr, flush=True)
    gflops = [_run_child(["--child-gflops", str(t)], {"OPENBLAS_NUM_THREADS": str(t), "OMP_NUM_THREADS": str(t)})
              for t in (1, 2)]
    result = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "numpy": np.__version__},
              "rows": rows, "matmul_512x1024x512_gflops": gflops}
    if has_torch:
        import torch
        result["machine"]["torch"] = torch.__version__
        result["machine"]["torch_threads"] = torch.get_num_threads()
    if has_jax:
        import jax
        result["machine"]["jax"] = jax.__version__
    return result


def _ms(v) -> str:
    if v is None:
        return "-"
    if v < 1e-3:
        return f"{v * 1e6:.1f}µs"
    return f"{v * 1e3:.2f}ms" if v < 0.1 else f"{v * 1e3:.0f}ms"


def render(result: dict) -> str:
    cols = ["program", "sched", "cold", "warm", "warm_be", "per call", "numpy", "np best", "torch",
            "t.compile", "jax.jit", "jax cold"]
    lines = []
    for name, r in result["rows"].items():
        c, w = r.get("cold", {}), r.get("warm", {})
        jc = r.get("jax_cold", {})
        lines.append([name, str(r.get("scheduled")), _ms(c.get("total_s")), _ms(w.get("total_s")),
                      _ms(w.get("backend_s")), _ms(r.get("mind_s")), _ms(r.get("numpy_s")),
                      _ms(r.get("numpy_best_s")), _ms(r.get("torch_s")), _ms(r.get("torch_compile_s")),
                      _ms(r.get("jax_s")), _ms(jc.get("total_s"))])
    widths = [max(len(x) for x in col) for col in zip(cols, *lines)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    out = [fmt.format(*cols), fmt.format(*["-" * w for w in widths])] + [fmt.format(*ln) for ln in lines]
    out.append("")
    for g in result["matmul_512x1024x512_gflops"]:
        if "error" in g:
            out.append(f"matmul GFLOP/s: error {g['error']}")
            continue
        out.append(f"matmul 512x1024@1024x512 f32, {g['threads']} thread(s): MIND {g['mind_gflops']:.1f} GFLOP/s "
                   f"(kernel threads {g['mind_threads']}), numpy {g['numpy_gflops']:.1f} GFLOP/s "
                   f"-> {100 * g['mind_gflops'] / g['numpy_gflops']:.0f}%")
    ch = result["rows"].get("fused_chain", {})
    if ch.get("mind_s") and ch.get("numpy_best_s"):
        gbs = 2 * 4096 * 4096 * 4 / ch["mind_s"] / 1e9
        out.append(f"fused chain: {gbs:.1f} GB/s, {ch['numpy_best_s'] / ch['mind_s']:.1f}x numpy's best "
                   f"(in-place ufuncs), {ch['numpy_s'] / ch['mind_s']:.1f}x numpy's expression")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--child-start":
        print(json.dumps(child_start(sys.argv[2])))
    elif len(sys.argv) >= 3 and sys.argv[1] == "--child-jax":
        print(json.dumps(child_jax_cold(sys.argv[2])))
    elif len(sys.argv) >= 3 and sys.argv[1] == "--child-gflops":
        print(json.dumps(child_gflops(int(sys.argv[2]))))
    else:
        res = main(quick="--quick" in sys.argv)
        text = render(res)
        print(text)
        res["table"] = text
        path = os.path.join(ROOT, "benchmarks", "results", "cpu.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1, default=str)
            f.write("\n")
