"""Differential testing of conv2d's methods: random convolutions (strides, both dilations, paddings,
odd sizes, 1x1 and whole-window filters, a transposed input) and their gradients, compiled for the
cpu backend, against the reference.

Each method the cost model may pick is drawn: the direct schedule (one image or several per block,
output channels padded to whole vectors: ``lowerings.block_channels``),
the phase decomposition of an input-dilated conv (``linalg.conv_phases``), the GEMM of a conv that is
a matmul (``cpu.conv_gemm``), and the padding copy with a transposed read.  The attributes are drawn
so that every one of those is reached; the results are checked with the spec's accuracy class.
"""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings, strategies as st

from mind.backends import compile_for
from mind.ir.builder import FunctionBuilder
from mind.reference.accuracy import check_op
from mind.reference.ops import conv2d as ref_conv2d
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

_CI = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci") == "ci"


@st.composite
def convs(draw):
    """(x shape, w shape, attrs, transposed): a conv whose output is not empty."""
    kind = draw(st.sampled_from(["any", "lhs-dilated", "1x1", "whole-window"]))
    n, c, f = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.sampled_from([1, 3, 8, 16, 20, 31, 32, 43]))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 31))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    lhs = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    rhs = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = tuple((draw(st.integers(0, 4)), draw(st.integers(0, 4))) for _ in range(2))
    if kind == "lhs-dilated":
        strides, lhs = (1, 1), (draw(st.integers(2, 3)), draw(st.integers(1, 3)))
    elif kind == "1x1":
        kh = kw = 1
        strides, lhs, pad = (1, 1), (1, 1), ((0, 0), (0, 0))
    elif kind == "whole-window":
        kh, kw = h, w
        lhs, rhs, pad = (1, 1), (1, 1), ((0, 0), (0, 0))
    attrs = {"strides": strides, "padding": pad, "lhs_dilation": lhs, "rhs_dilation": rhs}
    out = ref_conv2d(np.zeros((n, h, w, c)), np.zeros((kh, kw, c, f)), **attrs).shape
    if 0 in out:
        attrs["padding"] = ((kh * rhs[0], kh * rhs[0]), (kw * rhs[1], kw * rhs[1]))
    return (n, h, w, c), (kh, kw, c, f), attrs, draw(st.booleans())


def _program(xs, ws, attrs, transposed, dt):
    """conv2d(x, w), or conv2d(transpose(x'), w) with x' in the layout that makes the copy read
    across images (a filter gradient's layout)."""
    b = FunctionBuilder("main")
    if transposed:
        n, h, w, c = xs
        xp = b.param("x", TensorType(dt, (c, h, w, n)))
        x = b.emit("transpose", xp, permutation=(3, 1, 2, 0))
    else:
        xp = x = b.param("x", TensorType(dt, xs))
    wv = b.param("w", TensorType(dt, ws))
    return b.finish([b.emit("conv2d", x, wv, **attrs)]), xp.type.shape


@settings(max_examples=25, deadline=None) if _CI else settings(max_examples=2000, deadline=None)
@given(convs(), st.sampled_from([1, 2]), st.sampled_from([DType.F32, DType.F64, DType.I32]),
       st.sampled_from(["host", "x86-64-v3"]))
def test_random_convs_match_reference(conv, threads, dt, cpu):
    """On 1 and 2 threads, for this host's vector unit and for AVX2's (x86-64-v3: an AVX-512 host
    runs that code too; its blocks hold fewer accumulators)."""
    from mind.compiler.backend.cpu.vector_unit import runs_isa
    if cpu != "host" and not runs_isa(cpu):
        cpu = "host"
    xs, ws, attrs, transposed = conv
    fn, x_shape = _program(xs, ws, attrs, transposed, dt)
    rng = np.random.default_rng(sum(xs) + 7 * sum(ws))
    if dt.is_float:
        x, w = rng.standard_normal(x_shape).astype(dt.numpy), rng.standard_normal(ws).astype(dt.numpy)
        for a in (x, w):  # a NaN or an infinity now and then: 0 * inf must stay NaN where padding or
            if rng.random() < 0.25:  # a dilation's zeros meet it
                a.flat[rng.integers(0, a.size)] = rng.choice([np.nan, np.inf, -np.inf])
    else:
        x, w = (rng.integers(-50, 50, size=s).astype(dt.numpy) for s in (x_shape, ws))
    got = compile_for(fn, "cpu", threads=threads, cpu=cpu)({"x": x, "w": w})[0]
    xin = np.ascontiguousarray(x.transpose(3, 1, 2, 0)) if transposed else x
    want = ref_conv2d(xin, w, **attrs)
    assert check_op("conv2d", [xin, w], attrs, got, want) is None, (xs, ws, attrs, transposed)


@st.composite
def conv_grads(draw):
    """A conv's shapes and attributes for its gradient (stride and filter dilation of the forward
    conv: the input gradient is then input-dilated, the filter gradient a large window)."""
    n, c, f = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.sampled_from([1, 4, 16, 19]))
    h, w = draw(st.integers(2, 11)), draw(st.integers(2, 11))
    k = draw(st.integers(1, 3))
    s, d = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    p = draw(st.integers(0, 2))
    span = (k - 1) * d + 1
    if h + 2 * p < span or w + 2 * p < span:
        p = span
    return (n, h, w, c), (k, k, c, f), {"strides": (s, s), "padding": ((p, p), (p, p)),
                                        "lhs_dilation": (1, 1), "rhs_dilation": (d, d)}


@settings(max_examples=8, deadline=None) if _CI else settings(max_examples=300, deadline=None)
@given(conv_grads())
def test_random_conv_gradients_match_reference(case):
    """The gradients of sum(conv2d(x, w) * g) w.r.t. x and w (autodiff's conv2d programs: an
    input-dilated conv, a transposed large-window conv), compiled against the reference backend."""
    import mind
    xs, ws, attrs = case
    out = ref_conv2d(np.zeros(xs), np.zeros(ws), **attrs).shape
    ty = lambda s: f"Tensor<f64, [{', '.join(map(str, s))}]>"  # noqa: E731
    (pt, pb), (pl, pr) = attrs["padding"]
    s, d = attrs["strides"][0], attrs["rhs_dilation"][0]
    src = (f"fn loss(x: {ty(xs)}, w: {ty(ws)}, g: {ty(out)}) -> f64 {{ sum(conv2d(x, w, strides=[{s}, {s}], "
           f"padding=[[{pt}, {pb}], [{pl}, {pr}]], dilation=[{d}, {d}]) * g, axes=[0, 1, 2, 3], keepdims=false) }}\n"
           f"fn f(x: {ty(xs)}, w: {ty(ws)}, g: {ty(out)}) -> ({ty(xs)}, {ty(ws)}) {{ "
           f"let (dx, dw) = grad(loss(x, w, g), wrt=[x, w]); (dx, dw) }}")
    rng = np.random.default_rng(sum(xs) + sum(ws))
    args = [rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(out)]
    got = mind.compile(src, fn="f", threads=2)(*args)
    want = mind.compile(src, fn="f", backend="reference")(*args)
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-9, atol=1e-9 * (1 + np.abs(w_).max()))
