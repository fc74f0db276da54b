"""``range_max``: the IEEE maximum of vectors through AVX-512DQ's ``vrange``, bit for bit.

The rewrite is checked on every pair of special values (±0, ±inf, NaNs, subnormals, ±1) and on
random pairs, in each width it emits (512, 256, 128 bits; f32 and f64), against the spec's
``reduce_max`` rules (NaN if either is NaN, +0 above -0); then whole reductions that put NaNs and
zeros of both signs at every position of rows of odd lengths, against the reference.  The
semantic checks need an x86-64-v4 host (they skip elsewhere, saying so); the text checks run
everywhere.
"""

from __future__ import annotations

import ctypes
import functools
import itertools

import numpy as np
import pytest
from bitwise import same_bits

from mind.calling import run_reference
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.range_max import balance_maximum_trees, rewrite_maximum
from mind.compiler.backend.cpu.vector_unit import runs_isa
from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

V4 = pytest.mark.skipif(not runs_isa("x86-64-v4"), reason="the host does not run x86-64-v4 (AVX-512) code")

_TYPES = {np.float32: ("float", "f32"), np.float64: ("double", "f64")}
_SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-310, -1e-310, 1e-40, -1e-40, 3.5, -2.25]


def _maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The spec's maximum: NaN if either is NaN; +0 above -0."""
    r = np.maximum(a, b)
    both_zero = (a == 0) & (b == 0)
    return np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0), r).astype(a.dtype)


def _define(name: str, operand: str, result: str, call: str, operands: int) -> str:
    """``@name(ptr %a[, ptr %b], ptr %o)``: loads %x (and %y) of type ``operand``, ``%r = call``,
    stores %r (of type ``result``) to %o."""
    ptrs = ["%a", "%b"][:operands]
    loads = "".join(f"  %{v} = load {operand}, ptr {p}, align 8\n" for v, p in zip("xy", ptrs))
    return (f"define void @{name}({', '.join(f'ptr {p}' for p in ptrs)}, ptr %o) {{\n{loads}"
            f"  %r = {call}\n  store {result} %r, ptr %o, align 8\n  ret void\n}}\n")


def _reduce_function(lanes: int, elem: str, suffix: str) -> str:
    vec, name = f"<{lanes} x {elem}>", f"@llvm.vector.reduce.fmaximum.v{lanes}{suffix}"
    return f"declare {elem} {name}({vec})\n" + _define("reduced", vec, elem, f"call reassoc {elem} {name}({vec} %x)", 1)


def _max_function(lanes: int, elem: str, suffix: str) -> str:
    vec, name, scalar = f"<{lanes} x {elem}>", f"@llvm.maximum.v{lanes}{suffix}", f"@llvm.maximum.{suffix}"
    return (f"declare {vec} {name}({vec}, {vec})\n" +
            _define("pairwise", vec, vec, f"call {vec} {name}({vec} %x, {vec} %y)", 2) +
            _reduce_function(lanes, elem, suffix) + f"declare {elem} {scalar}({elem}, {elem})\n" +
            _define("scalar", elem, elem, f"call {elem} {scalar}({elem} %x, {elem} %y)", 2))


def _jit(text: str):
    """An x86-64-v4 MCJIT engine of the LLVM IR ``text`` (keep it alive while its functions run)."""
    import llvmlite.binding as llvm

    from mind.compiler.backend.cpu import codegen
    codegen._llvm()
    tm = codegen._target_machine("x86-64-v4")
    module = llvm.parse_assembly(text)
    module.triple = tm.triple
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    return engine


