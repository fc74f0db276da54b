"""Matmuls that call the prebuilt GEMM of ``kernel_library`` instead of being scheduled per program.

Two steps, both on a parsed module:

* before scheduling (tensors), ``handled_by_library`` tells the schedule (``linalg.schedule``) which
  ``linalg.matmul`` ops (and the zero fills of their inits) to leave alone: 2-D, f32 or f64, static non-empty shapes, the default
  indexing maps, whatever their size (a call costs no compile time, so the schedule's cost model
  does not apply, and even a small matmul runs faster as a call than as scalar loops);
* after bufferization (memrefs), ``insert_library_calls`` replaces each of them by a call of a small
  private helper written for its operand types.  The helper casts the operands to the library's
  ``memref<?x?xT, strided<[?, 1], offset: ?>>`` (copying an operand whose elements are not contiguous
  along a row into a fresh buffer first), and with ``threads > 1`` calls the threaded driver of
  ``gemm_driver`` instead, with the rows (or the columns, whichever has more register tiles) split
  into one block per thread: the kernel itself then has no OpenMP region to compile.  A matmul on
  memrefs accumulates into its output, and so does the call (``C += A @ B``), except where the
  emitter's zero fill of C comes right before it: the fill is then dropped and the call overwrites C
  (``C = A @ B``, C never read).

Why after bufferization: a call of a body-less function cannot be bufferized on tensors (nothing
says which operands it writes), and on memrefs the replacement is one-to-one.
"""

from __future__ import annotations

from typing import Any

from ..linalg.payload import (CONTRACT_OP, DEFAULT_MAPS, SHARED_RHS_MAPS, TRANSPOSED_LHS_MAPS, TRANSPOSED_RHS_MAPS,
                              product, static_shape)
from mind.runtime.memref import row_major_strides
from mind.spec.dtypes import DType

from .conv_gemm import CONV_OP, conv_gemm, conv_helper
from .gemm_driver import driver_symbol
from .gemm_kernel import LAYOUTS, VARIANTS, gemm_symbol, operand_types, packs_from
from .thread_cost import COSTS, KernelCost, one_thread_seconds, saving_pays
from .vector_unit import vector_unit

__all__ = ["eligible_matmul", "handled_by_library", "insert_library_calls", "gemm_seconds", "HELPER_PREFIX",
           "RANKS", "ELEMENTS", "FORMS", "transposed_operands", "CONTRACT_OP", "contract_form"]


HELPER_PREFIX = "__mind_matmul_"

RANKS = {"linalg.matmul": 2, "linalg.batch_matmul": 3}
"""The contractions the library computes, with their operands' rank (a batched one, one GEMM per
matrix of the batch)."""

ELEMENTS = ("f32", "f64")
"""The element types the library computes."""

FORMS: dict[tuple[str, str], tuple[tuple[int, int, int], str]] = {
    ("linalg.matmul", DEFAULT_MAPS["linalg.matmul"]): ((2, 2, 2), ""),
    ("linalg.matmul", TRANSPOSED_LHS_MAPS): ((2, 2, 2), "strided_lhs"),
    ("linalg.matmul", TRANSPOSED_RHS_MAPS["linalg.matmul"]): ((2, 2, 2), "strided_rhs"),
    ("linalg.batch_matmul", DEFAULT_MAPS["linalg.batch_matmul"]): ((3, 3, 3), ""),
    ("linalg.batch_matmul", SHARED_RHS_MAPS): ((3, 2, 3), ""),
    ("linalg.batch_matmul", TRANSPOSED_RHS_MAPS["linalg.batch_matmul"]): ((3, 3, 3), "strided_rhs"),
}
"""The contractions the library computes, by op and indexing maps: the ranks of A, B and C (a rank-2
B of a batched op is shared by the batch) and the GEMM's layout (``gemm_kernel.LAYOUTS``: the
operand read transposed, in place, through its ``memref.transpose``)."""

_TRANSPOSED_OPERAND = {"strided_lhs": 0, "strided_rhs": 1}
"""The operand each layout reads transposed."""


