"""The cuda runtime's driver paths that conformance cases do not take, checked on a real GPU.

``prepare`` (here, with MLIR) builds the artifact of a small f32 program; ``check`` (on the GPU
machine: NumPy, cuda-bindings, and torch / CuPy / JAX where installed) calls it every way a user
can and returns one record per check (``name``, ``ok``, ``detail``):

* NumPy arguments, copied in and out; arguments already on the device, by
  ``__cuda_array_interface__`` (torch, CuPy) and by DLPack alone, used where they are (the pointer the
  runtime binds is the tensor's own); results left on the device (``device_results``) read by torch
  without a copy and fed to the next call; an argument written on another torch stream;
* the PTX path (no cubin for the device: the driver compiles the PTX, its ``.version`` capped);
* coded errors for a strided device array and a wrong shape (E6009), never a crash;
* a figure: the median time of a call with device arguments and results.

The program, ``x * y + x`` in f32, has one exact answer when each op rounds once (no FMA across
ops): every check compares bits with NumPy's.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable

import numpy as np

SHAPE = (64, 33)
PROGRAM = """func @main(%x: f32[64, 33], %y: f32[64, 33]) -> (f32[64, 33]) {
  %0 = mul(%x, %y) : f32[64, 33]
  %1 = add(%0, %x) : f32[64, 33]
  return %1
}
"""


def prepare(folder: str) -> None:
    """Write the artifact of ``PROGRAM`` into the new folder ``folder`` (needs the compiler)."""
    from mind.compiler.build import build_artifact
    from mind.ir.parser import parse_module

    files = build_artifact(parse_module(PROGRAM, "interop").functions[0], "cuda", {})
    os.makedirs(folder)
    for name, data in files.items():
        with open(os.path.join(folder, name), "xb") as fh:
            fh.write(data)


def _expected(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x * y).astype(np.float32) + x


def _same(got: Any, want: np.ndarray) -> tuple[bool, str]:
    got = np.asarray(got)
    ok = got.shape == want.shape and got.dtype == want.dtype and bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)))
    return ok, "bit-identical to NumPy" if ok else f"differs: {got.dtype}{list(got.shape)}, first {got.ravel()[:3]} vs {want.ravel()[:3]}"


class _Skip(Exception):
    """A check this machine cannot make (its library sees no GPU): recorded as skipped, with why."""


class _DLPackOnly:
    """A device array that offers DLPack and nothing else (no ``__cuda_array_interface__``)."""

    def __init__(self, tensor: Any) -> None:
        self._t = tensor

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._t.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self._t.__dlpack_device__()


def _coded(code: str, call: Callable[[], Any]) -> tuple[bool, str]:
    from mind.diagnostics import MindError

    try:
        call()
    except MindError as e:
        got = e.diagnostics[0]
        return got.code == code, f"{got.code}: {got.message}"
    return False, f"no diagnostic (expected {code})"


def check(folder: str) -> list[dict[str, Any]]:
    """Every check's record (``name``, ``ok``, ``skipped``, ``detail``); a check whose library is
    missing is recorded as skipped, which the comparison prints and counts apart."""
    import mind.runtime
    from mind.runtime import cuda
    from mind.runtime.artifact import PLAN, read_checked

    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    want = _expected(x, y)
    records: list[dict[str, Any]] = []

    def record(name: str, body: Callable[[], tuple[bool, str]]) -> None:
        skipped = False
        try:
            ok, detail = body()
        except (ImportError, _Skip) as e:  # a peer library this machine lacks: said, not passed
            ok, detail, skipped = True, f"skipped: {e}", True
        except Exception as e:  # noqa: BLE001 - a check that raises is a failing check, with its reason
            ok, detail = False, f"raised {type(e).__name__}: {e}"
        records.append({"name": name, "ok": bool(ok), "skipped": skipped, "detail": detail})

    reason = cuda.unavailable()
    if reason is not None:
        return [{"name": "device", "ok": False, "detail": f"no GPU to check: {reason}"}]
    f = mind.runtime.load(folder)
    dev = cuda.device(0)

    def device_info() -> tuple[bool, str]:
        cu = dev.cu
        _, version = cu.cuDriverGetVersion()
        _, raw = cu.cuDeviceGetName(256, dev.handle)
        import importlib.metadata as md
        try:
            bindings = md.version("cuda-bindings")
        except md.PackageNotFoundError:
            bindings = "?"
        name = raw.split(b"\0")[0].decode()
        return True, f"{name}, {dev.sm}, driver API {version}, PTX up to {dev.ptx_limit}, cuda-bindings {bindings}"

    record("device", device_info)
    record("numpy arguments and results", lambda: _same(f(x, y), want))

    def torch_zero_copy() -> tuple[bool, str]:
        import torch
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        ref = cuda._device_ref(tx)
        if ref is None or ref.ptr != tx.data_ptr():
            return False, "the runtime did not bind the tensor's own memory"
        ok, detail = _same(f(tx, ty), want)
        return ok, f"bound at the tensor's data_ptr; {detail}"

    record("torch tensors as arguments, without a copy", torch_zero_copy)

    def device_results() -> tuple[bool, str]:
        import torch
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        d = f(tx, ty, device_results=True)
        if not isinstance(d, cuda.DeviceArray):
            return False, f"got {type(d).__name__}"
        t = torch.as_tensor(d, device="cuda")
        if t.data_ptr() != d.ptr:
            return False, "torch copied the result"
        ok1, _ = _same(t.cpu().numpy(), want)
        ok2, detail = _same(d.numpy(), want)
        chained = f(d, ty, device_results=True)
        ok3, detail3 = _same(chained.numpy(), _expected(want, y))
        return ok1 and ok2 and ok3, f"torch reads it in place; {detail}; as the next call's argument: {detail3}"

    record("results left on the device (device_results=True)", device_results)

    def cupy_args() -> tuple[bool, str]:
        import cupy
        return _same(f(cupy.asarray(x), cupy.asarray(y)), want)

    record("CuPy arrays as arguments", cupy_args)

    def dlpack_only() -> tuple[bool, str]:
        import torch
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        ref = cuda._device_ref(_DLPackOnly(tx))
        if ref is None or ref.ptr != tx.data_ptr():
            return False, "the DLPack capsule was not bound in place"
        return _same(f(_DLPackOnly(tx), _DLPackOnly(ty)), want)

    record("DLPack-only device arguments", dlpack_only)

    def jax_args() -> tuple[bool, str]:
        import jax
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if not gpus:
            raise _Skip("JAX sees no GPU")
        return _same(f(jax.device_put(x, gpus[0]), jax.device_put(y, gpus[0])), want)

    record("JAX arrays as arguments", jax_args)

    def other_stream() -> tuple[bool, str]:
        import torch
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            tx = torch.from_numpy(x).cuda(non_blocking=True) * 1.0
            big = torch.ones(1 << 24, device="cuda").cumsum(0)  # keep the stream busy
            ty = torch.from_numpy(y).cuda(non_blocking=True) + big[:1] * 0.0
            out = f(tx, ty)
        return _same(out, want)

    record("arguments written on another torch stream", other_stream)

    def ptx_path() -> tuple[bool, str]:
        checked = read_checked(folder)
        plan = checked.json(PLAN)
        images = {m: {"ptx": checked.files[files["ptx"]]} for m, files in plan["images"].items()}
        program = cuda.Program(dev, plan, images)
        ok, detail = _same(program.run([x, y])[0], want)
        return ok, f"no cubin: the driver compiled the PTX; {detail}"

    record("the PTX path (no cubin for this GPU)", ptx_path)

    def strided() -> tuple[bool, str]:
        import torch
        wide = torch.zeros(SHAPE[0], 2 * SHAPE[1], device="cuda")
        return _coded("E6009", lambda: f(wide[:, ::2], wide[:, ::2]))

    record("a strided device argument is E6009", strided)

    def wrong_shape() -> tuple[bool, str]:
        import torch
        return _coded("E6009", lambda: f(torch.zeros(SHAPE[::-1], device="cuda"), torch.zeros(SHAPE[::-1], device="cuda")))

    record("a device argument of the wrong shape is E6009", wrong_shape)

    def call_time() -> tuple[bool, str]:
        import torch
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        times = []
        for _ in range(300):
            start = time.perf_counter()
            f(tx, ty, device_results=True)
            times.append(time.perf_counter() - start)
        torch.cuda.synchronize()
        return True, f"median {statistics.median(times[50:]) * 1e6:.1f} us per call (device arguments and results)"

    record("call overhead", call_time)
    return records
