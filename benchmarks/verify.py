"""Benchmark of the Z3 verifier: all spec obligations, `mind verify` (in-process) on generated
Core IR dumps of 100, 1,000 and 10,000 ops with symbolic dims, every rewrite rule (`--rewrites`,
all dtypes, ranks ≤ 6) and translation validation (`--equiv`) of generated programs of 10, 100 and
1,000 elements against their canonical form.

    python benchmarks/verify.py [--sizes 100,1000,10000] [--rank-bound 6] [--equiv-sizes 10,100,1000]

Prints a table and writes benchmarks/results/verify.json.  Targets: spec < 10 s, a 10,000-op dump
< 5 s, near-linear growth (the per-op cost is reported for each size); every rule proved in < 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def generate(n_ops: int) -> str:
    """A chain of ops over symbolic B, N, M (B == M is a relation only Z3 can use: every 10th op
    needs a proof), mixing elementwise, matmul, transpose, reshape, slice, pad and reductions."""
    lines = ["func @main(%x: f32[B, N], %w: f32[N, N], %y: f32[M, N], %v: f32[]) -> (f32[B, N]) "
             "where B >= 1, N >= 2, B == M {"]
    cur = "x"
    i = 0
    k = 0
    while i < n_ops:
        kind = k % 10
        k += 1
        out = f"v{i}"
        if kind == 0:
            lines.append(f"  %{out} = add(%{cur}, %y) : f32[B, N]")  # needs B == M: Z3
        elif kind == 1:
            lines.append(f"  %{out} = matmul(%{cur}, %w) : f32[B, N]")
        elif kind == 2:
            lines.append(f"  %{out} = exp(%{cur}) : f32[B, N]")
        elif kind == 3:
            lines.append(f"  %{out} = transpose(%{cur}) {{permutation = [1, 0]}} : f32[N, B]")
            i += 1
            cur, out = out, f"v{i}"
            lines.append(f"  %{out} = transpose(%{cur}) {{permutation = [1, 0]}} : f32[B, N]")
        elif kind == 4:
            lines.append(f"  %{out} = reshape(%{cur}) {{shape = [N * B]}} : f32[B * N]")
            i += 1
            cur, out = out, f"v{i}"
            lines.append(f"  %{out} = reshape(%{cur}) {{shape = [B, N]}} : f32[B, N]")
        elif kind == 5:
            lines.append(f"  %{out} = mul(%{cur}, %v) : f32[B, N]")
        elif kind == 6:
            lines.append(f"  %{out} = pad(%{cur}, %v) {{lo = [0, 1], hi = [0, 1], interior = [0, 0]}} : f32[B, N + 2]")
            i += 1
            cur, out = out, f"v{i}"
            lines.append(f"  %{out} = slice(%{cur}) {{start = [0, 1], stop = [B, N + 1], step = [1, 1]}} : f32[B, N]")
        elif kind == 7:
            lines.append(f"  %{out} = reduce_sum(%{cur}) {{axes = [1], keepdims = true}} : f32[B, 1]")
            i += 1
            cur, out = out, f"v{i}"
            lines.append(f"  %{out} = add(%{cur}, %x) : f32[B, N]")
        elif kind == 8:
            lines.append(f"  %{out} = sub(%{cur}, %x) : f32[B, N]")
        else:
            lines.append(f"  %{out} = div(%{cur}, %y) : f32[M, N]")  # declared with M: Z3 proves M == B
            i += 1
            cur, out = out, f"v{i}"
            lines.append(f"  %{out} = log(%{cur}) : f32[B, N]")  # M vs B again
        cur = out
        i += 1
    lines.append(f"  return %{cur}")
    lines.append("}")
    return "\n".join(lines) + "\n"


EQUIV_SHAPES = {10: (2, 5), 100: (10, 10), 1000: (20, 50)}


def equiv_program(rows: int, cols: int) -> str:
    """A program with what the canonicalizer removes (x·1, x - (+0), a transpose pair, an operand
    order CSE ignores) around exp, a row sum and a matmul; %x holds rows·cols elements."""
    t = f"f32[{rows}, {cols}]"
    return (f"func @main(%x: {t}, %y: {t}, %w: f32[{cols}, 4]) -> ({t}, f32[{rows}], f32[{rows}, 4]) {{\n"
            "  %one = const {value = 1.0} : f32[]\n  %pz = const {value = 0.0} : f32[]\n"
            f"  %0 = mul(%x, %one) : {t}\n  %1 = add(%0, %y) : {t}\n  %2 = add(%y, %0) : {t}\n"
            f"  %3 = transpose(%1) {{permutation = [1, 0]}} : f32[{cols}, {rows}]\n"
            f"  %4 = transpose(%3) {{permutation = [1, 0]}} : {t}\n  %5 = sub(%4, %pz) : {t}\n"
            f"  %6 = mul(%5, %2) : {t}\n  %7 = exp(%6) : {t}\n"
            f"  %8 = reduce_sum(%7) {{axes = [1], keepdims = false}} : f32[{rows}]\n"
            f"  %9 = matmul(%6, %w) : f32[{rows}, 4]\n  return %6, %8, %9\n}}\n")


def bench_equiv(n: int) -> dict:
    from mind.compiler.passes import canonicalize
    from mind.ir.parser import parse_module
    from mind.verify.equiv import check_equiv

    fn = parse_module(equiv_program(*EQUIV_SHAPES[n])).functions[0]
    canon = canonicalize(fn)
    t = time.perf_counter()
    rep = check_equiv(fn, canon)
    dt = time.perf_counter() - t
    assert rep.verdict == "equal", (rep.verdict, rep.reason)
    return {"elements": n, "ops": len(fn.ops), "canonical_ops": len(canon.ops), "seconds": round(dt, 3),
            "result_elements": rep.elements, "same_term": rep.identical, "proved": rep.proved,
            "solver_queries": rep.queries}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--rank-bound", type=int, default=6)
    ap.add_argument("--equiv-sizes", default="10,100,1000")
    ap.add_argument("--no-rewrites", action="store_true", help="skip proving the rewrite rules")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "verify.json"))
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    import z3  # noqa: F401  (import cost reported separately)
    t_import = time.perf_counter() - t0

    from mind.verify.dump import verify_text
    from mind.verify.obligations import run_spec

    spec = run_spec(args.rank_bound)
    counts = spec.counts()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        text = generate(n)
        best = None
        for _ in range(2 if n <= 1000 else 1):
            t = time.perf_counter()
            rep = verify_text(text, f"gen{n}.mir")
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        assert rep.ok, [f.diag.message for f in rep.findings][:3]
        rows.append({"ops": rep.stats.ops, "seconds": round(best, 4), "us_per_op": round(best / rep.stats.ops * 1e6, 1),
                     "z3_queries": rep.stats.z3_queries, "decided_without_z3": rep.stats.decided_cheaply})
    rewrites = None
    if not args.no_rewrites:
        from mind.verify.rewrites import prove_rules

        rw = prove_rules(rank_bound=args.rank_bound)
        rewrites = {"rules": len(rw.verdicts), "rank_bound": rw.rank_bound, "counts": rw.counts(),
                    "seconds": round(rw.seconds, 2), "solver_queries": rw.queries}
    equiv_rows = [bench_equiv(int(n)) for n in args.equiv_sizes.split(",") if n]
    print(f"z3 import: {t_import * 1000:.0f} ms")
    print(f"spec obligations (ranks ≤ {args.rank_bound}): {len(spec.verdicts)} — {counts['proved']} proved, "
          f"{counts['refuted']} refuted, {counts['unknown']} unknown in {spec.seconds:.2f} s (target < 10 s)")
    print(f"{'ops':>7} {'seconds':>9} {'µs/op':>8} {'z3 queries':>11} {'no-z3 ops':>10}")
    for r in rows:
        print(f"{r['ops']:>7} {r['seconds']:>9.3f} {r['us_per_op']:>8.1f} {r['z3_queries']:>11} {r['decided_without_z3']:>10}")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        ratio = (b["seconds"] / a["seconds"]) / (b["ops"] / a["ops"])
        print(f"growth: time ratio / size ratio from {a['ops']} to {b['ops']} ops = {ratio:.2f} (1.0 = linear)")
    if rewrites is not None:
        c = rewrites["counts"]
        print(f"rewrite rules (all dtypes, ranks ≤ {rewrites['rank_bound']}): {rewrites['rules']} — {c['proved']} proved, "
              f"{c['refuted']} refuted, {c['unknown']} unknown in {rewrites['seconds']:.2f} s, "
              f"{rewrites['solver_queries']} solver queries (target < 60 s)")
    if equiv_rows:
        print(f"{'equiv: elements':>16} {'ops':>5} {'canon ops':>10} {'seconds':>8} {'results':>8} {'same term':>10} "
              f"{'proved':>7} {'queries':>8}")
        for r in equiv_rows:
            print(f"{r['elements']:>16} {r['ops']:>5} {r['canonical_ops']:>10} {r['seconds']:>8.3f} "
                  f"{r['result_elements']:>8} {r['same_term']:>10} {r['proved']:>7} {r['solver_queries']:>8}")
    payload = {"machine": platform.platform(), "python": sys.version.split()[0], "z3_import_s": round(t_import, 4),
               "spec": {"rank_bound": args.rank_bound, "seconds": round(spec.seconds, 3), "counts": counts,
                        "obligations": [v.to_json() for v in spec.verdicts]},
               "dumps": rows, "rewrites": rewrites, "equiv": equiv_rows}
    from mind.driver_io import atomic_write

    atomic_write(args.out, lambda fh: fh.write(json.dumps(payload, indent=2) + "\n"), mode="w")
    print(f"wrote {args.out}")
    rewrites_ok = rewrites is None or rewrites["counts"]["proved"] == rewrites["rules"]
    return 0 if counts["refuted"] == counts["unknown"] == 0 and rewrites_ok else 1


if __name__ == "__main__":
    sys.exit(main())
