"""Exit statuses against the code catalogue: every code MIND raises is produced through the `mind`
command by a real input, and the command exits with the status ``mind.cli.exit_status`` (and
``docs/errors.md``) gives that code.  The codes of the catalogue that nothing raises are checked to be
absent from the sources, and their status through an injected diagnostic.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from mind.cli import exit_status
from mind.cli.main import main
from mind.diagnostics import error
from mind.spec.errors import CODES

ROOT = Path(__file__).resolve().parents[2]
QUICK = str(ROOT / "examples" / "quickstart.mind")
AFFINE = str(ROOT / "examples" / "affine.mir")

#: Codes the catalogue has (for the public catalogue's numbering) but nothing in MIND raises.
NEVER_RAISED = frozenset({"E5001", "E5002", "E6001"})

#: code -> (subcommand, file name, file text, further arguments); ``{dir}`` in an argument is the
#: test's folder.  A file name of None: no file.
SOURCE_TRIGGERS: dict[str, tuple[str, str | None, str | bytes, tuple[str, ...]]] = {
    "E1001": ("check", "p.mind", b"let x = \xff\n", ()),
    "E1002": ("check", "p.mind", "let x = 1 $ 2\n", ()),
    "E1003": ("check", "p.mind", 'let s = "abc\n', ()),
    "E1004": ("check", "p.mind", 'let s = "a\\qb";\n', ()),
    "E1005": ("check", "p.mind", "let x = 12abc\n", ()),
    "E1006": ("check", "p.mind", "/* never closed\n", ()),
    "E1010": ("check", "p.mind", "let = 1\n", ()),
    "E1011": ("check", "p.mind", "let x = (1 + 2\n", ()),
    "E1012": ("check", "p.mind", "let x = " + "9" * 5000 + "\n", ()),
    "E1013": ("check", "p.mind", "fn main() {\n  on(gpu0) {\n    let y = 1.0;\n  }\n}\n", ()),
    "E2001": ("check", "p.mind", "let x: i32 = 99999999999\nx\n", ()),
    "E2002": ("check", "p.mind", "y + 1\n", ()),
    "E2003": ("check", "p.mind", "fn f(x: f32) -> f32 { f(x) }\n", ()),
    "E2004": ("check", "p.mind", "fn f(a: Tensor<f32, [2]>, b: Tensor<i32, [2]>) -> Tensor<f32, [2]> { a + b }\n", ()),
    "E2005": ("check", "p.mind", "!1.5\n", ()),
    "E2007": ("check", "p.mind", "fn f(x: f32) -> f32 { x }\nf(1.0, 2.0)\n", ()),
    "E2008": ("check", "p.mind", "frobnicate(1)\n", ()),
    "E2009": ("check", "p.mind", '"a string"\n', ()),
    "E2010": ("check", "p.mind", "fn f() -> f32 { 1.0 }\nfn f() -> f32 { 2.0 }\n", ()),
    "E2011": ("check", "p.mind", "fn f(x: Tensor<f32, [2]>) -> f32 {\n  let mut s = 0.0;\n"
                                 "  while sum(x) > 0.0 { s += 1.0; }\n  s\n}\n", ()),
    "E3001": ("check", "p.mind", "fn f(a: Tensor<f32, [3]>, b: Tensor<f32, [4]>) -> Tensor<f32, [3]> { a + b }\n", ()),
    "E3002": ("check", "p.mind", "fn f(x: Tensor<f32, [2, 3]>) -> Tensor<f32, [3, 2]> { transpose(x, [0]) }\n", ()),
    "E3003": ("check", "p.mind", "fn f(a: Tensor<f32, [2, 3]>, b: Tensor<f32, [4, 5]>) -> Tensor<f32, [2, 5]> "
                                 "{ matmul(a, b) }\n", ()),
    "E3004": ("check", "p.mind", "fn f(x: Tensor<f32, [2]>) -> f32 { sum(x, axes=[5]) }\n", ()),
    "E3005": ("check", "p.mind", "fn f(x: Tensor<f32, [2, 2]>) -> f32 { sum(x, axes=[0, 0]) }\n", ()),
    "E3006": ("check", "p.mind", "fn f(x: Tensor<f32, [4]>) -> Tensor<f32, [4]> { slice(x, [0], [4], [0]) }\n", ()),
    "E3007": ("check", "p.mind", "fn f(x: Tensor<f32, [2, 3]>) -> Tensor<f32, [8]> { reshape(x, [8]) }\n", ()),
    "E3008": ("check", "p.mind", "fn f(x: Tensor<f32, [2, 3]>) -> Tensor<f32, [2, 3]> { transpose(x, [0, 0]) }\n", ()),
    "E3009": ("check", "p.mind", "fn f(x: Tensor<f32, [2, 3]>) -> Tensor<f32, [3]> { squeeze(x, [0]) }\n", ()),
    "E3010": ("check", "p.mind", "let x: Tensor<f32, [3]> = [1.0, 2.0];\nx\n", ()),
    "E3011": ("check", "p.mind", "fn f(x: Tensor<f32, [A]>, y: Tensor<f32, [B]>) -> Tensor<f32, [A]> { x + y }\n", ()),
    "E4001": ("check", "p.mir", "func @main(%x: f32[4]) -> (f32[4]) {\n  %0 = add(%x, %1) : f32[4]\n"
                                "  %1 = add(%x, %x) : f32[4]\n  return %0\n}\n", ()),
    "E4002": ("check", "p.mir", "func @main(%x: f32[4]) -> (f32[4]) {\n  %0 = add(%x, %x) : f32[4]\n"
                                "  %0 = add(%x, %x) : f32[4]\n  return %0\n}\n", ()),
    "E4003": ("check", "p.ir", '%0 = Input() {name: "a"} : Tensor<f32, [2]>\noutputs: %5\n', ()),
    "E4004": ("check", "p.ir", "%0 = Input() : Tensor<f32, [2]>\noutputs: %0\n", ()),
    "E4005": ("check", "p.mir", "func @main() -> (i32[3]) {\n  %0 = const {value = [1, 2]} : i32[3]\n"
                                "  return %0\n}\n", ()),
    "E4006": ("check", "p.mir", "func @main() -> () {\n  %0 = tanh : f32[]\n  return\n}\n", ()),
    "E4007": ("check", "p.mir", "func @main(%x: f32[4]) -> (f32[2]) {\n  %0 = slice(%x) {start = [0, 0], "
                                "stop = [2], step = [1]} : f32[2]\n  return %0\n}\n", ()),
    "E4008": ("check", "p.mir", "func @main(%x: f32[4]) -> (f32[4]) {\n  %0 = add(%x, %x) {bogus = 1} : f32[4]\n"
                                "  return %0\n}\n", ()),
    "E4009": ("check", "p.mir", "func @main(%x: f32[4]) -> (f32[4]) {\n  %0 = add(%x) : f32[4]\n  return %0\n}\n", ()),
    "E4010": ("check", "p.mir", "func @main(%x: f32[4]) -> (f32[4]) {\n  %0 = add(%x, %x) : f32[5]\n"
                                "  return %0\n}\n", ()),
    "E4011": ("check", "p.mir", "func @main(%x: f32[N]) -> (f32[N]) where M >= 1 {\n  return %x\n}\n", ()),
    "E5004": ("grad", "p.mir", "func @f(%x: f32[N], %i: i64[2]) -> (f32[]) {\n  %0 = gather(%x, %i) {axis = 0} "
                               ": f32[2]\n  %1 = reduce_sum(%0) {axes = [0], keepdims = false} : f32[]\n  return %1\n}\n",
              ("--fn", "f", "--wrt", "x")),
    "E5005": ("grad", "p.mind", "fn f(x: Tensor<f32, [2]>, n: Tensor<i32, [2]>) -> f32 { sum(x) }\n",
              ("--fn", "f", "--wrt", "n")),
    "E5006": ("grad", "p.mind", "fn f(x: Tensor<f32, [2]>) -> Tensor<f32, [2]> { x * x }\n", ("--fn", "f", "--wrt", "x")),
    "E6002": ("conformance", None, "", ("run", "--impl", "exec:{dir}/no-such-implementation")),
    "E6003": ("export", "p.mir", "func @main(%x: f32[N]) -> (f32[N]) {\n  return %x\n}\n", ("--to", "stablehlo")),
    "E6009": ("run", None, "", (AFFINE, "--backend", "reference", "--input", "x={dir}/i32.npy",
                                "--input", "w={dir}/w.npy", "--input", "b={dir}/b.npy")),
    "E6010": ("run", None, "", (AFFINE, "--backend", "reference")),
    "E6011": ("run", None, "", (AFFINE, "--backend", "reference", "--input", "x={dir}/junk.npy")),
    "E7001": ("check", None, "", ("{dir}/no-such-file.mind",)),
    "E7002": ("run", None, "", (QUICK, "--no-such-option")),
    "E7003": ("verify", "p.mir", "func @main(%x: f32[4]) -> (f32[4]) {\n  return %x\n}\n",
              ("--emit-core", "{dir}/no-such-folder/core.mir")),
    "E7004": ("conformance", None, "", ("verify-submission", "{dir}/submission")),
}


def _files(d: Path) -> None:
    """The arrays and folders the triggers name."""
    np.save(d / "i32.npy", np.ones((4, 3), np.int32))
    np.save(d / "w.npy", np.ones((3, 2), np.float32))
    np.save(d / "b.npy", np.ones(2, np.float32))
    (d / "junk.npy").write_text("not an array")
    (d / "submission").mkdir()
    (d / "submission" / "results.json").write_text("{}")


def _allocation_failure(d: Path, monkeypatch: Any) -> list[str]:
    from mind.reference import memory

    monkeypatch.setattr(memory, "CHECK_FROM", 0)
    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(8, "a test"))
    np.save(d / "x.npy", np.ones(4, np.float32))
    (d / "p.mind").write_text("fn main(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x * 2.0 }\n")
    return ["run", str(d / "p.mind"), "--backend", "reference", "--input", f"x={d / 'x.npy'}"]


def _damaged_kernel_library(d: Path, monkeypatch: Any) -> list[str]:
    """The prebuilt kernel library's manifest replaced by one in no known format (a bad setting is
    a usage error, E7002, like every other)."""
    import shutil

    from mind.compiler.backend.cpu import kernel_library as KL

    shutil.copytree(KL.PREBUILT_DIR, d / "prebuilt")
    (d / "prebuilt" / "MANIFEST.json").write_text("{}")
    monkeypatch.setattr(KL, "PREBUILT_DIR", str(d / "prebuilt"))
    monkeypatch.setattr(KL, "MANIFEST", str(d / "prebuilt" / "MANIFEST.json"))
    KL._manifest.cache_clear()  # reading it fails, so nothing of the damaged folder stays cached
    return ["run", QUICK, "--backend", "cpu"]


def _device_error(d: Path, monkeypatch: Any) -> list[str]:
    """A driver call that fails (here a driver stand-in whose first call reports an error: a machine
    without a GPU cannot fail otherwise): E6008 names the CUDA error."""
    from mind.runtime import cuda

    class FailingDriver:
        def cuDeviceGetCount(self) -> tuple[int, int]:
            return (999, 0)

        def cuGetErrorName(self, err: int) -> tuple[int, bytes]:
            return (0, b"CUDA_ERROR_UNKNOWN")

    monkeypatch.setattr(cuda, "_driver", FailingDriver)
    monkeypatch.setattr(cuda, "_DEVICES", {})
    return ["run", QUICK, "--backend", "cuda"]


def _tampered_artifact(d: Path, monkeypatch: Any) -> list[str]:
    assert main(["build", QUICK, "--out", str(d / "artifact")]) == 0
    with open(d / "artifact" / "plan.json", "a", encoding="utf-8") as fh:
        fh.write(" ")
    return ["run", str(d / "artifact")]


def _internal_error(d: Path, monkeypatch: Any) -> list[str]:
    from mind.spec import table

    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("a bug")
    monkeypatch.setattr(table, "op_table_text", broken)
    return ["spec"]


def _unsafe_cache(d: Path, monkeypatch: Any) -> list[str]:
    root = d / "cache"
    root.mkdir(mode=0o700)
    root.chmod(0o777)
    monkeypatch.setenv("MIND_CACHE_DIR", str(root))
    return ["check", QUICK]


def _audit_finding(d: Path, monkeypatch: Any) -> list[str]:
    (d / "p.mir").write_text("func @main(%a: f32[N, K], %b: f32[M, 3]) -> (f32[N, 3]) {\n"
                             "  %0 = matmul(%a, %b) : f32[N, 3]\n  return %0\n}\n")
    return ["audit", str(d / "p.mir"), "--out", str(d / "bundle")]


def _tampered_bundle(d: Path, monkeypatch: Any) -> list[str]:
    assert main(["audit", AFFINE, "--out", str(d / "bundle")]) == 0
    with open(d / "bundle" / "audit.json", "a", encoding="utf-8") as fh:
        fh.write(" ")
    return ["audit", "--check", str(d / "bundle")]


#: Codes whose trigger needs more than a file: a function (test folder, monkeypatch) -> argv.
SPECIAL_TRIGGERS: dict[str, Callable[[Path, Any], list[str]]] = {
    "E6004": _allocation_failure,
    "E6008": _device_error,
    "E6012": _damaged_kernel_library,
    "E7009": _internal_error,
    "E7010": _unsafe_cache,
    "E7012": _tampered_bundle,
    "E7013": _audit_finding,
    "E7014": _tampered_artifact,
}

#: Warnings: reported, and the command still succeeds.
WARNINGS = frozenset({"E7011"})


def _codes(err: str) -> list[str]:
    return re.findall(r"(?:error|warning)\[(E\d{4})\]", err)


def test_the_triggers_cover_the_catalogue():
    covered = set(SOURCE_TRIGGERS) | set(SPECIAL_TRIGGERS) | WARNINGS | NEVER_RAISED
    assert covered == set(CODES), sorted(set(CODES) ^ covered)
    assert not (set(SOURCE_TRIGGERS) & set(SPECIAL_TRIGGERS))


def test_codes_never_raised_are_absent_from_the_sources():
    """If MIND starts raising one of them, it needs a real trigger above."""
    sources = [p for folder in ("mind", "compiler", "verify", "reference", "conformance", "spec")
               for p in (ROOT / folder).rglob("*.py") if p.name != "errors.py"]
    for code in NEVER_RAISED:
        users = [str(p) for p in sources if code in p.read_text(encoding="utf-8")]
        assert not users, (code, users)


@pytest.mark.parametrize("code", sorted(SOURCE_TRIGGERS) + sorted(SPECIAL_TRIGGERS))
def test_each_code_exits_with_its_status(code, tmp_path, capsys, monkeypatch, cache_root):
    _files(tmp_path)
    if code in SPECIAL_TRIGGERS:
        argv = SPECIAL_TRIGGERS[code](tmp_path, monkeypatch)
    else:
        command, name, text, extra = SOURCE_TRIGGERS[code]
        argv = [command]
        if name is not None:
            path = tmp_path / name
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
            argv.append(str(path))
        argv += [a.replace("{dir}", str(tmp_path)) for a in extra]
    status = main(argv)
    err = capsys.readouterr().err
    assert _codes(err)[:1] == [code], err
    assert status == exit_status.status_of(code) and status != exit_status.SUCCESS, err
    assert "Traceback" not in err


@pytest.mark.parametrize("code", sorted(NEVER_RAISED))
def test_codes_nothing_raises_exit_with_their_status(code, capsys, monkeypatch):
    from mind.cli import cmd_spec

    def raising(args: Any) -> int:
        raise error(code, "injected")
    monkeypatch.setattr(cmd_spec, "run", raising)
    assert main(["spec"]) == exit_status.status_of(code)
    assert _codes(capsys.readouterr().err) == [code]


def test_a_warning_leaves_the_status_alone(cache_root, capsys):
    assert main(["check", QUICK]) == 0
    (entry,) = cache_root.glob("frontend/*/*.mir")
    entry.write_bytes(b"damaged")
    from mind.compiler.frontend import cache as fcache

    fcache.clear()
    assert main(["check", QUICK]) == exit_status.status_of("E7011") == exit_status.SUCCESS
    assert _codes(capsys.readouterr().err) == ["E7011"]


def test_several_diagnostics_exit_with_the_highest_status():
    assert exit_status.exit_status(["E2004", "E7001"]) == exit_status.USAGE
    assert exit_status.exit_status(["E7001", "E7009", "E3001"]) == exit_status.INTERNAL
    assert exit_status.exit_status(["E3001"]) == exit_status.PROGRAM


def test_the_documented_statuses_are_the_table():
    """docs/errors.md (generated) shows each code's status; README and docs say the same four."""
    page = (ROOT / "docs" / "errors.md").read_text()
    for code in CODES:
        assert re.search(rf"\| `{code}` \| [^|]+ \| {exit_status.status_of(code)} \|", page), code
    readme = (ROOT / "README.md").read_text()
    assert "0 success, 1 diagnostics about the program, 2 usage or unreadable input, 3 internal error" in readme


DUMPS: dict[str, tuple[str, bytes]] = {
    "E1001": ("p.mir", b"func @main( \xff"),
    "E1010": ("p.mir", b"func @main( {{{"),
    "E4004": ("p.ir", SOURCE_TRIGGERS["E4004"][2].encode()),
    "E4006": ("p.mir", SOURCE_TRIGGERS["E4006"][2].encode()),
    "E4009": ("p.mir", SOURCE_TRIGGERS["E4009"][2].encode()),
}


@pytest.mark.parametrize("code", sorted(DUMPS))
def test_verify_exits_as_check_does_on_a_dump(code, tmp_path, capsys):
    """`mind verify` reports a dump's findings itself; its status comes from the same table."""
    name, data = DUMPS[code]
    path = tmp_path / name
    path.write_bytes(data)
    statuses = [main([command, str(path)]) for command in ("verify", "check")]
    err = capsys.readouterr().err
    assert statuses == [exit_status.status_of(code)] * 2 and _codes(err)[0] == code, err