def transposed_operands(library: str | None) -> frozenset[str]:
    """The element types whose matmuls the emitter may write with a transposed lhs or rhs read in
    place (``linalg.emitter.Emitter``'s ``transposed_lhs`` and ``transposed_rhs``): those of the
    library when there is one (its ``strided_lhs`` and ``strided_rhs`` GEMMs read them), none
    otherwise: a scheduled matmul takes the default maps only, so without the library a transpose
    stays a copy."""
    return frozenset(ELEMENTS) if library is not None else frozenset()


def _form(op: Any) -> tuple[tuple[int, int, int], str] | None:
    """(operand ranks, layout) of a contraction of ``FORMS``, else None."""
    if len(list(op.operands)) != 3:
        return None
    return FORMS.get((op.name, str(op.attributes["indexing_maps"])))


def eligible_matmul(op: Any, isa: str) -> str | None:
    """The element type ("f32"/"f64") if the library of level ``isa`` can compute ``op`` (tensor or
    memref form): a matmul, or a conv that is one (``conv_gemm``)."""
    from mlir import ir
    if op.name == CONV_OP:
        found = conv_gemm(op, isa)
        return None if found is None else found[0]
    if op.name == CONTRACT_OP:
        contract = contract_form(op)
        ranks = None if contract is None else (contract[1] + 2, contract[2] + 2, contract[0] + 2)
        if contract is not None and not _unread_loops_of_one(op, contract):
            ranks = None
    else:
        form = _form(op) if op.name in RANKS else None
        ranks = None if form is None else form[0]
    if ranks is None:
        return None
    operands = list(op.operands)
    for v, want in zip(operands, ranks):
        t = v.type
        if not isinstance(t, ir.ShapedType) or not t.has_static_shape or t.rank != want or 0 in t.shape:
            return None
    elems = {str(ir.ShapedType(v.type).element_type) for v in operands}
    if len(elems) != 1:
        return None
    elem = elems.pop()
    if elem not in ELEMENTS:
        return None
    return elem


def _unread_loops_of_one(op: Any, form: tuple[int, int, int]) -> bool:
    """Whether every batch loop that A or B, reading some, does not read has extent 1 (the batch an
    operand's own batch dims collapse into is then the result's)."""
    nb, *reads = form
    c = static_shape(op.operands[2].type)
    return c is not None and all(d == 1 for n in reads if n for d in c[:nb - n])


def _transposed_type(t: Any) -> str:
    """The type of ``memref.transpose`` of the 2-D memref type ``t`` (its sizes and strides swapped)."""
    from mlir import ir
    mt = ir.MemRefType(t)
    strides, offset = mt.get_strides_and_offset()
    dyn = ir.ShapedType.get_dynamic_stride_or_offset()

    def text(v: int) -> str:
        return "?" if v == dyn else str(v)
    rows, cols = mt.shape
    return (f"memref<{cols}x{rows}x{mt.element_type}, strided<[{text(strides[1])}, {text(strides[0])}], "
            f"offset: {text(offset)}>>")


def handled_by_library(op: Any, isa: str) -> bool:
    """A matmul that ``insert_library_calls`` hands to the prebuilt GEMM of level ``isa``, or the
    zero fill of its init (which it drops: the GEMM then overwrites its output): what the schedule
    leaves alone."""
    if op.name == "linalg.fill":
        uses = [u for r in op.results for u in r.uses]
        return bool(uses) and all(_contraction(u.owner) and u.operand_number == 2 and
                                  eligible_matmul(u.owner, isa) is not None for u in uses)
    return eligible_matmul(op, isa) is not None


