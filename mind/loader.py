"""Loading a program from a path: Core IR text (``.mir``) or MIND source (``.mind``)."""

from __future__ import annotations

from mind.diagnostics import MindError, error
from mind.driver_io import read_source
from mind.ir.core import Module


def load_module(path: str, *, verify: bool = True) -> tuple[Module, dict[str, str]]:
    """Parse (and verify) the module in ``path``; returns it with the source texts for diagnostics."""
    text = read_source(path)
    sources = {path: text}
    try:
        if path.endswith(".mind"):
            from mind.compiler.frontend.cache import compile_cached

            module = compile_cached(text, path)
        elif path.endswith(".mir"):
            from mind.ir.parser import parse_module
            from mind.ir.verify import verify_module

            module = parse_module(text, path)
            if verify:
                verify_module(module)
        else:
            raise error("E7002", f"`{path}` is neither MIND source (.mind) nor Core IR text (.mir)",
                        help="rename the file with the extension of its language (`mind run`, `mind ir` "
                             "and `mind verify` also read public MIND IR dumps, .ir)")
    except MindError as exc:
        exc.sources.update(sources)
        raise
    return module, sources
