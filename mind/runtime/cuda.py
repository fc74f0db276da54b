"""Running CUDA kernels with the driver API of ``cuda-python``: a launch plan, its kernel images, buffers.

Needs NumPy and ``cuda-bindings`` only (no MLIR), so a ``mind build --target cuda`` artifact runs on
a machine that has a GPU and nothing of MIND's compiler.  Every driver failure is a coded
diagnostic naming the CUDA error (E6008 ``device error``), and a machine without the driver or a GPU
gets E6002, never a traceback.

* **Images.** Each kernel module comes as PTX and as a cubin per architecture; the device's own
  architecture's cubin is loaded when there is one, else the PTX, which the driver compiles.  PTX
  declares the ISA version it needs (``.version``); a driver older than the PTX generator refuses
  it (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), so the version is capped at what the driver supports
  (``cuDriverGetVersion``: CUDA 12.x reads PTX 8.x, 13.x reads 9.x).
* **Memory.** Buffers come from the device's stream-ordered memory pool (``cuMemAllocAsync``), its
  release threshold raised so that freed memory stays in the pool for the next call.
* **Streams.** One stream per device (blocking: it waits for the legacy default stream): copies in,
  launches, copies out, then one synchronize; device results name the stream in their interface.
* **Arguments.** NumPy arrays are copied to the device; objects with ``__cuda_array_interface__``
  (CuPy, PyTorch, Numba) or a CUDA DLPack capsule are used where they are, without a copy.
  ``device_results=True`` leaves the results on the device as ``DeviceArray`` (with
  ``__cuda_array_interface__``; ``numpy()`` copies one to the host).
"""

from __future__ import annotations

import ctypes
import re
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from mind.diagnostics import MindError, error

from .artifact import PLAN, Checked
from .memref import row_major_strides

__all__ = ["device", "unavailable", "Device", "Program", "DeviceArray", "CudaArtifact", "Binder", "bind_device_arguments",
           "cap_ptx_version", "ptx_version_for_driver"]

_DRIVER: Any = None
_DEVICES: dict[int, "Device"] = {}
_LOCK = threading.Lock()


def _driver() -> Any:
    """The driver API module, initialized (E6002 when cuda-bindings or the driver is missing)."""
    global _DRIVER
    if _DRIVER is not None:
        return _DRIVER
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        try:
            from cuda import cuda as cu  # type: ignore[no-redef]  # cuda-python before 12.6
        except ImportError:
            raise error("E6002", "the cuda backend needs cuda-bindings (cuda-python), which is not installed",
                        help="pip install cuda-python, or run with --backend cpu") from None
    try:
        (err,) = cu.cuInit(0)
    except Exception as e:  # noqa: BLE001 - cuda-bindings raises when libcuda cannot be loaded
        raise error("E6002", f"no CUDA driver on this machine ({type(e).__name__}: {str(e).strip()[:200]})",
                    help="run on a machine with an NVIDIA GPU and its driver, or with --backend cpu") from None
    if int(err) != 0:
        raise error("E6002", f"the CUDA driver did not start: {_name(cu, err)}",
                    help="check the GPU and its driver (nvidia-smi), or run with --backend cpu")
    _DRIVER = cu
    return cu


def _name(cu: Any, err: Any) -> str:
    try:
        e2, name = cu.cuGetErrorName(err)
        return name.decode() if int(e2) == 0 else f"CUDA error {int(err)}"
    except Exception:  # noqa: BLE001
        return f"CUDA error {int(err)}"


def _check(cu: Any, result: Any, what: str) -> Any:
    """The values of a driver call's result tuple, after its error code (E6008 naming the error)."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise error("E6008", f"{what} failed on the GPU: {_name(cu, err)}",
                    help="the CUDA error names the cause; CUDA_ERROR_OUT_OF_MEMORY: run on smaller inputs")
    return values[0] if len(values) == 1 else tuple(values)


def ptx_version_for_driver(driver_version: int) -> tuple[int, int]:
    """The newest PTX ISA a driver of ``cuDriverGetVersion``'s value (e.g. 12040) reads."""
    major, minor = driver_version // 1000, (driver_version % 1000) // 10
    if major >= 13:
        return (9, minor)
    if major == 12:
        return (8, min(minor, 8))
    if major == 11:
        return (7, min(minor, 8))
    return (6, 0)


