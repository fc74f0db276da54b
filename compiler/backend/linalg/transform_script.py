"""Transform-dialect scripts as text: the pieces a schedule is made of, and running a script.

Why generated and not pasted: tile sizes must divide the static shapes (partial tiles have dynamic
shapes, which the vectorizer leaves scalar) and must shrink for small shapes, so each script is built
from parameters a target chooses per op.  Every scheduled op is tagged with a unique ``mind.sched``
attribute (``SCHED_ATTR``) and matched by it, so ops of different ranks get their own tiles.  MLIR is
imported inside ``apply_script`` only.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["SCHED_ATTR", "ENTRY", "largest_divisor_at_most", "sizes", "match", "tile_for", "tile_forall",
           "vectorize", "peel", "canonicalize", "wrap_script", "apply_script"]

SCHED_ATTR = "mind.sched"
ENTRY = "__mind_schedule"


def largest_divisor_at_most(n: int, bound: int, multiple_of: int = 1) -> int:
    """Largest d with d | n, d <= bound and multiple_of | d (falls back to ``multiple_of``)."""
    best = multiple_of
    for d in range(multiple_of, min(n, bound) + 1, multiple_of):
        if n % d == 0:
            best = d
    return best


def sizes(ts: Sequence[int]) -> str:
    return "[" + ", ".join(str(t) for t in ts) + "]"


def _handles(n: int) -> str:
    return ", ".join(["!transform.any_op"] * n)


def match(var: str, op: str, tag: int) -> str:
    """``var`` = the payload op ``op`` tagged ``tag``."""
    return (f"    {var} = transform.structured.match ops{{[\"{op}\"]}} attributes {{{SCHED_ATTR} = {tag} : i64}}"
            f" in %root : (!transform.any_op) -> !transform.any_op\n")


def tile_for(res: str, src: str, tiles: Sequence[int]) -> str:
    """Sequential tiling of ``src`` (``scf.for``; 0 leaves a loop untiled)."""
    nloops = sum(1 for s in tiles if s)
    loops = f"%{res}_l" if nloops == 1 else f"%{res}_l:{nloops}"
    return (f"    %{res}, {loops} = transform.structured.tile_using_for {src} tile_sizes {sizes(tiles)}"
            f" : (!transform.any_op) -> ({_handles(nloops + 1)})\n")


def tile_forall(res: str, src: str, tiles: Sequence[int]) -> str:
    """Parallel tiling of ``src`` (``scf.forall``: the loops a target runs on threads)."""
    return (f"    %{res}, %{res}_f = transform.structured.tile_using_forall {src} tile_sizes {sizes(tiles)}"
            f" : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n")


def vectorize(handle: str, nd_extract: bool = False, contraction: bool = False) -> str:
    """``nd_extract``: the payload reads computed indices (``tensor.extract``), which the vectorizer
    then vectorizes too (``payload.row_reads`` says when that is safe).  ``contraction``: the payload
    is a matrix product (a GEMM's register block), vectorized as one ``vector.contract`` of its two
    operands' tiles, which the lowering turns into outer products."""
    flags = [name for name, on in (("vectorize_nd_extract", nd_extract), ("create_named_contraction", contraction))
             if on]
    attrs = f" {{{', '.join(flags)}}}" if flags else ""
    return f"    transform.structured.vectorize {handle}{attrs} : !transform.any_op\n"


def peel(name: str, loop: str) -> str:
    """Split the ``scf.for`` handle ``loop`` into its whole tiles (``%{name}_m``) and its last partial
    tile (``%{name}_t``), with the linalg.generic of each (``%{name}_mg``, ``%{name}_tg``)."""
    s = (f"    %{name}_c = transform.cast {loop} : !transform.any_op to !transform.op<\"scf.for\">\n"
         f"    %{name}_m, %{name}_t = transform.loop.peel %{name}_c : (!transform.op<\"scf.for\">) -> "
         f"(!transform.any_op, !transform.any_op)\n")
    for part in ("m", "t"):
        s += (f"    %{name}_{part}g = transform.structured.match ops{{[\"linalg.generic\"]}} in %{name}_{part} : "
              f"(!transform.any_op) -> !transform.any_op\n")
    return s


def canonicalize(handle: str) -> str:
    """MLIR's canonicalization patterns on the payload of ``handle`` (after ``peel``: the peeled tiles'
    sizes, constants then, folded into static shapes; the ops' handles follow them, so apply it to
    an op that outlives the patterns, a forall, not to a peeled loop of one tile that they inline)."""
    return (f"    transform.apply_patterns to {handle} {{\n      transform.apply_patterns.canonicalization\n"
            f"    }} : !transform.any_op\n")


def wrap_script(sections: Sequence[str], lowering: str, name: str = ENTRY) -> str:
    """A complete transform module: the per-op sections, then the target's ``lowering`` of what they
    made (vector lowering, for a CPU)."""
    body = "".join(sections)
    return ("module attributes {transform.with_named_sequence} {\n"
            f"  transform.named_sequence @{name}(%root: !transform.any_op {{transform.readonly}}) {{\n"
            f"{body}{lowering}    transform.yield\n  }}\n}}\n")


def apply_script(module: Any, script: str, entry: str = ENTRY) -> None:
    """Run ``script`` (a transform module text) on ``module`` in place, in the module's context.

    The script is parsed and interpreted through ``mlir_capi`` (the GIL is released meanwhile, and
    ``mlir.dialects.transform.interpreter`` is not imported).  Raises ``RuntimeError`` when the
    script does not parse or a transform fails; MLIR's reasons go to the context's diagnostic
    handler."""
    from mlir import ir

    from .mlir_capi import apply_named_sequence, parse_module
    with module.context, ir.Location.unknown():
        tmod = parse_module(module.context, script)
        if tmod is None:
            raise RuntimeError("the transform script does not parse")
        entry_op = None
        for op in tmod.body.operations:
            if op.operation.name == "transform.named_sequence" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == entry:
                entry_op = op
        if entry_op is None:
            raise ValueError(f"transform script has no named sequence @{entry}")
        if not apply_named_sequence(module.operation, entry_op.operation, tmod.operation):
            raise RuntimeError(f"the transform script @{entry} failed")
