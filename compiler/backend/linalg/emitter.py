"""The builder the op lowerings write MLIR with: tensor values, named tensor ops, and scalar bodies.

``Emitter`` hands out fresh SSA names and collects the function's lines; its methods write the
tensor-level pieces every lowering needs (an empty or filled tensor, a ``linalg.generic`` with its
body, an elementwise op with NumPy broadcasting, a reshape, a slice).  ``Body`` collects the scalar
lines of a ``linalg.generic`` region through named arith/tensor operations.  The order in which
names are handed out is part of the text, so the text is a function of the program alone.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from mind.spec.dtypes import DType

from .mlir_text import affine_map, identity_map, tensor_type
from .transform_script import largest_divisor_at_most

__all__ = ["TensorValue", "Emitter", "Body", "GenericBody"]


_NAME_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$.")


def _uses(name: str, line: str) -> bool:
    """Whether ``line`` holds ``name`` not followed by a character of a longer SSA name (string
    search: a regular expression per name cost a compile of its own, milliseconds per kernel)."""
    i = line.find(name)
    while i >= 0:
        end = i + len(name)
        if end == len(line) or line[end] not in _NAME_CHARS:
            return True
        i = line.find(name, i + 1)
    return False


def _reads(name: str, lines: Sequence[str], result: str) -> bool:
    """Whether the body ``lines`` (or its yielded ``result``) use the SSA value ``name``."""
    return result == name or any(_uses(name, ln) for ln in lines)


def _slice_attrs(offsets: Sequence[int], sizes: Sequence[int], steps: Sequence[int] | None) -> str:
    """The ``[offsets] [sizes] [strides]`` of an ``extract_slice`` / ``insert_slice``."""
    steps = [1] * len(sizes) if steps is None else steps
    return "".join(f"[{', '.join(map(str, v))}]" if i == 0 else f" [{', '.join(map(str, v))}]"
                   for i, v in enumerate((offsets, sizes, steps)))


def _border(lo: Sequence[int], inner: Sequence[int], shape: Sequence[int],
            axes: int | None = None) -> list[tuple[list[int], tuple[int, ...]]]:
    """The boxes (offsets, sizes) of ``shape`` outside the window ``inner`` at ``lo``, disjoint: for
    each axis d (of the first ``axes``, all if None), the part before and after the window along d,
    within the window along the axes before d and whole along those after it (at most two boxes per
    axis, none of size 0)."""
    boxes = []
    for d in range(len(shape) if axes is None else axes):
        for start, size in ((0, lo[d]), (lo[d] + inner[d], shape[d] - lo[d] - inner[d])):
            if size > 0:
                offsets = list(lo[:d]) + [start] + [0] * (len(shape) - d - 1)
                boxes.append((offsets, tuple(inner[:d]) + (size,) + tuple(shape[d + 1:])))
    return boxes


PAD_BLOCK_ELEMENTS = 4096
"""A pad's band (``Emitter._band``) moves blocks of whole rows of about this many elements."""

CONV_OPERAND = "mind.conv_operand"
"""The attribute of the copy of a conv's padding (``Emitter.pad``), which a target may plan apart."""

WINDOW_COPY = "mind.window_copy"
"""The attribute of the copy of a computed window that is a result (``Emitter.copied``), which a
target may plan apart."""


def _last_padded_axis(lo: Sequence[int], inner: Sequence[int], shape: Sequence[int]) -> int:
    """The last axis along which a pad of ``inner`` at ``lo`` in ``shape`` adds elements (-1: none)."""
    return max((d for d in range(len(shape)) if shape[d] != inner[d] or lo[d]), default=-1)


class TensorValue:
    """A tensor SSA value during emission: its name, static shape, element type and dtype."""

    __slots__ = ("name", "shape", "elem", "dtype")

    def __init__(self, name: str, shape: tuple[int, ...], elem: str, dtype: DType | None):
        self.name, self.shape, self.elem, self.dtype = name, shape, elem, dtype

    @property
    def ty(self) -> str:
        return tensor_type(self.shape, self.elem)


