"""A deliberately broken implementation for the protocol tests: ``exec:python fake_impl.py MODE``.

It answers like the reference, except in the way MODE names, on every case whose id contains
``TARGET`` (the second argument, default: every case):

good, crash (exits), hang (never answers), garbage (not JSON), wrong-id, wrong-count, wrong-dtype,
wrong-shape, nan (a NaN as element 1, where add_f32_specials expects -0), unsupported, stray-stdout (prints a
line that is not an answer before the answer), bad-version (the handshake fails).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from mind.conformance.implementations import BackendAdapter
from mind.conformance.protocol import answer_line, answer_with


def corrupt(mode: str, cid: str, line: str) -> str:
    obj = json.loads(line)
    if mode == "garbage":
        return "this is not JSON {"
    if mode == "wrong-id":
        obj["id"] = cid + "-other"
    if obj["status"] != "ok":
        return json.dumps(obj)
    res = obj["results"]
    if mode == "wrong-count":
        res.append(res[0] if res else {"dtype": "f32", "shape": [], "data": ["00000000"]})
    elif mode == "wrong-dtype" and res:
        res[0] = {"dtype": "f64" if res[0]["dtype"] != "f64" else "f32", "shape": res[0]["shape"],
                  "data": ["0" * (16 if res[0]["dtype"] != "f64" else 8)] * len(res[0]["data"])}
    elif mode == "wrong-shape" and res:
        res[0] = {**res[0], "shape": [len(res[0]["data"]), 1] if res[0]["data"] else [0, 1]}
    elif mode == "nan" and res and res[0]["dtype"] in ("f32", "f64") and res[0]["data"]:
        res[0]["data"][len(res[0]["data"]) > 1] = "7fc00000" if res[0]["dtype"] == "f32" else "7ff8000000000000"
    return json.dumps(obj)


def main() -> int:
    mode = sys.argv[1]
    target = sys.argv[2] if len(sys.argv) > 2 else ""
    if sys.argv[-1] == "--version":
        if mode == "bad-version":
            print("broken", file=sys.stderr)
            return 3
        print(json.dumps({"name": f"fake-{mode}", "version": "0.0.1",
                          "profiles": ["core", "i64", "f64", "symbolic", "diagnostics"]}))
        return 0
    adapter = BackendAdapter("reference")
    for raw in sys.stdin:
        req = json.loads(raw)
        cid = req["id"]
        line = answer_line(cid, answer_with(adapter.prepare, req))
        if target in cid:
            if mode == "crash":
                os._exit(7)
            if mode == "hang":
                time.sleep(3600)
            if mode == "unsupported":
                line = json.dumps({"id": cid, "status": "unsupported", "message": "not implemented here"})
            elif mode == "stray-stdout":
                print("debug: hello")
            elif mode != "good":
                line = corrupt(mode, cid, line)
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
