"""ONNX Runtime as a MIND implementation: Core IR → an ONNX model (``mind export --to onnx``) →
``onnxruntime.InferenceSession`` on the CPU execution provider (default graph optimizations).

    mind conformance run --impl python:mind.conformance.adapters.onnxruntime:factory \\
        --expect conformance/adapters/onnxruntime.expect

Install with ``pip install 'mind-lang[conformance-onnxruntime]'``.  The exporter writes MIND's total
semantics into the graph (guarded division, saturating casts, clipped gather indices), so what the
suite finds is ONNX Runtime's behaviour on that graph; integer conv2d is not expressible in ONNX
(the case is answered ``unsupported``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from mind.conformance.adapters.common import concrete, exported, front


class OrtAdapter:
    profiles = ("core", "i64", "f64", "symbolic", "diagnostics")

    def __init__(self) -> None:
        import onnxruntime

        self.ort = onnxruntime
        self.name = "ONNX Runtime (CPUExecutionProvider)"
        self.version = f"onnxruntime {onnxruntime.__version__}"
        self._sessions: dict[bytes, Any] = {}

    def _session(self, model: bytes) -> Any:
        if model not in self._sessions:
            opts = self.ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.log_severity_level = 3
            self._sessions[model] = self.ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        return self._sessions[model]

    def prepare(self, ir: str, function: str) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
        from mind.compiler.export.onnx import export_function

        fn = front(ir, function)

        def run(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
            spec = concrete(fn, inputs)
            model = exported(export_function, spec)
            feeds = {f"in_{p.name}": np.asarray(inputs[p.name], order="C") for p in spec.params}
            return [np.asarray(r) for r in self._session(model).run(None, feeds)]
        return run


def factory() -> OrtAdapter:
    return OrtAdapter()
