"""The frontend's entry points: MIND source text → verified-shape, canonical Core IR.

``compile_source(text, path)`` parses (``parser.parse``), elaborates (type checking and lowering
in one pass, ``elaborate.elaborate``) and canonicalizes every function
(``mind.compiler.passes.canonicalize``).  It raises ``MindError`` with every diagnostic found;
no input yields another exception.  ``mind.loader`` dispatches ``.mind`` files here.
"""

from __future__ import annotations

from mind.diagnostics import MindError
from mind.ir.core import Module

from .elaborate import elaborate, elaborate_functions
from .parser import parse

__all__ = ["compile_source", "lower_source", "check_source"]


_CANONICALIZE = None


def _load_canonicalize():
    """``mind.compiler.passes.canonicalize``, imported on first use (not at import time)."""
    global _CANONICALIZE
    from mind.compiler.passes import canonicalize

    _CANONICALIZE = canonicalize
    return canonicalize


def lower_source(text: str | bytes, path: str = "<input>") -> Module:
    """Parse and elaborate, without canonicalization (for tests and for inspecting lowering)."""
    return elaborate(parse(text, path))


def compile_source(text: str | bytes, path: str = "<input>", *, verify: bool = False) -> Module:
    """Parse, check, lower and canonicalize ``text``; ``verify`` also runs the IR verifier."""
    canonicalize = _CANONICALIZE or _load_canonicalize()
    module = Module(list(map(canonicalize, elaborate_functions(parse(text, path)))))
    if verify:
        from mind.ir.verify import check_module

        diags = check_module(module)
        if diags:  # a frontend bug: report it as data rather than as a traceback
            raise MindError(diags, {path: text if isinstance(text, str) else text.decode("utf-8", "replace")})
    return module


def check_source(text: str | bytes, path: str = "<input>") -> list:
    """The diagnostics of ``text`` (empty when it compiles)."""
    try:
        compile_source(text, path)
    except MindError as exc:
        return list(exc.diagnostics)
    return []
