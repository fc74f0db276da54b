"""The catalogue of diagnostic codes: one stable code per kind of failure.

Codes follow the public MIND pattern ``E<category><3 digits>`` and reuse the public catalogue's
numbers where the meaning matches (E3001 broadcasting failure, E2004 dtype mismatch, ...).
Codes are never renumbered; new ones are appended.  Everything that reports an error (lexer,
parser, checker, IR verifier, autodiff, runtime, CLI) takes its code from this table, and the
docs (``docs/errors.md``) are generated from it.
"""

from __future__ import annotations

from mind.spec.record import FrozenRecord

CATEGORIES: dict[str, str] = {
    "E1": "lexical and syntax",
    "E2": "type",
    "E3": "shape",
    "E4": "IR verification",
    "E5": "autodiff",
    "E6": "runtime and backend",
    "E7": "driver (files, usage and settings)",
}


class ErrorCode(FrozenRecord):
    """One catalogue entry: an immutable value with the fields, ``repr``, equality and hashing of a
    frozen dataclass (a ``mind.spec.record.FrozenRecord``, so that importing the catalogue builds no
    dataclass)."""

    __slots__ = ("code", "title")

    def __init__(self, code: str, title: str) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "title", title)

    @property
    def category(self) -> str:
        return CATEGORIES[self.code[:2]]


_TABLE: tuple[tuple[str, str], ...] = (
    # E1xxx: lexical and syntax (source text and IR text)
    ("E1001", "invalid UTF-8 in input"),
    ("E1002", "invalid character"),
    ("E1003", "unterminated string literal"),
    ("E1004", "invalid escape sequence"),
    ("E1005", "invalid numeric literal"),
    ("E1006", "unterminated block comment"),
    ("E1010", "syntax error: unexpected token"),
    ("E1011", "syntax error: unclosed delimiter"),
    ("E1012", "input exceeds a resource limit"),
    ("E1013", "construct not supported by MIND"),
    # E2xxx: types
    ("E2001", "type mismatch"),
    ("E2002", "undefined name"),
    ("E2003", "cannot infer type"),
    ("E2004", "dtype mismatch"),
    ("E2005", "invalid dtype for operation"),
    ("E2007", "wrong number of arguments"),
    ("E2008", "unknown function or builtin"),
    ("E2009", "invalid argument"),
    ("E2010", "duplicate definition"),
    ("E2011", "control flow needs a value known at compile time"),
    # E3xxx: shapes
    ("E3001", "broadcasting failure"),
    ("E3002", "rank mismatch"),
    ("E3003", "dimension mismatch"),
    ("E3004", "invalid axis"),
    ("E3005", "duplicate axis"),
    ("E3006", "invalid dimension or attribute value"),
    ("E3007", "element count mismatch"),
    ("E3008", "invalid permutation"),
    ("E3009", "squeezed dimension is not 1"),
    ("E3010", "literal shape mismatch"),
    ("E3011", "shape constraint cannot be decided statically"),
    # E4xxx: IR verification
    ("E4001", "use before definition"),
    ("E4002", "multiple definitions"),
    ("E4003", "undefined result or function"),
    ("E4004", "invalid parameter declaration"),
    ("E4005", "constant does not match its type"),
    ("E4006", "unknown op"),
    ("E4007", "attribute list length mismatch"),
    ("E4008", "invalid attribute"),
    ("E4009", "wrong number of operands"),
    ("E4010", "declared result type differs from the inferred one"),
    ("E4011", "invalid assumption"),
    # E5xxx: autodiff
    ("E5001", "operation is not differentiable"),
    ("E5002", "gradient verification failed"),
    ("E5004", "unsupported shape for differentiation"),
    ("E5005", "non-differentiable input"),
    ("E5006", "loss is not a scalar"),
    # E6xxx: runtime and backend
    ("E6001", "index out of bounds"),
    ("E6002", "backend unavailable"),
    ("E6003", "operation unsupported on backend"),
    ("E6004", "allocation failure"),
    ("E6008", "device error"),
    ("E6009", "argument does not match the parameter's type"),
    ("E6010", "missing argument"),
    ("E6011", "unreadable array file"),
    ("E6012", "backend compilation failed"),
    # E7xxx: driver
    ("E7001", "file not found or unreadable"),
    ("E7002", "invalid usage: command line, option or setting"),
    ("E7003", "output cannot be written"),
    ("E7004", "invalid conformance file (suite, expectations or results)"),
    ("E7009", "internal compiler error"),
    ("E7010", "cache folder is not safe to use"),
    ("E7011", "damaged cache entry removed and rebuilt"),
    ("E7012", "audit bundle does not hold what its manifest says"),
    ("E7013", "audit finding"),
    ("E7014", "build artifact does not hold what its manifest says"),
)

CODES: dict[str, ErrorCode] = {code: ErrorCode(code, title) for code, title in _TABLE}


def lookup(code: str) -> ErrorCode:
    """Return the catalogue entry, failing loudly on an unknown code (a bug in the caller)."""
    try:
        return CODES[code]
    except KeyError:
        raise KeyError(f"unknown diagnostic code {code!r}; add it to spec/errors.py") from None
