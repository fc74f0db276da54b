"""The CPU's pass pipelines after the schedule: bufferize, then lower memrefs, vectors and loops to the
LLVM dialect (``scf.forall`` to OpenMP on more than one thread).  Built from the validated passes of
``linalg.pipeline``; MLIR is not imported.
"""

from __future__ import annotations

from ..linalg.pipeline import MAX_THREADS, PassSpec, Pipeline, PipelineError, bufferize, pass_spec as _p

__all__ = ["lower_to_llvm", "to_loops", "loops_to_llvm", "full_pipeline", "MAX_THREADS"]


def to_loops(threads: int = 1) -> Pipeline:
    """Bufferized memrefs to loops: ``scf.forall`` to ``scf.parallel`` (OpenMP on more than one
    thread), vector transfers and the unscheduled linalg ops to ``scf.for`` nests.  What runs before
    ``movement_loops.mark_movement_loops`` reads the loops."""
    if not (isinstance(threads, int) and not isinstance(threads, bool) and 1 <= threads <= MAX_THREADS):
        raise PipelineError(f"thread count must be an integer in [1, {MAX_THREADS}], got {threads!r}")
    head: tuple[PassSpec, ...]
    if threads > 1:
        # convert-scf-to-openmp needs a canonicalize right after it
        head = (_p("scf-forall-to-parallel"), _p("convert-scf-to-openmp", num_threads=threads), _p("canonicalize"))
    else:
        head = (_p("scf-forall-to-parallel"),)
    return Pipeline(head + (
        _p("convert-vector-to-scf", full_unroll=True),  # without the full unroll, allocas stay inside loops
        _p("convert-linalg-to-loops"),
    ))


def loops_to_llvm(threads: int = 1) -> Pipeline:
    """Loops, memrefs and vectors to the LLVM dialect (what follows ``to_loops``)."""
    body = (
        _p("lower-affine"), _p("convert-scf-to-cf"),
        _p("canonicalize"), _p("cse"),
        _p("convert-vector-to-llvm"), _p("expand-strided-metadata"), _p("lower-affine"),
        _p("convert-arith-to-llvm"), _p("convert-math-to-llvm"), _p("finalize-memref-to-llvm"),
        _p("convert-func-to-llvm"), _p("convert-cf-to-llvm"), _p("convert-index-to-llvm"),
        _p("convert-ub-to-llvm"),  # ub.poison (from vector lowering) has no other lowering
    )
    tail = (_p("convert-openmp-to-llvm"),) if threads > 1 else ()
    return Pipeline(body + tail + (_p("reconcile-unrealized-casts"),))


def lower_to_llvm(threads: int = 1) -> Pipeline:
    """Memref/vector/scf to the LLVM dialect; ``threads > 1`` turns ``scf.forall`` into OpenMP."""
    return to_loops(threads) + loops_to_llvm(threads)


def full_pipeline(threads: int = 1) -> Pipeline:
    """Bufferize then lower; what runs after the transform scripts."""
    return bufferize() + lower_to_llvm(threads)
