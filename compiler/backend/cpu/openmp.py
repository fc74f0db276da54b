"""Find and load the OpenMP runtime that runs the kernels' parallel loops.

Two ABIs (see ``kmpc_gomp``):
* ``"gomp"``: GCC's libgomp.  MLIR's ``__kmpc_*`` calls are defined on top of it (``kmpc_gomp``).
  Preferred: it loads and starts its threads several times faster than Intel OpenMP initializes,
  which every new process pays before its first parallel loop (``docs/backend-cpu.md``, Threads).
* ``"kmpc"``: the LLVM/Intel runtime that implements ``__kmpc_*`` itself: pip ``intel-openmp``
  (``libiomp5.so`` in ``<venv>/lib``, a pinned dependency) or Debian ``libomp5-*`` (``libomp.so.5``);
  used when libgomp is absent, when a module needs more of the ABI than the adapter covers, or when
  chosen (the ``openmp`` option, ``kmpc``, or ``openmp_lib``: the path of such a runtime).
Runtimes are loaded with RTLD_GLOBAL so kernel libraries resolve against them.  The ABI choice
changes the object code, so it is part of every cache key (``CpuOptions.abi``).  The options come
from the caller (``cpu.options``); what this module remembers are facts of the process: where the
runtimes are on this machine, which it loaded, and the fork handler's list of serial switches.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
import weakref
from typing import Any

__all__ = ["load_openmp_runtime", "preferred_abi", "runtime_path", "bind_runtime",
           "register_serial_switch", "serial_after_fork", "ABIS", "OpenMPUnavailable"]

ABIS = ("gomp", "kmpc")
_LOADED: dict[str, ctypes.CDLL] = {}
"""The OpenMP runtimes loaded into the process (a runtime is never unloaded)."""
_FOUND: dict[str, str | None] = {}
"""Where each ABI's runtime is on this machine (searched once per process)."""


def runtime_path(abi: str, lib: str | None = None) -> str | None:
    """Absolute path of a runtime with ``abi`` (``"gomp"`` or ``"kmpc"``), or None if there is none;
    ``lib`` (the ``openmp_lib`` option) is the LLVM/Intel runtime to use if it exists."""
    if abi == "kmpc" and lib:
        return lib if os.path.exists(lib) else None
    if abi not in _FOUND:  # each search runs once per process
        _FOUND[abi] = _search_gomp() if abi == "gomp" else _search_kmpc()
    return _FOUND[abi]


def preferred_abi(choice: str | None = None, lib: str | None = None) -> str | None:
    """The ABI new threaded kernels are built for: ``choice`` (the ``openmp`` option) if given and
    its runtime exists, ``kmpc`` when ``lib`` (``openmp_lib``) names a runtime, else libgomp when
    present; None: no runtime."""
    if choice in ABIS:
        return choice if runtime_path(choice, lib) else None
    for abi in ("kmpc", "gomp") if lib else ABIS:
        if runtime_path(abi, lib):
            return abi
    return None


def _search_gomp() -> str | None:
    machine = os.uname().machine
    for c in (f"/usr/lib/{machine}-linux-gnu/libgomp.so.1", f"/lib/{machine}-linux-gnu/libgomp.so.1",
              "/usr/lib64/libgomp.so.1", "/usr/lib/libgomp.so.1"):
        if os.path.exists(c):
            return c
    return None


def _search_kmpc() -> str | None:
    for c in (os.path.join(sys.prefix, "lib", "libiomp5.so"), os.path.join(sys.base_prefix, "lib", "libiomp5.so")):
        if os.path.exists(c):  # the pip runtime: found without the glob over /usr/lib
            return c
    candidates = sorted(glob.glob("/usr/lib/llvm-*/lib/libomp.so*"), reverse=True)
    candidates += ["/usr/lib/x86_64-linux-gnu/libomp.so.5", "/usr/lib/x86_64-linux-gnu/libiomp5.so"]
    for c in candidates:
        if os.path.exists(c):
            return c
    return None


class OpenMPUnavailable(Exception):
    """A module needs an OpenMP runtime that this machine does not have."""


def bind_runtime(llvm_ir: str, abi: str | None, lib: str | None = None, teams: bool = False) -> tuple[str, str | None]:
    """The module's text for the runtime it will run on, and that runtime's ABI (None: the module
    starts no OpenMP team).  libgomp when ``abi`` (the preferred one) is ``gomp`` and the module's
    ``__kmpc_*`` calls are within what ``kmpc_gomp`` defines; else an LLVM/Intel runtime (``lib``, or
    one found).  ``teams``: the module also calls prebuilt code that starts teams through
    ``GOMP_parallel`` (the threaded GEMM driver), which both runtimes export; the module then
    defines the serial switch that code reads."""
    if "@__kmpc_" not in llvm_ir and not teams:
        return llvm_ir, None
    from .kmpc_gomp import adaptable, define_serial_switch, link_kmpc_on_gomp
    if abi == "gomp" and adaptable(llvm_ir):
        linked = link_kmpc_on_gomp(llvm_ir)
        return (define_serial_switch(linked) if teams else linked), "gomp"
    if runtime_path("kmpc", lib) is None:
        raise OpenMPUnavailable("the kernel's parallel loops need an LLVM/Intel OpenMP runtime (libiomp5 or "
                                "libomp): none was found; install intel-openmp or compile with threads=1")
    return (define_serial_switch(llvm_ir) if teams else llvm_ir), "kmpc"


