"""The op table as data and as text: what `mind spec` prints and the docs are generated from."""

from __future__ import annotations

from typing import Any, Sequence

from mind.spec.columns import aligned_lines
from mind.spec.ops import OpDef


def op_record(op: OpDef) -> dict[str, Any]:
    return {
        "name": op.name,
        "summary": op.summary,
        "operands": [{"name": o.name, "doc": o.doc} for o in op.operands],
        "attributes": [{"name": a.name, "kind": a.kind, "doc": a.doc, **({"choices": list(a.choices)} if a.choices else {})}
                       for a in op.attrs],
        "dtypes": op.dtype_rule,
        "shape": op.shape_rule_text,
        "constraints": [{"label": f"{op.name}.{c.label}", "code": c.code, "text": c.text} for c in op.constraints],
        "semantics": op.semantics,
        "edge_cases": op.edge_cases,
        "accuracy": op.accuracy,
        "vjp": op.vjp_text,
    }


def op_table_text(ops: Sequence[OpDef], full: bool = False) -> str:
    rows = [("op", "operands", "attributes", "dtype rule", "constraints")]
    for op in ops:
        rows.append((op.name, ", ".join(o.name for o in op.operands) or "-",
                     ", ".join(f"{a.name}:{a.kind}" for a in op.attrs) or "-",
                     op.dtype_rule.replace("result dtype = ", ""),
                     " ".join(f"{c.label}({c.code})" for c in op.constraints) or "-"))
    lines = aligned_lines(rows)
    if full:
        for op in ops:
            lines.append("")
            lines.append(f"{op.name}: {op.summary}")
            lines.append(f"  semantics: {op.semantics}")
            lines.append(f"  shape: {op.shape_rule_text}")
            for c in op.constraints:
                lines.append(f"  {op.name}.{c.label} [{c.code}]: {c.text}")
            lines.append(f"  edge cases: {op.edge_cases}")
            lines.append(f"  accuracy: {op.accuracy}")
            lines.append(f"  vjp: {op.vjp_text}")
    return "\n".join(lines)