def cap_ptx_version(ptx: bytes, most: tuple[int, int]) -> bytes:
    """``ptx`` with its ``.version`` lowered to ``most`` when it is newer (what the driver reads)."""
    m = re.search(rb"^\.version (\d+)\.(\d+)", ptx, re.M)
    if m is None or (int(m.group(1)), int(m.group(2))) <= most:
        return ptx
    return ptx[:m.start()] + f".version {most[0]}.{most[1]}".encode() + ptx[m.end():]


class Device:
    """One GPU: its primary context, a stream, its architecture (``sm``) and the driver's PTX limit."""

    def __init__(self, ordinal: int) -> None:
        cu = self.cu = _driver()
        count = _check(cu, cu.cuDeviceGetCount(), "counting the GPUs")
        if ordinal >= count:
            raise error("E6002", f"no GPU {ordinal} on this machine ({count} found)",
                        help="choose one with the cuda option `device` (MIND_CUDA_DEVICE)")
        self.handle = _check(cu, cu.cuDeviceGet(ordinal), "opening the GPU")
        self.ordinal = ordinal
        attr = cu.CUdevice_attribute
        major = _check(cu, cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.handle),
                       "reading the GPU's architecture")
        minor = _check(cu, cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.handle),
                       "reading the GPU's architecture")
        self.sm = f"sm_{major}{minor}"
        self.ptx_limit = ptx_version_for_driver(_check(cu, cu.cuDriverGetVersion(), "reading the driver version"))
        self.context = _check(cu, cu.cuDevicePrimaryCtxRetain(self.handle), "creating the GPU context")
        self.activate()
        # a blocking stream: it waits for the legacy default stream, where other libraries (PyTorch's
        # default) may still be writing an argument that comes without a stream of its own
        self.stream = _check(cu, cu.cuStreamCreate(0), "creating a stream")
        pool = _check(cu, cu.cuDeviceGetDefaultMemPool(self.handle), "opening the memory pool")
        try:  # keep freed memory in the pool (the default threshold 0 returns it at every synchronize)
            _check(cu, cu.cuMemPoolSetAttribute(pool, cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                                cu.cuuint64_t(2**64 - 1)), "configuring the memory pool")
        except (MindError, TypeError, ValueError, AttributeError):
            pass  # a pool that keeps its default still works
        self.lock = threading.RLock()  # a DeviceArray freed by the collector inside a run takes it too

    def activate(self) -> None:
        _check(self.cu, self.cu.cuCtxSetCurrent(self.context), "making the GPU context current")

    def alloc(self, nbytes: int) -> int:
        if nbytes == 0:
            return 0
        return int(_check(self.cu, self.cu.cuMemAllocAsync(nbytes, self.stream), f"allocating {nbytes} bytes"))

    def free(self, ptr: int) -> None:
        if ptr:
            _check(self.cu, self.cu.cuMemFreeAsync(ptr, self.stream), "freeing device memory")

    def synchronize(self) -> None:
        _check(self.cu, self.cu.cuStreamSynchronize(self.stream), "running the kernels")


def unavailable(ordinal: int = 0) -> str | None:
    """Why GPU ``ordinal`` cannot run kernels here (no cuda-bindings, no driver, no such GPU), or None."""
    try:
        device(ordinal)
    except MindError as e:
        return e.diagnostics[0].message
    return None


def device(ordinal: int = 0) -> Device:
    """The device ``ordinal``, opened once per process (E6002 without a driver or such a GPU)."""
    with _LOCK:
        d = _DEVICES.get(ordinal)
        if d is None:
            d = _DEVICES[ordinal] = Device(ordinal)
        return d


