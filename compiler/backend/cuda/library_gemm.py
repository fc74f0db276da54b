"""Matmuls and convolutions that launch the CUDA GEMM (``gemm_kernel``) instead of the generic loop
mapping.

After bufferization, ``insert_gemm_calls`` replaces each ``linalg.matmul`` and ``linalg.batch_matmul``
it can (f32 or f64, the plain indexing maps or a rank-2 rhs shared by the batch, static shapes,
strides and offsets), and each ``linalg.conv_2d_nhwc_hwcf`` (any stride and dilation; the input
padded already; the window variant of the kernel reads the input pixels under the window in place,
an implicit GEMM) by a ``func.call`` of a private declaration, and returns, per callee, the
launch the plan gives it (``GemmLaunch``): the grid, the block and the kernel's integer arguments
(sizes, offsets and strides read from the operands' memref types, so views such as slices, row
blocks and transposed layouts are read in place).  The host plan (``lowering._host_plan``) turns
each such call into a launch step of the GEMM's kernel module, whose PTX ``gemm_ptx`` supplies.

A matmul on memrefs accumulates into its output; where the op just before it is a fill of that
output with +0.0, the fill is dropped and the kernel overwrites the output instead (``accumulate``
0: one pass over C, not three).  A fill with another value (-0.0 included) stays.

Why after bufferization: the call then takes the very buffers (and views) the matmul took, one to
one, and nothing has to say which operands it writes.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from mind.spec.record import FrozenRecord

from ..linalg.payload import DEFAULT_MAPS, SHARED_RHS_MAPS
from .gemm_kernel import TILES, block_shape, gemm_ptx, kernel_symbol
from .options import GRID_YZ_MAX

__all__ = ["GemmLaunch", "insert_gemm_calls", "CALLEE_PREFIX", "CONV", "library_ptx"]

CALLEE_PREFIX = "__mind_cuda_gemm_"

CONV = "linalg.conv_2d_nhwc_hwcf"

_FORMS = {("linalg.matmul", DEFAULT_MAPS["linalg.matmul"]): False,
          ("linalg.batch_matmul", DEFAULT_MAPS["linalg.batch_matmul"]): False,
          ("linalg.batch_matmul", SHARED_RHS_MAPS): True}
"""The contractions the kernel computes, by op and indexing maps: whether B is one matrix shared by
the batch (a rank-2 rhs of a batched op)."""


class GemmLaunch(FrozenRecord):
    """One call's launch: the element type, whether it is the window (convolution) variant, grid,
    block and the kernel's integer arguments (``gemm_kernel.PARAMS`` or ``WINDOW_PARAMS`` after the
    three buffers)."""

    __slots__ = ("elem", "window", "grid", "block", "ints")

    elem: str
    window: bool
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    ints: tuple[int, ...]

    def __init__(self, elem: str, window: bool, grid: list[int], block: list[int], ints: list[int]) -> None:
        for name, value in (("elem", elem), ("window", window), ("grid", tuple(grid)), ("block", tuple(block)),
                            ("ints", tuple(ints))):
            object.__setattr__(self, name, value)

    @property
    def module(self) -> str:
        """The kernel module (and kernel) it launches."""
        return kernel_symbol(self.elem, self.window)


@lru_cache(maxsize=None)
def library_ptx(elem: str, chip: str, window: bool = False) -> str:
    """The kernel's PTX for ``elem`` (generated once per process: it depends on nothing else)."""
    return gemm_ptx(elem, chip, "ptx70", window)


def _layout(t: Any) -> tuple[list[int], list[int], int] | None:
    """(shape, strides, offset) of a static memref type with non-negative strides, else None."""
    from mlir import ir
    mt = ir.MemRefType(t)
    if not mt.has_static_shape:
        return None
    try:
        strides, offset = mt.get_strides_and_offset()
    except (ValueError, RuntimeError):
        return None
    if any(s < 0 or s >= 2**62 for s in strides) or not 0 <= offset < 2**62:  # dynamic ones read as huge
        return None
    return list(mt.shape), list(strides), offset


def _zero_fill_of(prev: Any, out: Any) -> bool:
    """Whether ``prev`` is a ``linalg.fill`` of ``out`` with +0.0."""
    from mlir import ir
    if prev is None or prev.name != "linalg.fill" or prev.operands[1] != out:
        return False
    owner = prev.operands[0].owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    try:
        value = ir.FloatAttr(owner.attributes["value"]).value
    except ValueError:  # an integer fill
        return False
    return value == 0.0 and math.copysign(1.0, value) > 0


