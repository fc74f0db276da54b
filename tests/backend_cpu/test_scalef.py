"""``scalef``: exp's scaling by 2^n as one AVX-512 ``vscalef``, the same bits as the two halves.

The text checks run everywhere: the marked pair that mathlib writes becomes one ``vscalef`` per native
piece (through MLIR's aggregates of n-D vectors, and widened when the width is not a multiple of 128
bits), and a pair not made that way is left alone.  The semantic check compiles exp for x86-64-v4
(rewritten) and for x86-64-v3 (the two multiplies) and asks for the same bits on every special value
and across exp's whole range: results below the normal range, overflow to +inf, NaN.  It needs an
x86-64-v4 host (it skips elsewhere, saying so).
"""

from __future__ import annotations

import numpy as np
import pytest
from bitwise import same_bits

from mind.compiler.backend.cpu.api import compile_function, emit_stage
from mind.compiler.backend.cpu.scalef import rewrite_exp_scaling
from mind.compiler.backend.cpu.vector_unit import runs_isa
from mind.compiler.backend.linalg.mathlib import EXP_SHIFT, F64, SCALE_MARK
from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

V4 = pytest.mark.skipif(not runs_isa("x86-64-v4"), reason="the host does not run x86-64-v4 (AVX-512) code")


def _scaling(lanes: int, elem: str, wrapped: bool, s1_from_t: bool = True) -> str:
    """A function computing ``y * s1 * s2`` as mathlib's exp does, ``s1`` from ``t``'s bits (or, with
    ``s1_from_t`` False, from an argument's); ``wrapped``: through ``[1 x <...>]`` aggregates, as
    MLIR translates n-D vectors."""
    bits = 32 if elem == "float" else 64
    mant = 23 if elem == "float" else 52
    v, iv = f"<{lanes} x {elem}>", f"<{lanes} x i{bits}>"

    def get(name: str, ty: str) -> tuple[list[str], str]:
        if not wrapped:
            return [], name
        return [f"  {name}.agg = insertvalue [1 x {ty}] poison, {ty} {name}, 0",
                f"  {name}.x = extractvalue [1 x {ty}] {name}.agg, 0"], f"{name}.x"

    body = [f"define void @f(ptr %pt, ptr %py, ptr %po, {iv} %other) {{",
            f"  %t = load {v}, ptr %pt, align 4", f"  %y = load {v}, ptr %py, align 4",
            f"  %bits = bitcast {v} %t to {iv}" if s1_from_t else f"  %bits = add {iv} %other, %other"]
    pre, bits_name = get("%bits", iv)
    body += pre + [f"  %half = lshr {iv} {bits_name}, splat (i{bits} 1)"]
    pre, half = get("%half", iv)
    body += pre + [f"  %low = add {iv} {half}, splat (i{bits} -1)"]
    pre, low = get("%low", iv)
    body += pre + [f"  %sh = shl {iv} {low}, splat (i{bits} {mant})"]
    pre, sh = get("%sh", iv)
    body += pre + [f"  %s1 = bitcast {iv} {sh} to {v}", f"  %s2 = bitcast {iv} {sh} to {v}"]
    pre, s1 = get("%s1", v)
    body += pre + [f"  %a = fmul {SCALE_MARK} {v} %y, {s1}"]
    pre, a = get("%a", v)
    body += pre + [f"  %r = fmul {SCALE_MARK} {v} {a}, %s2", f"  store {v} %r, ptr %po, align 4", "  ret void", "}"]
    return "\n".join(body) + "\n"


@pytest.mark.parametrize("lanes,elem,calls,width", [(16, "float", 1, 512), (32, "double", 4, 512),
                                                    (15, "float", 1, 512), (3, "float", 1, 128),
                                                    (4, "double", 1, 256), (20, "float", 2, 512),
                                                    (48, "float", 4, 512), (40, "float", 4, 512),
                                                    (24, "double", 4, 512)])
@pytest.mark.parametrize("wrapped", [False, True])
def test_the_marked_pair_becomes_vscalef_of_t_less_the_shift(lanes, elem, calls, width, wrapped):
    out = rewrite_exp_scaling(_scaling(lanes, elem, wrapped))
    suffix = "ps" if elem == "float" else "pd"
    name = f"@llvm.x86.avx512.mask.scalef.{suffix}.{width}"
    assert out.count(f"call <{width // (32 if elem == 'float' else 64)} x {elem}> {name}(") == calls
    assert out.count(f"declare <{width // (32 if elem == 'float' else 64)} x {elem}> {name}(") == 1
    shift = f"0x{F64.bits_of(EXP_SHIFT['f32' if elem == 'float' else 'f64']):016X}"
    assert f"fsub <{lanes} x {elem}> %t, splat ({elem} {shift})" in out
    assert f"  %r = select i1 true, <{lanes} x {elem}> " in out  # the result keeps its name
    assert f"fmul {SCALE_MARK} <{lanes} x {elem}> %a" not in out and f"fmul {SCALE_MARK} <{lanes} x {elem}> %a.x" \
        not in out


