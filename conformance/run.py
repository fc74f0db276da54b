"""A conformance run: the selected cases of a suite, asked of one implementation, judged, summarised.

``run(options)`` is a function of its :class:`RunOptions` (resolved once by the CLI) and returns a
:class:`RunResult` whose case list is in manifest order whatever ``jobs`` is; only durations vary
between runs.  Outcomes:

``pass`` / ``fail``     the verdict of ``mind.conformance.verdict``
``xfail`` / ``xpass``   an ``xfail`` expectation matched and the case failed / passed (xpass: the run
                        is not clean -- remove the stale expectation)
``skip``                a ``skip`` expectation matched; not run
``unsupported``         the case needs a profile outside the run's (``--profile``, or what the
                        implementation declares it supports): "not supported", never a failure

A failing program (depth ≥ 2) that uses an op which already fails a single-op case is marked as a
cascade of that op, and the summary names the first ops that fail on their own.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

from mind.conformance import expectations as expect_mod
from mind.conformance.implementations import Launch, resolve
from mind.conformance.protocol import request
from mind.conformance.suite import PROFILES, SUITE_DIR, Entry, Suite, all_labels, load_suite
from mind.conformance.verdict import Answer, judge
from mind.conformance.workers import Identity, handshake, run_all
from mind.diagnostics import error

OUTCOMES = ("pass", "fail", "xfail", "xpass", "skip", "unsupported")
DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RunOptions:
    impl: str
    cases: str = SUITE_DIR
    profiles: tuple[str, ...] | None = None  # None: what the implementation declares, else all
    expect: str | None = None
    jobs: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    select: tuple[str, ...] = ()


@dataclass
class CaseResult:
    entry: Entry
    outcome: str
    kind: str = ""
    message: str = ""
    details: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    reason: str = ""
    expectation_label: str = ""
    cascade: list[str] = field(default_factory=list)
    reproduce: str = ""
    culprit: str = ""  # the op the failure points at (culprit_op)


@dataclass
class RunResult:
    options: RunOptions
    suite: Suite
    identity: Identity
    profiles: tuple[str, ...]
    expectations: expect_mod.Expectations
    cases: list[CaseResult]
    date: str

    def count(self, outcome: str) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)

    @property
    def clean(self) -> bool:
        """No unexpected outcome: every case passed, or failed / was skipped as the expectations say."""
        return not any(c.outcome in ("fail", "xpass") for c in self.cases)

    @property
    def verdict(self) -> str:
        if not self.clean:
            return "fail"
        if any(c.outcome in ("xfail", "skip") for c in self.cases):
            return "pass-with-expectations"
        return "pass"

    def first_failing_ops(self) -> list[str]:
        """Ops that fail a single-op case, in the order of their first failure."""
        out: dict[str, None] = {}
        for c in self.cases:
            if c.outcome in ("fail", "xfail") and c.entry.depth <= 1 and c.culprit:
                out.setdefault(c.culprit, None)
        return list(out)


def culprit_op(case: dict[str, Any], details: Sequence[str], cascade: Sequence[str] = ()) -> str:
    """The op a failure points at: the case's only op, else the op whose result failed first
    (``result i:`` of the verdict's details), else, for a cascade, the op that fails alone; "" when
    a case of several ops failed as a whole (a crash, a wrong count)."""
    from mind.ir.parser import parse_module
    from mind.calling import select_function

    if cascade:
        return cascade[0]
    ops = [o for o in case["ops"] if o != "const"] or list(case["ops"])
    if len(ops) <= 1:
        return ops[0] if ops else ""
    m = re.match(r"result (\d+):", details[0]) if details else None
    if m is None:
        return ""
    fn = select_function(parse_module(case["ir"], case["id"]), case["function"])
    index = int(m.group(1))
    producer = {id(op.result): op.op for op in fn.ops}
    return producer.get(id(fn.results[index]), "") if index < len(fn.results) else ""


def _date() -> str:
    """UTC now, or ``SOURCE_DATE_EPOCH`` when set (reproducible reports)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch and epoch.isdigit()
            else datetime.datetime.now(datetime.timezone.utc))
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def reproducer(options: RunOptions, cid: str) -> str:
    parts = ["mind", "conformance", "run", "--impl", options.impl]
    if os.path.abspath(options.cases) != os.path.abspath(SUITE_DIR):
        parts += ["--cases", options.cases]
    if options.expect:
        parts += ["--expect", options.expect]
    parts += ["--select", cid]
    return " ".join(shlex.quote(p) for p in parts)