def test_the_rewrite_replaces_every_vector_maximum_and_declares_once():
    text = _max_function(16, "float", "f32") + _max_function(8, "double", "f64").replace("@pairwise", "@p2") \
        .replace("@reduced", "@r2")
    out = rewrite_maximum(text)
    assert "call <16 x float> @llvm.maximum" not in out and "call <8 x double> @llvm.maximum" not in out
    assert "call float @llvm.maximum" not in out and "call double @llvm.maximum" not in out
    assert "call reassoc float @llvm.vector.reduce.fmaximum" not in out
    assert "call reassoc double @llvm.vector.reduce.fmaximum" not in out
    assert out.count("declare <16 x float> @llvm.x86.avx512.mask.range.ps.512(") == 1
    assert "@llvm.x86.avx512.mask.range.pd.128(" in out  # the reduction's last halving of f64
    assert rewrite_maximum("define void @f() {\n  ret void\n}\n") == "define void @f() {\n  ret void\n}\n"
    # an operand that is a constant stays LLVM's
    const = "  %r = call <4 x float> @llvm.maximum.v4f32(<4 x float> %x, <4 x float> zeroinitializer)\n"
    assert rewrite_maximum(const) == const
    # three native pieces (48 f32) are widened to four, five 128-bit ones (20 f32) to two of 512 bits
    for lanes, calls in ((48, 4), (20, 2)):
        line = f"  %r = call <{lanes} x float> @llvm.maximum.v{lanes}f32(<{lanes} x float> %x, <{lanes} x float> %y)\n"
        out = rewrite_maximum(line)
        assert "@llvm.maximum" not in out.split("declare")[0]
        assert out.split("declare")[0].count("@llvm.x86.avx512.mask.range.ps.512(") == calls
        assert f"<{calls * 16} x i32> <i32 0, " in out and "i32 poison>" in out
    # a width that is not a multiple of 128 bits is widened with poison lanes to a native one
    odd = rewrite_maximum("  %r = call <3 x float> @llvm.maximum.v3f32(<3 x float> %x, <3 x float> %y)\n")
    assert "@llvm.maximum" not in odd.split("declare")[0] and "@llvm.x86.avx512.mask.range.ps.128(" in odd
    assert "<4 x i32> <i32 0, i32 1, i32 2, i32 poison>" in odd


def _chain(n: int, vec: str, callee: str, extra_use: int | None = None) -> list[str]:
    """A function body folding ``%x0 .. %x{n}`` into ``%a{n}`` one after another (innerparallel's
    shape); ``extra_use``: an inner value that is also stored."""
    lines = ["define void @f(ptr %p) {"]
    prev = "%x0"
    for i in range(1, n + 1):
        lines.append(f"  %a{i} = call {vec} {callee}({vec} %x{i}, {vec} {prev})")
        prev = f"%a{i}"
    if extra_use is not None:
        lines.append(f"  store {vec} %a{extra_use}, ptr %p, align 4")
    return lines + [f"  store {vec} {prev}, ptr %p, align 4", "  ret void", "}"]


def _depth(lines: list[str], root: str) -> int:
    """The longest chain of ``llvm.maximum`` calls ending in ``root``."""
    defs = {}
    for line in lines:
        if "@llvm.maximum" in line and " = " in line:
            name, _, rest = line.strip().partition(" = ")
            defs[name] = [t.rstrip(",)") for t in rest.split() if t.startswith("%")]
    return 0 if root not in defs else 1 + max(_depth(lines, a) for a in defs[root])


def _balanced(lines: list[str]) -> list[str]:
    return balance_maximum_trees("\n".join(lines)).split("\n")


def test_chains_of_maximum_are_rebuilt_as_balanced_trees():
    """A chain of 15 (a transposed tile's 15 columns folded one after another) becomes a tree of
    depth 4 whose root keeps its name and whose leaves are the chain's; an inner value that is used
    elsewhere stays a value (a leaf of the tree above it); the calls of another block, and of another
    function that reuses the names, are not merged."""
    vec, callee = "<3 x float>", "@llvm.maximum.v3f32"
    lines = _chain(15, vec, callee)
    out = _balanced(lines)
    assert _depth(lines, "%a15") == 15 and _depth(out, "%a15") == 4
    assert sum("@llvm.maximum" in x for x in out) == 15
    assert sorted(t for x in out for t in x.replace(",", " ").replace(")", " ").split() if t.startswith("%x")) \
        == sorted(f"%x{i}" for i in range(16))
    shared = _balanced(_chain(15, vec, callee, extra_use=7))
    assert any(x.startswith("  %a7 = ") for x in shared) and _depth(shared, "%a15") <= 4
    split = _chain(6, vec, callee)
    split.insert(4, "5:")  # %a4 onwards in another block: %a3 is a leaf there, not a node
    moved = _balanced(split)
    assert any(x.startswith("  %a3 = ") for x in moved) and moved.index("5:") < [
        i for i, x in enumerate(moved) if x.startswith("  %a6 = ")][0]
    assert _depth(moved, "%a6") == 2 + 2 and any("%a3" in x for x in moved[moved.index("5:"):])  # 2 below %a3
    two = _chain(7, vec, callee) + _chain(7, vec, callee)
    assert [x for x in _balanced(two) if x.startswith("define")] == ["define void @f(ptr %p) {"] * 2
    assert _balanced(_chain(2, vec, callee)) == _chain(2, vec, callee)  # as shallow as it gets


