"""`mind conformance`: run the conformance suite on an implementation, check a submission, list labels.

    mind conformance run --impl IMPL [--cases DIR] [--profile P,...] [--expect FILE] [-j N]
                         [--timeout S] [--select GLOB ...] [--report DIR] [--junit FILE] [--json]
    mind conformance verify-submission DIR [--cases DIR] [--json]
    mind conformance draft-expectations DIR [--cases DIR]
    mind conformance labels [--json]
    mind conformance run-public DIR [--backend B] [--select GLOB ...] [--json]

``run-public`` runs the public MIND spec's YAML conformance cases, unchanged, through MIND
(``mind.conformance.public_cases``, ``mind.cli.public_cases``) and exits 1 when a case fails.

Exit status of ``run``: 0 when every outcome is expected (pass, or as the expectations file says),
1 otherwise; of ``verify-submission``: 0 when the submission is valid and claims conformance, 1
when it is valid but some case of the claimed profiles did not pass, 2 when it is invalid (E7004).
"""

from __future__ import annotations

import argparse

NAME = "conformance"
HELP = "run the conformance suite on an implementation, or check a submitted result set"


def register(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    r = sub.add_parser("run", help="run the suite on an implementation")
    r.add_argument("--impl", required=True, metavar="IMPL",
                   help="reference | cpu | python:package.module:factory | exec:COMMAND")
    r.add_argument("--cases", metavar="DIR", help="the suite folder (default: the suite shipped with MIND)")
    r.add_argument("--profile", action="append", metavar="P[,P...]",
                   help="profiles to run: core, i64, f64, symbolic, diagnostics (default: what the "
                        "implementation declares); cases of other profiles are 'not supported'")
    r.add_argument("--expect", metavar="FILE", help="expectations file (xfail/skip lines with reasons)")
    r.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="implementation processes in parallel")
    r.add_argument("--timeout", type=float, default=None, metavar="S", help="seconds per case (default 120)")
    r.add_argument("--select", action="append", default=[], metavar="GLOB", help="run only the cases whose id matches")
    r.add_argument("--report", metavar="DIR", help="write results.json, junit.xml, status.md, status.html")
    r.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    v = sub.add_parser("verify-submission", help="re-check a submitted results folder against the suite")
    v.add_argument("dir", metavar="DIR", help="a folder written by `mind conformance run --report`")
    v.add_argument("--cases", metavar="DIR", help="the suite folder (default: the suite shipped with MIND)")
    v.add_argument("--json", action="store_true", help="print the verdict as JSON")
    d = sub.add_parser("draft-expectations", help="print an expectations file drafted from a run's results")
    d.add_argument("dir", metavar="DIR", help="a folder written by `mind conformance run --report`")
    d.add_argument("--cases", metavar="DIR", help="the suite folder (default: the suite shipped with MIND)")
    lab = sub.add_parser("labels", help="list the spec labels cases cover and expectations name")
    lab.add_argument("--json", action="store_true", help="print as JSON")
    pub = sub.add_parser("run-public", help="run the public MIND spec's YAML conformance cases through MIND")
    pub.add_argument("dir", metavar="DIR", help="a folder of public cases (*.yaml, searched recursively), or one case file")
    pub.add_argument("--backend", default=None, metavar="B",
                     help="the backend that runs the programs (default: `mind run`'s, cpu)")
    pub.add_argument("--select", action="append", default=[], metavar="GLOB",
                     help="run only the cases whose id (path under DIR, without .yaml) matches")
    pub.add_argument("--json", action="store_true", help="print every case's verdict as JSON")


def _options(args: argparse.Namespace) -> object:
    from mind.conformance.run import DEFAULT_TIMEOUT_S, RunOptions
    from mind.conformance.suite import SUITE_DIR
    from mind.diagnostics import error

    if args.jobs < 1:
        raise error("E7002", f"-j {args.jobs}: the number of jobs is at least 1")
    timeout = DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout
    if not timeout > 0:
        raise error("E7002", f"--timeout {args.timeout}: a timeout is a positive number of seconds")
    profiles = None
    if args.profile:
        profiles = tuple(p.strip() for spec in args.profile for p in spec.split(",") if p.strip())
    return RunOptions(impl=args.impl, cases=args.cases or SUITE_DIR, profiles=profiles, expect=args.expect,
                      jobs=args.jobs, timeout_s=timeout, select=tuple(args.select))


