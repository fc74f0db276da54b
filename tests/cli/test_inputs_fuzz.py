"""Fuzzing `mind run --input` with .npy files: valid, truncated, with mutated headers, wrong magic,
archives, odd dtypes and bools of any byte.  Never a traceback or E7009, never a hang, nothing
written but the output folder (issue 22).  Uses the hypothesis profile (`ci` / `thorough`)."""

from __future__ import annotations

import io
import os

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from cli_fuzzing import run_sandboxed

DTYPES = ["<f4", "<f8", "<i4", "<i8", "|b1", ">f4", "<u1", "<c8", "<U3", "|S2", "<M8[s]", "|V4", "<f2"]
MIND_NAMES = {"<f4": "f32", "<f8": "f64", "<i4": "i32", "<i8": "i64", "|b1": "bool"}


@st.composite
def arrays(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    raw = draw(st.binary(min_size=dtype.itemsize * int(np.prod(shape)), max_size=dtype.itemsize * int(np.prod(shape))))
    arr = np.frombuffer(raw, dtype=dtype).reshape(shape) if dtype.kind != "U" else np.full(shape, "ab", dtype)
    if draw(st.booleans()) and arr.ndim > 1:
        arr = np.asfortranarray(arr)
    return arr


def _save(arr, version) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    return buf.getvalue()


@st.composite
def npy_files(draw):
    arr = draw(arrays())
    data = bytearray(_save(arr, draw(st.sampled_from([(1, 0), (2, 0), (3, 0)]))))
    how = draw(st.sampled_from(["valid", "truncate", "flip", "magic", "zip", "header", "object", "extend"]))
    if how == "truncate":
        data = data[:draw(st.integers(0, len(data)))]
    elif how == "flip":
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
    elif how == "magic":
        data[:6] = draw(st.binary(min_size=6, max_size=6))
    elif how == "zip":
        buf = io.BytesIO()
        np.savez(buf, x=np.ones(3, np.float32))
        data = bytearray(buf.getvalue())
    elif how == "header":
        header = draw(st.sampled_from([b"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999,), }",
                                       b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }",
                                       b"{'descr': '<f4', 'fortran_order': 7, 'shape': (2,), }",
                                       b"{'descr': 'O', 'fortran_order': False, 'shape': (2,), }",
                                       b"__import__('os').system('true')",
                                       b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                                       b"[" * 200 + b"]" * 200]))
        header += b" " * (63 - len(header) % 64) + b"\n"
        data = bytearray(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 8)
    elif how == "object":
        buf = io.BytesIO()
        np.save(buf, np.array([1, None], dtype=object), allow_pickle=True)
        data = bytearray(buf.getvalue())
    elif how == "extend":
        data += draw(st.binary(max_size=16))
    return arr, bytes(data)


def _program(arr) -> str:
    """An identity-like function whose parameter matches ``arr`` when MIND has its dtype."""
    dt = MIND_NAMES.get(arr.dtype.str, "f32")
    dims = ", ".join(f"D{i}" for i in range(arr.ndim))
    body = "x" if dt != "bool" else "x == true"
    return f"fn main(x: Tensor<{dt}, [{dims}]>) -> Tensor<{dt}, [{dims}]> {{ {body} }}\n"


@given(npy_files(), st.sampled_from(["reference", "cpu"]))
@example((np.ones(4, np.float32), b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, "
          b"'shape': (1099511627776,), }" + b" " * 49 + b"\n" + b"\0" * 16), "reference")
@example((np.float32(0), b"\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<f4', 'fortran_order': False, 'shape': (), "
          b"\x00" + b" " * 60 + b"\n\x00\x00\x00\x00"), "reference").via("tokenize.TokenError from NumPy's header parser")
def test_run_with_fuzzed_npy_inputs(case, backend):
    arr, data = case
    status, out, err = run_sandboxed({"p.mind": _program(arr).encode(), "x.npy": data},
                                     lambda d: ["run", os.path.join(d, "p.mind"), "--backend", backend,
                                                f"--input=x={os.path.join(d, 'x.npy')}",
                                                "--out", os.path.join(d, "out")],
                                     outputs=("out",))
    if status == 0:
        assert out.startswith("result0:")
