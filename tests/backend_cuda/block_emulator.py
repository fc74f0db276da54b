"""Runs an NVPTX kernel's LLVM IR on the CPU, one block at a time, each of its threads an OS thread.

Why: the CUDA GEMM (``compiler.backend.cuda.gemm_kernel``) is hand-written LLVM IR whose indexing
(load slots, shared-memory layout, double buffering, edges) can be wrong in ways only a run shows,
and CI has no GPU.  Its IR compiled for the host, with shared memory as ordinary globals (one block
runs at a time, so its threads share them as a block's threads do), the special registers and
``barrier0`` as calls into Python (``threading.Barrier`` across the block's threads), computes what
the GPU computes: an indexing fault, or a missing barrier that the threads' interleaving exposes,
shows as values that differ from NumPy's.

Only what the GEMM uses is translated: ``tid.x``, ``ctaid.x/y/z``, ``barrier0``, address spaces 1
and 3, ``ptx_kernel``.
"""

from __future__ import annotations

import ctypes
import re
import threading
from typing import Any, Sequence

_SREGS = ("tid.x", "ctaid.x", "ctaid.y", "ctaid.z")


def _host_ir(ir: str) -> str:
    """The kernel's IR for the host: no address spaces, the NVVM intrinsics as external calls."""
    out = []
    for line in ir.splitlines():
        if line.startswith(("target datalayout", "target triple")):
            continue
        m = re.match(r"\s*(%\S+) = addrspacecast ptr (%\S+) to ptr addrspace\(1\)$", line)
        if m:
            line = f"  {m.group(1)} = getelementptr i8, ptr {m.group(2)}, i64 0"
        line = re.sub(r" addrspace\([13]\)", "", line)
        line = line.replace("define ptx_kernel void", "define void")
        line = re.sub(r' "nvvm\.[a-z]+"="[0-9]+"', "", line)
        for reg in _SREGS:
            line = line.replace(f"@llvm.nvvm.read.ptx.sreg.{reg}()", f"@emu_{reg.replace('.', '_')}()")
        line = line.replace("@llvm.nvvm.barrier0()", "@emu_barrier()")
        out.append(line)
    return "\n".join(out)


class BlockEmulator:
    """``run(grid, block_threads, args)``: every block of ``grid`` in turn, its threads in parallel."""

    def __init__(self, ir: str, kernel: str, n_pointer_args: int, n_int_args: int) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self._local = threading.local()
        self._barrier: threading.Barrier | None = None
        int_fn = ctypes.CFUNCTYPE(ctypes.c_int32)
        self._callbacks = [int_fn(lambda r=r: getattr(self._local, r)) for r in ("tid", "bx", "by", "bz")]
        self._callbacks.append(ctypes.CFUNCTYPE(None)(self._wait))
        for name, cb in zip(("emu_tid_x", "emu_ctaid_x", "emu_ctaid_y", "emu_ctaid_z", "emu_barrier"), self._callbacks):
            llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)
        module = llvm.parse_assembly(_host_ir(ir))
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()
        types = [ctypes.c_void_p] * n_pointer_args + [ctypes.c_int64] * n_int_args
        self._kernel = ctypes.CFUNCTYPE(None, *types)(self._engine.get_function_address(kernel))

    def _wait(self) -> None:
        assert self._barrier is not None
        self._barrier.wait(timeout=60)

    def run(self, grid: Sequence[int], threads: int, args: Sequence[Any]) -> None:
        errors: list[BaseException] = []

        def thread(t: int, block: tuple[int, int, int]) -> None:
            self._local.tid, (self._local.bx, self._local.by, self._local.bz) = t, block
            try:
                self._kernel(*args)
            except BaseException as e:  # noqa: BLE001 - reported after the block
                errors.append(e)
                assert self._barrier is not None
                self._barrier.abort()

        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    self._barrier = threading.Barrier(threads)
                    workers = [threading.Thread(target=thread, args=(t, (bx, by, bz))) for t in range(threads)]
                    for w in workers:
                        w.start()
                    for w in workers:
                        w.join()
                    if errors:
                        raise errors[0]