def _zero_fills_in_front(module: Any) -> list[tuple[Any, Any]]:
    """(matmul, fill) pairs: a ``linalg.fill`` of +0.0 right before a matmul in the same block, into
    its output buffer (the init the emitter writes for every matmul): the library overwrites C
    instead of accumulating, and the fill goes."""
    import math

    from mlir import ir
    pairs: list[tuple[Any, Any]] = []
    for func in module.body.operations:
        for region in func.regions:
            for block in region.blocks:
                prev = None
                for op in block.operations:
                    if _contraction(op) and prev is not None and prev.name == "linalg.fill" and \
                            len(prev.operands) == 2 and prev.operands[1] == op.operands[2]:
                        src = prev.operands[0].owner
                        if getattr(src, "name", None) == "arith.constant" and \
                                isinstance(src.attributes["value"], ir.FloatAttr):
                            v = src.attributes["value"].value
                            if v == 0.0 and math.copysign(1.0, v) > 0:
                                pairs.append((op, prev))
                    prev = op
    return pairs


def _contraction(op: Any) -> bool:
    """Whether ``op`` is of a kind the library may compute (``eligible_matmul`` says whether it can)."""
    return op.name in RANKS or op.name in (CONV_OP, CONTRACT_OP)


def contract_form(op: Any) -> tuple[int, int, int] | None:
    """(batch dims, how many of them A reads, how many B reads) of a ``linalg.contract`` over loops
    (batch..., m, n, k) whose A reads (trailing batch loops..., m, k), B (trailing batch loops..., k,
    n) and C (batch..., m, n); else None.  A batch loop an operand does not read must have extent 1
    where it reads any (``eligible_matmul`` checks); one that reads none is a matrix shared by the
    batch."""
    from mlir import ir
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    if len(maps) != 3 or len(list(op.operands)) != 3:
        return None
    dims = maps[0].n_dims
    nb = dims - 3
    if nb < 1 or any(m.n_dims != dims for m in maps):
        return None

    def positions(m: Any) -> list[int] | None:
        out = []
        for e in m.results:
            if not isinstance(e, ir.AffineDimExpr):
                return None
            out.append(e.position)
        return out
    a, b, c = (positions(m) for m in maps)
    if c != list(range(nb)) + [nb, nb + 1] or a is None or b is None:
        return None

    def reads(p: list[int], last2: list[int]) -> int | None:
        """How many trailing batch loops ``p`` reads before ``last2``, None if not of that form."""
        n = len(p) - 2
        return n if n >= 0 and p == list(range(nb - n, nb)) + last2 else None
    na, nb_ = reads(a, [nb, nb + 2]), reads(b, [nb + 2, nb + 1])
    if na is None or nb_ is None:
        return None
    return nb, na, nb_


def _contiguous_rows(t: Any) -> bool:
    from mlir import ir
    strides, _ = ir.MemRefType(t).get_strides_and_offset()
    return strides[-1] == 1


def _dense(t: Any) -> bool:
    """Row-major without offset, in the identity layout: a matrix of a batch is then a subview of
    known strides of the helper's own type.  A view whose strides are those of a dense array but
    written out (``strided<[1, 1, 1]>``: a transposed slice of extent 1) is not that type, and the
    helper's text would not parse: it goes through the copy, as any other view."""
    from mlir import ir
    if not isinstance(ir.MemRefType(t).layout, ir.AffineMapAttr):
        return False  # a strided<...> layout, even with dense strides
    return _dense_strides(t)


def _transpose(lines: list[str], value: str, src: str, name: str) -> tuple[str, str]:
    """Append ``name = memref.transpose value`` of the 2-D memref type ``src``; returns the view's
    name and type: the operand of a ``strided_lhs`` / ``strided_rhs`` GEMM, read in place."""
    from mlir import ir
    viewed = _transposed_type(ir.Type.parse(src))
    lines.append(f"{name} = memref.transpose {value} (d0, d1) -> (d1, d0) : {src} to {viewed}")
    return name, viewed


def _batched_helper(name: str, isa: str, elem: str, types: list[str], dense: list[bool], batched: list[bool],
                    shape: tuple[int, int, int, int], threads: int, accumulate: bool, layout: str = "") -> str:
    """The private function ``name(A, B, C)`` of ``_batched_lines``."""
    return _function(name, types, _batched_lines(isa, elem, types, dense, batched, shape, threads, accumulate, layout))


