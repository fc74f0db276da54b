"""The plug-in contract: how an implementation receives cases and answers them.

Every implementation speaks one protocol, JSON lines over a subprocess's stdin/stdout (the
``exec:`` form; built-in backends and ``python:`` adapters are served by ``mind.conformance.host``):

* ``COMMAND --version`` prints one line: a version string, or a JSON object
  ``{"name": ..., "version": ..., "profiles": [...]}``.
* ``COMMAND`` then reads one request per line and writes one answer per line, in order::

      {"id": "edge/div_i32_total", "ir": "func @main(...", "function": "main",
       "inputs": [{"name": "a", "dtype": "i32", "shape": [9], "data": ["00000007", ...]}]}

      {"id": "edge/div_i32_total", "status": "ok", "results": [{"dtype": "i32", "shape": [9], "data": [...]}]}
      {"id": "negative/matmul_c4", "status": "error", "code": "E3003", "label": "matmul.C4", "stage": "verify"}
      {"id": "...", "status": "unsupported", "message": "why the implementation cannot run it"}

Tensors are encoded as in the suite (``mind.conformance.encoding``).  The implementation never sees
the expected values: the runner alone judges (``mind.conformance.verdict``).  A crash, a hang past the
per-case timeout, or an answer that does not follow this contract is that case's failure; the runner
restarts the implementation for the next case.

In-process adapters (``python:package.module:factory``): ``factory()`` returns an object with
``name``, ``version``, optionally ``profiles``, and ``prepare(ir, function)`` returning a callable
that maps ``{parameter name: numpy array}`` to a list of result arrays.  Either may raise
:class:`CodedError` (or a ``mind.diagnostics.MindError``) for a coded diagnostic, or
:class:`Unsupported`.
"""

from __future__ import annotations

import json
import traceback
from typing import Any, Callable, Mapping

import numpy as np

from mind.conformance.encoding import EncodingError, decode, encode
from mind.conformance.suite import canonical_json
from mind.conformance.verdict import Answer

ANSWER_STATUSES = ("ok", "error", "unsupported", "crash")
STAGES = ("parse", "verify", "run")


class CodedError(Exception):
    """A diagnostic an implementation reports: code, spec label, stage (each optional but code)."""

    def __init__(self, code: str, label: str | None = None, stage: str | None = None, message: str = ""):
        super().__init__(message or code)
        self.code, self.label, self.stage, self.message = code, label, stage, message

    @classmethod
    def from_mind(cls, exc: Any, stage: str | None) -> "CodedError":
        first = exc.diagnostics[0]
        return cls(first.code, first.label, stage, first.message)


class Unsupported(Exception):
    """The implementation cannot express this case (counted as a failure unless expected)."""


def request(case: Mapping[str, Any]) -> str:
    """The request line for a case (no expected values)."""
    return canonical_json({"id": case["id"], "ir": case["ir"], "function": case["function"],
                           "inputs": case["inputs"]})


def answer_line(cid: str, answer: Answer) -> str:
    obj: dict[str, Any] = {"id": cid, "status": answer.status}
    if answer.status == "ok":
        obj["results"] = [encode(r) for r in answer.results]
    elif answer.status == "error":
        obj.update(code=answer.code, label=answer.label, stage=answer.stage, message=answer.message)
    else:
        obj["message"] = answer.message
    return canonical_json(obj)


def parse_answer(line: str, cid: str) -> Answer:
    """The answer an implementation wrote for case ``cid``; a ``protocol`` answer (the case fails)
    when the line does not follow the contract."""
    def bad(why: str) -> Answer:
        shown = line if len(line) <= 200 else line[:200] + "…"
        return Answer("protocol", message=f"malformed answer ({why}): {shown!r}")

    try:
        obj = json.loads(line)
    except ValueError:
        return bad("not JSON")
    if not isinstance(obj, dict):
        return bad("not a JSON object")
    if obj.get("id") != cid:
        return bad(f"answers case {obj.get('id')!r}, the request was {cid!r}")
    status = obj.get("status")
    if status not in ANSWER_STATUSES:
        return bad(f"status {status!r} is none of {', '.join(ANSWER_STATUSES)}")
    message = obj.get("message") if isinstance(obj.get("message"), str) else ""
    if status == "ok":
        results = obj.get("results")
        if not isinstance(results, list):
            return bad("`results` is not a list")
        try:
            arrays = [decode(r) for r in results]
        except EncodingError as exc:
            return bad(f"a result is not a tensor: {exc}")
        return Answer("ok", arrays)
    if status == "error":
        code, label, stage = obj.get("code"), obj.get("label"), obj.get("stage")
        if not isinstance(code, str) or not code:
            return bad("an error answer needs a `code`")
        if label is not None and not isinstance(label, str):
            return bad("`label` is not a string")
        if stage is not None and stage not in STAGES:
            return bad(f"`stage` is none of {', '.join(STAGES)}")
        return Answer("error", code=code, label=label, stage=stage, message=message)
    return Answer(status, message=message)


def answer_with(prepare: Callable[[str, str], Callable[[dict[str, np.ndarray]], Any]], req: Mapping[str, Any]
                ) -> Answer:
    """Run one request through an in-process adapter's ``prepare``; every outcome becomes an Answer
    (an exception that is not a coded error is the implementation's crash, with its traceback)."""
    from mind.diagnostics import MindError

    try:
        inputs = {i["name"]: decode(i) for i in req["inputs"]}
        runner = prepare(req["ir"], req["function"])
        results = runner(inputs)
        arrays = [np.asarray(r) for r in results]
        return Answer("ok", arrays)
    except CodedError as exc:
        return Answer("error", code=exc.code, label=exc.label, stage=exc.stage, message=exc.message)
    except MindError as exc:
        return Answer("error", code=exc.diagnostics[0].code, label=exc.diagnostics[0].label,
                      message=exc.diagnostics[0].message)
    except Unsupported as exc:
        return Answer("unsupported", message=str(exc))
    except Exception:
        return Answer("crash", message="the implementation raised an exception:\n" + traceback.format_exc(limit=8))
