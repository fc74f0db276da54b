"""Calling a Core IR function: which function of a module runs, and its arguments bound to its parameters.

Why here and not in a backend: every backend (the reference interpreter, the compiled ones) and every
tool that runs a function (the conformance generator, the exporters, ``mind verify --equiv``) checks
arguments the same way, with the same diagnostics: dtype, rank and extents against the parameter
types, each symbol bound to the first extent it meets, the declared assumptions checked
(E6009/E6010); bool arrays are made 0/1.  The front door (``mind.backends``) binds once, and the
backend runs on the bound arrays and the symbol values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from mind.diagnostics import Diagnostic, MindError, error
from mind.ir.core import Function, Module
from mind.spec.dims import DimExpr, evaluate, format_dim, substitute
from mind.spec.dtypes import from_numpy

if TYPE_CHECKING:
    from mind.reference.interpreter import Probe

__all__ = ["bind_arguments", "canonical_bools", "select_function", "run_reference"]


def bind_arguments(fn: Function, args: Sequence[Any] | Mapping[str, Any]) -> tuple[list[np.ndarray], dict[str, int]]:
    """Check arguments against ``fn``'s parameters; return them as arrays and the symbol values."""
    if isinstance(args, Mapping):
        unknown = sorted(set(args) - {p.name for p in fn.params})
        if unknown:
            raise error("E6009", f"@{fn.name} has no parameter named {', '.join(unknown)}",
                        help="parameters: " + ", ".join(p.name for p in fn.params))
        missing = [p.name for p in fn.params if p.name not in args]
        if missing:
            raise error("E6010", f"missing argument for parameter {', '.join('%' + m for m in missing)} "
                                 f"of @{fn.name}", help="pass every parameter, e.g. `--input NAME=file.npy`")
        ordered = [args[p.name] for p in fn.params]
    else:
        ordered = list(args)
        if len(ordered) != len(fn.params):
            raise error("E6010", f"@{fn.name} takes {len(fn.params)} arguments, got {len(ordered)}")
    env: dict[str, int] = {}
    arrays: list[np.ndarray] = []
    diags: list[Diagnostic] = []
    for p, a in zip(fn.params, ordered):
        arr = np.asarray(a)
        if from_numpy(arr.dtype) is not p.type.dtype:
            diags.append(Diagnostic("E6009", f"argument %{p.name} has dtype {arr.dtype}, expected "
                                             f"{p.type.dtype.value}", help=f"the parameter type is {p.type}"))
            continue
        if arr.ndim != p.type.rank:
            diags.append(Diagnostic("E6009", f"argument %{p.name} has rank {arr.ndim} (shape "
                                             f"{list(arr.shape)}), expected {p.type}"))
            continue
        for axis, (d, n) in enumerate(zip(p.type.shape, arr.shape)):
            if isinstance(d, DimExpr) and len(d.symbols()) == 1 and d == DimExpr.symbol(next(iter(d.symbols()))):
                name = next(iter(d.symbols()))
                if name not in env:
                    env[name] = int(n)
                    continue
            try:
                expected = evaluate(d, env)
            except KeyError:
                continue  # an expression of unbound symbols: checked below once all are bound
            if expected != n:
                diags.append(Diagnostic("E6009", f"argument %{p.name} axis {axis} has extent {n}, expected "
                                                 f"{_extent(d, expected)}", help=f"the parameter type is {p.type}"))
        arrays.append(canonical_bools(np.asarray(arr, order="C")))
    if not diags:
        for p, arr in zip(fn.params, arrays):
            for axis, (d, n) in enumerate(zip(p.type.shape, arr.shape)):
                v = substitute(d, env)
                if not isinstance(v, int):
                    diags.append(Diagnostic("E6009", f"cannot determine {format_dim(d)} in %{p.name}'s type"))
                elif v != n:
                    diags.append(Diagnostic("E6009", f"argument %{p.name} axis {axis} has extent {n}, "
                                                     f"expected {_extent(d, v)}"))
        for a in fn.assumptions:
            lhs, rhs = evaluate(a.lhs, env), evaluate(a.rhs, env)
            holds = {">=": lhs >= rhs, "<=": lhs <= rhs, "==": lhs == rhs, ">": lhs > rhs, "<": lhs < rhs}[a.rel]
            if not holds:
                bound = ", ".join(f"{k} = {v}" for k, v in sorted(env.items()))
                diags.append(Diagnostic("E6009", f"the arguments violate the assumption `{a}` ({bound})"))
    if diags:
        raise MindError(diags)
    return arrays, env


def canonical_bools(arr: np.ndarray) -> np.ndarray:
    """``arr``, or for a bool array holding bytes other than 0 and 1 (a NumPy bool is a byte, and a
    ``.npy`` file or a ``uint8`` view can hold any byte) the same truth values as 0/1 bytes.

    Why: ops and compiled kernels assume a bool is 0 or 1 (the cpu backend converts a bool by
    widening its byte and compares bools bytewise), so a byte 2 would read as 2, and 2 == 1 as
    false.  Every backend's arguments pass through here; only bool arrays pay (one pass)."""
    if arr.dtype != np.bool_ or arr.size == 0:
        return arr
    raw = arr.view(np.uint8)
    return raw != 0 if raw.max() > 1 else arr


def _extent(d: Any, value: int) -> str:
    """``3`` for a literal extent, ``B = 4`` for a symbolic one (how a message names it)."""
    text = format_dim(d)
    return text if text == str(value) else f"{text} = {value}"


def select_function(module: Module, name: str | None) -> Function:
    """The function to run: ``name``, else ``main``, else the only one."""
    if name is not None:
        fn = module.function(name)
        if fn is None:
            raise error("E4003", f"no function named @{name}",
                        help="functions: " + ", ".join("@" + f.name for f in module.functions))
        return fn
    fn = module.function("main")
    if fn is not None:
        return fn
    if len(module.functions) == 1:
        return module.functions[0]
    if not module.functions:
        raise error("E4003", "the module is empty: it defines no function and has no statements",
                    help="write statements (they form `main`) or functions, e.g. `fn main() -> f32 { 1.0 }`")
    raise error("E7002", "the module has several functions and none is named `main`",
                help="choose one with --fn NAME: " + ", ".join(f.name for f in module.functions))


def run_reference(fn: Function, args: Sequence[Any] | Mapping[str, Any], *,
                  probe: Probe | None = None) -> list[np.ndarray]:
    """``fn`` on ``args`` (positional, or a mapping by parameter name) by the reference interpreter:
    the arguments bound, then evaluated op by op; one array per result.  ``probe`` sees every value
    (``mind.reference.interpreter.evaluate_function``)."""
    from mind.reference.interpreter import evaluate_function

    arrays, env = bind_arguments(fn, args)
    return evaluate_function(fn, arrays, env, probe=probe)