def _chain_function(n: int, lanes: int, elem: str, suffix: str) -> str:
    """``@chain(ptr %a, ptr %o)``: %o = the maximum of the ``n`` vectors of ``lanes`` at %a, folded
    one after another."""
    vec, callee = f"<{lanes} x {elem}>", f"@llvm.maximum.v{lanes}{suffix}"
    size = lanes * (4 if elem == "float" else 8)
    lines = [f"declare {vec} {callee}({vec}, {vec})", "define void @chain(ptr %a, ptr %o) {"]
    for i in range(n):
        lines.append(f"  %p{i} = getelementptr i8, ptr %a, i64 {i * size}")
        lines.append(f"  %x{i} = load {vec}, ptr %p{i}, align 4")
    prev = "%x0"
    for i in range(1, n):
        lines.append(f"  %c{i} = call {vec} {callee}({vec} %x{i}, {vec} {prev})")
        prev = f"%c{i}"
    return "\n".join(lines + [f"  store {vec} {prev}, ptr %o, align 4", "  ret void", "}"]) + "\n"


@V4
@pytest.mark.parametrize("expanded", [True, False], ids=["avx512", "llvm"])
@pytest.mark.parametrize("dtype,lanes", [(np.float32, 3), (np.float32, 15), (np.float32, 45), (np.float32, 2),
                                         (np.float32, 16), (np.float32, 20), (np.float32, 48), (np.float64, 3),
                                         (np.float64, 5), (np.float64, 1), (np.float64, 24)])
def test_balanced_chains_match_the_spec(dtype, lanes, expanded):
    """16 vectors folded by a chain that is balanced, then (AVX-512) expanded and, where the width is
    not a multiple of 128 bits, widened; or left to LLVM's expansion (the other targets): a NaN or a
    zero of either sign at each vector in turn, every lane."""
    elem, suffix = _TYPES[dtype]
    text = balance_maximum_trees(_chain_function(16, lanes, elem, suffix))
    assert "%mind.maxtree." in text
    if expanded:
        text = rewrite_maximum(text)
        assert f"@llvm.maximum.v{lanes}" not in text.split("define")[1]
    engine = _jit(text)
    chain = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("chain"))
    rng = np.random.default_rng(5)
    got = np.empty(lanes, dtype)
    for special in _SPECIALS:
        for j in range(16):
            rows = -np.abs(rng.standard_normal((16, lanes))).astype(dtype) - 1.0
            rows[j] = special
            rows[(j + 5) % 16, ::2] = -0.0
            rows = np.ascontiguousarray(rows)
            chain(rows.ctypes.data, got.ctypes.data)
            want = functools.reduce(_maximum, list(rows))
            assert same_bits(got, want).all(), (special, j, got, want)
    del engine


@V4
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bits", [128, 256, 512, 1024, 2048])
def test_vector_maximum_matches_the_spec_on_every_special_pair(dtype, bits):
    elem, suffix = _TYPES[dtype]
    lanes = bits // (32 if dtype == np.float32 else 64)
    text = rewrite_maximum(_max_function(lanes, elem, suffix))
    assert f"call <{lanes} x {elem}> @llvm.maximum" not in text and "call reassoc" not in text  # all rewritten
    engine = _jit(text)
    pairwise = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("pairwise"))
    reduced = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("reduced"))
    scalar = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        engine.get_function_address("scalar"))
    rng = np.random.default_rng(7)
    pairs = np.array(list(itertools.product(_SPECIALS, repeat=2)) + list(rng.standard_normal((4000, 2))), dtype)
    pairs = np.concatenate([pairs, pairs[: (-len(pairs)) % lanes]])
    for i in range(0, len(pairs), lanes):
        a, b = np.ascontiguousarray(pairs[i:i + lanes, 0]), np.ascontiguousarray(pairs[i:i + lanes, 1])
        got = np.empty(lanes, dtype)
        pairwise(a.ctypes.data, b.ctypes.data, got.ctypes.data)
        assert same_bits(got, _maximum(a, b)).all(), (a, b, got)
        one = np.empty(1, dtype)
        reduced(a.ctypes.data, one.ctypes.data)
        want = functools.reduce(_maximum, [a[j:j + 1] for j in range(lanes)])
        assert same_bits(one, want).all(), (a, one, want)
        for j in range(lanes):
            scalar(a[j:].ctypes.data, b[j:].ctypes.data, one.ctypes.data)
            assert same_bits(one, _maximum(a[j:j + 1], b[j:j + 1])).all(), (a[j], b[j], one)
    del engine