class DeviceArray:
    """A result left on the GPU: ``shape``, ``dtype``, ``__cuda_array_interface__``; ``numpy()`` copies
    it to the host.  Its memory returns to the pool when it is garbage collected."""

    def __init__(self, dev: Device, ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.device, self.ptr, self.shape, self.dtype = dev, ptr, tuple(shape), np.dtype(dtype)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "strides": None,
                "version": 3, "stream": int(self.device.stream)}  # a consumer waits for the stream that writes it

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            with self.device.lock:
                self.device.activate()
                cu = self.device.cu
                _check(cu, cu.cuMemcpyDtoHAsync(out.ctypes.data, self.ptr, out.nbytes, self.device.stream),
                       "copying a result to the host")
                self.device.synchronize()
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __del__(self) -> None:
        try:
            with self.device.lock:
                self.device.free(self.ptr)
        except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone already
            pass


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DL_CODES = {(2, 32): "float32", (2, 64): "float64", (0, 32): "int32", (0, 64): "int64", (6, 8): "bool", (1, 8): "bool"}


class _DeviceRef:
    """An argument already on the GPU: its address, dtype and shape, and what keeps it alive."""

    def __init__(self, ptr: int, dtype: np.dtype, shape: tuple[int, ...], keep: Any, stream: int | None = None) -> None:
        self.ptr, self.dtype, self.shape, self.keep, self.stream = ptr, dtype, shape, keep, stream


def _device_ref(a: Any) -> _DeviceRef | None:
    """A zero-copy view of ``a`` when it lives on a GPU (``__cuda_array_interface__`` or a CUDA DLPack
    capsule), else None.  E6009 for a non-contiguous device array (a copy would hide the cost)."""
    if isinstance(a, np.ndarray):
        return None
    if isinstance(a, DeviceArray):
        return _DeviceRef(a.ptr, a.dtype, a.shape, a)
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(n) for n in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != row_major_strides(shape, dtype.itemsize):
            raise error("E6009", "a device array argument is not C-contiguous", help="pass a contiguous copy")
        stream = cai.get("stream")
        return _DeviceRef(int(cai["data"][0]), dtype, shape, a, stream if stream not in (None, 0) else None)
    dl_device = getattr(a, "__dlpack_device__", None)
    if dl_device is not None and hasattr(a, "__dlpack__") and dl_device()[0] == 2:  # kDLCUDA
        capsule = a.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        t = _DLTensor.from_address(get(capsule, b"dltensor"))
        shape = tuple(t.shape[i] for i in range(t.ndim))
        if t.strides and tuple(t.strides[i] for i in range(t.ndim)) != row_major_strides(shape, 1):  # in elements
            raise error("E6009", "a DLPack device argument is not C-contiguous", help="pass a contiguous copy")
        name = _DL_CODES.get((t.code, t.bits))
        if name is None or t.lanes != 1:
            raise error("E6009", f"a DLPack argument of an element type MIND has no dtype for (code {t.code}, "
                                 f"{t.bits} bits)")
        return _DeviceRef(int(t.data or 0) + int(t.byte_offset), np.dtype(name), shape, (a, capsule))
    return None


