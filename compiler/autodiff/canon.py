"""Canonicalization of gradient functions: the shared passes (``mind.compiler.passes``), then a
deterministic renaming of the values the transform created."""

from __future__ import annotations

from typing import Iterable

from mind.ir.core import Function


def rename_values(fn: Function, ids: Iterable[int], prefix: str = "d") -> Function:
    """Give the values whose ids are in ``ids`` the names prefix0, prefix1, … in program order
    (skipping names that other values already use), so the text does not depend on how many
    values the transform created and later dropped."""
    ids = set(ids)
    taken = {p.name for p in fn.params} | {op.result.name for op in fn.ops if id(op.result) not in ids}
    k = 0
    for op in fn.ops:
        if id(op.result) in ids:
            while f"{prefix}{k}" in taken:
                k += 1
            op.result.name = f"{prefix}{k}"
            taken.add(op.result.name)
            k += 1
    return fn


def canonicalize(fn: Function) -> Function:
    """The shared canonicalizer; names are chosen afterwards by ``rename_values``."""
    from mind.compiler.passes import canonicalize as passes_canonicalize

    return passes_canonicalize(fn, rename=False)
