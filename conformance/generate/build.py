"""Building one case: run the reference, derive the expectation and the case's metadata.

Every success case is evaluated here op by op with the reference interpreter's op functions;
``exp``/``log`` results are then replaced by their correctly rounded values (``exact``), and the
reference's own values are checked against the expectation through the accuracy class, so a
generated suite never disagrees with the reference.  Hand-written expectations are checked the same
way (a disagreement aborts generation: either the hand or the reference is wrong).

Metadata comes from the program and its values, never from the generator's intent: the ops, every
dtype that occurs, the value classes each op application sees (``coverage``), the labels, the
profiles and the depth.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mind.conformance.encoding import encode, from_literal
from mind.conformance.generate import exact
from mind.conformance.suite import required_profiles
from mind.ir.core import Function
from mind.ir.parser import parse_module
from mind.ir.verify import verify_module
from mind.calling import bind_arguments, select_function
from mind.reference.ops import OP_FUNCTIONS
from mind.spec import accuracy
from mind.reference.accuracy import accumulation
from mind.spec.dims import DimExpr, evaluate
from mind.spec.dtypes import DType
from mind.spec.ops import OPS

EDGE_CLASSES = frozenset({"zero", "inf", "nan", "extreme", "empty"})
#: The operand whose dtype an op application is counted under (default 0; select: its branches).
DTYPE_OPERAND = {"select": 1}


class GenerationError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# value classes
# ---------------------------------------------------------------------------------------------

def value_classes(arr: np.ndarray) -> set[str]:
    """The classes of the elements of ``arr``: ``empty`` for no elements; floats ``nan``, ``inf``,
    ``zero`` (either sign), ``extreme`` (a quarter of the largest finite value or more, or below the
    smallest normal), ``normal`` (anything else); integers ``zero``, ``extreme`` (a quarter of the
    range or more), ``normal``; bools ``normal``."""
    a = np.asarray(arr)
    if a.size == 0:
        return {"empty"}
    kind = a.dtype.kind
    out: set[str] = set()
    if kind == "b":
        return {"normal"}
    if kind == "f":
        fi = np.finfo(a.dtype)
        with np.errstate(invalid="ignore"):
            mag = np.abs(a)
            if np.isnan(a).any():
                out.add("nan")
            if np.isinf(a).any():
                out.add("inf")
            if (a == 0).any():
                out.add("zero")
            finite = np.isfinite(a) & (a != 0)
            ext = finite & ((mag >= fi.max / 4) | (mag < fi.tiny))
            if ext.any():
                out.add("extreme")
            if (finite & ~ext).any():
                out.add("normal")
        return out
    info = np.iinfo(a.dtype)
    wide = a.astype(np.int64)
    if (wide == 0).any():
        out.add("zero")
    big = (wide >= info.max // 4 + 1) | (wide <= info.min // 4)
    if big.any():
        out.add("extreme")
    if ((wide != 0) & ~big).any():
        out.add("normal")
    return out


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------

class Evaluation:
    """Every value of one run: ``values[id(v)]``, and per op its operands and attributes."""

    def __init__(self, fn: Function, inputs: dict[str, np.ndarray]):
        _checked, env = bind_arguments(fn, inputs)
        self.env = env
        self.values: dict[int, np.ndarray] = {id(p): np.asarray(inputs[p.name], order="C") for p in fn.params}
        self.applied: list[tuple[Any, list[np.ndarray], dict[str, Any]]] = []
        self.reference: dict[int, np.ndarray] = {}  # what the reference computed, where it differs
        for op in fn.ops:
            attrs = dict(op.attrs)
            for key in ("shape", "start", "stop"):
                if key in attrs:
                    attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
            operands = [self.values[id(v)] for v in op.operands]
            out = OP_FUNCTIONS[op.op](*operands, **attrs)
            if op.op in exact.FUNCTIONS:
                self.reference[id(op.result)] = out
                with np.errstate(all="ignore"):
                    out = exact.apply(op.op, operands[0])
            self.values[id(op.result)] = out
            self.applied.append((op, operands, attrs))


def check_composition(fn: Function) -> None:
    """Inexact float ops (exp, log, reduce_sum, matmul, conv2d) may only produce function results:
    an accuracy class bounds one op, not a composition."""
    inexact = {id(op.result): op for op in fn.ops
               if OPS[op.op].accuracy != "exact" and op.result.type.dtype.is_float}
    for op in fn.ops:
        for v in op.operands:
            if id(v) in inexact:
                raise GenerationError(f"@{fn.name}: {inexact[id(v)].op} result %{v.name} feeds `{op.op}`; "
                                      "an inexact op may only produce a function result in a case")


def depth(fn: Function) -> int:
    level: dict[int, int] = {id(p): 0 for p in fn.params}
    for op in fn.ops:
        level[id(op.result)] = 1 + max((level[id(v)] for v in op.operands), default=0)
    return max((level[id(v)] for v in fn.results), default=0)


def is_symbolic(fn: Function) -> bool:
    return any(isinstance(d, DimExpr) for p in fn.params for d in p.type.shape)


def _accuracy(fn: Function, ev: Evaluation, value: Any) -> dict[str, Any]:
    for op, operands, attrs in ev.applied:
        if op.result is value:
            cls = OPS[op.op].accuracy
            out: dict[str, Any] = {"class": cls}
            if accuracy.get(cls).kind == "sum":
                with np.errstate(all="ignore"):
                    n, abs_sum = accumulation(op.op, operands, attrs)
                out["n"] = int(n)
                if value.type.dtype.is_float:
                    out["abs_sum"] = encode(np.asarray(abs_sum, dtype=np.float64), "f64")
            return out
    return {"class": "exact"}


def _check(cid: str, what: str, acc: dict[str, Any], dtype: DType, actual: np.ndarray, want: np.ndarray) -> None:
    from mind.conformance.encoding import decode

    extra: dict[str, Any] = {}
    if "n" in acc:
        extra["n"] = acc["n"]
        extra["abs_sum"] = decode(acc["abs_sum"]) if "abs_sum" in acc else np.zeros(want.shape)
    with np.errstate(all="ignore"):
        mismatch = accuracy.check(acc["class"], dtype, actual, want, **extra)
    if mismatch is not None:
        raise GenerationError(f"{cid}: {what}:\n{mismatch}")


def _coverage(fn: Function, ev: Evaluation) -> list[list[str]]:
    symbolic = is_symbolic(fn)
    seen: dict[tuple[str, str, str], None] = {}
    for op, operands, attrs in ev.applied:
        data = operands if operands else [attrs["value"]]
        typed = op.operands[DTYPE_OPERAND.get(op.op, 0)] if op.operands else op.result
        dtype = typed.type.dtype.value
        classes: set[str] = set()
        for a in data:
            classes |= value_classes(np.asarray(a))
        if ev.values[id(op.result)].size == 0:
            classes.add("empty")
        if symbolic:
            classes.add("symbolic")
        for c in sorted(classes):
            seen.setdefault((op.op, dtype, c), None)
    return [list(k) for k in seen]


def _labels(coverage: list[list[str]]) -> list[str]:
    out: dict[str, None] = {}
    for op, dtype, cls in coverage:
        out.setdefault(f"{op}.semantics", None)
        if cls in EDGE_CLASSES:
            out.setdefault(f"{op}.edge_cases", None)
        if OPS[op].accuracy != "exact" and dtype in ("f32", "f64"):
            out.setdefault(f"{op}.accuracy", None)
    return sorted(out)


def _dtypes(fn: Function) -> list[str]:
    return sorted({v.type.dtype.value for v in fn.values()})


def _as_array(v: Any, dtype: DType, shape: Sequence[Any]) -> np.ndarray:
    arr = np.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else from_literal(v, dtype)
    if arr.dtype != dtype.numpy:
        raise GenerationError(f"input of dtype {arr.dtype} for a {dtype.value} parameter")
    if arr.size == 0 and all(isinstance(d, int) for d in shape) and int(np.prod(shape)) == 0:
        arr = arr.reshape(tuple(shape))  # an empty literal carries no shape: take the declared one
    return arr


def success_case(cid: str, description: str, ir: str, inputs: dict[str, Any], expected: Sequence[Any] | None,
                 *, source: str, function: str = "main") -> dict[str, Any]:
    """A success case.  ``inputs``/``expected`` are arrays or nested literals (with "nan", "inf",
    "-inf"); ``expected=None`` takes the reference's results (exp/log correctly rounded)."""
    module = parse_module(ir, cid)
    verify_module(module)
    fn = select_function(module, function)
    check_composition(fn)
    params = {p.name: p for p in fn.params}
    if set(inputs) != set(params):
        raise GenerationError(f"{cid}: inputs {sorted(inputs)} for parameters {sorted(params)}")
    arrays = {k: _as_array(v, params[k].type.dtype, params[k].type.shape) for k, v in inputs.items()}
    try:
        with np.errstate(all="ignore"):  # IEEE results (and signalling NaN inputs) are defined outcomes
            ev = Evaluation(fn, arrays)
    except Exception as exc:
        raise GenerationError(f"{cid}: the reference failed: {type(exc).__name__}: {exc}") from exc
    results = []
    for i, (v, t) in enumerate(zip(fn.results, fn.result_types)):
        acc = _accuracy(fn, ev, v)
        got = ev.values[id(v)]
        if expected is not None:
            want = _as_array(expected[i], t.dtype, got.shape)
            _check(cid, f"the hand-written result {i} is not within its accuracy class of the exact value", acc,
                   t.dtype, got, want)
        else:
            want = got
        if id(v) in ev.reference:
            _check(cid, f"the reference's result {i} is not within its accuracy class", acc, t.dtype,
                   ev.reference[id(v)], want)
        results.append({**encode(want, t.dtype, nan_class=True), "accuracy": acc})
    if expected is not None and len(expected) != len(fn.results):
        raise GenerationError(f"{cid}: {len(expected)} expected results for {len(fn.results)}")
    coverage = _coverage(fn, ev)
    dtypes = _dtypes(fn)
    return {
        "id": cid, "description": description, "source": source,
        "ops": sorted({op.op for op in fn.ops}), "dtypes": dtypes, "labels": _labels(coverage),
        "classes": sorted({c for _o, _d, c in coverage}),
        "profiles": required_profiles(dtypes, is_symbolic(fn), "success"), "depth": depth(fn),
        "coverage": coverage, "ir": module.text(), "function": fn.name,
        "inputs": [{"name": p.name, **encode(arrays[p.name], p.type.dtype)} for p in fn.params],
        "expected": {"status": "success", "results": results},
    }


