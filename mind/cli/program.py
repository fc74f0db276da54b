"""The program a command works on: MIND source (``.mind``) and Core IR text (``.mir``) through
``mind.loader``, and a public MIND IR dump (``.ir``, any of its encodings) legalized into Core IR by
``mind.verify.legalize_encodings`` and then verified like Core IR text (the legalizer's note says so on
stderr)."""

from __future__ import annotations

import sys

from mind.diagnostics import MindError
from mind.ir.core import Module


def load_program(path: str, *, notes: bool = True) -> tuple[Module, dict[str, str]]:
    if not path.endswith(".ir"):
        from mind.loader import load_module

        return load_module(path)
    from mind.driver_io import read_source
    from mind.ir.verify import verify_module
    from mind.verify.legalize_encodings import legalize

    text = read_source(path)
    try:
        module, messages = legalize(text, path)
        verify_module(module)
    except MindError as exc:
        exc.sources.setdefault(path, text)
        raise
    if notes:
        for note in messages:
            sys.stderr.write(f"note: {note}\n")
    return module, {path: text}
