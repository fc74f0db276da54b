"""`mind verify` on arbitrary bytes and mutated dumps: always a coded result, never a traceback."""

from __future__ import annotations

import io
import json
import contextlib
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from mind.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ir"))
from ir_strategies import mutate  # noqa: E402

DUMPS = Path(__file__).parent / "dumps"
SEEDS = [p.read_bytes() for p in sorted((DUMPS / "valid").glob("*.mir"))[:8]] + \
    [p.read_bytes() for p in sorted((DUMPS / "invalid").glob("*.mir"))[::5]] + [(DUMPS / "public_simple.ir").read_bytes()]


def _run(tmp: Path, data: bytes, *extra: str) -> tuple[int, str]:
    path = tmp / "d.mir"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["verify", str(path), "--json", *extra])
    payload = json.loads(out.getvalue())
    assert rc in (0, 1, 2)
    assert payload["ok"] == (rc == 0)
    for d in payload["diagnostics"]:
        assert d["code"].startswith("E")
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue()


@st.composite
def mutated(draw):
    return mutate(draw, draw(st.sampled_from(SEEDS)), (1, 4))


@settings(suppress_health_check=list(HealthCheck))  # example counts: the profile (tests/conftest.py)
@given(mutated())
def test_mutated_dumps(tmp_path_factory, data):
    _run(tmp_path_factory.mktemp("f"), data)


@settings(suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=200))
def test_arbitrary_bytes(tmp_path_factory, data):
    _run(tmp_path_factory.mktemp("b"), data)


def test_polynomial_blowup_is_refused(tmp_path):
    factor = "(A + B + C + D + 1)"
    dim = " * ".join([factor] * 12)
    text = f"func @main(%x: f32[{dim}]) -> (f32[{dim}]) {{\n  return %x\n}}\n"
    rc, out = _run(tmp_path, text.encode())
    assert rc == 1 and json.loads(out)["diagnostics"][0]["code"] == "E1012"  # (exit status: docs/errors.md)
    big = " * ".join(["281474976710656"] * 40)
    rc, out = _run(tmp_path, f"func @main(%x: f32[{big}]) -> () {{\n  return\n}}\n".encode())
    assert rc == 1


def test_emit_core_not_written_halfway(tmp_path):
    target = tmp_path / "out" / "core.mir"
    rc, _ = _run(tmp_path, b"func @main( garbage", "--emit-core", str(target))
    assert rc == 1 and not target.exists()
    assert not [p for p in (tmp_path).rglob(".mind-*")]