class Body:
    """The scalar lines of one ``linalg.generic`` region, with names from the emitter."""

    def __init__(self, em: "Emitter"):
        self.em = em
        self.lines: list[str] = []

    def op(self, rhs: str, hint: str = "s") -> str:
        """A line ``%name = rhs``; returns the name."""
        v = self.em.fresh(hint)
        self.lines.append(f"{v} = {rhs}")
        return v

    def const(self, lit: str, elem: str) -> str:
        return self.op(f"arith.constant {lit} : {elem}", "k")

    def binary(self, name: str, x: str, y: str, elem: str) -> str:
        """``arith.<name> x, y : elem`` (``addf``, ``divsi``, ``andi``, ``maxsi``, ...)."""
        return self.op(f"arith.{name} {x}, {y} : {elem}")

    def cmpi(self, predicate: str, x: str, y: str, elem: str) -> str:
        return self.op(f"arith.cmpi {predicate}, {x}, {y} : {elem}")

    def cmpf(self, predicate: str, x: str, y: str, elem: str) -> str:
        return self.op(f"arith.cmpf {predicate}, {x}, {y} : {elem}")

    def select(self, cond: str, if_true: str, if_false: str, elem: str) -> str:
        return self.op(f"arith.select {cond}, {if_true}, {if_false} : {elem}")

    def cast(self, name: str, x: str, src: str, dst: str) -> str:
        """``arith.<name> x : src to dst`` (``extui``, ``sitofp``, ``index_cast``, ...)."""
        return self.op(f"arith.{name} {x} : {src} to {dst}")

    def index(self, dim: int) -> str:
        """The loop index of ``dim`` (``linalg.index``)."""
        return self.op(f"linalg.index {dim} : index")

    def extract(self, tensor: TensorValue, indices: Sequence[str]) -> str:
        """One element of ``tensor`` at computed ``indices``."""
        return self.op(f"tensor.extract {tensor.name}[{', '.join(indices)}] : {tensor.ty}")

    def paste(self, lines: Sequence[str], result: str) -> str:
        """Lines written elsewhere (``mathlib``'s), ending in ``result``."""
        self.lines.extend(lines)
        return result


#: ``body(b, args, out) -> yielded``: a generic's region from its block arguments.
GenericBody = Callable[[Body, list[str], str], str]


