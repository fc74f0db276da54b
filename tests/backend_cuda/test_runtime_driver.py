"""``mind.runtime.cuda`` against a stand-in of the driver API (memory as byte arrays, launches
recorded, not executed): the runtime's own logic — the plan's buffers, constants, copies, launch
arguments, zero-copy device arguments, device results, freeing — checked on a machine without a
GPU.  What only a GPU can show (the kernels' values, the real driver's behaviour) is the ``gpu``
tests' and ``tools/gpu_check.py``'s."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import mind
from mind.calling import run_reference
from mind.compiler.backend.cuda.ptxas import find_ptxas
from mind.runtime import cuda

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="no ptxas")


class _Enum:
    def __getattr__(self, name):
        return name


class FakeDriver:
    CUdevice_attribute = _Enum()
    CUmemPool_attribute = _Enum()
    CUevent_flags = _Enum()

    @staticmethod
    def CUstream(handle):
        return handle

    def __init__(self):
        self.memory: dict[int, bytearray] = {}
        self.next = 0x10000
        self.launches: list[tuple] = []
        self.freed: list[int] = []
        self.host_copies = 0
        self.synchronized: list = []
        self.stream_waits: list = []  # (waiting stream, stream the event was recorded on)
        self.released: list = []  # modules unloaded and events destroyed
        self._recorded = None

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_FAKE")

    def cuDeviceGetCount(self):
        return (0, 1)

    def cuDeviceGet(self, i):
        return (0, i)

    def cuDeviceGetAttribute(self, attr, dev):
        return (0, 9 if attr.endswith("MAJOR") else 0)

    def cuDriverGetVersion(self):
        return (0, 12040)

    def cuDevicePrimaryCtxRetain(self, dev):
        return (0, "ctx")

    def cuCtxSetCurrent(self, ctx):
        return (0,)

    def cuStreamCreate(self, flags):
        return (0, 7)

    def CUstream(self, s):
        return s

    def cuDeviceGetDefaultMemPool(self, dev):
        return (0, "pool")

    def cuuint64_t(self, v):
        return v

    def cuMemPoolSetAttribute(self, pool, attr, value):
        return (0,)

    def cuMemAllocAsync(self, n, stream):
        p = self.next
        self.next += (n + 255) // 256 * 256 + 256
        self.memory[p] = bytearray(n)
        return (0, p)

    def cuMemFreeAsync(self, p, stream):
        self.freed.append(p)
        return (0,)

    def _at(self, address):
        """The allocation holding ``address`` and the offset into it."""
        base = max(b for b in self.memory if b <= address)
        return self.memory[base], address - base

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        self.memory[dst][:n] = ctypes.string_at(src, n)
        self.host_copies += 1
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        ctypes.memmove(dst, bytes(self.memory[src][:n]), n)
        return (0,)

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        buf, off = self._at(src)
        self.memory[dst][:n] = buf[off:off + n]
        return (0,)

    def cuEventCreate(self, flags):
        return (0, "event")

    def cuEventDestroy(self, event):
        self.released.append(event)
        return (0,)

    def cuModuleUnload(self, module):
        self.released.append(module)
        return (0,)

    def cuEventRecord(self, event, stream):
        self._recorded = stream
        return (0,)

    def cuStreamWaitEvent(self, stream, event, flags):
        self.stream_waits.append((stream, self._recorded))
        return (0,)

    def cuStreamSynchronize(self, stream):
        self.synchronized.append(stream)
        return (0,)

    def cuModuleLoadData(self, image):
        return (0, bytes(image[:16]))

    def cuModuleGetFunction(self, module, name):
        return (0, name.decode())

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.launches.append((f, (gx, gy, gz), (bx, by, bz), params))
        return (0,)


@pytest.fixture
def fake(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(cuda, "_driver", lambda: driver)
    monkeypatch.setattr(cuda, "_DEVICES", {})
    return driver


def test_constants_and_copies_follow_the_plan(fake):
    f = mind.compile("func @main() -> (f32[2, 2]) {\n  %0 = const {value = [[1.0, 2.0], [3.0, 4.0]]} : f32[2, 2]\n"
                     "  return %0\n}\n", backend="cuda")
    np.testing.assert_array_equal(f(), np.array([[1, 2], [3, 4]], np.float32))
    assert fake.launches == [] and fake.freed  # every buffer returned to the pool


PROGRAM = """\
func @main(%x: f32[33, 5], %y: f32[33, 5]) -> (f32[33, 5]) {
  %0 = add(%x, %y) : f32[33, 5]
  return %0
}
"""


class DeviceBuffer:
    """A stand-in of a GPU array (CuPy, PyTorch): only ``__cuda_array_interface__``."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3}