def _run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.conformance.report import results_json, write_junit, write_report
    from mind.conformance.run import run

    result = run(_options(args))  # type: ignore[arg-type]
    written = write_report(result, args.report) if args.report else []
    if args.junit:
        write_junit(result, args.junit)
        written.append(args.junit)
    doc = results_json(result)
    if args.json:
        emit_json({"ok": result.clean, "summary": doc["summary"], "written": written,
                   "unexpected": [c for c in doc["cases"] if c["outcome"] in ("fail", "xpass")]})
    else:
        s = doc["summary"]
        print(f"{result.identity.name} {result.identity.version}: suite {result.suite.version} "
              f"(spec {result.suite.spec_version}), profiles {', '.join(result.profiles)}")
        bad = [c for c in result.cases if c.outcome in ("fail", "xpass")]
        for c in bad[:20]:
            casc = f" [cascade of {', '.join(c.cascade)}]" if c.cascade else ""
            print(f"{c.outcome.upper()} {c.entry.id} ({c.kind or c.outcome}){casc}: {c.message}\n  reproduce: {c.reproduce}")
        if len(bad) > 20:
            print(f"… {len(bad) - 20} more unexpected outcomes (see --report)")
        for e in result.expectations.unused():
            print(f"note: {result.expectations.path}:{e.line}: `{e.kind} {e.pattern}` matches no case that ran")
        if s["first_failing_ops"]:
            print(f"first failing ops: {', '.join(s['first_failing_ops'])}")
        print(f"verdict: {s['verdict']} — {s['pass']} passed, {s['fail']} failed, {s['xfail']} xfail, "
              f"{s['xpass']} xpass, {s['skip']} skipped, {s['unsupported']} not supported, {s['total']} cases")
        for w in written:
            print(f"wrote {w}")
    return 0 if result.clean else 1


def _verify_submission(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.conformance.submission import load_results, raise_invalid, verify
    from mind.conformance.suite import SUITE_DIR, load_suite

    doc = load_results(args.dir)
    chk = verify(doc, load_suite(args.cases or SUITE_DIR))
    if not chk.valid:
        raise_invalid(chk, args.dir)
    impl, s = doc["implementation"], doc["summary"]
    claim = (f"{impl['name']} {impl['version']} {'conforms to' if chk.conformant else 'does not conform to'} "
             f"{doc['suite']['name']} {doc['suite']['version']} (spec {doc['suite']['spec_version']}), "
             f"profiles {', '.join(doc['profiles'])}")
    if args.json:
        emit_json({"ok": chk.conformant, "valid": True, "conformant": chk.conformant, "claim": claim, "summary": s})
    else:
        print(f"valid submission: {claim}")
        print(f"{s['pass']} passed, {s['fail']} failed, {s['xfail']} xfail, {s['xpass']} xpass, "
              f"{s['skip']} skipped, {s['unsupported']} not supported")
    return 0 if chk.conformant else 1


def _draft(args: argparse.Namespace) -> int:
    from mind.conformance.draft import draft
    from mind.conformance.submission import load_results
    from mind.conformance.suite import SUITE_DIR, load_suite

    print(draft(load_results(args.dir), load_suite(args.cases or SUITE_DIR)), end="")
    return 0


def _labels(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.conformance.suite import all_labels, label_text

    labels = [(lab, label_text(lab)) for lab in all_labels()]
    if args.json:
        emit_json({"ok": True, "labels": [{"label": k, "text": t} for k, t in labels]})
    else:
        width = max(len(k) for k, _ in labels)
        print("\n".join(f"{k:<{width}}  {t}" for k, t in labels))
    return 0


def _run_public(args: argparse.Namespace) -> int:
    from mind.backends import BACKENDS, DEFAULT_BACKEND
    from mind.cli.output import emit_json
    from mind.cli.public_cases import run_case
    from mind.conformance.public_cases import load_cases, summary
    from mind.diagnostics import error

    backend = args.backend or DEFAULT_BACKEND
    if backend not in BACKENDS:
        raise error("E7002", f"--backend {backend}: no such backend", help="backends: " + ", ".join(BACKENDS))
    cases = load_cases(args.dir, tuple(args.select))  # every file read and checked before any runs
    verdicts = [run_case(c, backend) for c in cases]
    counts = summary(verdicts)
    ok = counts["fail"] == 0
    if args.json:
        emit_json({"ok": ok, "backend": backend, "summary": counts, "cases": [v.to_json() for v in verdicts]})
    else:
        label = {"pass": "PASS", "fail": "FAIL", "not-applicable": "N/A "}
        for v in verdicts:
            print(f"{label[v.outcome]}  {v.case.id}" + (": " + "; ".join(v.reasons) if v.reasons else ""))
        print(f"{counts['total']} public case{'s' if counts['total'] != 1 else ''} on the {backend} backend: "
              f"{counts['pass']} passed, {counts['fail']} failed, {counts['not-applicable']} not applicable")
    return 0 if ok else 1


def run(args: argparse.Namespace) -> int:
    from mind.diagnostics import error

    actions = {"run": _run, "verify-submission": _verify_submission, "draft-expectations": _draft, "labels": _labels,
               "run-public": _run_public}
    if args.action not in actions:
        raise error("E7002", "mind conformance needs an action: run, verify-submission, draft-expectations, "
                             "labels or run-public",
                    help="run `mind conformance --help`")
    return actions[args.action](args)