def resolve_profiles(requested: Sequence[str] | None, identity: Identity) -> tuple[str, ...]:
    if requested is None:
        declared = identity.profiles if identity.profiles is not None else tuple(PROFILES)
        return tuple(p for p in PROFILES if p in declared)
    unknown = [p for p in requested if p not in PROFILES]
    if unknown:
        raise error("E7002", f"unknown profile `{unknown[0]}`", help="profiles: " + ", ".join(PROFILES))
    if "core" not in requested:
        raise error("E7002", "--profile must include `core`: every other profile extends it")
    if identity.profiles is not None:  # what the implementation cannot do stays "not supported"
        return tuple(p for p in PROFILES if p in requested and p in identity.profiles)
    return tuple(p for p in PROFILES if p in requested)


def selected(suite: Suite, patterns: Sequence[str]) -> list[Entry]:
    import fnmatch

    if not patterns:
        return list(suite.entries)
    out = [e for e in suite.entries if any(fnmatch.fnmatchcase(e.id, p) for p in patterns)]
    if not out:
        raise error("E7002", f"--select {' '.join(patterns)} matches no case of the suite")
    return out


def run(options: RunOptions, launch: Launch | None = None) -> RunResult:
    suite = load_suite(options.cases)
    launch = launch or resolve(options.impl)
    expectations = (expect_mod.load(options.expect, set(all_labels())) if options.expect
                    else expect_mod.Expectations())
    entries = selected(suite, options.select)
    identity = handshake(launch)
    profiles = resolve_profiles(options.profiles, identity)
    results: list[CaseResult] = []
    cases: dict[int, dict[str, Any]] = {}
    pending: list[int] = []
    for e in entries:
        r = CaseResult(e, "", reproduce=reproducer(options, e.id))
        results.append(r)
        missing = [p for p in e.profiles if p not in profiles]
        if missing:
            r.outcome, r.message = "unsupported", f"needs profile {', '.join(missing)}"
            continue
        exp = expectations.lookup(e.id)
        if exp is not None:
            r.reason, r.expectation_label = exp.reason, exp.label
            if exp.kind == "skip":
                r.outcome, r.message = "skip", exp.reason
                continue
        cases[len(results) - 1] = suite.case(e)
        pending.append(len(results) - 1)

    def record(k: int, answer: Answer, seconds: float) -> None:
        i = pending[k]
        r = results[i]
        v = judge(cases[i], answer)
        r.duration_s = round(seconds, 6)
        if r.expectation_label:  # an xfail expectation
            r.outcome = "xpass" if v.passed else "xfail"
            r.kind, r.message, r.details = v.kind, v.message or r.reason, v.details
            if v.passed:
                r.message = f"expected to fail ({r.reason}), but passed: remove the expectation"
        else:
            r.outcome = "pass" if v.passed else "fail"
            r.kind, r.message, r.details = v.kind, v.message, v.details

    run_all(launch, [(cases[i]["id"], request(cases[i])) for i in pending], options.jobs, options.timeout_s, record)
    bad = [(i, r) for i, r in enumerate(results) if r.outcome in ("fail", "xfail")]
    failing = set()
    for i, r in bad:
        if r.entry.depth <= 1:
            r.culprit = culprit_op(cases[i], r.details)
            if r.culprit:
                failing.add(r.culprit)
    for i, r in bad:
        if r.entry.depth > 1:
            r.cascade = sorted(failing & set(r.entry.ops))
            r.culprit = culprit_op(cases[i], r.details, r.cascade)
    return RunResult(options, suite, identity, profiles, expectations, results, _date())
