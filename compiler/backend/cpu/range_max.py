"""IEEE maximum of vectors in three AVX-512 instructions instead of six, and chains of maxima as trees.

A max reduction combines every element with ``llvm.maximum`` (NaN if either operand is NaN, and +0
above -0: the spec's ``reduce_max``).  x86 has no such instruction before AVX10.2, and LLVM expands
each vector ``llvm.maximum`` into six (the sign of one operand as a mask, two blends ordering the
operands so that ``vmaxps`` picks +0, ``vmaxps``, an unordered compare, a masked move of the NaN);
a 46x208x100 f64 row max spent most of its time there.  AVX-512DQ's ``vrangeps``/``vrangepd`` with
imm 5 (max, sign from the comparison) orders the zeros as IEEE does but, like ``maxNum``, returns
the other operand when one is a quiet NaN; an unordered compare of the two operands and their sum
(a NaN when either is) merged under that mask, one masked ``vaddps``, complete it.  Checked on
every pair of specials (±0, ±inf, NaNs, subnormals) and random pairs per type and width, bit for
bit (``tests/backend_cpu/test_range_max.py``).

``rewrite_maximum`` works on the LLVM IR text of a kernel for an x86-64-v4 target: each vector
``llvm.maximum`` of 32- or 64-bit floats whose width is a power of two times 128, 256 or 512 bits
is split into the widest native pieces (the 256- and 128-bit forms are AVX-512VL's), and any other
width (a transposed tile's rows of 3 or 15 f32, not a multiple of 128 bits; a tile's 20 or 48 f32)
is widened with poison lanes to the next power of two of lanes first; each
``llvm.vector.reduce.fmaximum`` becomes a tree of halvings down to 128 bits and then shuffles within
that vector down to lane 0 (a row that is not a power of two of lanes, 48 f64 or 100 f32, first
combines its native pieces, and its last lanes of less than 128 bits join at the end); a scalar
``llvm.maximum`` (a reduction's last combination with its initial value) runs in lane 0 of a
128-bit vector: three instructions where LLVM's scalar expansion took eight, moving the values
through integer registers.  New values are named (``%mind.max.N``, a
prefix MLIR's translation never writes), so the function's numbered values keep their numbers.

``balance_maximum_trees`` runs first, for every target: a reduction over rows shorter than a vector
folds its tile's columns into the rows' maxima one after another, a chain as long as the row, which
it rebuilds as a balanced tree (``%mind.maxtree.N``); the maxima are the same bits in any order.
"""

from __future__ import annotations

import re
from collections import Counter

from .llvm_vectors import ELEMENT, MASK, NAME, VectorWriter, per_function, with_declares

__all__ = ["rewrite_maximum", "balance_maximum_trees"]

_VECTOR_MAX = re.compile(
    rf"^(\s*)({NAME}) = call (?:[a-z ]+ )?<(\d+) x (float|double)> @llvm\.maximum\.v\d+f(?:32|64)\("
    rf"<\d+ x (?:float|double)> ({NAME}), <\d+ x (?:float|double)> ({NAME})\)\s*$")
_SCALAR_MAX = re.compile(
    rf"^(\s*)({NAME}) = call (?:[a-z ]+ )?(float|double) @llvm\.maximum\.f(?:32|64)\("
    rf"(?:float|double) ({NAME}), (?:float|double) ({NAME})\)\s*$")
_REDUCE_MAX = re.compile(
    rf"^(\s*)({NAME}) = call (?:[a-z ]+ )?(float|double) @llvm\.vector\.reduce\.fmaximum\.v(\d+)f(?:32|64)\("
    rf"<\d+ x (?:float|double)> ({NAME})\)\s*$")


