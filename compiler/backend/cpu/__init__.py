"""The CPU backend: Core IR functions compiled through MLIR and LLVM to native code, run on NumPy arrays.

Built on the target-neutral middle (``compiler.backend.linalg``: emission, payload inspection,
transform scripts, pass table, MLIR context); what is the CPU's here: the options (``options``), the
runner (``api``), the tile choices and schedules (``transforms``, ``conv_schedule``), the prebuilt
GEMM and its calls (``gemm_kernel``, ``gemm_driver``, ``kernel_library``, ``library_calls``), the
lowering to LLVM IR (``lowering``, ``pipeline``, ``runtime``), code generation (``codegen``,
``llvm_split``), OpenMP (``openmp``, ``kmpc_gomp``), loading and calling (``engine``, ``abi``,
``outputs``) and the kernel cache (``cache``).  Importing this package imports neither MLIR nor
llvmlite; the heavy modules load on first compile.
"""

BACKEND_VERSION = "cpu-0.2.0"  # 0.2: contraction patterns and the cost model changed the schedules
