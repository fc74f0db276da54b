"""conv2d on the CPU backend: the named-op emission, the tile chooser and the vectorized schedule.

Every compiled case is checked against the reference (``mind.reference.ops.conv2d``, which
accumulates in f64 / wrapping uint64) and asserted to have been scheduled.
"""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.conv_schedule import ConvTiles, choose_conv_tiles, conv_section
from mind.ir.parser import parse_module
from mind.reference.interpreter import select_function
from mind.reference.ops import conv2d as ref_conv2d
from mind.spec import accuracy

_NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


# ------------------------------------------------------------------------------ tile chooser (pure)

def test_tiles_of_the_benchmark_conv():
    # 6 pixels x 64 channels: 24 zmm accumulators, tiles divide 54 and 64
    assert choose_conv_tiles(8, 54, 54, 64, 3, 3, 64) == ConvTiles(ow=6, f=64, c=1)


def test_tiles_f64_and_narrow_channels():
    assert choose_conv_tiles(1, 8, 8, 64, 3, 3, 8, elem_bits=64) == ConvTiles(ow=4, f=32, c=1)
    assert choose_conv_tiles(1, 5, 7, 1, 1, 1, 1) == ConvTiles(ow=7, f=1, c=1)      # F = 1
    assert choose_conv_tiles(1, 5, 53, 32, 3, 3, 3) == ConvTiles(ow=1, f=32, c=1)   # prime OW
    assert choose_conv_tiles(2, 3, 12, 20, 3, 3, 5) == ConvTiles(ow=12, f=20, c=1)  # F not a lane multiple
    assert choose_conv_tiles(1, 0, 4, 4, 1, 1, 1) is None


def test_tiles_prefer_more_accumulators_over_wider_f():
    # OW = 7 or 27 has no divisor <= 6: 7 x 2 (9 x 2) vectors beat 1 x 4 (3 x 4)
    assert choose_conv_tiles(8, 7, 7, 256, 3, 3, 256) == ConvTiles(ow=7, f=32, c=1)
    assert choose_conv_tiles(8, 27, 27, 64, 3, 3, 64) == ConvTiles(ow=9, f=32, c=1)
    # equal accumulator counts: fewer loads per FMA wins (4 x 4 over 8 x 2)
    assert choose_conv_tiles(8, 56, 56, 64, 3, 3, 64) == ConvTiles(ow=4, f=64, c=1)


