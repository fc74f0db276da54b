"""Running a ``mind build --target cpu`` artifact: its shared object loaded from the checked bytes.

Why from the bytes and not the file: the manifest's hashes were compared with the bytes read
(``artifact.read_checked``); loading the file by its name afterwards would run whatever is there
*then*.  So the bytes go into an anonymous in-memory file (``memfd_create``) and the dynamic loader
opens that.  The descriptor stays open for the life of the process: the loader knows a library by
the name it was opened with (``/proc/self/fd/N``), and a closed, reused number would name another
library under the same name.  Where there is no ``memfd_create`` (not Linux) the bytes go to a
fresh file in a private temporary folder, loaded and then removed.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np

from mind.diagnostics import error

from . import heap
from .artifact import CORE_IR, PLAN, Checked
from .memref import AbiError, ArgBinder, Signature

__all__ = ["CpuArtifact"]

_OPEN_LIBRARIES: list[int] = []
"""The in-memory files of the libraries this process loaded (never closed: see the module's text)."""


def _dlopen_bytes(data: bytes, name: str) -> ctypes.CDLL:
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create(name, getattr(os, "MFD_CLOEXEC", 0))
        _OPEN_LIBRARIES.append(fd)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return ctypes.CDLL(f"/proc/self/fd/{fd}")
    with tempfile.TemporaryDirectory(prefix="mind-artifact-") as d:
        path = os.path.join(d, f"{name}-{len(_OPEN_LIBRARIES)}.so")
        _OPEN_LIBRARIES.append(-1)
        with open(path, "xb") as f:
            f.write(data)
        return ctypes.CDLL(path)


class CpuArtifact:
    """A loaded cpu artifact: call it like ``mind.compile``'s callable (positional arrays, or by
    parameter name), or ``run(args)`` for the list of results.  Arguments are bound by
    ``mind.calling.bind_arguments`` (the diagnostics of every backend) and must have the sizes the
    artifact was built for."""

    def __init__(self, checked: Checked) -> None:
        from mind.calling import select_function
        from mind.ir.parser import parse_module

        plan = checked.json(PLAN)
        try:
            self.signature = Signature.from_json(plan["signature"])
            self.sizes = {str(k): int(v) for k, v in plan["sizes"].items()}
            library = checked.files[plan["library"]]
            entry = str(plan["entry"])
            text = checked.files[CORE_IR].decode("utf-8")
        except (KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as e:
            raise error("E7014", f"the artifact {checked.path} is not usable: its {PLAN} does not describe a "
                                 f"cpu kernel ({type(e).__name__}: {e})", help="rebuild it with `mind build`") from None
        self.path = checked.path
        self.manifest = checked.manifest
        self.function = select_function(parse_module(text, os.path.join(checked.path, CORE_IR)), plan.get("function"))
        try:
            lib = _dlopen_bytes(library, "mind-" + self.signature.name)
            self._entry = getattr(lib, entry)
        except (OSError, AttributeError) as e:
            raise error("E6012", f"cannot load the kernel of the artifact {checked.path}: {e}",
                        help="a cpu artifact runs on x86-64 Linux with the C library it was linked against") from None
        heap.attach_library(lib)  # its intermediates' blocks cached between calls
        self._entry.restype = None
        self._entry.argtypes = [ctypes.c_void_p] * (len(self.signature.inputs) + len(self.signature.outputs))
        self._lib = lib
        self._binder = ArgBinder(self.signature)

    def run(self, args: Sequence[Any] | Mapping[str, Any]) -> list[np.ndarray]:
        from mind.calling import bind_arguments

        arrays, env = bind_arguments(self.function, args)
        if env != self.sizes:
            given = ", ".join(f"{k} = {v}" for k, v in sorted(env.items()))
            built = ", ".join(f"{k} = {v}" for k, v in sorted(self.sizes.items()))
            raise error("E6009", f"the artifact {self.path} was built for {built}; the arguments give {given}",
                        help="build it again with `mind build --shapes` for these sizes")
        ins = [np.ascontiguousarray(a, dtype=spec.dtype) for a, spec in zip(arrays, self.signature.inputs)]
        outs = [np.empty(o.shape, o.dtype) for o in self.signature.outputs]
        try:
            self._binder.run(self._entry, ins, outs)
        except AbiError as e:  # bind_arguments checked dtypes and shapes: a plan that lies
            raise error("E7014", f"the artifact {self.path} does not fit its own Core IR: {e}") from None
        return outs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args and kwargs:
            raise TypeError("pass arguments either positionally or by name")
        results = self.run(kwargs if kwargs else list(args))
        return results[0] if len(results) == 1 else tuple(results)