@V4
@pytest.mark.parametrize("dtype,lanes", [(np.float32, 100), (np.float32, 33), (np.float32, 17), (np.float32, 12),
                                         (np.float32, 7), (np.float32, 4), (np.float64, 48), (np.float64, 40),
                                         (np.float64, 24), (np.float64, 13), (np.float64, 6), (np.float64, 5),
                                         (np.float64, 3)])
def test_reductions_of_any_width_match_the_spec(dtype, lanes):
    """A row that is not a power of two of lanes (48 f64, 100 f32) is cut into native pieces and
    the lanes left over; a NaN or a zero of either sign in each lane in turn, the rest random."""
    elem, suffix = _TYPES[dtype]
    text = rewrite_maximum(_reduce_function(lanes, elem, suffix))
    assert "@llvm.vector.reduce.fmaximum" not in text.split("define")[1]  # rewritten, not left to LLVM
    engine = _jit(text)
    reduced = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("reduced"))
    rng = np.random.default_rng(11)
    rows = []
    for special in _SPECIALS:
        for j in range(lanes):
            row = -np.abs(rng.standard_normal(lanes)).astype(dtype) - 1.0
            row[j] = special
            rows.append(row)
    rows += list(rng.standard_normal((200, lanes)).astype(dtype))
    one = np.empty(1, dtype)
    for row in rows:
        row = np.ascontiguousarray(row)
        reduced(row.ctypes.data, one.ctypes.data)
        want = functools.reduce(_maximum, [row[j:j + 1] for j in range(lanes)])
        assert same_bits(one, want).all(), (row, one, want)
    del engine

def _reduce_max_program(dtype: DType, shape, axes):
    b = FunctionBuilder("main")
    x = b.param("x", TensorType(dtype, shape))
    return b.finish([b.emit("reduce_max", x, axes=axes, keepdims=False)])


@V4
@pytest.mark.parametrize("dtype", [DType.F32, DType.F64])
@pytest.mark.parametrize("shape,axes", [((37, 100), (1,)), ((12, 272), (1,)), ((300, 19), (0,)), ((9, 5, 16), (2,)),
                                        ((40, 3, 15), (2,)), ((300, 11), (1,)), ((50, 3, 5), (2,))])
def test_reductions_with_nans_and_signed_zeros_match_the_reference(dtype, shape, axes):
    """Each row holds zeros of both signs and, in some rows, a NaN at a moving position: the
    reductions' vector steps, their tails and their horizontal combination all see them."""
    fn = _reduce_max_program(dtype, shape, axes)
    rng = np.random.default_rng(3)
    x = -np.abs(rng.standard_normal(shape)).astype(dtype.numpy) - 1.0
    flat = np.moveaxis(x, axes[0], -1).reshape(-1, shape[axes[0]])
    for r, row in enumerate(flat):
        row[(r * 7) % len(row)] = -0.0
        if r % 3 == 0:
            row[(r * 5 + 2) % len(row)] = 0.0
        if r % 4 == 1:
            row[(r * 11 + 1) % len(row)] = np.nan
    x = np.moveaxis(flat.reshape(np.moveaxis(x, axes[0], -1).shape), -1, axes[0]).copy()
    for threads in (1, 2):
        got = compile_function(fn, threads=threads, cache=False, cpu="x86-64-v4", schedule="all")([x])[0]
        want = run_reference(fn, [x])[0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert same_bits(got, want).all()