@pytest.mark.parametrize("bits", [32, 64])
def test_tiles_divide_and_fit_registers(bits):
    lanes = 512 // bits
    for ow in range(1, 40):
        for f in (1, 2, 3, 7, 8, 16, 20, 24, 32, 48, 64, 96, 100, 128, 256):
            t = choose_conv_tiles(1, 1, ow, f, 1, 1, 1, bits)
            assert t is not None and ow % t.ow == 0 and f % t.f == 0
            assert t.ow <= 12 and t.f <= 4 * lanes
            assert t.ow * -(-t.f // lanes) <= 24


def test_section_text():
    s = conv_section(3, ConvTiles(6, 64, 1))
    assert "attributes {mind.sched = 3 : i64}" in s
    assert "tile_sizes [1, 1, 6, 64]" in s and "tile_sizes [0, 0, 0, 0, 1, 1, 1]" in s
    assert "fuse_into_containing_op" in s and "transform.structured.decompose" in s
    assert "fuse_into_containing_op" not in conv_section(0, ConvTiles(1, 1, 1), fuse_fill=False)


# ------------------------------------------------------------------------------ compiled vs reference

def _conv_fn(xs, ws, dt, strides=(1, 1), padding=((0, 0), (0, 0)), lhs_dil=(1, 1), rhs_dil=(1, 1),
             epilogue=False):
    x = np.zeros(xs)
    w = np.zeros(ws)
    out = ref_conv2d(x, w, strides=strides, padding=padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil).shape
    ty = lambda s: f"{dt}[{', '.join(map(str, s))}]"  # noqa: E731
    pad = "[" + ", ".join(f"[{a}, {b}]" for a, b in padding) + "]"
    attrs = (f"{{strides = [{strides[0]}, {strides[1]}], padding = {pad}, lhs_dilation = [{lhs_dil[0]}, "
             f"{lhs_dil[1]}], rhs_dilation = [{rhs_dil[0]}, {rhs_dil[1]}]}}")
    params = f"%x: {ty(xs)}, %w: {ty(ws)}"
    body = f"  %0 = conv2d(%x, %w) {attrs} : {ty(out)}\n"
    res = "%0"
    if epilogue:  # relu(conv + b)
        params += f", %b: {ty((ws[3],))}"
        zero = "0.0" if dt.startswith("f") else "0"
        body += (f"  %1 = add(%0, %b) : {ty(out)}\n  %2 = const {{value = {zero}}} : {dt}[]\n"
                 f"  %3 = compare(%1, %2) {{direction = le}} : bool{ty(out)[len(dt):]}\n"
                 f"  %4 = select(%3, %2, %1) : {ty(out)}\n")
        res = "%4"
    text = f"func @main({params}) -> ({ty(out)}) {{\n{body}  return {res}\n}}\n"
    return select_function(parse_module(text, "t"), None), out


def _data(rng, shape, dt):
    if dt.startswith("f"):
        return rng.standard_normal(shape).astype(_NP[dt])
    info = np.iinfo(_NP[dt])
    return rng.integers(info.min, info.max, size=shape, dtype=_NP[dt], endpoint=True)


CASES = [
    # name, x shape, w shape, dtype, kwargs
    ("bench-like", (1, 8, 8, 64), (3, 3, 64, 64), "f32", {}),
    ("odd", (2, 7, 9, 5), (3, 2, 5, 20), "f32", {}),
    ("stride2", (1, 9, 11, 8), (3, 3, 8, 16), "f32", {"strides": (2, 2)}),
    ("stride21-pad", (1, 7, 8, 3), (3, 3, 3, 32), "f32", {"strides": (2, 1), "padding": ((0, 2), (1, 0))}),
    ("dilation", (1, 10, 10, 4), (3, 3, 4, 32), "f32", {"rhs_dil": (2, 3)}),
    ("same", (1, 6, 6, 3), (3, 3, 3, 16), "f32", {"padding": ((1, 1), (1, 1))}),
    ("same-batch3", (3, 5, 7, 4), (3, 3, 4, 16), "f32", {"padding": ((1, 1), (1, 1))}),
    ("one-tile", (1, 3, 3, 2), (3, 3, 2, 5), "f32", {}),
    ("lhs-dilation", (1, 4, 5, 2), (2, 2, 2, 16), "f32", {"lhs_dil": (2, 2), "padding": ((1, 1), (1, 1))}),
    ("c1", (2, 5, 5, 1), (2, 2, 1, 16), "f32", {}),
    ("f1", (2, 5, 5, 3), (3, 3, 3, 1), "f32", {}),
    ("1x1", (1, 4, 4, 8), (1, 1, 8, 8), "f32", {}),
    ("window-is-input", (3, 3, 3, 2), (3, 3, 2, 5), "f32", {}),
    ("f64", (1, 5, 6, 4), (3, 3, 4, 8), "f64", {}),
    ("i32-wraps", (1, 5, 6, 3), (2, 3, 3, 17), "i32", {"strides": (1, 2)}),
    ("i64", (2, 4, 4, 2), (2, 2, 2, 8), "i64", {"padding": ((1, 0), (0, 1))}),
]


@pytest.mark.parametrize("name,xs,ws,dt,kw", CASES, ids=[c[0] for c in CASES])
def test_scheduled_conv_matches_reference(name, xs, ws, dt, kw):
    fn, out_shape = _conv_fn(xs, ws, dt, **kw)
    rng = np.random.default_rng(len(name))
    x, w = _data(rng, xs, dt), _data(rng, ws, dt)
    run = compile_function(fn, threads=1)
    k = run.kernel({})
    assert k.scheduled
    got = np.empty(out_shape, _NP[dt])
    k(x, w, out=[got])
    attrs = {"strides": kw.get("strides", (1, 1)), "padding": kw.get("padding", ((0, 0), (0, 0))),
             "lhs_dilation": kw.get("lhs_dil", (1, 1)), "rhs_dilation": kw.get("rhs_dil", (1, 1))}
    want = ref_conv2d(x, w, **attrs)
    # the spec's accuracy class of conv2d (exact for integers, a dot-product bound for floats)
    assert accuracy.check_op("conv2d", [x, w], attrs, got, want) is None


@pytest.mark.parametrize("dt", ["f32", "i32"])
def test_conv_bias_relu_two_threads(dt):
    fn, out_shape = _conv_fn((2, 6, 14, 16), (3, 3, 16, 32), dt, epilogue=True)
    rng = np.random.default_rng(7)
    x, w = _data(rng, (2, 6, 14, 16), dt), _data(rng, (3, 3, 16, 32), dt)
    b = _data(rng, (32,), dt)
    run = compile_function(fn, threads=2)
    got = run([x, w, b])[0]
    assert next(iter(run._kernels.values())).scheduled
    c = ref_conv2d(x, w, strides=(1, 1), padding=((0, 0), (0, 0)), lhs_dilation=(1, 1), rhs_dilation=(1, 1))
    with np.errstate(over="ignore"):
        want = np.maximum(c + b, 0)
    if dt == "f32":
        scale = ref_conv2d(np.abs(x), np.abs(w), strides=(1, 1), padding=((0, 0), (0, 0)), lhs_dilation=(1, 1),
                           rhs_dilation=(1, 1)) + np.abs(b)
        assert np.all(np.abs(got - want) <= 1e-5 * scale)
    else:
        np.testing.assert_array_equal(got, want)


def test_schedule_module_tags_the_conv():
    from mlir import ir

    from mind.compiler.backend.cpu.emit import emit_mlir
    from mind.compiler.backend.cpu.transforms import schedule_module

    fn, _ = _conv_fn((1, 6, 8, 4), (3, 3, 4, 16), "f32", strides=(1, 2))
    text, _name = emit_mlir(fn, {})
    assert "linalg.conv_2d_nhwc_hwcf" in text and "strides = dense<[1, 2]>" in text
    with ir.Context(), ir.Location.unknown():
        script = schedule_module(ir.Module.parse(text), min_work=0)  # a small shape: no cost model
    assert script is not None and "linalg.conv_2d_nhwc_hwcf" in script
    assert "tile_sizes [1, 1, 3, 16]" in script


def test_padding_copy_is_split_over_the_batch():
    from mlir import ir

    from mind.compiler.backend.cpu.emit import emit_mlir
    from mind.compiler.backend.cpu.pipeline import prefusion
    from mind.compiler.backend.cpu.transforms import schedule_module
    from mlir.passmanager import PassManager

    for n, hops in ((2, 2), (1, 0)):  # top padding 0 -> extract_slice between the copy and the conv
        fn, _ = _conv_fn((n, 5, 6, 4), (3, 3, 4, 16), "f32", padding=((0, 1), (1, 1)))
        text, _name = emit_mlir(fn, {})
        with ir.Context(), ir.Location.unknown():
            m = ir.Module.parse(text)
            PassManager.parse(prefusion().render()).run(m.operation)
            script = schedule_module(m, min_work=0)  # small shapes: no cost model
        assert script is not None
        assert ("get_producer_of_operand %cpad0_0[0]" in script) == (hops == 2)
        assert ("tile_sizes [1] :" in script) == (hops > 0)


def test_unscheduled_conv_still_correct():
    fn, out_shape = _conv_fn((1, 5, 5, 3), (2, 2, 3, 4), "f32", strides=(2, 1))
    rng = np.random.default_rng(3)
    x, w = _data(rng, (1, 5, 5, 3), "f32"), _data(rng, (2, 2, 3, 4), "f32")
    run = compile_function(fn, threads=1, schedule=False)
    got = run([x, w])[0]
    assert not next(iter(run._kernels.values())).scheduled
    attrs = {"strides": (2, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    assert accuracy.check_op("conv2d", [x, w], attrs, got, ref_conv2d(x, w, **attrs)) is None


def test_two_convs_sharing_an_init_and_a_chain():
    # CSE merges the two zero fills of equal shape; the second conv consumes a scheduled conv
    text = ("func @main(%x: f32[1, 8, 10, 4], %w1: f32[3, 3, 4, 16], %w2: f32[3, 3, 4, 16], "
            "%w3: f32[1, 3, 16, 8]) -> (f32[1, 6, 6, 8]) {\n"
            "  %0 = conv2d(%x, %w1) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 6, 8, 16]\n"
            "  %1 = conv2d(%x, %w2) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 6, 8, 16]\n"
            "  %2 = add(%0, %1) : f32[1, 6, 8, 16]\n"
            "  %3 = conv2d(%2, %w3) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 6, 6, 8]\n"
            "  return %3\n}\n")
    fn = select_function(parse_module(text, "t"), None)
    rng = np.random.default_rng(11)
    x = _data(rng, (1, 8, 10, 4), "f32")
    w1, w2, w3 = _data(rng, (3, 3, 4, 16), "f32"), _data(rng, (3, 3, 4, 16), "f32"), _data(rng, (1, 3, 16, 8), "f32")
    run = compile_function(fn, threads=1)
    got = run([x, w1, w2, w3])[0]
    assert next(iter(run._kernels.values())).scheduled
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    h = (ref_conv2d(x, w1, **attrs).astype(np.float64) + ref_conv2d(x, w2, **attrs)).astype(np.float32)
    want = ref_conv2d(h, w3, **attrs)
    scale = ref_conv2d(np.abs(h), np.abs(w3), **attrs) + 1.0
    assert np.all(np.abs(got - want) <= 1e-4 * scale)


def _script(fn):
    from mlir import ir
    from mlir.passmanager import PassManager

    from mind.compiler.backend.cpu.emit import emit_mlir
    from mind.compiler.backend.cpu.pipeline import prefusion
    from mind.compiler.backend.cpu.transforms import schedule_module

    text, _name = emit_mlir(fn, {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        PassManager.parse(prefusion().render()).run(m.operation)
        return schedule_module(m, min_work=0)  # small shapes: no cost model


def test_bias_relu_epilogue_is_fused_into_the_conv_tile():
    fn, _ = _conv_fn((2, 6, 14, 16), (3, 3, 16, 32), "f32", epilogue=True)
    script = _script(fn)
    assert "get_consumers_of_result %cv0[0]" in script
    assert "fuse_into_containing_op %cv0 into" in script
    # conv + conv into one add: neither is fused (both would claim the add)
    text = ("func @main(%x: f32[1, 6, 8, 4], %w1: f32[3, 3, 4, 16], %w2: f32[3, 3, 4, 16]) -> (f32[1, 4, 6, 16]) {\n"
            "  %0 = conv2d(%x, %w1) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 4, 6, 16]\n"
            "  %1 = conv2d(%x, %w2) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
            "rhs_dilation = [1, 1]} : f32[1, 4, 6, 16]\n"
            "  %2 = add(%0, %1) : f32[1, 4, 6, 16]\n  return %2\n}\n")
    assert "get_consumers_of_result" not in _script(select_function(parse_module(text, "t"), None))
