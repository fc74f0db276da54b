"""Convs with and without the matmuls of filter rows (``conv_gemm.ConvRows``), in one process.

    python benchmarks/conv_rows.py [--cpu LEVEL] [--threads N] [--force] [--refuse rows|packing]
        # prints the table, writes benchmarks/results/conv_rows-<cpu>-t<N>[-forced][-packing].json

Why: whether a conv runs as KH matmuls of filter rows or as the direct schedule's register blocks is
a cost model's choice (``conv_gemm.rows_of_shapes``: the direct estimate times the vector unit's
``direct_conv_factor`` against the matmuls'); this is the A/B that fits and checks it.  Each conv is
compiled twice for the level ``--cpu`` (default: the host's best level), once as the cost model
chooses ("new") and once with the filter rows refused ("old"); ``--force`` takes the filter rows
for every conv that can have them (the factor made 100), to see what the cost model leaves.  Stride
1, "same" padding, f32.  Each figure is the least of 3 medians of repeated calls (wall time), the
two kernels alternating; the results of the two kernels are compared first.  ``--refuse packing``
is the A/B of the direct blocks' packed filter slices instead (``conv_schedule.packed_cost``): "old"
refuses them (their estimate made infinite), and the row's mark says whether the cost model takes
them for "new".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

CONVS = [((2, 32, 32, 128), (3, 3, 128, 128)), ((8, 14, 14, 256), (3, 3, 256, 256)),
         ((1, 7, 7, 512), (3, 3, 512, 512)), ((2, 32, 32, 64), (5, 5, 64, 64)),
         ((2, 40, 40, 48), (5, 5, 48, 96)), ((4, 28, 28, 16), (3, 3, 16, 32)),
         ((8, 28, 28, 128), (3, 3, 128, 128)), ((2, 56, 56, 64), (3, 3, 64, 64)),
         ((16, 7, 7, 512), (3, 3, 512, 512)), ((4, 14, 14, 128), (3, 3, 128, 256))]
"""(input NHWC, filter HWCF) of each conv: 3x3 and 5x5, 16 to 512 channels, images of 7 to 56."""


def _function(xs: tuple[int, ...], ws: tuple[int, ...]):
    from mind.calling import select_function
    from mind.ir.parser import parse_module
    n, h, w, _ = xs
    kh, kw, _, f = ws
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    oh, ow = h + 2 * ph - kh + 1, w + 2 * pw - kw + 1
    t = lambda s: f"f32[{', '.join(map(str, s))}]"  # noqa: E731
    text = (f"func @main(%x: {t(xs)}, %w: {t(ws)}) -> ({t((n, oh, ow, f))}) {{\n  %0 = conv2d(%x, %w) "
            f"{{strides = [1, 1], padding = [[{ph}, {ph}], [{pw}, {pw}]], lhs_dilation = [1, 1], "
            f"rhs_dilation = [1, 1]}} : {t((n, oh, ow, f))}\n  return %0\n}}\n")
    return select_function(parse_module(text, "conv_rows"), None), (n, oh, ow, f), (ph, pw)


def _median(run, args, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run(args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _refusal(refuse: str):
    """A context in which the cost model refuses the method ``refuse`` ("rows" or "packing")."""
    import contextlib

    from mind.compiler.backend.cpu import conv_gemm, conv_schedule

    @contextlib.contextmanager
    def refused():
        module, name, value = ((conv_gemm, "rows_of_shapes", lambda *a: None) if refuse == "rows"
                               else (conv_schedule, "packed_cost", lambda *a: float("inf")))
        kept = getattr(module, name)
        setattr(module, name, value)
        try:
            yield
        finally:
            setattr(module, name, kept)
    return refused


def _taken(refuse: str, cpu: str, padded: list[int], ws: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether the cost model takes the method ``refuse`` names for this conv."""
    from mind.compiler.backend.cpu import conv_gemm
    from mind.compiler.backend.cpu.conv_schedule import choose_conv_tiles
    rows = conv_gemm.rows_of_shapes(padded, list(ws), list(out), [1, 1], [1, 1], "f32", cpu) is not None
    if refuse == "rows":
        return rows
    tiles = choose_conv_tiles(*out, ws[0], ws[1], ws[2], 32, conv_gemm.vector_unit(cpu))
    return not rows and tiles is not None and tiles.pack_rows > 0


def measure(cpu: str, threads: int, force: bool, refuse: str = "rows") -> list[dict]:
    from mind.compiler.backend.cpu import conv_gemm
    from mind.compiler.backend.cpu.api import compile_function
    refused = _refusal(refuse)
    unit_of = conv_gemm.vector_unit
    if force:
        from mind.compiler.backend.cpu.vector_unit import VectorUnit

        def forced(isa: str) -> VectorUnit:
            return unit_of(isa).replaced(direct_conv_factor=100.0)
        conv_gemm.vector_unit = forced
    rows = []
    for xs, ws in CONVS:
        fn, out, (ph, pw) = _function(xs, ws)
        n, h, w, c = xs
        taken = _taken(refuse, cpu, [n, h + 2 * ph, w + 2 * pw, c], ws, out)
        rng = np.random.default_rng(0)
        args = [rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)]
        new = compile_function(fn, threads=threads, cpu=cpu, cache=False)
        new(args)  # compiled at the first call, while the choice is in place
        with refused():
            old = compile_function(fn, threads=threads, cpu=cpu, cache=False)
            old(args)
        np.testing.assert_allclose(new(args)[0], old(args)[0], rtol=1e-3, atol=1e-3)
        flops = 2 * int(np.prod(out)) * ws[0] * ws[1] * c
        reps = max(5, min(200, int(2e10 / flops)))
        t_old, t_new = [], []
        for _ in range(3):
            t_old.append(_median(old, args, reps))
            t_new.append(_median(new, args, reps))
        row = {"x": list(xs), "w": list(ws), refuse: taken, "old_ms": min(t_old) * 1e3, "new_ms": min(t_new) * 1e3,
               "old_gflops": flops / min(t_old) / 1e9, "speedup": min(t_old) / min(t_new)}
        rows.append(row)
        print(f"{str(xs):18} {str(ws):18} {(refuse if taken else '-')[:4]:4} old {row['old_ms']:8.3f} ms "
              f"({row['old_gflops']:6.1f} GFLOP/s)  new {row['new_ms']:8.3f} ms  old/new {row['speedup']:5.2f}x",
              flush=True)
    conv_gemm.vector_unit = unit_of
    return rows


def main() -> None:
    from mind.compiler.backend.cpu.host import host_fingerprint
    from mind.compiler.backend.cpu.kernel_library import host_isa
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", default=None, help="an x86-64 level (default: the host's best)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--force", action="store_true", help="filter rows for every conv that can have them")
    ap.add_argument("--refuse", choices=("rows", "packing"), default="rows",
                    help="the method the old kernels are refused (default: the filter rows)")
    args = ap.parse_args()
    cpu = args.cpu or host_isa()
    if cpu is None:
        sys.exit("this host runs none of the x86-64 levels of the prebuilt GEMM")
    rows = measure(cpu, args.threads, args.force, args.refuse)
    name = (f"conv_rows-{cpu}-t{args.threads}{'-forced' if args.force else ''}"
            f"{'-packing' if args.refuse == 'packing' else ''}.json")
    out = os.path.join(ROOT, "benchmarks", "results", name)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"cpu": cpu, "threads": args.threads, "forced": args.force, "refused": args.refuse,
                   "host": host_fingerprint(),
                   "rows": rows}, fh, indent=1)
    print(f"wrote {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
