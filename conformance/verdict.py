"""The one place where an implementation's answer to a case is judged.

Whatever the implementation (a built-in backend, a Python adapter, a subprocess), its answer reaches
this module as an :class:`Answer`; :func:`judge` compares it with the case's expectation.  Results
are checked in the order the ONNX backend tests use -- count, then dtype, then shape, then values --
and values only through ``mind.spec.accuracy.check`` with the accuracy class the case carries, so
there is no tolerance anywhere else (and none that is global).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mind.conformance.encoding import EncodingError, decode

#: Why a case failed (``Verdict.kind``): each is reported and counted on its own, because a crash
#: and a wrong value mean different things to the implementer (and a wrong value matters most).
FAILURE_KINDS = ("wrong-result", "wrong-error", "unexpected-error", "missing-error", "unsupported",
                 "crash", "timeout", "protocol")


@dataclass
class Answer:
    """What an implementation said about one case.

    ``status``: ``ok`` (``results``), ``error`` (a coded diagnostic: ``code``, optional ``label`` and
    ``stage``), ``unsupported`` (the implementation cannot express the case), or one the runner
    assigns when the implementation did not answer properly: ``crash``, ``timeout``, ``protocol``.
    """

    status: str
    results: list[np.ndarray] = field(default_factory=list)
    code: str | None = None
    label: str | None = None
    stage: str | None = None
    message: str = ""


@dataclass
class Verdict:
    passed: bool
    kind: str = ""  # one of FAILURE_KINDS when not passed
    message: str = ""
    details: list[str] = field(default_factory=list)


def _fail(kind: str, message: str, details: list[str] | None = None) -> Verdict:
    return Verdict(False, kind, message, details or [])


def _want_error(expected: dict[str, Any]) -> str:
    return expected["code"] + (f" [{expected['label']}]" if expected.get("label") else "")


def judge(case: dict[str, Any], answer: Answer) -> Verdict:
    """Pass or fail (with the kind of failure and a message) for ``answer`` to ``case``."""
    if answer.status in ("crash", "timeout", "protocol"):
        return _fail(answer.status, answer.message)
    if answer.status == "unsupported":
        return _fail("unsupported", f"the implementation cannot run this case: {answer.message}")
    expected = case["expected"]
    if expected["status"] == "error":
        return _judge_error(expected, answer)
    if answer.status == "error":
        have = (answer.code or "?") + (f" [{answer.label}]" if answer.label else "")
        return _fail("unexpected-error", f"expected results, got error {have}"
                     + (f" at stage {answer.stage}" if answer.stage else ""),
                     [answer.message] if answer.message else [])
    return _judge_results(expected["results"], answer.results)


def _judge_error(expected: dict[str, Any], answer: Answer) -> Verdict:
    want = _want_error(expected)
    if answer.status == "ok":
        return _fail("missing-error", f"expected error {want}, but the function ran")
    have = (answer.code or "?") + (f" [{answer.label}]" if answer.label else "")
    if answer.code != expected["code"] or (expected.get("label") and answer.label != expected["label"]):
        return _fail("wrong-error", f"expected error {want}, got {have}",
                     [answer.message] if answer.message else [])
    if answer.stage and expected.get("stage") and answer.stage != expected["stage"]:
        return _fail("wrong-error", f"error {have} reported at stage {answer.stage}, expected {expected['stage']}")
    return Verdict(True)


def _judge_results(want: list[dict[str, Any]], got: list[np.ndarray]) -> Verdict:
    from mind.spec import accuracy
    from mind.spec.dtypes import parse_dtype

    if len(got) != len(want):
        return _fail("wrong-result", f"{len(got)} results, expected {len(want)}")
    details = []
    for i, (res, exp) in enumerate(zip(got, want)):
        dt = parse_dtype(exp["dtype"])
        if res.dtype != dt.numpy:
            details.append(f"result {i}: dtype {res.dtype}, expected {dt.value}")
            continue
        if list(res.shape) != exp["shape"]:
            details.append(f"result {i}: shape {list(res.shape)}, expected {exp['shape']}")
            continue
        try:
            want_arr = decode(exp, allow_nan_class=True)
            acc = exp["accuracy"]
            extra: dict[str, Any] = {}
            if acc.get("n") is not None:
                extra["n"] = acc["n"]
                extra["abs_sum"] = decode(acc["abs_sum"]) if acc.get("abs_sum") else np.zeros(want_arr.shape)
        except (EncodingError, KeyError) as exc:
            details.append(f"result {i}: the case's expected value is malformed ({exc})")
            continue
        with np.errstate(all="ignore"):  # NaN and inf in answers are values to judge, not warnings
            mismatch = accuracy.check(acc["class"], dt, res, want_arr, **extra)
        if mismatch is not None:
            details.append(f"result {i}: {mismatch}")
    if details:
        return _fail("wrong-result", details[0].splitlines()[0], details)
    return Verdict(True)
