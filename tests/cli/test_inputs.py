"""`mind run --input`: hostile .npy files are coded diagnostics, read only after their header has
been checked (regressions of issue 22), and non-0/1 bools read the same on every backend."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

from mind.cli.main import main
from mind.reference import memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _prog(tmp_path, text):
    p = tmp_path / "p.mind"
    p.write_text(text)
    return str(p)


F32 = "fn main(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x * 2.0 }\n"


def _header(descr="'<f4'", shape="(4,)", fortran="False", version=(1, 0)):
    h = f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}".encode("latin1")
    h += b" " * (63 - len(h) % 64) + b"\n"
    width = 2 if version[0] == 1 else 4
    return b"\x93NUMPY" + bytes(version) + len(h).to_bytes(width, "little") + h


def _run(tmp_path, capsys, data, prog=F32, backend="reference"):
    f = tmp_path / "x.npy"
    f.write_bytes(data)
    status = main(["run", _prog(tmp_path, prog), "--backend", backend, f"--input=x={f}"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "E7009" not in out.err, out.err
    return status, out


def _npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, x=np.ones(4, np.float32))
    return buf.getvalue()


@pytest.mark.parametrize("data,words", [
    (_npz(), "zip archive"),
    (b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'}  \n", "malformed header"),
    (_header(shape="(1099511627776,)") + b"\0" * 16, "declares 4398046511104 bytes"),  # 4 TiB
    (_header(shape="(-4,)") + b"\0" * 16, "negative dimension"),
    (_header(descr="'|O'"), "Python objects"),
    (_header(descr="[('a', '<f4')]") + b"\0" * 16, "structured"),
    (_header() + b"\0" * 5, "declares 16 bytes"),
    (_header()[:20], "ends inside its header"),
    (b"not an array at all", "magic string"),
    (_header(version=(9, 0)) + b"\0" * 16, "format version 9.0"),
    (b"\x93NUMPY\x01\x00\xff\xff" + b" " * 100, "header of 65535 bytes"),
])
def test_hostile_npy_is_e6011(tmp_path, capsys, data, words):
    status, out = _run(tmp_path, capsys, data)
    assert status == 2 and "error[E6011]" in out.err and words in out.err, out.err


def test_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    assert main(["run", _prog(tmp_path, F32), f"--input=x={fifo}"]) == 2
    assert "a FIFO" in capsys.readouterr().err


def test_an_array_larger_than_memory_is_e6004(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(memory, "CHECK_FROM", 0)
    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(8, "a test"))
    status, out = _run(tmp_path, capsys, _header() + b"\0" * 16)
    assert status == 1 and "error[E6004]" in out.err and "16 bytes" in out.err


def test_valid_variants_are_read(tmp_path, capsys):
    """Big-endian data, Fortran order and format 2.0: read as numpy.load reads them."""
    two_by_three = "fn main(x: Tensor<f32, [2, 3]>) -> Tensor<f32, [2, 3]> { x * 2.0 }\n"
    raw = np.arange(4, dtype="<f4").tobytes()
    cases = [(np.arange(4, dtype=">f4"), F32), (np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)), two_by_three)]
    for arr, prog in cases:
        buf = io.BytesIO()
        np.save(buf, arr)
        (tmp_path / "x.npy").write_bytes(buf.getvalue())
        assert main(["run", _prog(tmp_path, prog), "--backend", "reference", f"--input=x={tmp_path / 'x.npy'}", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["results"][0]["values"] == (arr * 2).tolist()
    (tmp_path / "x.npy").write_bytes(_header(version=(2, 0)) + raw)
    assert main(["run", _prog(tmp_path, F32), f"--input=x={tmp_path / 'x.npy'}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["values"] == [0.0, 2.0, 4.0, 6.0]


BOOL_CAST = "fn main(x: Tensor<bool, [4]>) -> Tensor<i32, [4]> { cast(x, i32) }\n"
BOOL_EQ = "fn main(x: Tensor<bool, [4]>) -> Tensor<bool, [4]> { x == true }\n"


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_bools_that_are_not_0_or_1_read_as_true(tmp_path, capsys, backend):
    """Regression: bytes 2 and 255 viewed as bool: the cpu backend's convert gave 2 and 255 and
    `== true` gave False."""
    buf = io.BytesIO()
    np.save(buf, np.array([2, 255, 0, 1], np.uint8).view(np.bool_))
    status, out = _run(tmp_path, capsys, buf.getvalue(), BOOL_CAST, backend)
    assert status == 0 and "[1 1 0 1]" in out.out
    status, out = _run(tmp_path, capsys, buf.getvalue(), BOOL_EQ, backend)
    assert status == 0 and "[ True  True False  True]" in out.out


@pytest.mark.parametrize("command", ["check", "ir", "verify", "run"])
def test_a_source_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, capsys, command):
    """A FIFO with no writer used to block `mind` forever; a device could be read forever."""
    fifo = tmp_path / "p.mind"
    os.mkfifo(fifo)
    for source in [str(fifo)] + (["/dev/zero"] if os.path.exists("/dev/zero") else []):
        assert main([command, source]) == 2
        err = capsys.readouterr().err
        assert "error[E7001]" in err and ("a FIFO" in err or "a character device" in err)
