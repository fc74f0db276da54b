"""Serve an in-process implementation over the conformance protocol.

    python -m mind.conformance.host IMPL --version    # the handshake
    python -m mind.conformance.host IMPL              # answer JSON-line requests on stdin

``IMPL`` is a built-in backend name or ``python:package.module:factory``.  Running them in a
subprocess, like any ``exec:`` implementation, means a segfault, a hang or stray output of the
implementation costs one case, never the runner.  The protocol owns stdout: anything the
implementation prints there is moved to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from mind.conformance.encoding import EncodingError, encode
from mind.conformance.protocol import answer_line, answer_with
from mind.conformance.verdict import Answer


def _handshake(adapter: Any) -> str:
    info = {"name": str(getattr(adapter, "name", "?")), "version": str(getattr(adapter, "version", "?"))}
    profiles = getattr(adapter, "profiles", None)
    if profiles is not None:
        info["profiles"] = list(profiles)
    return json.dumps(info, sort_keys=True)


def _line(cid: str, answer: Answer) -> str:
    try:
        return answer_line(cid, answer)
    except EncodingError:
        # a result of a dtype MIND does not have: send it as it is; the runner reports the answer
        results = []
        for r in answer.results:
            try:
                results.append(encode(r))
            except EncodingError:
                results.append({"dtype": str(r.dtype), "shape": list(r.shape), "data": []})
        return json.dumps({"id": cid, "status": "ok", "results": results}, sort_keys=True)


def serve(adapter: Any, stdin: TextIO, out: TextIO) -> None:
    for line in stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        answer = answer_with(adapter.prepare, req)
        out.write(_line(req["id"], answer) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    from mind.conformance.implementations import load_adapter

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m mind.conformance.host IMPL [--version]", file=sys.stderr)
        return 2
    # the protocol owns the real stdout; the implementation's own prints go to stderr
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.path.insert(0, os.getcwd())  # `python:` adapters are importable as from the user's folder
    try:
        adapter = load_adapter(args[0])
    except Exception as exc:  # reported to the runner through the failed handshake
        print(f"cannot load implementation `{args[0]}`: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args[1:] == ["--version"]:
        proto.write(_handshake(adapter) + "\n")
        proto.flush()
        return 0
    serve(adapter, sys.stdin, proto)
    return 0


if __name__ == "__main__":
    sys.exit(main())
