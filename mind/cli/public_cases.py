"""MIND as the implementation under the public conformance cases (``mind conformance run-public``):
each case's program goes through what ``mind check``, ``mind verify`` and ``mind run`` do, and what
happened becomes an ``Observation`` for ``mind.conformance.public_cases.judge``.

* ``input.source``: compiled by the frontend (``compile_source``, no cache);
* ``input.ir_module``: read as ``mind verify`` reads a dump (any public encoding, or Core IR text;
  ``verify.dump.verify_text``), the first finding being the case's error;
* the program runs (on ``backend``, no arguments) when the case expects a result or an error that
  compiling did not give: the function it runs is the one without parameters (``main`` if there are
  several); a program with none is not applicable.

The first diagnostic is the one compared; its public catalogue code comes from
``verify.public_codes.public_code``.  Anything but a ``MindError`` escaping MIND is an internal error
(E7009) of that case, never of the run.  This module sits at the CLI layer because it uses the
frontend, the verifier and the backends together; the case format and the verdict are
``mind.conformance.public_cases``.
"""

from __future__ import annotations

from typing import Any

from mind.conformance.public_cases import Observation, PublicCase, Verdict, judge, not_applicable
from mind.diagnostics import Diagnostic, MindError

#: The public spec's profiles MIND claims: its backends here are CPU backends.
PROFILES = ("cpu",)


def run_case(case: PublicCase, backend: str) -> Verdict:
    if case.profile not in PROFILES:
        return not_applicable(case, f"profile {case.profile!r}: MIND runs the public spec's "
                                    f"{'/'.join(PROFILES)} profile")
    try:
        obs = observe(case, backend)
    except Exception as exc:  # a bug in MIND: this case's failure, reported as E7009
        obs = Observation("error", "E7009", "E7009", f"internal compiler error: {type(exc).__name__}: {exc}")
    return judge(case, obs)


def observe(case: PublicCase, backend: str) -> Observation:
    from mind.ir.core import Function

    try:
        module = _compile(case)
    except MindError as exc:
        return _error(exc.diagnostics[0])
    obs = Observation(ir_text=module.text())
    if case.result is None and case.status != "error":
        return obs  # nothing to run
    runnable = [f for f in module.functions if not f.params]
    fn: Function | None = runnable[0] if len(runnable) == 1 else module.function("main")
    if fn is None or fn.params:
        obs.not_applicable = ("the program has " + ("several functions without parameters and none is `main`"
                                                    if runnable else "no function without parameters")
                              + ", so there is nothing to run without arguments")
        return obs
    from mind.backends import compile_for

    try:
        obs.results = [_array(r) for r in compile_for(fn, backend)([])]
    except MindError as exc:
        return _error(exc.diagnostics[0])
    return obs


def _compile(case: PublicCase) -> Any:
    if case.kind == "source":
        from mind.compiler.frontend.api import compile_source

        return compile_source(case.text, case.id + ".mind")
    from mind.verify.dump import verify_text

    rep = verify_text(case.text, case.id + ".ir")
    if rep.findings:
        raise MindError([f.diag for f in rep.findings], rep.sources)
    return rep.module


def _error(d: Diagnostic) -> Observation:
    from mind.verify.public_codes import public_code

    return Observation.of_error(d, public_code(d))


def _array(value: Any) -> Any:
    import numpy as np

    return np.asarray(value)
