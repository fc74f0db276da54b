"""CPU backend: MLIR (linalg/tensor/arith) text in, native callable out.

Importing this package imports neither MLIR nor llvmlite; the heavy modules load on first compile.
Public entry points: ``engine.compile_kernel`` and ``engine.translate_to_llvm_ir``; ``mathlib`` emits
vectorizable exp/log; ``pipeline`` and ``transforms`` hold the pass pipelines and schedules.
"""

BACKEND_VERSION = "cpu-0.2.0"  # 0.2: contraction patterns and the cost model changed the schedules