class Binder:
    """``bind_device_arguments`` for one function, its parameters' dtypes and shapes read once: a
    call with device arguments then costs a few dictionary lookups per argument (the per-call
    overhead the runtime is measured by)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.concrete = not fn.symbols()
        self.params = [(p.name, str(p.type)) for p in fn.params]
        self.expected = [(np.dtype(p.type.dtype.numpy), tuple(p.type.shape)) for p in fn.params] if self.concrete else []

    def __call__(self, args: Sequence[Any] | Mapping[str, Any]) -> tuple[list[Any], dict[str, int]]:
        if self.concrete and not isinstance(args, Mapping) and len(args) == len(self.expected):
            out: list[Any] = []
            for a, (dtype, shape), (name, typ) in zip(args, self.expected, self.params):
                ref = _device_ref(a)
                if ref is None:
                    return bind_device_arguments(self.fn, args)  # a host array among them: the full check
                if ref.dtype != dtype or ref.shape != shape:
                    raise error("E6009", f"argument %{name} is {ref.dtype}{list(ref.shape)}, expected {typ}")
                out.append(ref)
            return out, {}
        return bind_device_arguments(self.fn, args)


def bind_device_arguments(fn: Any, args: Sequence[Any] | Mapping[str, Any]) -> tuple[list[Any], dict[str, int]]:
    """``mind.calling.bind_arguments`` for arguments that may live on the GPU.  Device arguments of a
    function without symbolic dims are checked against the parameter types directly (no host memory
    is touched); with symbolic dims, through zero-stride host stand-ins of their dtype and shape
    (which the binding copies: a cost of that case only)."""
    from mind.calling import bind_arguments

    items = list(args.items()) if isinstance(args, Mapping) else list(enumerate(args))
    refs = {key: ref for key, a in items if (ref := _device_ref(a)) is not None}
    if not refs:
        return bind_arguments(fn, args)
    if not fn.symbols():
        return _bind_concrete(fn, args, refs)
    stand_ins = [(k, np.lib.stride_tricks.as_strided(np.zeros(1, refs[k].dtype), refs[k].shape, (0,) * len(refs[k].shape))
                  if k in refs else a) for k, a in items]
    arrays, env = bind_arguments(fn, dict(stand_ins) if isinstance(args, Mapping) else [a for _, a in stand_ins])
    order = [p.name for p in fn.params] if isinstance(args, Mapping) else list(range(len(arrays)))
    return [refs.get(k, a) for k, a in zip(order, arrays)], env


def _bind_concrete(fn: Any, args: Sequence[Any] | Mapping[str, Any],
                   refs: Mapping[Any, _DeviceRef]) -> tuple[list[Any], dict[str, int]]:
    """Arguments of a function whose parameter types are concrete: each checked against its type."""
    from mind.calling import bind_arguments, canonical_bools
    from mind.spec.dtypes import from_numpy

    if isinstance(args, Mapping):
        if set(args) != {p.name for p in fn.params}:
            return bind_arguments(fn, {k: v for k, v in args.items() if k not in refs})  # E6009/E6010
        keyed = [(p.name, args[p.name]) for p in fn.params]
    else:
        if len(args) != len(fn.params):
            raise error("E6010", f"@{fn.name} takes {len(fn.params)} arguments, got {len(args)}")
        keyed = list(enumerate(args))
    out: list[Any] = []
    for (key, a), p in zip(keyed, fn.params):
        ref = refs.get(key)
        dtype, shape = (ref.dtype, ref.shape) if ref is not None else (np.asarray(a).dtype, np.shape(a))
        if from_numpy(np.dtype(dtype)) is not p.type.dtype or tuple(shape) != tuple(p.type.shape):
            raise error("E6009", f"argument %{p.name} is {np.dtype(dtype)}{list(shape)}, expected {p.type}")
        out.append(ref if ref is not None else canonical_bools(np.ascontiguousarray(a)))
    return out, {}


class _Launch:
    """A launch step, ready to go: its kernel, grid and block, and its arguments as a persistent array
    of 64-bit values (the plan's integers written once) with the array of pointers to them that the
    driver reads; a call writes only the buffer addresses (``slots``)."""

    __slots__ = ("function", "dims", "values", "params", "address", "slots", "empty", "name")

    def __init__(self, function: Any, step: Mapping[str, Any]) -> None:
        self.function, self.name = function, step["launch"][1]
        self.dims = (*step["grid"], *step["block"])
        self.empty = 0 in self.dims
        args = step["args"]
        self.values = (ctypes.c_uint64 * max(len(args), 1))()
        self.slots = []
        for i, (kind, v) in enumerate(args):
            if kind == "index":
                self.values[i] = v
            else:
                self.slots.append((i, kind, v))
        base = ctypes.addressof(self.values)
        self.params = (ctypes.c_void_p * max(len(args), 1))(*[base + 8 * i for i in range(len(args))])
        self.address = ctypes.addressof(self.params) if args else 0


class _Copy:
    """A copy step: from (kind, n) plus a byte offset to (kind, n), ``nbytes`` bytes."""

    __slots__ = ("source", "offset", "target", "nbytes")

    def __init__(self, step: Mapping[str, Any]) -> None:
        self.source, self.target = tuple(step["copy"]), tuple(step["to"])
        self.offset, self.nbytes = step.get("offset", 0), step["bytes"]


class Program:
    """A launch plan's kernels loaded on ``dev``; ``run`` follows the plan on arguments.  Everything
    a call does not change (sizes, constants, launch arguments) is worked out here, once."""

    def __init__(self, dev: Device, plan: Mapping[str, Any], images: Mapping[str, Mapping[str, bytes]]) -> None:
        from .memref import Signature

        self.device, self.plan = dev, plan
        self.signature = Signature.from_json(plan["signature"])
        cu = dev.cu
        functions: dict[tuple[str, str], Any] = {}
        with dev.lock:
            dev.activate()
            modules = {}
            for name in plan["modules"]:
                image = images[name].get(dev.sm)
                if image is None:  # no cubin for this GPU: the driver compiles the PTX
                    image = cap_ptx_version(images[name]["ptx"], dev.ptx_limit) + b"\0"
                modules[name] = _check(cu, cu.cuModuleLoadData(image), f"loading the kernel module {name}")
            for step in plan["steps"]:
                if "launch" in step:
                    mod, fn = step["launch"]
                    if (mod, fn) not in functions:
                        functions[(mod, fn)] = _check(cu, cu.cuModuleGetFunction(modules[mod], fn.encode()),
                                                      f"finding the kernel {fn}")
        self._modules = modules
        self._steps = [_Launch(functions[tuple(step["launch"])], step) if "launch" in step else _Copy(step)
                       for step in plan["steps"]]
        self._outputs = [(tuple(o.shape), np.dtype(o.dtype), int(np.prod(o.shape, dtype=np.int64)) * np.dtype(o.dtype).itemsize)
                         for o in self.signature.outputs]
        self._temps = []
        for t in plan["temps"]:
            nbytes = int(np.prod(t["shape"], dtype=np.int64)) * np.dtype(t["dtype"]).itemsize
            init = np.frombuffer(bytes.fromhex(t["init"]), np.uint8) if t.get("init") and nbytes else None
            self._temps.append((nbytes, init))
        self._event: Any = None

    def __del__(self) -> None:
        """Unload the kernel modules (and the event): a process that compiles many programs would
        otherwise keep every one's code on the GPU for its whole life."""
        dev = getattr(self, "device", None)
        if dev is None:
            return
        try:
            with dev.lock:
                dev.activate()
                for module in getattr(self, "_modules", {}).values():
                    dev.cu.cuModuleUnload(module)
                if getattr(self, "_event", None) is not None:
                    dev.cu.cuEventDestroy(self._event)
        except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone already
            pass

    def _wait_for(self, stream: int) -> None:
        """Order this device's stream after the work ``stream`` has queued (a device argument's
        producer), without blocking the host: an event recorded there, waited on here.  The legacy
        default stream (1) needs nothing: the runtime's stream is a blocking one, which the driver
        orders after it."""
        cu, dev = self.device.cu, self.device
        if stream == 1:
            return
        if self._event is None:
            self._event = _check(cu, cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "creating an event")
        _check(cu, cu.cuEventRecord(self._event, cu.CUstream(stream)), "waiting for an argument")
        _check(cu, cu.cuStreamWaitEvent(dev.stream, self._event, 0), "waiting for an argument")

    def run(self, arrays: Sequence[Any], *, device_results: bool = False) -> list[Any]:
        dev, cu, sig = self.device, self.device.cu, self.signature
        with dev.lock:
            dev.activate()
            owned: list[Any] = []
            outputs: list[int] = []
            try:
                inputs, waited = [], set()
                for a, spec in zip(arrays, sig.inputs):
                    if isinstance(a, _DeviceRef):
                        if a.stream is not None and a.stream not in waited:  # its producer must finish first
                            self._wait_for(a.stream)
                            waited.add(a.stream)
                        inputs.append(a.ptr)
                        continue
                    host = np.ascontiguousarray(a, dtype=spec.dtype)
                    ptr = dev.alloc(host.nbytes)
                    owned.append(ptr)
                    if host.nbytes:
                        _check(cu, cu.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes, dev.stream),
                               "copying an argument to the GPU")
                    inputs.append(ptr)
                outputs = [dev.alloc(nbytes) for _, _, nbytes in self._outputs]
                temps = []
                for nbytes, init in self._temps:
                    ptr = dev.alloc(nbytes)
                    owned.append(ptr)
                    if init is not None:
                        _check(cu, cu.cuMemcpyHtoDAsync(ptr, init.ctypes.data, nbytes, dev.stream),
                               "copying a constant to the GPU")
                    temps.append(ptr)
                where = {"input": inputs, "output": outputs, "temp": temps}
                for step in self._steps:
                    self._step(step, where)
                if device_results:
                    kept = [DeviceArray(dev, p, shape, dtype) for p, (shape, dtype, _) in zip(outputs, self._outputs)]
                    outputs = []  # the DeviceArrays own them now
                    return kept
                results = [np.empty(shape, dtype) for shape, dtype, _ in self._outputs]
                for r, p in zip(results, outputs):
                    if r.nbytes:
                        _check(cu, cu.cuMemcpyDtoHAsync(r.ctypes.data, p, r.nbytes, dev.stream),
                               "copying a result to the host")
                dev.synchronize()
                return results
            finally:
                for ptr in owned + outputs:
                    if isinstance(ptr, int):
                        try:
                            dev.free(ptr)
                        except MindError:
                            pass

    def _step(self, step: "_Launch | _Copy", where: Mapping[str, list[int]]) -> None:
        cu, dev = self.device.cu, self.device
        if isinstance(step, _Copy):
            if step.nbytes:
                source = where[step.source[0]][step.source[1]] + step.offset  # a view's first element
                _check(cu, cu.cuMemcpyDtoDAsync(where[step.target[0]][step.target[1]], source, step.nbytes, dev.stream),
                       "copying on the GPU")
            return
        if step.empty:
            return  # an empty loop: nothing to launch
        values = step.values
        for i, kind, n in step.slots:
            values[i] = where[kind][n]
        # the driver copies the arguments when it queues the launch: the arrays may change for the next
        _check(cu, cu.cuLaunchKernel(step.function, *step.dims, 0, dev.stream, step.address, 0),
               f"launching the kernel {step.name}")


