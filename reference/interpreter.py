"""The reference interpreter: runs a Core IR function on NumPy arrays, op by op.

Arguments are checked against the parameter types (dtype, rank, and dims, binding each symbol to
the first extent it meets and checking the declared assumptions); mismatches are coded
diagnostics (E6009/E6010).  A probe directory, if given, receives every intermediate value as
``.npy``, in program order, for bisecting mismatches between implementations.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

import numpy as np

from mind.diagnostics import Diagnostic, MindError, error
from mind.ir.core import Function, Module, Value
from mind.spec.dims import DimExpr, evaluate, format_dim, substitute
from mind.spec.dtypes import from_numpy
from mind.reference.ops import OP_FUNCTIONS


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
                                                 f"{format_dim(d)} = {expected}", help=f"the parameter type is {p.type}"))
        arrays.append(np.asarray(arr, order="C"))
    if not diags:
        for p, arr in zip(fn.params, arrays):
            for axis, (d, n) in enumerate(zip(p.type.shape, arr.shape)):
                v = substitute(d, env)
                if not isinstance(v, int):
                    diags.append(Diagnostic("E6009", f"cannot determine {format_dim(d)} in %{p.name}'s type"))
                elif v != n:
                    diags.append(Diagnostic("E6009", f"argument %{p.name} axis {axis} has extent {n}, "
                                                     f"expected {format_dim(d)} = {v}"))
        for a in fn.assumptions:
            lhs, rhs = evaluate(a.lhs, env), evaluate(a.rhs, env)
            holds = {">=": lhs >= rhs, "<=": lhs <= rhs, "==": lhs == rhs, ">": lhs > rhs, "<": lhs < rhs}[a.rel]
            if not holds:
                bound = ", ".join(f"{k} = {v}" for k, v in sorted(env.items()))
                diags.append(Diagnostic("E6009", f"the arguments violate the assumption `{a}` ({bound})"))
    if diags:
        raise MindError(diags)
    return arrays, env


def run_function(fn: Function, args: Sequence[Any] | Mapping[str, Any], *,
                 probe_dir: str | None = None) -> list[np.ndarray]:
    """Evaluate ``fn`` on ``args``; returns one array per result."""
    arrays, env = bind_arguments(fn, args)
    values: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.params, arrays)}
    manifest: list[dict[str, Any]] = []
    if probe_dir is not None:
        os.makedirs(probe_dir, exist_ok=True)
        for i, (p, a) in enumerate(zip(fn.params, arrays)):
            manifest.append(_probe(probe_dir, len(manifest), p, "param", a))
    for op in fn.ops:
        attrs = dict(op.attrs)
        for key in ("shape", "start", "stop"):  # dims attributes: symbols take their bound values
            if key in attrs:
                attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
        operands = [values[id(v)] for v in op.operands]
        out = OP_FUNCTIONS[op.op](*operands, **attrs)
        values[id(op.result)] = out
        if probe_dir is not None:
            manifest.append(_probe(probe_dir, len(manifest), op.result, op.op, out))
    if probe_dir is not None:
        with open(os.path.join(probe_dir, "manifest.json"), "w", encoding="utf-8") as fh:
            json.dump({"function": fn.name, "values": manifest}, fh, indent=1, sort_keys=True)
    return [values[id(v)] for v in fn.results]


def _probe(directory: str, index: int, value: Value, op: str, arr: np.ndarray) -> dict[str, Any]:
    fname = f"{index:05d}_{_safe(value.name)}.npy"
    np.save(os.path.join(directory, fname), arr)
    return {"index": index, "value": value.name, "op": op, "file": fname,
            "dtype": str(value.type.dtype), "shape": list(arr.shape)}


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


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