def _batched_lines(isa: str, elem: str, types: list[str], dense: list[bool], batched: list[bool],
                   shape: tuple[int, int, int, int], threads: int, accumulate: bool, layout: str = "",
                   operands: tuple[str, str, str] = ("%a", "%b", "%c")) -> list[str]:
    """A private function ``name(A, B, C)``: C[i] (+)= A[i] @ B[i] (or @ B, when ``batched[1]`` is
    False: one rhs shared by the batch) for each i of the batch.  A shared rhs: one GEMM over the
    batch's rows (A and C collapsed to ``[B * M, K]`` and ``[B * M, N]``), split by the threaded
    driver (``_split``).  Else one call of the serial GEMM per matrix, the batch split across
    threads (``scf.forall``, OpenMP) when it has at least as many matrices as threads, each matrix
    split into blocks of rows (a call each) where the matrices do not share evenly among the
    threads (``batch_parts``); else the matrices in turn, each split by the threaded driver.
    Operands that are not dense row-major go through a dense copy.  ``layout`` "strided_rhs": B is
    given as ``[N, K]`` matrices, each passed as its ``memref.transpose`` (read in place).
    ``operands``: the SSA names of A, B and C (of ``types``)."""
    bsz, m, n, k = shape
    lines: list[str] = []
    args = list(operands)
    dims = ((m, k), (n, k) if layout == "strided_rhs" else (k, n), (m, n))
    full = [f"memref<{bsz}x{r}x{c}x{elem}>" if batched[i] else f"memref<{r}x{c}x{elem}>"
            for i, (r, c) in enumerate(dims)]
    for i in range(3):
        if dense[i]:
            continue
        lines.append(f"%t{i} = memref.alloc() {{alignment = 64 : i64}} : {full[i]}")
        if i < 2 or accumulate:
            lines.append(f"memref.copy {args[i]}, %t{i} : {types[i]} to {full[i]}")
        args[i] = f"%t{i}"
    lines += ["%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index",
              f"%cb = arith.constant {bsz} : index",
              f"%acc = arith.constant {'true' if accumulate else 'false'}"]
    wanted = operand_types(elem, layout)
    if batched[0] and not batched[1] and batched[2] and layout == "":
        # one B for the whole batch, A and C dense: the batch's matrices are the rows of one GEMM
        # (bsz * m rows), whose threads split those rows and pack each block of B once, where a
        # call per matrix packed it again for every matrix; each output's sum is the same
        for i, r in ((0, k), (2, n)):
            flat = f"memref<{bsz * m}x{r}x{elem}>"
            lines.append(f"%f{i} = memref.collapse_shape {args[i]} [[0, 1], [2]] : {full[i]} into {flat}")
            lines.append(f"%d{i} = memref.cast %f{i} : {flat} to {wanted[i]}")
        lines.append(f"%d1 = memref.cast {args[1]} : {full[1]} to {wanted[1]}")
        lines += _gemm_call(isa, elem, (bsz * m, n, k), threads, layout)
        if not dense[2]:
            lines.append(f"memref.copy %t2, {operands[2]} : {full[2]} to {types[2]}")
        lines += [f"memref.dealloc %t{i} : {full[i]}" for i in range(3) if not dense[i]]
        return lines
    by_batch = threads > 1 and bsz >= threads and \
        saving_pays(bsz * gemm_seconds(isa, elem, m, n, k), 1, threads, BATCH_FORK_GAIN)
    # a shared A (not batched): every unit reads all of it, so the matrices are not split by rows
    parts, block = batch_parts(isa, elem, shape, threads, layout) if by_batch and batched[0] else (1, m)
    inner = []
    if parts > 1:  # unit %u of the forall: rows [%r0, %r0 + %rows) of matrix %i
        lines += [f"%cp = arith.constant {parts} : index", f"%cblock = arith.constant {block} : index",
                  f"%cm = arith.constant {m} : index"]
        inner += ["%i = arith.divui %u, %cp : index", "%part = arith.remui %u, %cp : index",
                  "%r0 = arith.muli %part, %cblock : index", "%rest = arith.subi %cm, %r0 : index",
                  "%rows = arith.minui %cblock, %rest : index"]
    for i, (r, c) in enumerate(dims):
        body = inner if batched[i] else lines
        value, vty = args[i], full[i]
        if batched[i]:  # A and C always are here (a shared B with a batched A and C: the one GEMM above)
            split = parts > 1 and i != 1  # A's and C's rows of the unit
            rows, at, size = ("%rows", "%r0", "?") if split else (str(r), "0", str(r))
            vty = f"memref<{size}x{c}x{elem}, strided<[{c}, 1], offset: ?>>"
            inner.append(f"%s{i} = memref.subview {args[i]}[%i, {at}, 0] [1, {rows}, {c}] [1, 1, 1] : {full[i]} to {vty}")
            value = f"%s{i}"
        if _TRANSPOSED_OPERAND.get(layout) == i:
            value, vty = _transpose(body, value, vty, f"%tr{i}")
        body.append(f"%d{i} = memref.cast {value} : {vty} to {wanted[i]}")
    inner += _gemm_call(isa, elem, (m, n, k), 1 if by_batch else threads, layout)
    if parts > 1:
        lines.append(f"scf.forall (%u) in ({bsz * parts}) {{")
    elif by_batch:
        lines.append(f"scf.forall (%i) in ({bsz}) {{")
    else:
        lines.append("scf.for %i = %c0 to %cb step %c1 {")
    lines += ["  " + ln for ln in inner] + ["}"]
    for i in range(3):
        if not dense[i]:
            if i == 2:
                lines.append(f"memref.copy %t2, {operands[2]} : {full[i]} to {types[2]}")
            lines.append(f"memref.dealloc %t{i} : {full[i]}")
    return lines