class Emitter:
    """What the target takes (``emit.emit_mlir``'s arguments, the CPU's from ``cpu.api``):
    ``transposed_lhs``: the element types whose 2-D matmuls the target computes with the lhs read
    transposed in place (its GEMM takes an lhs of any strides): ``matmul(transpose(a), b)`` is then
    one ``linalg.matmul`` of ``a`` with ``payload.TRANSPOSED_LHS_MAPS``, and the transpose is not
    materialized (it stays only if something else reads it); ``transposed_rhs``: the element types
    whose matmuls (2-D, or batched with the batch on both sides) the target computes with the rhs
    read transposed in place: ``a @ transpose(b)`` (the last two axes swapped) is then one
    contraction of ``b`` with ``payload.TRANSPOSED_RHS_MAPS``; ``pad_border``: a pad without interior
    padding fills only its border, box by box (``pad``; the CUDA backend's mapping takes one fill
    of the whole result); ``conv_pixels``: the most output pixels of a conv's register block (the
    target's accumulator registers; ``lowerings.block_width`` widens a conv whose width has no
    divisor up to it); ``contractions``: the element types whose matmuls of several or broadcast
    batch dims the target computes as a ``linalg.contract`` (its GEMM takes them, ``lowerings._contract``),
    where others get one generic over every loop."""

    def __init__(self, transposed_lhs: frozenset[str] = frozenset(), pad_border: bool = False,
                 conv_pixels: int = 24, transposed_rhs: frozenset[str] = frozenset(),
                 contractions: frozenset[str] = frozenset()) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.reshaped_from: dict[str, TensorValue] = {}  # a reshape's result -> the value it reshapes
        self.transposed_lhs = transposed_lhs
        self.transposed_rhs = transposed_rhs
        self.contractions = contractions
        self.pad_border = pad_border
        self.conv_pixels = conv_pixels
        self.transposed_from: dict[str, TensorValue] = {}  # a last-two-axes transpose's result -> its operand
        self.sliced_from: dict[str, str] = {}  # an extract_slice's result -> the tensor it is a window of
        self.params: set[str] = set()  # the function's parameters (``emit_mlir`` names them)

    def fresh(self, hint: str = "v") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def empty(self, shape: tuple[int, ...], elem: str) -> str:
        e = self.fresh("e")
        self.emit(f"{e} = tensor.empty() : {tensor_type(shape, elem)}")
        return e

    def filled(self, shape: tuple[int, ...], elem: str, lit: str | None = None, scalar: str | None = None) -> str:
        """A tensor of ``shape`` holding the literal ``lit`` (or the scalar SSA value ``scalar``)."""
        e = self.empty(shape, elem)
        if scalar is None:
            scalar = self.fresh("c")
            self.emit(f"{scalar} = arith.constant {lit} : {elem}")
        f = self.fresh("f")
        t = tensor_type(shape, elem)
        self.emit(f"{f} = linalg.fill ins({scalar} : {elem}) outs({e} : {t}) -> {t}")
        return f

    def generic(self, out_shape: tuple[int, ...], out_elem: str, ins: Sequence[TensorValue], maps: Sequence[str],
                iterators: Sequence[str], body: GenericBody, init: str | None = None, out_map: str | None = None) -> str:
        """One ``linalg.generic`` writing a tensor of ``out_shape`` (into ``init``, else a new empty one).

        A generic without reduction loops whose body reads its init (``out_arg``) through the
        identity map gets that init as one more *input* and a fresh ``tensor.empty`` as its init
        (what MLIR's own ``MoveInitOperandsToInput`` pattern does).  Why: MLIR's elementwise
        fusion (``linalg-fuse-elementwise-ops``, MLIR 22) keeps the result of a producer whose
        body reads its init as an extra output of the fused op, indexed by the consumer's map of
        that operand; when that map leaves out a loop of the consumer (a broadcast, a matmul's
        column loop), the fused body reads back what its previous iteration wrote and adds again,
        so the value is counted once per iteration of that loop (``reduce_sum`` over no axes,
        ``init + x``, feeding a batched matmul doubled column 1: conformance case prog/0284).
        A generic that reads its init to update only part of it (a non-identity out map) keeps
        its init: fusion never takes such a producer (its result map is not a permutation).
        """
        rank = len(iterators)
        t = tensor_type(out_shape, out_elem)
        identity_out = identity_map(rank)
        if out_map is None:
            out_map = identity_out
        if init is None:
            init = self.empty(out_shape, out_elem)
        args = [self.fresh("a") for _ in ins]
        oarg = self.fresh("o")
        b = Body(self)
        res = body(b, args, oarg)
        ins_names = [x.name for x in ins]
        ins_types = [x.ty for x in ins]
        bb_args = [f"{a}: {x.elem}" for a, x in zip(args, ins)]
        maps = list(maps)
        if out_map == identity_out and all(i == "parallel" for i in iterators) and _reads(oarg, b.lines, res):
            ins_names.append(init)
            ins_types.append(t)
            bb_args.append(f"{oarg}: {out_elem}")
            maps.append(out_map)
            init, oarg = self.empty(out_shape, out_elem), self.fresh("o")
        r = self.fresh("g")
        its = ", ".join(f'"{i}"' for i in iterators)
        ins_txt = ""
        if ins_names:
            ins_txt = f"ins({', '.join(ins_names)} : {', '.join(ins_types)}) "
        self.emit(f"{r} = linalg.generic {{indexing_maps = [{', '.join(maps + [out_map])}], "
                  f"iterator_types = [{its}]}} {ins_txt}outs({init} : {t}) {{")
        bb = ", ".join(bb_args + [f"{oarg}: {out_elem}"])
        self.emit(f"^bb0({bb}):")
        for ln in b.lines:
            self.emit("  " + ln)
        self.emit(f"  linalg.yield {res} : {out_elem}")
        self.emit(f"}} -> {t}")
        return r

    def elementwise(self, out_shape: tuple[int, ...], out_elem: str, ins: Sequence[TensorValue],
                    body: Callable[..., str]) -> str:
        """``body(b, *elements)`` on every element, the operands broadcast to ``out_shape``.

        Size-1 axes are not loops: the generic runs over the result's other axes, each operand is
        reshaped to its axes that are not 1 (those that broadcast are dropped from its map), and the
        result is reshaped back.  Why: the linalg vectorizer reads an operand through a constant
        index, ``(d0, d1) -> (d0, 0)``, element by element (a norm's or softmax's ``x - m`` with ``m`` of
        ``[R, 1]`` is read element by element, where ``(d0, d1) -> (d0)`` is a vector broadcast); and a
        ``[R, 1]`` result (``mean(x, keepdims)``'s division) would let fusion push its reshape into the
        reduction before it, a ``[R, 1, C]`` reduction that vectorizes worse than ``[R, C]``."""
        loops = [k for k, n in enumerate(out_shape) if n != 1]
        loop_of = {k: i for i, k in enumerate(loops)}
        shape = tuple(out_shape[k] for k in loops)
        operands, maps = [], []
        for x in ins:
            lead = len(out_shape) - len(x.shape)
            axes = [j for j, n in enumerate(x.shape) if n != 1]
            operands.append(x if len(axes) == len(x.shape) else self.reshape(x, tuple(x.shape[j] for j in axes)))
            maps.append(affine_map(len(shape), [f"d{loop_of[lead + j]}" for j in axes]))
        r = self.generic(shape, out_elem, operands, maps, ["parallel"] * len(shape),
                         lambda b, args, o: body(b, *args))
        return self.reshape(TensorValue(r, shape, out_elem, None), out_shape).name

    def copy(self, x: TensorValue, shape: tuple[int, ...], in_map: str) -> str:
        """A tensor of ``shape`` whose element at each index is ``x`` read through ``in_map``."""
        return self.generic(shape, x.elem, [x], [in_map], ["parallel"] * len(shape), lambda b, args, o: args[0])

    def extract_slice(self, x: TensorValue, offsets: Sequence[int], sizes: Sequence[int],
                      steps: Sequence[int] | None = None, result_shape: tuple[int, ...] | None = None) -> TensorValue:
        """The window of ``x`` at ``offsets`` of ``sizes`` (unit steps unless ``steps``: a view, no
        copy); ``result_shape``: ``sizes`` without some of their 1s (a rank-reducing slice)."""
        cut = self.fresh("x")
        shape = tuple(sizes) if result_shape is None else result_shape
        sub = tensor_type(shape, x.elem)
        self.emit(f"{cut} = tensor.extract_slice {x.name}{_slice_attrs(offsets, sizes, steps)} : {x.ty} to {sub}")
        self.sliced_from[cut] = x.name
        return TensorValue(cut, shape, x.elem, x.dtype)

    def copied(self, x: TensorValue) -> str:
        """A ``linalg.copy`` of ``x`` into a fresh tensor (which bufferization may place where the
        result goes): an op the target plans, where an identity generic folds away."""
        c = self.fresh("c")
        self.emit(f"{c} = linalg.copy {{{WINDOW_COPY}}} ins({x.name} : {x.ty}) outs({self.empty(x.shape, x.elem)} : "
                  f"{x.ty}) -> {x.ty}")
        return c

    def computed_window(self, x: TensorValue) -> bool:
        """Whether ``x`` is a window (``extract_slice``) of a tensor the function computes, not of one
        of its parameters: a conv computed wider or deeper than its result (``lowerings.conv2d``), a
        slice of an op's result."""
        source = self.sliced_from.get(x.name)
        while source in self.reshaped_from or source in self.sliced_from:  # views of views
            source = self.reshaped_from[source].name if source in self.reshaped_from else self.sliced_from[source]
        return source is not None and source not in self.params

    def pad(self, x: TensorValue, value: str, lo: Sequence[int], interior: Sequence[int], shape: tuple[int, ...],
            conv_operand: bool = False) -> str:
        """``x`` placed at ``lo + i * (interior + 1)`` in a tensor of ``shape`` filled with ``value``.

        What a pad is: the result's border filled with ``value``, and a copy of ``x`` into its window
        (a ``linalg.copy`` put in place by an ``insert_slice`` with steps ``interior + 1``; bufferized,
        the copy writes the window of the result).  Without interior padding (and ``pad_border``) the border is the boxes
        of ``_border``, each a fill of its own slice of the result, so every element is written once
        (a fill of the whole result wrote the window twice); with it,
        the whole result is filled first.  Fills and copy are plain ops the schedule tiles and
        vectorizes, no element computes a clamped index, and elementwise fusion cannot fold the pad
        into a consumer as computed reads (it does not fuse through ``insert_slice``); a producer of
        ``x`` still fuses into the copy.  The earlier form, one generic over the result reading ``x``
        at clamped indices (``tensor.extract``), stayed scalar: vectorized, it became
        ``vector.gather``s with linearized indices, wrong on a strided view (``docs/backend-cpu.md``,
        Schedules).  With ``pad_border``, when the last padded axis is not the first, the rows inside
        the window along the axes before it are one band (``_band``) unless ``conv_operand``: a conv's
        padding keeps the boxes and its copy carries ``CONV_OPERAND`` (the CPU plans it apart).
        """
        steps = [i + 1 for i in interior]
        dense = self.pad_border and not any(interior)
        t = tensor_type(shape, x.elem)
        r = self.empty(shape, x.elem) if dense else self.filled(shape, x.elem, scalar=value)
        row_axis = _last_padded_axis(lo, x.shape, shape)
        banded = dense and row_axis > 0 and not conv_operand
        boxes = _border(lo, x.shape, shape, row_axis if banded else None) if dense else []
        for i, (offsets, box) in enumerate(boxes):
            # the first box's init is its own tensor (bufferization places it in the result); the
            # others' a slice of the result (identical fills of fresh tensors would be merged by cse,
            # and one of them copied into place)
            box_ty = tensor_type(box, x.elem)
            init = self.empty(box, x.elem) if i == 0 else \
                self.extract_slice(TensorValue(r, shape, x.elem, x.dtype), offsets, box).name
            f = self.fresh("f")
            self.emit(f"{f} = linalg.fill ins({value} : {x.elem}) outs({init} : {box_ty}) -> {box_ty}")
            r = self._insert(f, box_ty, r, t, offsets, box, None)
        if banded:
            band = self._band(x, value, lo, shape, row_axis)
            band_shape = tuple(x.shape[:row_axis]) + tuple(shape[row_axis:])
            return self._insert(band, tensor_type(band_shape, x.elem), r, t,
                                list(lo[:row_axis]) + [0] * (len(shape) - row_axis), band_shape, None)
        # The copy's init is a fresh tensor that bufferization (eliminate-empty-tensors) places in
        # the window itself; an extract_slice of a fill as its init made the fill a shared init,
        # which ``payload.untie_shared_inits`` splits in two (a second fill, and a copy between them).
        placed = self.fresh("c")
        mark = f" {{{CONV_OPERAND}}}" if conv_operand else ""
        self.emit(f"{placed} = linalg.copy{mark} ins({x.name} : {x.ty}) outs({self.empty(x.shape, x.elem)} : {x.ty}) "
                  f"-> {x.ty}")
        return self._insert(placed, x.ty, r, t, lo, x.shape, steps)

    def join(self, pieces: Sequence[tuple[TensorValue, Sequence[int]]], fill: TensorValue, shape: tuple[int, ...]) -> str:
        """Disjoint windows of a tensor of ``shape``, each a copy of its operand at its low corner,
        the rest the rank-0 ``fill`` (a concatenation, ``joins``).  Each copy's init is a fresh tensor
        that bufferization places in its window, as a pad's (``pad``); windows that cover the whole
        tensor leave nothing to fill."""
        elem = fill.elem
        t = tensor_type(shape, elem)
        if sum(math.prod(x.shape) for x, _ in pieces) == math.prod(shape):  # disjoint: they cover it
            r = self.empty(shape, elem)
        else:
            value = self.fresh("p")
            self.emit(f"{value} = tensor.extract {fill.name}[] : {fill.ty}")
            r = self.filled(shape, elem, scalar=value)
        for x, lo in pieces:
            placed = self.fresh("c")
            self.emit(f"{placed} = linalg.copy ins({x.name} : {x.ty}) outs({self.empty(x.shape, x.elem)} : {x.ty}) "
                      f"-> {x.ty}")
            r = self._insert(placed, x.ty, r, t, lo, x.shape, None)
        return r

    def _band(self, x: TensorValue, value: str, lo: Sequence[int], shape: tuple[int, ...], axis: int) -> str:
        """The rows of a pad's result inside its window along the axes before ``axis`` (the last
        padded one): a ``scf.forall`` over blocks of them, each block filling its border along
        ``axis`` and copying its rows of ``x`` between, so that each row is written by one thread in
        one pass (a fill of the border of every row on one thread, then a copy on two, moved each
        row's shared cache line between the cores)."""
        inner = x.shape
        band_shape = tuple(inner[:axis]) + tuple(shape[axis:])
        band_ty = tensor_type(band_shape, x.elem)
        row = 1
        for d in shape[axis:]:
            row *= d
        rows = largest_divisor_at_most(inner[axis - 1], max(1, PAD_BLOCK_ELEMENTS // row))
        block = (1,) * (axis - 1) + (rows,) + tuple(shape[axis:])
        block_ty = tensor_type(block, x.elem)
        ivs = [self.fresh("i") for _ in range(axis)]
        out, band = self.fresh("o"), self.fresh("b")
        init = self.empty(band_shape, x.elem)
        zeros = ", ".join("0" for _ in ivs)
        steps = ", ".join(map(str, block[:axis]))
        self.emit(f"{band} = scf.forall ({', '.join(ivs)}) = ({zeros}) to ({', '.join(map(str, inner[:axis]))}) "
                  f"step ({steps}) shared_outs({out} = {init}) -> ({band_ty}) {{")
        at = list(ivs) + ["0"] * (len(shape) - axis)
        xs_shape = block[:axis] + tuple(inner[axis:])
        xs = self.fresh("x")
        self.emit(f"{xs} = tensor.extract_slice {x.name}{_slice_attrs(at, xs_shape, None)} : {x.ty} to "
                  f"{tensor_type(xs_shape, x.elem)}")
        blk = self.fresh("k")
        self.emit(f"{blk} = tensor.extract_slice {out}{_slice_attrs(at, block, None)} : {band_ty} to {block_ty}")
        width = shape[axis]
        start = [0] * len(shape)
        parts = [(lo[axis], None), (inner[axis], xs), (width - lo[axis] - inner[axis], None)]
        for size, source in parts:
            if size > 0:
                sizes = block[:axis] + (size,) + tuple(shape[axis + 1:])
                part_ty = tensor_type(sizes, x.elem)
                dest = self.fresh("d")
                self.emit(f"{dest} = tensor.extract_slice {blk}{_slice_attrs(start, sizes, None)} : {block_ty} to {part_ty}")
                done = self.fresh("f")
                if source is None:
                    self.emit(f"{done} = linalg.fill ins({value} : {x.elem}) outs({dest} : {part_ty}) -> {part_ty}")
                else:
                    self.emit(f"{done} = linalg.copy ins({source} : {part_ty}) outs({dest} : {part_ty}) -> {part_ty}")
                nxt = self.fresh("k")
                self.emit(f"{nxt} = tensor.insert_slice {done} into {blk}{_slice_attrs(start, sizes, None)} : "
                          f"{part_ty} into {block_ty}")
                blk = nxt
            start[axis] += size
        self.emit("scf.forall.in_parallel {")
        self.emit(f"  tensor.parallel_insert_slice {blk} into {out}{_slice_attrs(at, block, None)} : {block_ty} into {band_ty}")
        self.emit("}")
        self.emit("}")
        return band

    def _insert(self, part: str, part_ty: str, into: str, into_ty: str, offsets: Sequence[int],
                sizes: Sequence[int], steps: Sequence[int] | None) -> str:
        r = self.fresh("i")
        self.emit(f"{r} = tensor.insert_slice {part} into {into}{_slice_attrs(offsets, sizes, steps)} : "
                  f"{part_ty} into {into_ty}")
        return r

    def reshape(self, x: TensorValue, shape: tuple[int, ...]) -> TensorValue:
        """``x`` with ``shape`` (same elements in row-major order): collapsed to rank 1, then expanded.

        A reshape of a reshape starts from the first one's operand (and is that operand when the
        shapes agree): an ``expand_shape`` followed by a ``collapse_shape`` left for canonicalization
        would first be pushed through the ops around it by elementwise fusion (a ``[R, 1, C]`` op)."""
        x = self.reshaped_from.get(x.name, x)
        if x.shape == shape:
            return x
        cur, cur_shape = x.name, x.shape
        n = 1
        for d in x.shape:
            n *= d
        if len(cur_shape) == 0:
            r = self.fresh("r")
            self.emit(f"{r} = tensor.expand_shape {cur} [] output_shape [1] : {tensor_type((), x.elem)} into "
                      f"{tensor_type((1,), x.elem)}")
            cur, cur_shape = r, (1,)
        elif len(cur_shape) > 1:
            r = self.fresh("r")
            grp = "[" + ", ".join(str(i) for i in range(len(cur_shape))) + "]"
            self.emit(f"{r} = tensor.collapse_shape {cur} [{grp}] : {tensor_type(cur_shape, x.elem)} into "
                      f"{tensor_type((n,), x.elem)}")
            cur, cur_shape = r, (n,)
        if len(shape) == 0:
            r = self.fresh("r")
            self.emit(f"{r} = tensor.collapse_shape {cur} [] : {tensor_type(cur_shape, x.elem)} into "
                      f"{tensor_type((), x.elem)}")
            cur = r
        elif len(shape) > 1:
            r = self.fresh("r")
            grp = "[" + ", ".join(str(i) for i in range(len(shape))) + "]"
            self.emit(f"{r} = tensor.expand_shape {cur} [{grp}] output_shape [{', '.join(map(str, shape))}] : "
                      f"{tensor_type(cur_shape, x.elem)} into {tensor_type(shape, x.elem)}")
            cur = r
        self.reshaped_from[cur] = x
        return TensorValue(cur, shape, x.elem, x.dtype)

