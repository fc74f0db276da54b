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

from typing import Any, Mapping

import numpy as np

from mind.conformance.adapters.common import Adapter, exported


class OrtAdapter(Adapter):

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

    def execute(self, fn: Any, inputs: Mapping[str, np.ndarray]) -> list[Any]:
        from mind.compiler.export.onnx import export_function

        model = exported(export_function, fn)
        feeds = {f"in_{p.name}": np.asarray(inputs[p.name], order="C") for p in fn.params}
        return self._session(model).run(None, feeds)


def factory() -> OrtAdapter:
    return OrtAdapter()