def _element(op: Any) -> str | None:
    """The element type all three operands share, when the kernels compute it."""
    from mlir import ir
    elems = {str(ir.MemRefType(v.type).element_type) for v in op.operands}
    return elems.pop() if len(elems) == 1 and next(iter(elems)) in TILES else None


def _conv_launch(op: Any, accumulate: bool) -> GemmLaunch | None:
    """The window variant's launch of a ``linalg.conv_2d_nhwc_hwcf`` (the input padded already):
    rows (image, output row, output column), columns (filter row, filter column, channel), the
    filter a ``[KH*KW*C, F]`` matrix (its dims must collapse: else None, and the op keeps its loops)."""
    from mlir import ir
    elem = _element(op)
    layouts = [_layout(v.type) for v in op.operands]
    if elem is None or any(lay is None for lay in layouts):
        return None
    (x_shape, x_st, x_off), (w_shape, w_st, w_off), (o_shape, o_st, o_off) = layouts  # type: ignore[misc]
    sh, sw = (int(v) for v in ir.DenseIntElementsAttr(op.attributes["strides"]))
    dh, dw = (int(v) for v in ir.DenseIntElementsAttr(op.attributes["dilations"]))
    kh, kw, c, f = w_shape
    n, oh, ow, _ = o_shape
    if w_st[1] != c * w_st[2] or w_st[0] != kw * w_st[1]:
        return None
    m, k = n * oh * ow, kh * kw * c
    if m >= 2**31 or k >= 2**31:  # the kernel splits row and column indices in 32 bits
        return None
    grid, block = block_shape(elem, m, f, 1)
    if grid[1] > GRID_YZ_MAX:
        return None
    ints = [m, f, k, ow, oh, c, kw, x_off, x_st[0], sh * x_st[1], sw * x_st[2], dh * x_st[1], dw * x_st[2], x_st[3],
            w_off, w_st[2], w_st[3], o_off, o_st[0], o_st[1], o_st[2], o_st[3], int(accumulate)]
    return GemmLaunch(elem, True, grid, block, ints)


def _launch(op: Any, accumulate: bool) -> GemmLaunch | None:
    """The launch that computes ``op``, or None when the kernels do not take it."""
    if len(list(op.operands)) != 3:
        return None
    if op.name == CONV:
        return _conv_launch(op, accumulate)
    if "indexing_maps" not in op.attributes:
        return None
    shared = _FORMS.get((op.name, str(op.attributes["indexing_maps"])))
    if shared is None:
        return None
    elem = _element(op)
    layouts = [_layout(v.type) for v in op.operands]
    if elem is None or any(lay is None for lay in layouts):
        return None
    (a_shape, a_st, a_off), (b_shape, b_st, b_off), (c_shape, c_st, c_off) = layouts  # type: ignore[misc]
    if op.name == "linalg.matmul":
        a_st, b_st, c_st = [0] + a_st, [0] + b_st, [0] + c_st
        batch = 1
    else:
        batch = c_shape[0]
        b_st = [0] + b_st if shared else b_st
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    grid, block = block_shape(elem, m, n, batch)
    if grid[1] > GRID_YZ_MAX or grid[2] > GRID_YZ_MAX:
        return None
    ints = [m, n, k, a_off, *a_st, b_off, *b_st, c_off, *c_st, int(accumulate)]
    return GemmLaunch(elem, False, grid, block, ints)


def insert_gemm_calls(module: Any, func_op: Any) -> dict[str, GemmLaunch]:
    """Replace each matmul of ``func_op``'s body that the GEMM computes by a call (see the module's
    text); returns the launch of each callee."""
    from mlir import ir
    from mlir.dialects import func

    launches: dict[str, GemmLaunch] = {}
    prev = None
    for op in list(func_op.regions[0].blocks[0].operations):
        o = op.operation
        if o.name in ("linalg.matmul", "linalg.batch_matmul", CONV):
            overwrite = _zero_fill_of(prev, o.operands[2])
            launch = _launch(o, accumulate=not overwrite)
            if launch is not None:
                name = f"{CALLEE_PREFIX}{len(launches)}"
                with ir.InsertionPoint(module.body):
                    func.FuncOp(name, ir.FunctionType.get([v.type for v in o.operands], []), visibility="private")
                ir.Operation.create("func.call", results=[], operands=list(o.operands),
                                    attributes={"callee": ir.FlatSymbolRefAttr.get(name)}, ip=ir.InsertionPoint(o))
                if overwrite:
                    prev.erase()
                o.erase()
                launches[name] = launch
                prev = None
                continue
        prev = o
    return launches
