"""MIND's diagnostic codes next to the public MIND catalogue's (spec v1.0 ``errors.md``).

Most codes are the same number for the same failure (E3001 broadcasting, E3007 element count,
E4001 use before definition, E4003 undefined output, E4004 a bad input declaration, E4005 a constant
that does not match its type, ...).  Where a constraint has a different code in the public catalogue,
``public_note`` gives a note naming the public code, which ``mind verify`` adds to each finding on a
public dump, so a tool written against the public catalogue understands the output.
"""

from __future__ import annotations

from mind.diagnostics import Diagnostic

#: (our code, spec constraint label or None) -> (public code, public title)
PUBLIC: dict[tuple[str, str | None], tuple[str, str]] = {
    ("E3003", "conv2d.C4"): ("E4009", "conv channel mismatch"),
    ("E3006", "conv2d.C6"): ("E4010", "conv strides"),
    ("E2005", "gather.C1"): ("E4011", "gather indices dtype"),
    ("E3006", "slice.C2"): ("E4008", "zero slice step"),
    ("E4007", None): ("E4006", "index length"),  # `Index` with one index per axis (legalize_public)
    ("E4010", None): ("E4005", "const mismatch"),
}


def public_note(d: Diagnostic) -> str | None:
    """``public MIND catalogue: E4009 (conv channel mismatch)`` where the public code differs."""
    hit = PUBLIC.get((d.code, d.label)) or (PUBLIC.get((d.code, None)) if d.label is None else None)
    if hit is None:
        return None
    return f"public MIND catalogue: {hit[0]} ({hit[1]})"


def with_public_code(d: Diagnostic) -> Diagnostic:
    note = public_note(d)
    if note is None or note in d.notes:
        return d
    return Diagnostic(d.code, d.message, d.span, d.label, d.help, d.notes + (note,), d.severity)