def _contract_helper(name: str, isa: str, elem: str, types: list[str], shapes: list[list[int]],
                     form: tuple[int, int, int], threads: int, accumulate: bool) -> str:
    """The private function ``name(A, B, C)`` of a ``linalg.contract`` (``contract_form``): its batch
    dims collapsed into one (each batched operand dense: as it is, cast from a layout of dense
    strides, or copied into a dense buffer), then ``_batched_lines``'s batch of GEMMs (a shared B:
    one GEMM over the batch's rows)."""
    nb, a_dims, b_dims = form
    flat = product(shapes[2][:nb])
    m, n, k = shapes[2][-2], shapes[2][-1], shapes[0][-1]
    lines: list[str] = []
    names, flat_types, back = [], [], []
    for i, (arg, t, shape, own) in enumerate(zip(("%a", "%b", "%c"), types, shapes, (a_dims, b_dims, nb))):
        dense = f"memref<{'x'.join(map(str, shape))}x{elem}>"
        value = arg
        if t != dense:
            value = f"%nd{i}"
            if _dense_strides(t):
                lines.append(f"{value} = memref.cast {arg} : {t} to {dense}")
            else:
                lines.append(f"{value} = memref.alloc() {{alignment = 64 : i64}} : {dense}")
                if i < 2 or accumulate:
                    lines.append(f"memref.copy {arg}, {value} : {t} to {dense}")
                if i == 2:
                    back = [f"memref.copy {value}, {arg} : {dense} to {t}", f"memref.dealloc {value} : {dense}"]
        ty = dense
        if own:  # its batch dims (those it lacks are 1) collapse into the result's batch
            ty = f"memref<{flat}x{shape[-2]}x{shape[-1]}x{elem}>"
            groups = ", ".join(map(str, range(own)))
            lines.append(f"%fl{i} = memref.collapse_shape {value} [[{groups}], [{own}], [{own + 1}]] : "
                         f"{dense} into {ty}")
            value = f"%fl{i}"
        names.append(value)
        flat_types.append(ty)
    lines += _batched_lines(isa, elem, flat_types, [True, True, True], [a_dims > 0, b_dims > 0, True],
                            (flat, m, n, k), threads, accumulate, operands=tuple(names))
    return _function(name, types, lines + back)


