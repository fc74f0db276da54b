"""The CUDA backend: Core IR functions compiled through MLIR's gpu and NVVM dialects to PTX, assembled
to cubins by ``ptxas`` (from the pinned ``nvidia-cuda-nvcc`` wheel), run by ``mind.runtime.cuda``.

Built on the target-neutral middle (``compiler.backend.linalg``: emission, elementwise fusion,
bufferization, the validated pass table); what is CUDA's here: the options (``options``), the GPU
mapping and NVVM pipelines (``pipeline``), the lowering that turns the host function into a launch
plan and the device functions into PTX (``lowering``), ``ptxas`` (``ptxas``) and the runner
(``api``).  Importing this package imports no MLIR; the runtime it hands kernels to imports none
either.  See ``docs/backend-cuda.md``.
"""

BACKEND_VERSION = "cuda-0.2.0"  # 0.2: library GEMM and conv, split reductions, the contiguous dim on x, one module