class _Writer(VectorWriter):
    """``VectorWriter`` with the maximum's expansions."""

    def __init__(self, prefix: str = "%mind.max.") -> None:
        super().__init__(prefix)

    def native_max(self, indent: str, a: str, b: str, lanes: int, elem: str) -> str:
        """``llvm.maximum`` of two vectors of one native width (128, 256 or 512 bits)."""
        suffix, bits = ELEMENT[elem]
        width = lanes * bits
        vec = f"<{lanes} x {elem}>"
        name = f"@llvm.x86.avx512.mask.range.{suffix}.{width}"
        rounding = ", i32 4" if width == 512 else ""
        self.declares.add(f"declare {vec} {name}({vec}, {vec}, i32, {vec}, {MASK[lanes]}{', i32' if rounding else ''})")
        r = self.emit(indent, f"call {vec} {name}({vec} {a}, {vec} {b}, i32 5, {vec} zeroinitializer, "
                              f"{MASK[lanes]} -1{rounding})")
        nan = self.emit(indent, f"fcmp uno {vec} {a}, {b}")
        either = self.emit(indent, f"fadd {vec} {a}, {b}")
        return self.emit(indent, f"select <{lanes} x i1> {nan}, {vec} {either}, {vec} {r}")

    def vector_max(self, indent: str, a: str, b: str, lanes: int, elem: str) -> str:
        """``llvm.maximum`` of two vectors of ``lanes``, in native pieces (widened first when the
        width is not a power of two of native pieces: ``VectorWriter.elementwise``)."""
        return self.elementwise(indent, [a, b], lanes, elem,
                                lambda ind, ops, n, el: self.native_max(ind, ops[0], ops[1], n, el))

    def reduce_max(self, indent: str, v: str, lanes: int, elem: str) -> str | None:
        """``llvm.vector.reduce.fmaximum`` of ``v``: a power of two of lanes by halving while the
        halves are 128 bits or more; other counts (a row of 48 f64, 100 f32) through their native
        pieces (``_fold_pieces``).  Then within one 128-bit vector: its upper lanes moved down by a
        shuffle and combined, until lane 0 holds the maximum (the other lanes are not read), and
        the lanes of less than 128 bits that no piece took combined with it one by one."""
        bits = ELEMENT[elem][1]
        if lanes * bits < 128:
            return None
        whole, rest = v, lanes
        if lanes & (lanes - 1):
            v, lanes, left = self._fold_pieces(indent, v, lanes, elem)
        else:
            left = []
        v, lanes = self._halve_to(indent, v, lanes, 128 // bits, elem)
        shift = lanes // 2
        while shift:
            mask = ", ".join(f"i32 {min(i + shift, lanes - 1)}" for i in range(lanes))
            moved = self.emit(indent, f"shufflevector <{lanes} x {elem}> {v}, <{lanes} x {elem}> poison, "
                                      f"<{lanes} x i32> <{mask}>")
            v = self.native_max(indent, v, moved, lanes, elem)
            shift //= 2
        result = self.emit(indent, f"extractelement <{lanes} x {elem}> {v}, i32 0")
        for i in left:
            lane = self.emit(indent, f"extractelement <{rest} x {elem}> {whole}, i32 {i}")
            result = self.scalar_max(indent, result, lane, elem)
        return result

    def _halve_to(self, indent: str, v: str, lanes: int, target: int, elem: str) -> tuple[str, int]:
        """``v`` of a power of two of native ``lanes`` folded in halves down to ``target`` lanes."""
        while lanes > target:
            half = lanes // 2
            v = self.vector_max(indent, self.piece(indent, v, lanes, elem, 0, half),
                                self.piece(indent, v, lanes, elem, half, half), half, elem)
            lanes = half
        return v, lanes

    def _fold_pieces(self, indent: str, v: str, lanes: int, elem: str) -> tuple[str, int, list[int]]:
        """A row of ``lanes`` that is not a power of two, cut into native pieces from its start (as
        many of 512 bits as fit, then one of 256 and one of 128 where they fit): the 512-bit pieces
        combined pairwise, then each narrower piece with the result so far halved to its width.
        Returns (that native vector, its lanes, the lanes left over: fewer than 128 bits)."""
        bits = ELEMENT[elem][1]
        acc: str | None = None
        acc_lanes = start = 0
        for width in (512, 256, 128):
            n = width // bits
            count = (lanes - start) // n if width == 512 else min(1, (lanes - start) // n)
            pieces = [self.piece(indent, v, lanes, elem, start + i * n, n) for i in range(count)]
            start += count * n
            while len(pieces) > 1:
                pairs = [self.native_max(indent, a, b, n, elem) for a, b in zip(pieces[::2], pieces[1::2])]
                pieces = pairs + pieces[2 * len(pairs):]
            if not pieces:
                continue
            if acc is None:
                acc, acc_lanes = pieces[0], n
            else:
                acc, acc_lanes = self._halve_to(indent, acc, acc_lanes, n, elem)
                acc = self.native_max(indent, acc, pieces[0], n, elem)
        assert acc is not None, "at least 128 bits"
        return acc, acc_lanes, list(range(start, lanes))

    def scalar_max(self, indent: str, a: str, b: str, elem: str) -> str:
        """``llvm.maximum`` of two scalars, in lane 0 of a 128-bit vector."""
        lanes = 128 // ELEMENT[elem][1]
        vec = f"<{lanes} x {elem}>"
        va = self.emit(indent, f"insertelement {vec} poison, {elem} {a}, i32 0")
        vb = self.emit(indent, f"insertelement {vec} poison, {elem} {b}, i32 0")
        return self.emit(indent, f"extractelement {vec} {self.native_max(indent, va, vb, lanes, elem)}, i32 0")


def _vector(w: _Writer, indent: str, lanes: str, elem: str, a: str, b: str) -> tuple[str, str | None]:
    return f"<{lanes} x {elem}>", w.vector_max(indent, a, b, int(lanes), elem)


def _scalar(w: _Writer, indent: str, elem: str, a: str, b: str) -> tuple[str, str | None]:
    return elem, w.scalar_max(indent, a, b, elem)


def _reduced(w: _Writer, indent: str, elem: str, lanes: str, v: str) -> tuple[str, str | None]:
    return elem, w.reduce_max(indent, v, int(lanes), elem)


_RULES = ((_VECTOR_MAX, _vector), (_SCALAR_MAX, _scalar), (_REDUCE_MAX, _reduced))
"""Each call's pattern (indent, result, then the builder's arguments) and its expansion: the
result's type and the value that replaces it (None: left to LLVM)."""


def _expand(w: _Writer, line: str) -> list[str] | None:
    """The lines that replace ``line``, or None to keep it."""
    for pattern, build in _RULES:
        m = pattern.match(line)
        if m:
            indent, result, *args = m.groups()
            w.lines = []
            ty, value = build(w, indent, *args)
            if value is None:
                return None
            return w.lines + [f"{indent}{result} = select i1 true, {ty} {value}, {ty} {value}"]
    return None


_NAME = re.compile(NAME)
_LABEL = re.compile(r"^(?:[-\w.$]+:|define )")


def balance_maximum_trees(llvm_ir: str) -> str:
    """``llvm_ir`` (a module) with each tree of vector ``llvm.maximum`` calls (every inner value of one
    type, used once, by the tree, in the same block) rebuilt as a balanced tree of its leaves in
    their order, for every target (``rewrite_maximum`` then expands the calls on AVX-512).

    Why: a reduction over a short row is lowered as a transposed tile whose columns are folded into
    the rows' maxima one after another (``lower_multi_reduction`` "innerparallel"), a dependent
    chain as long as the row; balanced, its depth is the logarithm.  The maximum is associative and
    commutative, NaNs and signed zeros included, so every order gives the same bits."""
    if "@llvm.maximum.v" not in llvm_ir:
        return llvm_ir
    w = _Writer("%mind.maxtree.")
    # a tree to rebalance has three calls or more
    return per_function(llvm_ir, lambda body: _balanced_function(body, w),
                        lambda body: body.count("@llvm.maximum.v") > 2)


def _balanced_function(lines: list[str], w: _Writer) -> list[str]:
    """``balance_maximum_trees`` on one function's lines (SSA names are the function's own)."""
    # every occurrence of a name but its definition is a use (one scan of the text, not of each line)
    uses = Counter(_NAME.findall("\n".join(lines)))
    calls: dict[str, tuple[int, int, str, str, str]] = {}  # result -> (line, block, type, a, b)
    block = 0
    for i, line in enumerate(lines):
        if line[:1] not in ("", " ") and _LABEL.match(line):
            block += 1
        m = _VECTOR_MAX.match(line) if "@llvm.maximum.v" in line else None
        if m:
            calls[m.group(2)] = (i, block, f"<{m.group(3)} x {m.group(4)}>", m.group(5), m.group(6))

    def inner(name: str, blk: int, ty: str) -> tuple[int, int, str, str, str] | None:
        """The call defining ``name`` when it is an inner node of a tree in block ``blk``."""
        c = calls.get(name)
        return c if c is not None and uses[name] == 2 and c[1] == blk and c[2] == ty else None

    def leaves(root: tuple[int, int, str, str, str], absorbed: list[int]) -> tuple[list[str], int]:
        """The leaves of the tree under ``root``'s call, left to right, and its depth (a stack, not
        recursion: a chain is as long as a row)."""
        _, blk, ty, a, b = root
        names: list[str] = []
        depth = 0
        stack = [(b, 1), (a, 1)]
        while stack:
            name, level = stack.pop()
            c = inner(name, blk, ty)
            if c is None:
                names.append(name)
                depth = max(depth, level)
                continue
            absorbed.append(c[0])
            stack += [(c[4], level + 1), (c[3], level + 1)]
        return names, depth

    consumed = {o for _, blk, ty, a, b in calls.values() for o in (a, b) if inner(o, blk, ty) is not None}
    roots = [r for r in calls if r not in consumed]
    dropped: set[int] = set()
    replaced: dict[int, list[str]] = {}
    for r in roots:
        i, blk, ty = calls[r][:3]
        absorbed: list[int] = []
        names, depth = leaves(calls[r], absorbed)
        if depth <= (len(names) - 1).bit_length():
            continue  # already as shallow as a balanced tree
        m = _VECTOR_MAX.match(lines[i])
        indent = m.group(1)
        callee = lines[i][lines[i].index("@llvm.maximum"):].split("(", 1)[0]
        w.lines = []
        # depth first, a pair as soon as two subtrees of one height are there: the tree of adjacent
        # pairs, with at most log2(leaves) partial results live (16 registers on AVX2)
        stack: list[tuple[str, int]] = []
        for k, leaf in enumerate(names):
            stack.append((leaf, 0))
            while len(stack) > 1 and stack[-1][1] == stack[-2][1] and (k + 1 < len(names) or len(stack) > 2):
                (x, h), (y, _) = stack[-2], stack.pop()
                stack[-1] = (w.emit(indent, f"call {ty} {callee}({ty} {x}, {ty} {y})"), h + 1)
        while len(stack) > 2:
            (x, h), (y, _) = stack[-2], stack.pop()
            stack[-1] = (w.emit(indent, f"call {ty} {callee}({ty} {x}, {ty} {y})"), h + 1)
        replaced[i] = w.lines + [f"{indent}{r} = call {ty} {callee}({ty} {stack[0][0]}, {ty} {stack[1][0]})"]
        dropped.update(absorbed)
    if not replaced:
        return lines
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in replaced:
            out.extend(replaced[i])
        elif i not in dropped:
            out.append(line)
    return out


def rewrite_maximum(llvm_ir: str) -> str:
    """``llvm_ir`` with its ``llvm.maximum`` and ``llvm.vector.reduce.fmaximum`` calls expanded as
    the module docstring says (for a target with AVX-512 F, DQ and VL); unchanged when it has none.
    Each original value keeps its name (a ``select i1 true`` of the expansion, which LLVM folds)."""
    if "@llvm.maximum." not in llvm_ir and "@llvm.vector.reduce.fmaximum" not in llvm_ir:
        return llvm_ir
    w = _Writer()
    out: list[str] = []
    for line in llvm_ir.split("\n"):
        expanded = _expand(w, line) if "maximum" in line else None  # a regular expression on every line cost ms
        out.extend([line] if expanded is None else expanded)
    return with_declares("\n".join(out), llvm_ir, w.declares)