def _dense_strides(t: Any) -> bool:
    """Whether the memref type ``t`` has a dense array's strides and offset 0 (whatever its layout's
    spelling): ``memref.cast`` makes it the identity layout's type."""
    from mlir import ir
    mt = ir.MemRefType(ir.Type.parse(t) if isinstance(t, str) else t)
    strides, offset = mt.get_strides_and_offset()
    return offset == 0 and tuple(strides) == row_major_strides(mt.shape)


BATCH_FORK_GAIN = 1.0
"""How many forks and joins the threads must save a batched matmul (its GEMMs' one-thread time,
``gemm_seconds``) to run its matrices on the threads: one."""


BATCH_SPLIT_GAIN = 0.1
"""How much shorter (a fraction) the longest thread's share of a batched matmul must become for its
matrices to be split by rows (``batch_parts``)."""


def batch_parts(isa: str, elem: str, shape: tuple[int, int, int, int], threads: int,
                layout: str = "") -> tuple[int, int]:
    """(parts, rows per part): the row blocks each matrix of a batch (``shape``: batch, m, n, k) splits
    into, so that the ``batch * parts`` units, one GEMM call each, share ``threads`` threads evenly.
    ``parts`` is 1 (and the block every row) unless the split shortens the longest thread's share
    by ``BATCH_SPLIT_GAIN``, saves it at least a parallel region's fork and join
    (``thread_cost.COSTS``: the calls are more, and the cost model's GEMM time is a lower bound),
    and leaves each part at least the row tiles from which the GEMM packs B (``packs_from``) where
    the whole matrix has them: a part below reads in place the B the whole matrix packed (only where
    B has a whole tile's columns, and not for ``strided_rhs``, which always packs).  Blocks are
    whole register tiles, the last one what remains.

    Why: the threads took whole matrices, so 5 matrices on 2 threads ran as 3 after one another
    (``docs/backend-cpu.md``, Measurements: batched matmuls split by rows); a thread's share, in
    matrices, is ``ceil(batch * parts / threads) / parts``."""
    bsz, m, n, k = shape
    g = VARIANTS[isa][elem]
    tiles = -(-m // g.rows)
    threshold = packs_from(g, n * g.elem_bytes)
    keep = threshold if layout == "" and n >= g.width and tiles >= threshold else 1

    def share(parts: int) -> float:
        return -(-bsz * parts // threads) / parts

    best, block = 1, m
    for p in range(2, min(tiles, threads) + 1):
        parts, per_part = _whole_tile_blocks(tiles, p)
        saved = share(1) - share(parts)
        if per_part >= keep and saved >= share(1) * BATCH_SPLIT_GAIN and share(parts) < share(best) and \
                saved * gemm_seconds(isa, elem, m, n, k) >= COSTS["region_s"]:
            best, block = parts, per_part * g.rows
    return best, block


def gemm_seconds(isa: str, elem: str, m: int, n: int, k: int) -> float:
    """The cost model's one-thread time of a GEMM (``thread_cost.one_thread_seconds`` of its
    multiply-adds alone: the operands of a matmul worth threads are read from cache)."""
    multiply_adds = m * n * k * DType(elem).bits / 32  # an f64 multiply-add takes two f32 lanes
    return one_thread_seconds(KernelCost(0, 0, multiply_adds, 1, multiply_adds), vector_unit(isa))


def _split(isa: str, elem: str, m: int, n: int, k: int, threads: int) -> tuple[str, int, int]:
    """(axis "m"/"n"/"", parts, block size): one block per thread, whole register tiles per block;
    no split when the threads would not pay for their region (``thread_cost.saving_pays``)."""
    g = VARIANTS[isa][elem]
    if threads < 2 or not saving_pays(gemm_seconds(isa, elem, m, n, k), 1, threads):
        return "", 1, 0
    tiles_m, tiles_n = -(-m // g.rows), -(-n // g.width)
    axis, tiles, tile = ("m", tiles_m, g.rows) if tiles_m >= tiles_n else ("n", tiles_n, g.width)
    parts, per_part = _whole_tile_blocks(tiles, threads)
    return (axis, parts, per_part * tile) if parts > 1 else ("", 1, 0)


def _whole_tile_blocks(tiles: int, wanted: int) -> tuple[int, int]:
    """(blocks, tiles per block): ``tiles`` cut into at most ``wanted`` blocks of whole tiles, as
    even as whole tiles allow, none empty (the last one what remains)."""
    per_block = -(-tiles // wanted)
    return -(-tiles // per_block), per_block


def _helper(name: str, isa: str, elem: str, types: list[str], contiguous: list[bool],
            shape: tuple[int, int, int], threads: int, accumulate: bool, layout: str = "") -> str:
    """A private function ``name(A, B, C)`` for operands of ``types``: C (+)= A @ B through the library.

    ``contiguous[i]``: operand i has unit stride along its rows (else it goes through a copy);
    ``accumulate``: False when the zero fill of C was dropped (the library then writes C without
    reading it); ``layout`` "strided_lhs" / "strided_rhs": A (B) is given as its transpose ``[K, M]``
    (``[N, K]``), whose ``memref.transpose`` the GEMM of that layout reads in place."""
    m, n, k = shape
    lines: list[str] = []
    args = ["%a", "%b", "%c"]
    current = list(types)
    copies: list[tuple[int, str]] = []
    flipped = _TRANSPOSED_OPERAND.get(layout)
    if flipped is not None:
        args[flipped], current[flipped] = _transpose(lines, args[flipped], types[flipped], "%tr")
    for i, dims in enumerate(((m, k), (k, n), (m, n))):
        if contiguous[i] or i == flipped:
            continue
        dense = f"memref<{dims[0]}x{dims[1]}x{elem}>"
        tmp = f"%t{i}"
        lines.append(f"{tmp} = memref.alloc() {{alignment = 64 : i64}} : {dense}")
        if i < 2 or accumulate:
            lines.append(f"memref.copy {args[i]}, {tmp} : {types[i]} to {dense}")
        copies.append((i, dense))
        args[i], current[i] = tmp, dense
    for i, want in enumerate(operand_types(elem, layout)):
        lines.append(f"%d{i} = memref.cast {args[i]} : {current[i]} to {want}")
    lines.append(f"%acc = arith.constant {'true' if accumulate else 'false'}")
    lines += _gemm_call(isa, elem, (m, n, k), threads, layout)
    for i, dense in copies:
        if i == 2:
            lines.append(f"memref.copy %t2, %c : {dense} to {types[2]}")
        lines.append(f"memref.dealloc %t{i} : {dense}")
    return _function(name, types, lines)


def _gemm_call(isa: str, elem: str, shape: tuple[int, int, int], threads: int, layout: str = "",
               values: tuple[str, str, str, str] = ("%d0", "%d1", "%d2", "%acc"), suffix: str = "") -> list[str]:
    """The call of the GEMM on ``values`` (``A @ B -> C``, ``accumulate``; by default ``%d0 @ %d1 ->
    %d2``, ``%acc``): the serial one, or the threaded driver with one block of rows or columns per
    thread (``_split``), its constants named with ``suffix``; ``layout``: the variant of
    ``gemm_kernel.LAYOUTS`` (which operand may have any strides)."""
    aty, bty, cty = operand_types(elem, layout)
    axis, parts, block = _split(isa, elem, *shape, threads)
    a, b, c, acc = values
    if not axis:
        return [f"func.call @{gemm_symbol(elem, layout)}({a}, {b}, {c}, {acc}) : ({aty}, {bty}, {cty}, i1) -> ()"]
    p, x, k = f"%parts{suffix}", f"%axis{suffix}", f"%block{suffix}"
    return [f"{p} = arith.constant {parts} : i32", f"{x} = arith.constant {0 if axis == 'm' else 1} : i32",
            f"{k} = arith.constant {block} : index",
            f"func.call @{driver_symbol(elem, layout)}({a}, {b}, {c}, {acc}, {p}, {x}, {k}) : "
            f"({aty}, {bty}, {cty}, i1, i32, i32, index) -> ()"]


def _function(name: str, types: list[str], lines: list[str]) -> str:
    """The private function ``name(%a, %b, %c)`` of operand ``types`` with the body ``lines``."""
    params = ", ".join(f"{a}: {t}" for a, t in zip(("%a", "%b", "%c"), types))
    body = "\n".join("  " + s for s in lines + ["return"])
    return f"func.func private @{name}({params}) {{\n{body}\n}}\n"


def insert_library_calls(module: Any, isa: str, threads: int) -> int:
    """Replace every eligible memref ``linalg.matmul`` of ``module`` by a call of a helper (see the
    module docstring) and add the helpers and the library's declarations; returns how many."""
    from mlir import ir
    found: list[tuple[Any, str]] = []

    def visit(op: Any) -> ir.WalkResult:
        if _contraction(op):
            elem = eligible_matmul(op, isa)
            if elem is not None and all(isinstance(v.type, ir.MemRefType) for v in op.operands):
                found.append((op, elem))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not found:
        return 0
    fills = _zero_fills_in_front(module)
    helpers: list[str] = []
    for i, (op, elem) in enumerate(found):
        operands = list(op.operands)
        a, b = (list(ir.ShapedType(v.type).shape) for v in operands[:2])
        name = f"{HELPER_PREFIX}{i}"
        fill = next((f for m, f in fills if m.operation == op.operation), None)
        types = [str(v.type) for v in operands]
        if op.name == CONTRACT_OP:
            shapes = [list(ir.ShapedType(v.type).shape) for v in operands]
            helpers.append(_contract_helper(name, isa, elem, types, shapes, contract_form(op), threads,
                                            accumulate=fill is None))
        elif op.name == CONV_OP:
            _, view = conv_gemm(op, isa)
            shapes = [list(ir.ShapedType(v.type).shape) for v in operands]
            def call(values: tuple[str, str, str, str], suffix: str, shape=(view.m, view.n, view.k)) -> list[str]:
                return _gemm_call(isa, elem, shape, threads, values=values, suffix=suffix)
            helpers.append(_function(name, types, conv_helper(elem, types, shapes, [_dense(v.type) for v in operands],
                                                              view, call, accumulate=fill is None)))
        else:
            layout = _form(op)[1]
            m, k = (a[-1], a[-2]) if layout == "strided_lhs" else (a[-2], a[-1])
            n = b[-2] if layout == "strided_rhs" else b[-1]
            if op.name == "linalg.batch_matmul":
                helpers.append(_batched_helper(name, isa, elem, types, [_dense(v.type) for v in operands],
                                               [len(a) == 3, len(b) == 3, True], (a[0], m, n, k), threads,
                                               accumulate=fill is None, layout=layout))
            else:
                helpers.append(_helper(name, isa, elem, types, [_contiguous_rows(v.type) for v in operands],
                                       (m, n, k), threads, accumulate=fill is None, layout=layout))
        if fill is not None:
            fill.erase()
        ir.Operation.create("func.call", results=[], operands=operands,
                            attributes={"callee": ir.FlatSymbolRefAttr.get(name)}, loc=op.location,
                            ip=ir.InsertionPoint(op))
        op.erase()
    decls = []
    for e in sorted({e for _, e in found}):
        for layout in LAYOUTS:
            operands = ", ".join(operand_types(e, layout))
            if not layout or any(f"@{gemm_symbol(e, layout)}(" in h for h in helpers):
                decls.append(f"func.func private @{gemm_symbol(e, layout)}({operands}, i1)")
            if any(f"@{driver_symbol(e, layout)}(" in h for h in helpers):
                decls.append(f"func.func private @{driver_symbol(e, layout)}({operands}, i1, i32, i32, index)")
    extra = ir.Module.parse("module {\n" + "\n".join(decls) + "\n" + "".join(helpers) + "}\n")
    anchor = list(module.body.operations)[-1]
    for op in list(extra.body.operations):
        op.move_after(anchor)
        anchor = op
    return len(found)
