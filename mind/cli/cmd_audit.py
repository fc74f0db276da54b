"""`mind audit`: write a bundle of evidence about a program (`--out DIR`), or re-verify one (`--check DIR`).

Exit status: 0 the audit passes (or the checked bundle is intact, reproduces and records a passing
audit), 1 findings (or a bundle that does not hold), 2 unreadable input or usage.  See docs/audit.md.
"""

from __future__ import annotations

import argparse
import os
import sys

NAME = "audit"
HELP = "write an auditor's bundle of evidence about a program (proofs, gradients, numerics, compiled code, " \
       "traceability), or check one"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="MIND source (.mind), Core IR (.mir) or a public MIND IR dump")
    p.add_argument("--out", metavar="DIR", help="the bundle folder (created; an existing one must hold only a "
                                                "bundle MIND wrote there)")
    p.add_argument("--check", metavar="DIR", help="re-verify the bundle in DIR: every hash, every proof with both "
                                                  "solvers, every differential run")
    p.add_argument("--fn", metavar="NAME", help="audit only this function")
    p.add_argument("--backend", metavar="LIST", default="",
                   help="compiled backends to audit, comma-separated (cpu); default: none")
    p.add_argument("--rlimit", type=int, default=None, metavar="N", help="resource limit of every solver call")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="time limit of every solver call (s)")
    p.add_argument("--timings", action="store_true",
                   help="also write timings.json (wall-clock times: the one file that differs between runs)")
    p.add_argument("--json", action="store_true", help="print the summary (or the check's report) as JSON")


def _source_date_epoch() -> int | None:
    from mind.diagnostics import error

    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        raise error("E7002", f"SOURCE_DATE_EPOCH={raw!r} is not a number of seconds since 1970",
                    help="set it to a non-negative integer, e.g. `SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)`")
    return int(raw)


def resolve(args: argparse.Namespace) -> "AuditOptions":  # noqa: F821
    """The one record of this audit's options (usage errors are E7002)."""
    from mind.backends import BACKENDS
    from mind.diagnostics import error
    from mind.ir.decide import DEFAULT_LIMITS, SolverLimits
    from mind.verify.audit.compiled import BUILDS
    from mind.verify.audit.options import AuditOptions

    if not args.out:
        raise error("E7002", "`mind audit FILE` needs `--out DIR`, the folder of the bundle")
    if args.rlimit is not None and args.rlimit < 1:
        raise error("E7002", f"--rlimit {args.rlimit} is not a positive number")
    if args.timeout is not None and not 0 < args.timeout <= 3600:
        raise error("E7002", f"--timeout {args.timeout:g} is outside (0, 3600] seconds")
    backends = tuple(dict.fromkeys(b.strip() for b in args.backend.split(",") if b.strip()))
    for b in backends:
        if b not in BUILDS:
            known = ", ".join(sorted(BUILDS))
            what = "has no audit support yet" if b in BACKENDS else "is not a backend"
            raise error("E7002", f"--backend {b} {what}", help=f"backends an audit can build: {known}")
    limits = SolverLimits(args.rlimit or DEFAULT_LIMITS.rlimit, args.timeout or DEFAULT_LIMITS.timeout_s)
    return AuditOptions(file=args.file, out=args.out, fn=args.fn, backends=backends, limits=limits,
                        timings=args.timings, source_date_epoch=_source_date_epoch())


def run(args: argparse.Namespace) -> int:
    from mind.diagnostics import error

    if args.check and args.file:
        raise error("E7002", "give a FILE to audit or --check DIR, not both")
    if args.check:
        if args.out or args.fn or args.backend or args.timings or args.rlimit or args.timeout:
            raise error("E7002", "--check DIR takes no other option but --json (the bundle records its own)")
        return run_check(args)
    if not args.file:
        raise error("E7002", "nothing to audit", help="`mind audit FILE --out DIR` or `mind audit --check DIR`")
    return run_audit(args)


def run_audit(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.diagnostics import render_all
    from mind.verify.audit.bundle import write_bundle
    from mind.verify.audit.html import finding_diagnostic
    from mind.verify.audit.report import build_audit

    options = resolve(args)
    from mind.driver_io import writing
    from mind.output_dir import OutputDir

    with writing(options.out):
        OutputDir(options.out, ["manifest.json"])  # a folder MIND may not write is refused before any work
    audit = build_audit(options)
    write_bundle(audit, options.out, options.timings)
    summary = audit.doc["summary"]
    if args.json:
        emit_json({"ok": audit.ok, "bundle": options.out, "summary": summary, "findings": audit.doc["findings"]})
    else:
        shown = [f for f in audit.doc["findings"] if f["level"] != "note"]
        if shown:
            sys.stderr.write(render_all([finding_diagnostic(f) for f in shown], audit.sources,
                                        color=sys.stderr.isatty()) + "\n")
        f = summary["findings"]
        counts = ", ".join(f"{n} {k}" for k, n in summary["obligations"].items())
        sys.stdout.write(f"{options.file}: audit {summary['verdict'].upper()} — obligations: {counts}; "
                         f"{f['error']} errors, {f['warning']} warnings, {f['note']} notes; "
                         f"bundle written to {options.out} (open audit.html)\n")
    return 0 if audit.ok else 1


def run_check(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.diagnostics import Diagnostic, Span, render_all
    from mind.verify.audit.bundle import check_bundle

    rep = check_bundle(args.check)
    if args.json:
        emit_json(rep.to_json())
    else:
        if rep.problems:
            diags = [Diagnostic("E7012", what, Span(os.path.join(args.check, file), 1, 1),
                                help="the bundle is not the one MIND wrote, or its evidence no longer holds here")
                     for file, what in rep.problems]
            sys.stderr.write(render_all(diags, {}, color=sys.stderr.isatty()) + "\n")
        checked = ", ".join(f"{n} {k}" for k, n in sorted(rep.checked.items()))
        state = "intact and reproduced" if rep.intact else f"NOT intact ({len(rep.problems)} problem(s))"
        sys.stdout.write(f"{args.check}: {state} ({checked}); the audit's verdict: "
                         f"{(rep.verdict or 'unknown').upper()}\n")
    return 0 if rep.ok else 1
