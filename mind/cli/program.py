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


def specialize(module: Module, shapes: list[str]) -> Module:
    """The module with each symbolic dimension replaced by the extent ``--shapes NAME=DTYPE[d, ...]``
    gives it through a parameter of that name (for printing the MLIR/LLVM stages, which are
    specialized per concrete shape); every function is checked again with those values."""
    import re

    from mind.diagnostics import error
    from mind.ir.parser import parse_module
    from mind.ir.verify import verify_module
    from mind.spec.dims import DimExpr, format_dim, substitute
    from mind.spec.dtypes import parse_dtype
    from mind.spec.ops import TensorType

    given: dict[str, tuple[str, list[int]]] = {}
    for spec in shapes:
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([a-z0-9]+)\s*\[([0-9,\s]*)\]\s*", spec)
        if m is None:
            raise error("E7002", f"--shapes `{spec}` is not of the form NAME=DTYPE[d0, d1, ...]",
                        help="e.g. --shapes x=f32[4,3]")
        given[m.group(1)] = (m.group(2), [int(d) for d in m.group(3).split(",") if d.strip()])
    copy = parse_module(module.text())  # fresh values whose types may be replaced
    for fn in copy.functions:
        env: dict[str, int] = {}
        for p in fn.params:
            if p.name not in given:
                continue
            dt, dims = given[p.name]
            if parse_dtype(dt) is not p.type.dtype or len(dims) != p.type.rank:
                raise error("E7002", f"--shapes {p.name}={dt}{dims} does not match @{fn.name}'s parameter "
                                     f"{p.name}: {p.type}")
            for d, n in zip(p.type.shape, dims):
                if type(d) is DimExpr and d.symbols() == {format_dim(d)}:  # a symbol: bind it
                    name = format_dim(d)
                    if env.setdefault(name, n) != n:
                        raise error("E7002", f"--shapes gives {name} two values, {env[name]} and {n}")
                elif substitute(d, env) != n:
                    raise error("E7002", f"--shapes {p.name}: extent {n} where @{fn.name} declares {format_dim(d)}")
        missing = sorted({s for p in fn.params for d in p.type.shape if type(d) is DimExpr
                          for s in d.symbols()} - set(env))
        if missing:
            raise error("E7002", f"@{fn.name} has symbolic dims {', '.join(missing)} that --shapes does not give",
                        help="give every parameter with a symbolic dim: --shapes x=f32[4,3]")
        for v in list(fn.params) + [op.result for op in fn.ops]:
            v.type = TensorType(v.type.dtype, tuple(substitute(d, env) for d in v.type.shape))
        for op in fn.ops:
            attrs = op.attrs
            for k, a in attrs.items():
                if isinstance(a, tuple) and any(type(d) is DimExpr for d in a):
                    attrs[k] = tuple(substitute(d, env) if type(d) is DimExpr else d for d in a)
        fn.assumptions = []
    verify_module(copy)
    return copy
