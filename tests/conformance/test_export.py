"""`mind export`: StableHLO text and ONNX bytes carry the spec's semantics, deterministically; what
a target cannot express is E6003 with the op and label."""

from __future__ import annotations

import numpy as np
import pytest

from mind.cli.main import main as cli
from mind.compiler.export import onnx as onnx_export
from mind.compiler.export import stablehlo
from mind.compiler.export.common import specialize
from mind.diagnostics import MindError
from mind.ir.parser import parse_module

DIV = """func @main(%a: i32[4], %b: i32[]) -> (i32[4], i64[4]) {
  %0 = div(%a, %b) : i32[4]
  %f = convert(%a) {dtype = f32} : f32[4]
  %1 = convert(%f) {dtype = i64} : i64[4]
  return %0, %1
}
"""
CONV_I32 = """func @main(%x: i32[1, 2, 2, 1], %w: i32[1, 1, 1, 1]) -> (i32[1, 2, 2, 1]) {
  %0 = conv2d(%x, %w) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], rhs_dilation = [1, 1]} : i32[1, 2, 2, 1]
  return %0
}
"""
SYMBOLIC = """func @main(%x: f32[N, 2]) -> (f32[2, N]) where N >= 1 {
  %0 = transpose(%x) {permutation = [1, 0]} : f32[2, N]
  return %0
}
"""


def fn_of(text: str):
    return parse_module(text, "t.mir").functions[0]


def read_fields(data: bytes) -> list[tuple[int, int, object]]:
    """A protocol-buffers wire reader: (field number, wire type, int or bytes) in order."""
    out, i = [], 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value
    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, wire, varint()))
        elif wire == 2:
            n = varint()
            out.append((number, wire, data[i:i + n]))
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def onnx_ops(model: bytes) -> list[str]:
    graph = next(v for n, _w, v in read_fields(model) if n == 7)
    nodes = [v for n, _w, v in read_fields(graph) if n == 1]
    return [next(v.decode() for n, _w, v in read_fields(node) if n == 4) for node in nodes]


def test_stablehlo_guards_integer_division_and_saturates_conversion():
    text = stablehlo.export_function(fn_of(DIV))
    assert text.count('"stablehlo.divide"') == 1 and text.count('"stablehlo.select"') >= 2
    assert "dense<-2147483648>" in text  # the INT_MIN / -1 guard
    assert "dense<0x5F000000>" in text  # 2^63 as f32: the saturation bound of f32 → i64
    assert text == stablehlo.export_function(fn_of(DIV))


def test_onnx_model_is_deterministic_and_guarded():
    model = onnx_export.export_function(fn_of(DIV))
    assert model == onnx_export.export_function(fn_of(DIV))
    ops = onnx_ops(model)
    assert ops.count("Div") == 1 and "Where" in ops and ops[-2:] == ["Identity", "Identity"]
    fields = read_fields(model)
    assert fields[0] == (1, 0, 9)  # ir_version
    opset = next(v for n, _w, v in fields if n == 8)
    assert read_fields(opset) == [(1, 2, b""), (2, 0, onnx_export.OPSET)]


def test_integer_conv2d_cannot_be_expressed_in_onnx():
    with pytest.raises(MindError) as ei:
        onnx_export.export_function(fn_of(CONV_I32))
    d = ei.value.diagnostics[0]
    assert (d.code, d.label) == ("E6003", "conv2d.semantics") and "float" in d.message
    assert "stablehlo.convolution" in stablehlo.export_function(fn_of(CONV_I32))


def test_symbolic_dims_need_bindings(tmp_path, capsys):
    src = tmp_path / "t.mir"
    src.write_text(SYMBOLIC)
    assert cli(["export", "--to", "stablehlo", str(src)]) == 1
    assert "E6003" in capsys.readouterr().err
    assert cli(["export", "--to", "stablehlo", str(src), "--bind", "N=0"]) == 2  # E6009: a usage error
    assert "E6009" in capsys.readouterr().err
    assert cli(["export", "--to", "stablehlo", str(src), "--bind", "N=3"]) == 0
    assert "tensor<2x3xf32>" in capsys.readouterr().out
    assert cli(["export", "--to", "onnx", str(src), "--bind", "N=3"]) == 2
    assert "-o OUT.onnx" in capsys.readouterr().err
    out = tmp_path / "t.onnx"
    assert cli(["export", "--to", "onnx", str(src), "--bind", "N=3", "-o", str(out)]) == 0
    assert onnx_ops(out.read_bytes()) == ["Transpose", "Identity"]
    assert cli(["export", "--to", "onnx", str(src), "--bind", "N", "-o", str(out)]) == 2


def test_specialize_rebuilds_types():
    spec = specialize(fn_of(SYMBOLIC), {"N": 4})
    assert [str(p.type) for p in spec.params] == ["f32[4, 2]"] and str(spec.results[0].type) == "f32[2, 4]"


def test_exported_models_run_with_the_spec_semantics():
    ort = pytest.importorskip("onnxruntime", reason="the conformance-onnxruntime extra is not installed")
    sess = ort.InferenceSession(onnx_export.export_function(fn_of(DIV)), providers=["CPUExecutionProvider"])
    a = np.array([7, -7, np.iinfo(np.int32).min, 5], dtype=np.int32)
    q, c = sess.run(None, {"in_a": a, "in_b": np.array(0, dtype=np.int32)})
    assert q.tolist() == [0, 0, 0, 0] and c.tolist() == [7, -7, -2**31, 5]
    q, _ = sess.run(None, {"in_a": a, "in_b": np.array(-1, dtype=np.int32)})
    assert q.tolist() == [-7, 7, np.iinfo(np.int32).min, -5]
