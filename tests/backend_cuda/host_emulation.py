"""The cuda lowering's loop program, run on the CPU: every stage but the GPU mapping itself.

Why: CI has no GPU, and the cuda backend's own rewrites — row reductions split into partials,
parallel dims put first, strided copies made loops, serial parts wrapped, each loop nest's dims
reversed for the mapping — change what the kernels compute.  ``lower_to_loops`` gives the module the
GPU mapping starts from; here its host function, parallel loops and all, is lowered for the CPU
(``scf.parallel`` to sequential loops) and run by MLIR's execution engine, and each call of a
library kernel (a matmul, a convolution) runs that kernel's own LLVM IR in ``block_emulator`` with
the launch's grid and arguments.  Upstream's mapping passes (tiling, mapping,
outlining, NVVM) are what this leaves to the GPU runs of ``tools/gpu_check.py``.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from mind.compiler.backend.cuda.api import signature_of
from mind.compiler.backend.cuda.lowering import lower_to_loops
from mind.compiler.backend.cuda.options import CudaOptions
from mind.compiler.backend.linalg.context import Diagnostics, find_func, run_pipeline
from mind.compiler.backend.linalg.emit import emit_mlir
from mind.compiler.backend.linalg.pipeline import Nest, Pipeline, pass_spec as _p
from mind.runtime.memref import descriptor_type

OPTIONS = CudaOptions.resolve({}, environ={})

TO_CPU = Pipeline((
    Nest("func.func", (_p("convert-scf-to-cf"),)),
    _p("expand-strided-metadata"), _p("lower-affine"), _p("finalize-memref-to-llvm"), _p("convert-math-to-llvm"),
    _p("convert-arith-to-llvm"), _p("convert-index-to-llvm"), _p("convert-cf-to-llvm"), _p("convert-func-to-llvm"),
    _p("convert-ub-to-llvm"), _p("reconcile-unrealized-casts"),
))
"""The host function, its parallel loops sequential, to LLVM."""


def _descriptor(a: np.ndarray) -> Any:
    """A ranked memref descriptor over ``a``'s own buffer (C-contiguous): the runtime's own struct."""
    descriptor = descriptor_type(a.ndim)()
    descriptor.allocated = descriptor.aligned = a.ctypes.data
    descriptor.offset = 0
    if a.ndim:
        descriptor.sizes[:] = list(a.shape)
        descriptor.strides[:] = [s // a.itemsize if a.itemsize else 0 for s in a.strides]
    return descriptor


_EMULATORS: dict[str, Any] = {}


def _library_kernel(launch: Any) -> Callable[[int, int, int], None]:
    """What a library call does on the GPU, here: the kernel's own LLVM IR in the block emulator,
    on the operands' base pointers, with the launch's grid and integer arguments — as the plan gives
    them to the GPU."""
    from block_emulator import BlockEmulator

    from mind.compiler.backend.cuda import gemm_kernel as gk

    name = gk.kernel_symbol(launch.elem, launch.window)
    if name not in _EMULATORS:
        params = gk.WINDOW_PARAMS if launch.window else gk.PARAMS
        _EMULATORS[name] = BlockEmulator(gk.gemm_llvm_ir(launch.elem, launch.window), name, 3, len(params) - 3)

    def call(a: int, b: int, c: int) -> None:  # pointers to the operands' memref descriptors
        base = [ctypes.c_void_p.from_address(d + 8).value or 0 for d in (a, b, c)]  # each one's aligned pointer
        _EMULATORS[name].run(launch.grid, launch.block[0], [*base, *launch.ints])

    return call


def run_on_host(fn: Any, inputs: list[np.ndarray], env: dict[str, int] | None = None) -> list[np.ndarray]:
    """``fn`` on ``inputs`` (its symbolic dims the values ``env``) through the cuda lowering, on the
    CPU, its matmuls and convolutions by the library kernels (emulated)."""
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    text, name = emit_mlir(fn, env or {})
    sig = signature_of(fn, env or {})
    module, ctx, gemms = lower_to_loops(text, name, sig, OPTIONS)
    with ctx, ir.Location.unknown():
        find_func(module, name).attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        for callee in gemms:  # the calls pass pointers to memref descriptors
            find_func(module, callee).attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        diags = Diagnostics(ctx)
        try:
            run_pipeline(ctx, TO_CPU.render(), module, "host", diags)
        finally:
            diags.detach()
        engine = ExecutionEngine(module, opt_level=1)
    callbacks = []
    for callee, launch in gemms.items():
        callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(_library_kernel(launch))
        callbacks.append(callback)  # alive while the engine may call it
        engine.register_runtime(callee, callback)
    arrays = [np.ascontiguousarray(a, dtype=spec.dtype) for a, spec in zip(inputs, sig.inputs)]
    outputs = [np.zeros(o.shape, o.dtype) for o in sig.outputs]
    descriptors = [_descriptor(a) for a in arrays + outputs]
    engine.invoke(name, *[ctypes.pointer(ctypes.pointer(d)) for d in descriptors])
    return outputs
