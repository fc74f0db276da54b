"""`mind verify`: Z3 proofs about the spec (`--spec`), IR dumps (`mind verify DUMP`), the
compiler's rewrite rules (`--rewrites`) and two functions' equivalence (`--equiv A B`).

Exit status: 0 valid (or every spec obligation or rule proved, or the functions equal), 1 invalid
(a constraint refuted, an obligation or rule refuted/unknown, the functions different or not
shown equal); a dump's findings exit as their codes say (``mind.cli.exit_status``: 2 for a dump
that cannot be read, 1 for a syntax error in it).  z3 is imported only when this runs.
"""

from __future__ import annotations

import argparse
import sys

from mind.spec.columns import aligned_lines

NAME = "verify"
HELP = "prove an IR dump shape-correct for all values of its symbolic dims, or prove the spec's shape rules"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("dump", nargs="?", help="a Core IR dump (.mir text) or a public MIND IR dump (`%%0 = Input() ...`)")
    p.add_argument("--spec", action="store_true", help="prove the spec's obligations for every op and print a table")
    p.add_argument("--autodiff", action="store_true",
                   help="check every op's VJP rule (sympy proofs, adjoint tests, Z3 shape proofs, finite differences)")
    p.add_argument("--format", choices=("auto", "core", "public"), default="auto", help="dump format (default: detect)")
    p.add_argument("--rank-bound", type=int, default=6, metavar="R",
                   help="--spec, --rewrites: enumerate ranks up to R (default 6)")
    p.add_argument("--op", action="append", default=[], metavar="OP", help="--spec: only this op (repeatable)")
    p.add_argument("--smt2", metavar="DIR", help="--spec, --rewrites: also write every Z3 query as SMT-LIB into DIR")
    p.add_argument("--rlimit", type=int, default=None, metavar="N",
                   help="Z3 resource limit per solver call (deterministic; default 500000 for a dump, "
                        "2000000 for --spec)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="wall-clock limit per solver call in seconds, the safety net behind --rlimit "
                        "(default 5 for a dump, 60 for --spec)")
    p.add_argument("--emit-core", metavar="PATH",
                   help="write the (legalized) Core IR text to PATH (atomically; PATH's folder must exist, and "
                        "only a regular file there is replaced: links and special files are refused)")
    p.add_argument("--rewrites", action="store_true",
                   help="prove every rewrite rule of the canonicalizer for every dtype and rank")
    p.add_argument("--rule", action="append", default=[], metavar="NAME",
                   help="--rewrites: only this rule (repeatable)")
    p.add_argument("--equiv", nargs=2, metavar=("A", "B"),
                   help="prove two functions (.mind or .mir) equal on every input of the given shapes")
    p.add_argument("--fn", metavar="NAME", help="--equiv: the function to compare (default main, or the only one)")
    p.add_argument("--shapes", action="append", default=[], metavar="NAME=TYPE",
                   help="--equiv: a parameter's concrete type, e.g. x=f32[2,3] (repeatable)")
    p.add_argument("--out", metavar="DIR", default="counterexample",
                   help="--equiv: where the inputs of a counterexample are written as NAME.npy "
                        "(default ./counterexample)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    from mind.diagnostics import error

    if sum(bool(x) for x in (args.spec, args.autodiff, args.dump, args.rewrites, args.equiv)) > 1:
        raise error("E7002", "give one of --spec, --autodiff, --rewrites, --equiv A B or a DUMP")
    if not (args.spec or args.dump or args.autodiff or args.rewrites or args.equiv):
        raise error("E7002", "nothing to verify",
                    help="`mind verify DUMP`, `mind verify --spec`, `mind verify --autodiff`, "
                         "`mind verify --rewrites` or `mind verify --equiv A B`")
    if args.rlimit is not None and args.rlimit < 1:
        raise error("E7002", f"--rlimit {args.rlimit} is not a positive number")
    if args.timeout is not None and not 0 < args.timeout <= 3600:
        raise error("E7002", f"--timeout {args.timeout:g} is outside (0, 3600] seconds")
    if args.rule and not args.rewrites:
        raise error("E7002", "--rule selects rules of --rewrites")
    if (args.shapes or args.fn) and not args.equiv:
        raise error("E7002", "--shapes and --fn apply to --equiv A B")
    if args.rewrites:
        return run_rewrites(args)
    if args.equiv:
        return run_equiv(args)
    if args.autodiff:
        return run_autodiff(args)
    if args.spec:
        return run_spec(args)
    return run_dump(args)


def run_autodiff(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.verify.autodiff_report import all_ok, autodiff_table, format_table as format_rules

    rows = autodiff_table()
    ok = all_ok(rows)
    if args.json:
        emit_json({"ok": ok, "rules": rows})
    else:
        sys.stdout.write(format_rules(rows) + "\n")
    return 0 if ok else 1


def _smt2_dir(path: str | None) -> None:
    if path:
        import os

        from mind.diagnostics import error

        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise error("E7003", f"cannot create `{path}`: {exc.strerror or exc}") from None


def run_rewrites(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.diagnostics import error
    from mind.ir.rewrite_rules import BY_NAME, RULES

    if not 0 <= args.rank_bound <= 8:
        raise error("E7002", f"--rank-bound {args.rank_bound} is outside [0, 8]")
    unknown = [r for r in args.rule if r not in BY_NAME]
    if unknown:
        raise error("E7002", f"unknown rule {', '.join(unknown)}", help="rules: " + ", ".join(BY_NAME))
    if args.rlimit is not None and args.rlimit < 1:
        raise error("E7002", f"--rlimit {args.rlimit} is not positive")
    _smt2_dir(args.smt2)
    from mind.verify.rewrites import RLIMIT, format_report, prove_rules

    rules = [BY_NAME[r] for r in dict.fromkeys(args.rule)] if args.rule else list(RULES)
    rep = prove_rules(rules, args.rank_bound, args.rlimit or RLIMIT, args.smt2)
    if args.json:
        emit_json(rep.to_json())
    else:
        sys.stdout.write(format_report(rep) + "\n")
    return 0 if rep.ok else 1


def run_equiv(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.diagnostics import error
    from mind.loader import load_module
    from mind.calling import select_function

    if args.rlimit is not None and args.rlimit < 1:
        raise error("E7002", f"--rlimit {args.rlimit} is not positive")
    path_a, path_b = args.equiv
    mod_a, _ = load_module(path_a)
    mod_b, _ = load_module(path_b)
    fa, fb = select_function(mod_a, args.fn), select_function(mod_b, args.fn)
    from mind.verify.equiv import RLIMIT, check_equiv, format_report, parse_shapes

    rep = check_equiv(fa, fb, parse_shapes(args.shapes), rlimit=args.rlimit or RLIMIT, out_dir=args.out)
    if args.json:
        emit_json(rep.to_json())
    else:
        sys.stdout.write(format_report(rep, path_a, path_b) + "\n")
    return 0 if rep.verdict in ("equal", "refines") else 1


def run_spec(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.diagnostics import error
    from mind.verify.obligations import run_spec as prove_spec
    from mind.ir.decide import SolverLimits
    from mind.verify.prove import Prover, spec_limits

    if not 0 <= args.rank_bound <= 8:
        raise error("E7002", f"--rank-bound {args.rank_bound} is outside [0, 8]")
    from mind.spec.ops import OPS

    unknown = [o for o in args.op if o not in OPS and o not in ("arith", "broadcast")]
    if unknown:
        raise error("E7002", f"unknown op {', '.join(unknown)}")
    if args.smt2:
        import os

        try:
            os.makedirs(args.smt2, exist_ok=True)
        except OSError as exc:
            raise error("E7003", f"cannot create `{args.smt2}`: {exc.strerror or exc}") from None
    base = spec_limits()
    prover = Prover(SolverLimits(args.rlimit or base.rlimit, args.timeout or base.timeout_s), args.smt2)
    rep = prove_spec(args.rank_bound, prover, args.op or None)
    counts = rep.counts()
    if args.json:
        emit_json({"ok": counts["refuted"] == 0 and counts["unknown"] == 0, "rank_bound": rep.rank_bound,
                   "counts": counts, "seconds": round(rep.seconds, 6),
                   "obligations": [v.to_json() for v in rep.verdicts]})
    else:
        sys.stdout.write(format_table(rep) + "\n")
    return 0 if counts["refuted"] == 0 and counts["unknown"] == 0 else 1


def format_table(rep) -> str:
    rows = [("op", "obligation", "verdict", "time", "cases", "detail")]
    for v in rep.verdicts:
        detail = ""
        if v.status == "refuted":
            detail = f"{v.case}: " + ", ".join(f"{k}={x}" for k, x in (v.counterexample or {}).items())
        elif v.status == "unknown":
            detail = f"{v.case}: {v.reason}"
        rows.append((v.op, v.name, v.status, f"{v.seconds * 1000:.0f} ms", str(v.cases), detail))
    lines = aligned_lines(rows, aligned=5)
    c = rep.counts()
    lines.append("")
    lines.append(f"{len(rep.verdicts)} obligations: {c['proved']} proved, {c['refuted']} refuted, "
                 f"{c['unknown']} unknown in {rep.seconds:.2f} s (ranks enumerated up to {rep.rank_bound}; "
                 f"conv2d rank 4; 3-operand broadcasting laws up to rank {min(rep.rank_bound, 4)})")
    return "\n".join(lines)


def run_dump(args: argparse.Namespace) -> int:
    from mind.cli.exit_status import exit_status
    from mind.cli.output import emit_json
    from mind.diagnostics import render_all
    from mind.driver_io import atomic_write, read_source
    from mind.ir.decide import DEFAULT_LIMITS, SolverLimits
    from mind.verify.dump import verify_text

    text = read_source(args.dump)
    if args.dump.endswith(".mind"):
        from mind.diagnostics import error

        raise error("E7002", f"`{args.dump}` is MIND source; `mind verify` checks IR dumps",
                    help=f"check MIND source with `mind check {args.dump}`; `mind ir {args.dump}` prints "
                         "its Core IR, which `mind verify` accepts")
    limits = SolverLimits(args.rlimit or DEFAULT_LIMITS.rlimit, args.timeout or DEFAULT_LIMITS.timeout_s)
    rep = verify_text(text, args.dump, args.format, limits)
    if args.emit_core and rep.module is not None:
        core = rep.module.text()
        atomic_write(args.emit_core, lambda fh: fh.write(core), mode="w")
    if args.json:
        emit_json(rep.to_json())
    else:
        color = sys.stderr.isatty()
        for note in rep.notes:
            sys.stderr.write(f"note: {note}\n")
        if rep.findings:
            sys.stderr.write(render_all([f.diag for f in rep.findings], rep.sources, color=color) + "\n")
            sys.stderr.write(f"{args.dump}: INVALID ({len(rep.findings)} problem"
                             f"{'s' if len(rep.findings) != 1 else ''})\n")
        else:
            st = rep.stats
            sys.stdout.write(f"{args.dump}: VALID — {st.functions} function(s), {st.ops} ops; every constraint holds "
                             f"for all values allowed by the assumptions ({st.decided_cheaply} ops decided "
                             f"without Z3, {st.z3_queries} Z3 queries) in {st.seconds:.3f} s\n")
    return exit_status([f.diag.code for f in rep.findings]) if rep.findings else 0
