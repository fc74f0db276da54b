"""What ``--impl`` names, resolved once at the front door into how to start it.

* a built-in backend name (``reference``, ``cpu``, and ``cuda`` once ``mind.backends`` registers it):
  served in a subprocess by ``mind.conformance.host`` through :class:`BackendAdapter`;
* ``python:package.module:factory``: an in-process adapter, served the same way;
* ``exec:COMMAND``: any program that speaks the protocol (``mind.conformance.protocol``).

All three reach the runner as one :class:`Launch` -- a command line -- so crashes, hangs and
malformed answers are handled in one place (``mind.conformance.workers``) for every implementation.
"""

from __future__ import annotations

import importlib
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mind.conformance.protocol import CodedError
from mind.diagnostics import error

_PYTHON_SPEC = re.compile(r"^python:([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class Launch:
    """How to start an implementation: ``impl`` as the user wrote it, and the command line."""

    impl: str
    argv: tuple[str, ...]


def resolve(impl: str) -> Launch:
    """The launch of ``--impl IMPL`` (E7002 for a malformed one, E6002 for an unknown backend)."""
    from mind.backends import BACKENDS, require

    host = (sys.executable, "-m", "mind.conformance.host")
    if impl.startswith("exec:"):
        try:
            argv = tuple(shlex.split(impl[len("exec:"):]))
        except ValueError as exc:
            raise error("E7002", f"--impl `{impl}`: cannot split the command ({exc})") from None
        if not argv:
            raise error("E7002", "--impl exec: needs a command, e.g. `exec:./my-impl --flag`")
        return Launch(impl, argv)
    if impl.startswith("python:"):
        if not _PYTHON_SPEC.match(impl):
            raise error("E7002", f"--impl `{impl}` is not of the form python:package.module:factory")
        return Launch(impl, host + (impl,))
    if impl in BACKENDS:
        require(impl)  # a backend without its device here: E6002 before any case runs
        return Launch(impl, host + (impl,))
    raise error("E6002", f"unknown implementation `{impl}`",
                help="--impl is a built-in backend (" + ", ".join(sorted(BACKENDS)) +
                     "), python:package.module:factory, or exec:COMMAND")


def load_adapter(impl: str) -> Any:
    """The in-process adapter object of a built-in backend or a ``python:`` spec."""
    m = _PYTHON_SPEC.match(impl)
    if m is None:
        return BackendAdapter(impl)
    module = importlib.import_module(m.group(1))
    return getattr(module, m.group(2))()


def frontend(ir: str, function: str) -> Any:
    """The verified Core IR function of a case, read by MIND's parser and verifier; a diagnostic is
    a CodedError at the stage (parse, verify, run) where it was found."""
    from mind.diagnostics import MindError
    from mind.ir.parser import parse_module
    from mind.ir.verify import verify_module
    from mind.calling import select_function

    stage = "parse"
    try:
        module = parse_module(ir, "case.mir")
        stage = "verify"
        verify_module(module)
        stage = "run"
        return select_function(module, function)
    except MindError as exc:
        raise CodedError.from_mind(exc, stage) from None


class BackendAdapter:
    """A ``mind.backends`` backend as an adapter: parse, verify, compile and run, each failure a
    coded error with the stage where it was detected."""

    profiles = ("core", "i64", "f64", "symbolic", "diagnostics")

    def __init__(self, backend: str):
        from mind.version import __version__

        self.backend = backend
        self.name = f"mind {backend} backend"
        self.version = __version__

    def prepare(self, ir: str, function: str) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
        from mind.backends import compile_for
        from mind.diagnostics import MindError

        fn = frontend(ir, function)
        try:
            runner = compile_for(fn, self.backend)
        except MindError as exc:
            raise CodedError.from_mind(exc, "run") from None

        def run(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
            try:
                return [np.asarray(r) for r in runner(inputs)]
            except MindError as exc:
                raise CodedError.from_mind(exc, "run") from None
        return run

    def answer(self, ir: str, function: str, inputs: dict[str, np.ndarray]) -> Any:
        """The answer to one case, in process (the generator checks its error cases with it)."""
        from mind.conformance.encoding import encode
        from mind.conformance.protocol import answer_with

        req = {"ir": ir, "function": function, "inputs": [{"name": k, **encode(v)} for k, v in inputs.items()]}
        return answer_with(self.prepare, req)