def _launch_args(params: int, n: int) -> list[int]:
    pointers = (ctypes.c_uint64 * n).from_address(params)
    return [ctypes.c_uint64.from_address(p).value for p in pointers]


def test_launches_arguments_and_device_results(fake):
    f = mind.compile(PROGRAM, backend="cuda", device_results=True)
    x = np.arange(165, dtype=np.float32).reshape(33, 5)
    (_, ptr) = fake.cuMemAllocAsync(x.nbytes, 7)
    fake.memory[ptr][:] = x.tobytes()
    out = f(DeviceBuffer(ptr, (33, 5), "<f4"), x)  # one argument on the device, one on the host
    assert fake.host_copies == 1  # only the host array was copied
    (name, grid, block, params), = fake.launches
    args = _launch_args(params, 2 + 3)
    assert ptr in args  # the device argument is used where it is
    assert grid[0] * block[0] >= 5 and grid[1] * block[1] >= 33  # the contiguous dim on threadIdx.x
    assert isinstance(out, cuda.DeviceArray) and out.ptr in args and out.ptr not in fake.freed
    fake.memory[out.ptr][:] = (2 * x).tobytes()  # what the kernel would write
    np.testing.assert_array_equal(out.numpy(), 2 * x)
    assert out.__cuda_array_interface__["shape"] == (33, 5)
    ptr_out = out.ptr
    del out
    assert ptr_out in fake.freed
    with pytest.raises(mind.diagnostics.MindError) as e:
        f(DeviceBuffer(ptr, (5, 33), "<f4"), x)
    assert e.value.diagnostics[0].code == "E6009"


def test_a_failing_driver_call_names_the_error(fake, monkeypatch):
    monkeypatch.setattr(fake, "cuLaunchKernel", lambda *a: (700, None)[:1])
    f = mind.compile(PROGRAM, backend="cuda")
    with pytest.raises(mind.diagnostics.MindError) as e:
        f(np.ones((33, 5), np.float32), np.ones((33, 5), np.float32))
    d = e.value.diagnostics[0]
    assert d.code == "E6008" and "CUDA_ERROR_FAKE" in d.message and "launching" in d.message


def test_reference_agrees_on_the_constant_program(fake):
    src = "func @main() -> (i32[3]) {\n  %0 = const {value = [1, -2, 3]} : i32[3]\n  return %0\n}\n"
    f = mind.compile(src, backend="cuda")
    np.testing.assert_array_equal(f(), run_reference(f.function, [])[0])


def test_a_contiguous_view_is_copied_from_its_first_element(fake):
    """A slice returned as it is: one device-to-device copy from the view's offset (the second row)."""
    f = mind.compile("func @main(%x: i32[2, 3]) -> (i32[1, 3]) {\n  %0 = slice(%x) {start = [1, 0], stop = [2, 3], "
                     "step = [1, 1]} : i32[1, 3]\n  return %0\n}\n", backend="cuda")
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(f(x), x[1:2])
    assert fake.launches == []


@pytest.mark.parametrize("stream,waits", [(None, []), (1, []), (2, [(7, 2)]), (0x5555, [(7, 0x5555)])])
def test_a_device_argument_from_another_stream_is_waited_for_on_the_gpu(fake, stream, waits):
    """An argument's producer stream (``__cuda_array_interface__``'s ``stream``) is waited for by an
    event on the runtime's stream (7 here), never by blocking the host: none for the legacy default
    stream (1), which the runtime's blocking stream follows anyway, nor for no stream at all."""
    f = mind.compile(PROGRAM, backend="cuda", device_results=True)
    x = np.arange(165, dtype=np.float32).reshape(33, 5)
    (_, ptr) = fake.cuMemAllocAsync(x.nbytes, 7)
    arg = DeviceBuffer(ptr, (33, 5), "<f4")
    if stream is not None:
        arg.__cuda_array_interface__["stream"] = stream
    f(arg, arg)
    assert fake.stream_waits == waits and fake.synchronized == []


def test_a_program_unloads_its_modules_and_event_when_it_goes(fake):
    """A compiled program's kernel modules (and its stream-wait event) leave the GPU with it."""
    import gc

    f = mind.compile(PROGRAM, backend="cuda", device_results=True)
    x = np.arange(165, dtype=np.float32).reshape(33, 5)
    (_, ptr) = fake.cuMemAllocAsync(x.nbytes, 7)
    arg = DeviceBuffer(ptr, (33, 5), "<f4")
    arg.__cuda_array_interface__["stream"] = 5  # so the program makes its event
    f(arg, arg)
    assert fake.released == []
    del f
    gc.collect()
    modules = [r for r in fake.released if r != "event"]
    assert "event" in fake.released and len(modules) == 1  # the event and the one kernel module
