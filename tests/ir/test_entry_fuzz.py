"""Fuzzing the entry points the CLI offers for IR text: `mind verify`, `mind ir` and
`mind run --backend reference` on Core IR (`.mir`), and `mind verify` on the public encoding.

Inputs are generated (well-typed modules from ``ir_strategies``, public dumps from the strategy
below, right and wrong) and then mutated byte-wise.  Every call must end with a coded result:
exit status 0, 1 or 2, JSON on stdout, never a traceback, never E7009 (internal error), and never a
hang (each call is bounded; the guard below only catches a runaway).
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings, strategies as st

from mind.cli.main import main
from mind.ir.printer import print_module
from mind.spec.dims import DimExpr

from .ir_strategies import modules, mutate

HANG_GUARD_S = 120  # far above any bounded call; a call past it is a hang, not a slow run
FUZZ = settings(suppress_health_check=list(HealthCheck))

def _call(argv: list[str]) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv + ["--json"])
    assert time.perf_counter() - t0 < HANG_GUARD_S, argv
    assert rc in (0, 1, 2), (rc, out.getvalue(), err.getvalue())
    assert "Traceback" not in err.getvalue() and "E7009" not in out.getvalue() + err.getvalue()
    payload = json.loads(out.getvalue()) if out.getvalue().strip() else json.loads(err.getvalue())
    return rc, payload


@st.composite
def core_texts(draw) -> bytes:
    return mutate(draw, print_module(draw(modules())).encode())


def _inputs(tmp: Path, text: bytes) -> list[str]:
    """`--input` arguments of zeros for the parameters of a (parseable) module's entry function
    (none when they would be large: then `mind run` reports the missing arguments)."""
    from mind.ir.parser import parse_module

    try:
        mod = parse_module(text.decode("utf-8"))
    except Exception:
        return []
    fn = mod.function("main") or (mod.functions[0] if mod.functions else None)
    args = []
    for p in fn.params if fn else []:
        shape = tuple(2 if isinstance(d, DimExpr) else max(d, 0) for d in p.type.shape)
        if np.prod(shape, dtype=float) > 1e6:
            return []
        np.save(tmp / f"{p.name}.npy", np.zeros(shape, p.type.dtype.numpy))
        args.append(f"--input={p.name}={tmp / p.name}.npy")
    return args


@example(b"func @main(%a: f32[S0, 3], %b: f32[S1, 3]) -> (f32[S0, 3]) where S0 == S1 {\n"
         b"  %0 = add(%a, %b) : f32[S0, 3]\n  return %0\n}\n")
@example(b"func @main(%a: f32[" + b"-" * 1000 + b"B]) -> () {\n  return\n}\n")
@example(b"func @main(%p0: i32[], %p1: i32[B, 99999999990]) -> (i32[]) where B >= 1 {\n  return %p0\n}\n")
# found by the thorough profile: verify's parser had a nesting bound of 32, `mind ir`'s 64
@example(b"func @main(%p0: bool[], %s: f32[" + b"-" * 64 + b"B, 2]) -> (bool[]) where B >= 1 {\n"
         b"  %0 = const {value = false} : bool[]\n  return %p0\n}\n")
@example(b"func @main(%p0: bool[]) -> (bool[" + b"-" * 64 + b"]) {\n"
         b"  %0 = const {value = false} : bool[]\n  return %p0\n}\n")
@FUZZ
@given(core_texts())
def test_core_ir_entry_points(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("core")
    path = tmp / "m.mir"
    path.write_bytes(data)
    rc_verify, v = _call(["verify", str(path)])
    rc_ir, i = _call(["ir", str(path)])
    assert v["ok"] == (rc_verify == 0) and i["ok"] == (rc_ir == 0)
    # one checker behind both: the same verdict, the same problems
    if v.get("format") == "core" and rc_verify != 2:
        assert v["ok"] == i["ok"], (v, i)
        if not v["ok"]:
            assert [d["code"] for d in v["diagnostics"]] == [d["code"] for d in i["diagnostics"]]
    _call(["run", str(path), "--backend", "reference"] + _inputs(tmp, data))


# -- the public encoding -----------------------------------------------------------------------------

DTYPES = ["f32", "f64", "i32", "i64", "f16"]


@st.composite
def public_types(draw) -> str:
    dims = draw(st.lists(st.sampled_from(["1", "2", "3", "?", "0"]), max_size=4))
    return f"Tensor<{draw(st.sampled_from(DTYPES))}, [{', '.join(dims)}]>"


@st.composite
def public_texts(draw) -> bytes:
    lines = []
    n = draw(st.integers(1, 3))
    for i in range(n):
        lines.append(f'%{i} = Input() {{name: "{draw(st.sampled_from(["a", "b", "c", "x"]))}"}} : '
                     f"{draw(public_types())}")
    k = n
    for _ in range(draw(st.integers(0, 5))):
        v = lambda: f"%{draw(st.integers(0, k - 1))}"  # noqa: E731
        ints = lambda: "[" + ", ".join(str(x) for x in draw(st.lists(st.integers(-3, 3), max_size=3))) + "]"  # noqa: E731
        body = draw(st.sampled_from([
            lambda: f"BinOp({draw(st.sampled_from(['Add', 'Sub', 'Mul', 'Div', 'Pow']))}, {v()}, {v()})",
            lambda: f"{draw(st.sampled_from(['Sum', 'Mean']))}({v()}, {ints()}, {draw(st.sampled_from(['true', 'false']))})",
            lambda: f"Reshape({v()}, {ints()})",
            lambda: f"Transpose({v()}, {ints()})",
            lambda: f"{draw(st.sampled_from(['ExpandDims', 'Squeeze']))}({v()}, {ints()})",
            lambda: f"Index({v()}, {ints()})",
            lambda: f"Slice({v()}, [{draw(st.sampled_from(['0:2', '1:', ':-1', '::2', '2:0:-1', '::0']))}])",
            lambda: f"Gather({v()}, {v()})",
            lambda: f"{draw(st.sampled_from(['Dot', 'MatMul']))}({v()}, {v()})",
            lambda: f"Conv2d({v()}, {v()}, {ints()}, {draw(st.sampled_from(['Same', 'Valid', 'Custom([[1, 1], [0, 0]])']))})",
            lambda: f"{draw(st.sampled_from(['Relu', 'Neg', 'Exp', 'Log']))}({v()})",
            lambda: f"{draw(st.sampled_from(['ConstI64', 'ConstF32', 'ConstF64']))}({draw(st.sampled_from(['1', '-2', '0.5', 'nan']))})",
            lambda: f"ConstTensor({draw(st.sampled_from(['[1.0, 2.0]', '[[1, 2], [3, 4]]', '[]']))})",
        ]))()
        ty = f" : {draw(public_types())}" if draw(st.booleans()) else ""
        lines.append(f"%{k} = {body}{ty}")
        k += 1
    lines.append(f"outputs: %{k - 1}")
    return mutate(draw, ("\n".join(lines) + "\n").encode())


@example(b"outputs: %0\n")
@example(b'%0 = Input() {name: "a"} : Tensor<f32, [?, 3]>\n%1 = BinOp(Add, %0, %0) : Tensor<f32, [5, 3]>\n'
         b"outputs: %1\n")
@FUZZ
@given(public_texts())
def test_public_ir_entry_point(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("public") / "d.ir"
    path.write_bytes(data)
    rc, payload = _call(["verify", str(path)])
    assert payload["ok"] == (rc == 0)
    for d in payload["diagnostics"]:
        assert d["code"].startswith("E") and d["code"] != "E7009"
