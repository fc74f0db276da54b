"""The reference interpreter: runs a Core IR function on NumPy arrays, op by op.

Arguments are checked against the parameter types (dtype, rank, and dims, binding each symbol to
the first extent it meets and checking the declared assumptions); mismatches are coded
diagnostics (E6009/E6010).  A probe, if given, is called with every parameter and intermediate
value in program order (``mind run --probe DIR`` saves them, for bisecting mismatches between
implementations); the interpreter itself writes no files.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mind.diagnostics import Diagnostic, MindError, error
from mind.ir.core import Function, Module, Operation, Value
from mind.reference.memory import REFERENCE_VIEWS, check_memory, memory_error, value_bytes
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


Probe = Callable[[Value, str, np.ndarray], None]
"""``probe(value, op, array)``: ``op`` is the op that computed ``value`` (``"param"`` for a parameter)."""


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


def run_function(fn: Function, args: Sequence[Any] | Mapping[str, Any], *,
                 probe: Probe | None = None) -> list[np.ndarray]:
    """Evaluate ``fn`` on ``args``; returns one array per result.

    Before any op runs, the values' sizes are checked against the memory available
    (``memory.check_memory``: E6004 at the op where the need peaks); an op whose allocation fails
    all the same is E6004 at that op.  A value is dropped after its last use."""
    arrays, env = bind_arguments(fn, args)
    check_memory(fn, env, _materializes, "reference")
    values: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.params, arrays)}
    if probe is not None:
        for p, a in zip(fn.params, arrays):
            probe(p, "param", a)
    last_use = {id(v): i for i, op in enumerate(fn.ops) for v in op.operands}
    keep = {id(v) for v in fn.results}
    for i, op in enumerate(fn.ops):
        attrs = dict(op.attrs)
        for key in ("shape", "start", "stop"):  # dims attributes: symbols take their bound values
            if key in attrs:
                attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
        operands = [values[id(v)] for v in op.operands]
        try:
            out = OP_FUNCTIONS[op.op](*operands, **attrs)
        except MemoryError:
            raise memory_error(fn, env, op, value_bytes(op.result.type, env), None, "reference") from None
        values[id(op.result)] = out
        if probe is not None:
            probe(op.result, op.op, out)
        for v in op.operands:
            if last_use[id(v)] == i and id(v) not in keep:
                values.pop(id(v), None)
        del operands
    return [values[id(v)] for v in fn.results]


def _materializes(op: Operation) -> bool:
    """The values the interpreter allocates (see ``memory``): all but possible views."""
    return op.op not in REFERENCE_VIEWS


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