def test_pairs_that_mathlib_did_not_make_are_left_alone():
    other = _scaling(16, "float", True, s1_from_t=False)
    assert rewrite_exp_scaling(other) == other
    plain = "define void @f() {\n  %r = fmul <16 x float> %a, %b\n  ret void\n}\n"
    assert rewrite_exp_scaling(plain) == plain


def _range_points(dtype: DType, n: int) -> np.ndarray:
    """Every special value of exp and ``n`` or more points across its whole range (results below the
    normal range, the last finite ones, overflow), of ``dtype``."""
    npdt = dtype.numpy
    info = np.finfo(npdt)
    lo, hi = (-104.5, 89.5) if dtype == DType.F32 else (-746.5, 710.5)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, info.smallest_subnormal, lo, hi,
                np.log(info.max), np.log(info.tiny), np.log(info.smallest_subnormal), info.max, -info.max]
    rng = np.random.default_rng(13)
    points = np.concatenate([specials, np.linspace(lo, hi, max(n, 4099) * 4), rng.uniform(lo, hi, n)])
    return np.concatenate([points, np.log(info.smallest_subnormal) + rng.uniform(-1, 30, n)]).astype(npdt)


def _exp_program(dtype: DType, shape):
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, shape))
    return b.finish([b.emit("exp", x)])


@V4
@pytest.mark.parametrize("dtype", [DType.F32, DType.F64])
@pytest.mark.parametrize("shape", [(4099,), (37, 15), (6, 3)])
def test_exp_on_avx512_gives_the_bits_of_the_two_halves(dtype, shape):
    """Every special value and 4099 or more points across exp's whole range (subnormal results,
    the last finite ones, overflow), x86-64-v4's ``vscalef`` against x86-64-v3's two multiplies."""
    fn = _exp_program(dtype, shape)
    assert "@llvm.x86.avx512.mask.scalef" in emit_stage(fn, "llvm", cpu="x86-64-v4", threads=2)
    n = int(np.prod(shape))
    points = _range_points(dtype, n)
    runs = {cpu: compile_function(fn, threads=2, cache=False, cpu=cpu) for cpu in ("x86-64-v4", "x86-64-v3")}
    for i in range(0, len(points), n):
        x = np.resize(points[i:i + n], shape).astype(dtype.numpy)
        a, b = (np.asarray(runs[cpu]([x])[0]) for cpu in runs)
        same = same_bits(a, b)
        assert same.all(), (x[~same], a[~same], b[~same])


@V4
@pytest.mark.parametrize("dtype,shape", [(DType.F32, (64, 20)), (DType.F32, (30, 48)), (DType.F32, (25, 40)),
                                         (DType.F64, (40, 24))])
def test_exp_of_rows_of_odd_native_pieces_gives_the_bits_of_the_two_halves(dtype, shape, monkeypatch):
    """``exp(x - m)`` with ``m`` per row keeps the row as its tile: vectors of 20, 40 or 48 floats, 24
    doubles, whose native pieces are not a power of two (five 128-bit ones, three or five 512-bit
    ones).  They are widened to a power of two and scaled by ``vscalef`` too (no marked multiply is
    left), with the bits of x86-64-v3's two multiplies.  The pairs are counted on x86-64-v3 code
    of the same plan (its rows of 20 or 40 floats are otherwise peeled, ``_peeled_row_tile``: two
    exps per row, not one)."""
    import mind
    from mind.compiler.backend.cpu import transforms
    ty = str(dtype)
    rows, cols = shape
    src = (f"fn f(x: Tensor<{ty}, [{rows}, {cols}]>, m: Tensor<{ty}, [{rows}, 1]>) -> Tensor<{ty}, [{rows}, {cols}]> "
           "{ exp(x - m) }")
    with monkeypatch.context() as patch:
        patch.setattr(transforms, "_peeled_row_tile", lambda *a: 0)
        llvm_ir = {cpu: emit_stage(mind._function_of(src, "f"), "llvm", cpu=cpu, threads=2)
                   for cpu in ("x86-64-v4", "x86-64-v3")}
    assert f"x {'float' if dtype == DType.F32 else 'double'}> @llvm.x86.avx512.mask.scalef" in llvm_ir["x86-64-v4"]
    # every pair's second multiply replaced (the first is then dead)
    pairs = llvm_ir["x86-64-v3"].count(f"fmul {SCALE_MARK}") // 2
    assert pairs and llvm_ir["x86-64-v4"].count(f"fmul {SCALE_MARK}") == pairs
    runs = {cpu: mind.compile(src, fn="f", threads=2, cache=False, cpu=cpu) for cpu in ("x86-64-v4", "x86-64-v3")}
    points = _range_points(dtype, rows * cols)
    m = np.zeros((rows, 1), dtype.numpy)
    m[1], m[2] = np.inf, np.nan
    for i in range(0, len(points), rows * cols):
        x = np.resize(points[i:i + rows * cols], shape).astype(dtype.numpy)
        a, b = (np.asarray(runs[cpu](x, m)) for cpu in runs)
        same = same_bits(a, b)
        assert same.all(), (x[~same], a[~same], b[~same])