def error_case(cid: str, description: str, ir: str, code: str, label: str | None, stage: str,
               inputs: dict[str, tuple[str, Any]] | None = None) -> dict[str, Any]:
    """An error case; ``ir`` is kept verbatim (it need not parse).  The reference must reject it
    with exactly this code, label and stage."""
    from mind.conformance.implementations import BackendAdapter

    encoded = []
    dtypes: set[str] = set()
    for name, (dtype, lit) in (inputs or {}).items():
        encoded.append({"name": name, **encode(from_literal(lit, dtype), dtype)})
        dtypes.add(dtype)
    case = {"id": cid, "description": description, "source": "hand",
            "ops": [label.split(".")[0]] if label else [], "dtypes": sorted(dtypes),
            "labels": [label or {"parse": "ir.parse", "verify": "ir.verify", "run": "call.arguments"}[stage]],
            "classes": [], "profiles": required_profiles(sorted(dtypes), False, "error"), "depth": 0,
            "coverage": [], "ir": ir, "function": "main", "inputs": encoded,
            "expected": {"status": "error", "code": code, "label": label, "stage": stage}}
    from mind.conformance.encoding import decode

    answer = BackendAdapter("reference").answer(ir, "main", {i["name"]: decode(i) for i in encoded})
    if (answer.status, answer.code, answer.label, answer.stage) != ("error", code, label, stage):
        raise GenerationError(f"{cid}: the reference answers {answer.status} {answer.code} [{answer.label}] "
                              f"at {answer.stage}, expected error {code} [{label}] at {stage}")
    return case
