"""The CUDA backend's pass pipelines, from the validated passes of ``linalg.pipeline`` (no MLIR import).

After the shared bufferization: every linalg op becomes a parallel loop nest (reductions as a
sequential loop inside each thread), tiled by the block shape (``tile``, with a bounds check inside
the tile instead of min/max bounds, so a block's extent is a constant), the tile mapped to threads
and the rest to the grid, each loop nest outlined into a kernel; then each kernel to NVVM (bare
pointers for memrefs: the shapes are static) and PTX (``gpu-module-to-binary{format=isa}``, no CUDA
toolkit).  Pitfall: nothing may canonicalize between the tiling and ``gpu-map-parallel-loops``.
"""

from __future__ import annotations

from ..linalg.pipeline import Nest, Pipeline, pass_spec as _p

__all__ = ["to_parallel_loops", "gpu_mapping", "to_ptx", "PTX_TARGET"]

PTX_TARGET = "sm_80"
"""The architecture the PTX is generated for: the oldest one MIND builds cubins for, so ptxas
assembles the same PTX for every newer one and the driver can compile it for GPUs after them."""


def to_parallel_loops() -> Pipeline:
    """Every linalg op as a parallel loop nest (an op without a parallel dimension, such as a rank-0
    op or a reduction to a scalar, as straight-line code or sequential loops: ``lowering`` wraps
    those in a one-iteration parallel loop, so they run on the GPU too)."""
    return Pipeline((Nest("func.func", (_p("convert-linalg-to-parallel-loops"),)),))


def gpu_mapping(tile: tuple[int, ...]) -> Pipeline:
    """Parallel loops, tiled into blocks of ``tile`` threads, as outlined GPU kernels."""
    return Pipeline((
        Nest("func.func", (_p("scf-parallel-loop-tiling", parallel_loop_tile_sizes=tuple(tile), no_min_max_bounds=True),
                           _p("gpu-map-parallel-loops"), _p("convert-parallel-loops-to-gpu"))),
        _p("gpu-launch-sink-index-computations"),  # before outlining, so constants move into kernels
        _p("gpu-kernel-outlining"), _p("canonicalize"), _p("cse"),
    ))


def to_ptx(chip: str = PTX_TARGET) -> Pipeline:
    """Each ``gpu.module`` to NVVM, then to PTX text (``gpu.binary`` objects in the ``isa`` format)."""
    return Pipeline((
        _p("nvvm-attach-target", chip=chip, O=3),
        Nest("gpu.module", (_p("lower-affine"), _p("convert-scf-to-cf"), _p("expand-strided-metadata"),
                            _p("lower-affine"), _p("convert-gpu-to-nvvm", use_bare_ptr_memref_call_conv=True),
                            _p("convert-index-to-llvm"), _p("canonicalize"), _p("cse"))),
        _p("reconcile-unrealized-casts"),
        _p("gpu-module-to-binary", format="isa"),
    ))