class CudaArtifact:
    """A loaded cuda artifact (``mind.runtime.load``): call it like ``mind.compile``'s callable."""

    def __init__(self, checked: Checked) -> None:
        from mind.calling import select_function
        from mind.ir.parser import parse_module

        from .artifact import CORE_IR

        plan = checked.json(PLAN)
        self.path, self.manifest = checked.path, checked.manifest
        try:
            images = {m: {kind: checked.files[f] for kind, f in files.items()} for m, files in plan["images"].items()}
            self.sizes = {str(k): int(v) for k, v in plan["sizes"].items()}
            text = checked.files[CORE_IR].decode("utf-8")
        except (KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as e:
            raise error("E7014", f"the artifact {checked.path} is not usable: its {PLAN} does not describe "
                                 f"cuda kernels ({type(e).__name__}: {e})", help="rebuild it with `mind build`") from None
        self.function = select_function(parse_module(text, checked.path), plan.get("function"))
        self.program = Program(device(0), plan, images)
        self.signature = self.program.signature
        self._bind = Binder(self.function)

    def run(self, args: Sequence[Any] | Mapping[str, Any], *, device_results: bool = False) -> list[Any]:
        arrays, env = self._bind(args)
        if env != self.sizes:
            raise error("E6009", f"the artifact {self.path} was built for other sizes ({self.sizes}) than the "
                                 f"arguments give ({env})", help="build it again with `mind build --shapes`")
        return self.program.run(arrays, device_results=device_results)

    def __call__(self, *args: Any, device_results: bool = False, **kwargs: Any) -> Any:
        if args and kwargs:
            raise TypeError("pass arguments either positionally or by name")
        results = self.run(kwargs if kwargs else list(args), device_results=device_results)
        return results[0] if len(results) == 1 else tuple(results)
