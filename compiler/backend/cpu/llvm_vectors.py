"""Vector code written into LLVM IR text: fresh names, lanes picked and joined by ``shufflevector``,
and an operation of the native widths (128, 256, 512 bits) applied to vectors of any width.

Why: the rewrites of AVX-512 kernels (``range_max``, ``scalef``) replace a generic LLVM operation by
an x86 intrinsic, which exists only at the native widths, while MLIR's vectors have the widths of
the schedule's tiles (32 doubles, 15 floats).  The writer is shared so that both cut and widen
vectors alike.
"""

from __future__ import annotations

from typing import Callable

from ..linalg.mathlib import F32, F64

__all__ = ["ELEMENT", "FORMAT", "MASK", "NAME", "VectorWriter", "per_function", "with_declares"]

NAME = r"%[-\w.$]+"
"""A local value's name in LLVM IR text (a regular expression)."""

FORMAT = {"float": F32, "double": F64}
"""LLVM float type -> its IEEE format (``linalg.mathlib``'s, which the exp that ``scalef`` rewrites uses)."""
ELEMENT = {name: (suffix, FORMAT[name].bits) for name, suffix in (("float", "ps"), ("double", "pd"))}
"""LLVM float type -> (the x86 intrinsics' suffix, bits)."""
MASK = {2: "i8", 4: "i8", 8: "i8", 16: "i16"}
"""Lanes of a native vector -> the type of an AVX-512 intrinsic's lane mask."""


class VectorWriter:
    """Lines of an expansion with fresh names (``prefix``: one MLIR's translation never writes, so
    that the function's numbered values keep their numbers) and the declarations they need."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.n = 0
        self.lines: list[str] = []
        self.declares: set[str] = set()

    def fresh(self) -> str:
        self.n += 1
        return f"{self.prefix}{self.n}"

    def emit(self, indent: str, text: str) -> str:
        name = self.fresh()
        self.lines.append(f"{indent}{name} = {text}")
        return name

    def piece(self, indent: str, v: str, lanes: int, elem: str, start: int, count: int) -> str:
        """Lanes ``start .. start + count`` of ``v`` (of ``lanes``) as a vector of ``count``."""
        if start == 0 and count == lanes:
            return v
        mask = ", ".join(f"i32 {start + i}" for i in range(count))
        return self.emit(indent, f"shufflevector <{lanes} x {elem}> {v}, <{lanes} x {elem}> poison, "
                                 f"<{count} x i32> <{mask}>")

    def concat(self, indent: str, parts: list[str], count: int, elem: str) -> str:
        """The pieces (each of ``count`` lanes) side by side, pairwise."""
        while len(parts) > 1:
            joined = []
            for a, b in zip(parts[::2], parts[1::2]):
                mask = ", ".join(f"i32 {i}" for i in range(2 * count))
                joined.append(self.emit(indent, f"shufflevector <{count} x {elem}> {a}, <{count} x {elem}> {b}, "
                                                f"<{2 * count} x i32> <{mask}>"))
            parts, count = joined, 2 * count
        return parts[0]

    def widen(self, indent: str, v: str, lanes: int, padded: int, elem: str) -> str:
        """``v`` with poison lanes after its ``lanes``, ``padded`` in all."""
        mask = ", ".join([f"i32 {i}" for i in range(lanes)] + ["i32 poison"] * (padded - lanes))
        return self.emit(indent, f"shufflevector <{lanes} x {elem}> {v}, <{lanes} x {elem}> poison, "
                                 f"<{padded} x i32> <{mask}>")

    def elementwise(self, indent: str, operands: list[str], lanes: int, elem: str,
                    native: Callable[[str, list[str], int, str], str]) -> str:
        """``native(indent, operands, native_lanes, elem)`` (an elementwise operation on vectors of
        one native width) applied to ``operands`` of ``lanes``: cut into the widest native pieces
        when they are a power of two of them (joined pairwise), else widened with poison lanes to
        the next power of two of lanes of 128 bits or more first (the poison lanes are never read):
        a tile's rows of 3 or 15 floats (not a multiple of 128 bits), of 20 (five 128-bit pieces:
        two of 512 bits) or 48 (three of 512: four), which LLVM expands generically otherwise."""
        bits = ELEMENT[elem][1]
        width = max((w for w in (512, 256, 128) if (lanes * bits) % w == 0), default=0)
        pieces = lanes * bits // width if width else 0
        if not pieces or pieces & (pieces - 1):
            padded = max(128 // bits, 1 << (lanes - 1).bit_length())
            wide = [self.widen(indent, v, lanes, padded, elem) for v in operands]
            return self.piece(indent, self.elementwise(indent, wide, padded, elem, native), padded, elem, 0, lanes)
        count = width // bits
        if count == lanes:
            return native(indent, operands, lanes, elem)
        parts = [native(indent, [self.piece(indent, v, lanes, elem, i, count) for v in operands], count, elem)
                 for i in range(0, lanes, count)]
        return self.concat(indent, parts, count, elem)


def per_function(llvm_ir: str, rewrite: Callable[[list[str]], list[str]], wanted: Callable[[str], bool]) -> str:
    """``llvm_ir`` with the lines of each function whose text ``wanted`` accepts (its ``define``
    line to its closing brace) replaced by ``rewrite`` of them: SSA names are a function's own.
    The module is cut at its ``define`` lines by string searches (a kernel's module is megabytes,
    and a Python loop over its lines cost milliseconds)."""
    parts = ("\n" + llvm_ir).split("\ndefine ")
    functions = []
    for part in parts[1:]:
        part = "define " + part
        end = part.find("\n}")
        end = len(part) if end < 0 else end + 2
        body, rest = part[:end], part[end:]
        functions.append(("\n".join(rewrite(body.split("\n"))) if wanted(body) else body) + rest)
    return "\n".join([parts[0]] + functions)[1:]


def with_declares(llvm_ir: str, original: str, declares: set[str]) -> str:
    """``llvm_ir`` followed by the ``declares`` (sorted: the text is deterministic) that
    ``original`` does not have already."""
    present = {d[d.find("@"):d.find("(")] for d in original.split("\ndeclare ")[1:]}
    missing = sorted(d for d in declares if d[d.find("@"):d.find("(")] not in present)
    return llvm_ir + ("\n" + "\n".join(missing) + "\n" if missing else "")
