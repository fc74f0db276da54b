"""The few ONNX protobuf messages MIND writes, encoded by hand (docs/export.md says why).

Protocol buffers' wire format is small: every field is a varint key ``(number << 3) | wire type``
followed by a varint (type 0) or a length-prefixed byte string (type 2: strings, bytes, nested
messages).  Fields are written in field-number order with no unknown fields, so the bytes are a pure
function of the model: exporting twice gives identical files.  Field numbers are those of ONNX's
``onnx.proto`` (IR version 9).
"""

from __future__ import annotations

from typing import Iterable, Sequence


def varint(n: int) -> bytes:
    """Base-128 varint; negative int64 values are written as their 64-bit two's complement."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_int(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return varint((number << 3) | 2) + varint(len(data)) + data


def message(*parts: bytes | Iterable[bytes]) -> bytes:
    out = bytearray()
    for p in parts:
        if isinstance(p, (bytes, bytearray)):
            out += p
        else:
            for q in p:
                out += q
    return bytes(out)


# ---- ONNX messages ----------------------------------------------------------------------------

ELEM_TYPE = {"f32": 1, "i32": 6, "i64": 7, "bool": 9, "f64": 11}
ATTR_INT, ATTR_TENSOR, ATTR_INTS = 2, 4, 7


def tensor(name: str, dtype: str, dims: Sequence[int], raw: bytes) -> bytes:
    """TensorProto: dims (1), data_type (2), name (8), raw_data (9, little-endian)."""
    return message([field_int(1, d) for d in dims], field_int(2, ELEM_TYPE[dtype]), field_bytes(8, name),
                   field_bytes(9, raw))


def attribute_int(name: str, value: int) -> bytes:
    return message(field_bytes(1, name), field_int(3, value), field_int(20, ATTR_INT))


def attribute_ints(name: str, values: Sequence[int]) -> bytes:
    return message(field_bytes(1, name), [field_int(8, v) for v in values], field_int(20, ATTR_INTS))


def attribute_tensor(name: str, t: bytes) -> bytes:
    return message(field_bytes(1, name), field_bytes(5, t), field_int(20, ATTR_TENSOR))


def node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str,
         attributes: Sequence[bytes] = ()) -> bytes:
    """NodeProto: input (1), output (2), name (3), op_type (4), attribute (5)."""
    return message([field_bytes(1, i) for i in inputs], [field_bytes(2, o) for o in outputs], field_bytes(3, name),
                   field_bytes(4, op_type), [field_bytes(5, a) for a in attributes])


def value_info(name: str, dtype: str, shape: Sequence[int]) -> bytes:
    """ValueInfoProto { name (1), type (2): TypeProto { tensor_type (1): { elem_type (1), shape (2) } } }."""
    dims = [field_bytes(1, field_int(1, d)) for d in shape]
    tensor_type = message(field_int(1, ELEM_TYPE[dtype]), field_bytes(2, message(dims)))
    return message(field_bytes(1, name), field_bytes(2, field_bytes(1, tensor_type)))


def graph(name: str, nodes: Sequence[bytes], inputs: Sequence[bytes], outputs: Sequence[bytes]) -> bytes:
    """GraphProto: node (1), name (2), input (11), output (12)."""
    return message([field_bytes(1, n) for n in nodes], field_bytes(2, name), [field_bytes(11, i) for i in inputs],
                   [field_bytes(12, o) for o in outputs])


def model(g: bytes, opset: int, producer: str, version: str, ir_version: int = 9) -> bytes:
    """ModelProto: ir_version (1), producer_name (2), producer_version (3), graph (7), opset_import (8)."""
    opset_id = message(field_bytes(1, ""), field_int(2, opset))
    return message(field_int(1, ir_version), field_bytes(2, producer), field_bytes(3, version), field_bytes(7, g),
                   field_bytes(8, opset_id))