_LOAD_LOCK = threading.Lock()


def load_openmp_runtime(abi: str, lib: str | None = None) -> str | None:
    """Load the runtime of ``abi`` (``lib``: see ``runtime_path``) globally (idempotent,
    thread-safe); returns its path or None if there is none."""
    path = runtime_path(abi, lib)
    if path is None:
        return None
    if path not in _LOADED:
        with _LOAD_LOCK:
            if path not in _LOADED:
                if abi == "gomp":
                    _LOADED[path] = _load_gomp(path)
                else:
                    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    _set_runtime_defaults(lib)
                    _LOADED[path] = lib
    return path


GOMP_SPIN_VARS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
"""libgomp's idle-wait settings, which the user's environment may decide."""
DEFAULT_GOMP_SPINCOUNT = 30000
"""Idle workers spin this many iterations (about 1 ms here) before sleeping; libgomp's own default
(300000, about 9 ms of a core after every parallel region) halves a threaded kernel's throughput
when another process wants the cores (``docs/backend-cpu.md``, Threads)."""


def _load_gomp(path: str) -> ctypes.CDLL:
    """Load libgomp with ``GOMP_SPINCOUNT`` at MIND's default unless the environment decides it;
    registers the fork handler (``serial_after_fork``).

    Why through the environment: libgomp reads its spin count in its load-time constructor, from the
    environment only, and exports no call that sets it (unlike Intel OpenMP's ``kmp_set_defaults``,
    which ``_set_runtime_defaults`` uses).  So the variable is set for the ``dlopen`` alone, under
    ``_LOAD_LOCK``, and removed at once: child processes see the user's environment.  This is the one
    write of the environment in the backend; the settings of MIND itself are never read from it below
    the front door (``options``)."""
    os.register_at_fork(after_in_child=_after_fork_in_child)
    if any(v in os.environ for v in GOMP_SPIN_VARS):
        return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    os.environ["GOMP_SPINCOUNT"] = str(DEFAULT_GOMP_SPINCOUNT)
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


# Fork safety (libgomp's threads do not survive a fork; see kmpc_gomp.SERIAL_SWITCH): the serial
# switch of every loaded kernel built for libgomp, by the object that keeps its code alive (a CDLL
# or a JitObject), so that a switch is never written after its code is gone.
_SWITCHES: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_SWITCH_LOCK = threading.Lock()
_FORKED_CHILD: list[bool] = [False]  # whether this process was forked after libgomp was loaded


def register_serial_switch(owner: Any, address: int) -> None:
    """Track the serial switch at ``address`` (in code that ``owner`` keeps alive); in a child
    forked after libgomp was loaded, set it at once."""
    if not address:
        return
    with _SWITCH_LOCK:
        _SWITCHES[owner] = address
    if _FORKED_CHILD[0]:
        ctypes.c_int32.from_address(address).value = 1


def serial_after_fork() -> bool:
    """Whether this process is a child forked after libgomp was loaded (its kernels run serially)."""
    return _FORKED_CHILD[0]


def _after_fork_in_child() -> None:
    global _SWITCH_LOCK
    _SWITCH_LOCK = threading.Lock()  # another thread may have held it at the fork
    _FORKED_CHILD[0] = True
    for address in list(_SWITCHES.values()):
        ctypes.c_int32.from_address(address).value = 1


_AFFINITY_VARS = ("KMP_AFFINITY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")
_BLOCKTIME_VARS = ("KMP_BLOCKTIME", "OMP_WAIT_POLICY", "KMP_LIBRARY")
DEFAULT_BLOCKTIME_MS = 1


def runtime_defaults() -> str:
    """The ``kmp_set_defaults`` string MIND applies (``|``-separated; empty when the user's
    environment already decides both settings)."""
    parts = []
    if not any(v in os.environ for v in _AFFINITY_VARS):
        # No thread binding, said explicitly: "none" keeps the placement and the start-up cost of the
        # default.  "disabled" started a little faster, but a child forked after the first parallel
        # region then aborts on an assertion in the runtime's affinity code at its own first region;
        # with "none" the child runs (tested).
        parts.append("KMP_AFFINITY=none")
    if not any(v in os.environ for v in _BLOCKTIME_VARS):
        # Idle workers spin this long before sleeping.  The runtime's default (200 ms) starves other
        # threads of the process (numpy's OpenBLAS, torch) and other processes after every kernel;
        # 0 makes every parallel region pay a futex wake-up of the workers (a scheduled matmul enters
        # one region per K tile); 1 ms covers back-to-back regions and calls.
        parts.append(f"KMP_BLOCKTIME={DEFAULT_BLOCKTIME_MS}")
    return "|".join(parts)


def _set_runtime_defaults(lib: ctypes.CDLL) -> None:
    """``kmp_set_defaults`` changes this runtime's defaults only (no environment variable is set; it
    overrides the environment, hence the checks in ``runtime_defaults``) and must come before the
    runtime initializes: one call, since the call itself initializes it."""
    text = runtime_defaults()
    if not text:
        return
    try:
        set_defaults = lib.kmp_set_defaults
    except AttributeError:
        return
    set_defaults.argtypes = [ctypes.c_char_p]
    set_defaults.restype = None
    set_defaults(text.encode())
