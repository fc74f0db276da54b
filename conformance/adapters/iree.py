"""IREE as a MIND implementation: Core IR → StableHLO text (``mind export --to stablehlo``) →
``iree-base-compiler`` (llvm-cpu, host CPU) → ``iree-base-runtime``'s ``local-task`` driver.

    mind conformance run --impl python:mind.conformance.adapters.iree:factory \\
        --expect conformance/adapters/iree.expect

Install with ``pip install 'mind-lang[conformance-iree]'``.  The exporter already writes MIND's
total semantics into the StableHLO (guarded division, saturating conversion, clamped gather), so
what the suite finds here is IREE's own behaviour on that StableHLO.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from mind.conformance.adapters.common import Adapter, exported


class IreeAdapter(Adapter):

    def __init__(self) -> None:
        import iree.compiler
        import iree.runtime  # noqa: F401  (fail here, at the handshake, when the runtime is missing)

        self.name = "IREE llvm-cpu (local-task)"
        self.version = f"iree-base-compiler {getattr(iree.compiler, '__version__', None) or _dist_version()}"
        self._compiled: dict[str, Any] = {}

    def _function(self, text: str, name: str) -> Any:
        import iree.compiler as ic
        import iree.runtime as rt

        if text not in self._compiled:
            vmfb = ic.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                  extra_args=["--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false"])
            config = rt.Config("local-task")
            ctx = rt.SystemContext(config=config)
            ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
            self._compiled[text] = ctx.modules.module[name]
        return self._compiled[text]

    def execute(self, fn: Any, inputs: Mapping[str, np.ndarray]) -> list[Any]:
        from mind.compiler.export.stablehlo import export_function

        text = exported(export_function, fn)
        out = self._function(text, fn.name)(*[np.asarray(inputs[p.name], order="C") for p in fn.params])
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [o.to_host() if hasattr(o, "to_host") else o for o in outs]


def _dist_version() -> str:
    from importlib.metadata import version

    return version("iree-base-compiler")


def factory() -> IreeAdapter:
    return IreeAdapter()
