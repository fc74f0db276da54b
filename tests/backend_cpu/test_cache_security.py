"""The kernel cache against a hostile or damaged disk: a cached kernel runs only if its folder is the
user's own, its sidecar is this entry's and agrees with the program, and its library is the one the
sidecar's SHA-256 names; anything else is evicted with a warning (E7011) and rebuilt, and the result
is right.  Also: debris of killed links is swept, and fuzzed cache files never crash MIND."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kernels as K
from mind import cache_store
from mind.cache_store import MindCacheWarning
from mind.compiler.backend.cpu.abi import mlir_signature
from mind.compiler.backend.cpu.api import compile_function, kernel_signature
from mind.compiler.backend.cpu.cache import KernelCache
from mind.compiler.backend.cpu.engine import compile_kernel, wait_for_cache_writes
from mind.compiler.backend.cpu.options import CpuOptions
from mind.diagnostics import MindError
from mind.ir.parser import parse_module

HERE = os.path.dirname(os.path.abspath(__file__))
F = parse_module("func @f(%a: f32[4, 8], %b: f32[4, 8]) -> (f32[4, 8]) {\n"
                 "  %0 = mul(%a, %b) : f32[4, 8]\n  %1 = add(%0, %a) : f32[4, 8]\n  return %1\n}\n").functions[0]
G = parse_module("func @f(%a: f32[4, 8], %b: f32[4, 8]) -> (f32[4, 8]) {\n"
                 "  %0 = sub(%a, %b) : f32[4, 8]\n  return %0\n}\n").functions[0]
A = np.arange(32, dtype=np.float32).reshape(4, 8)
B = np.full((4, 8), 3, np.float32)
WANT_F, WANT_G = A * B + A, A - B


@pytest.fixture(autouse=True)
def _linked_now(monkeypatch):
    """Link before the first call (no background store), so the entry is complete on return."""
    monkeypatch.setenv("MIND_CPU_JIT", "0")
    cache_store.forget_checks()
    yield
    cache_store.forget_checks()


def _run(root, fn=F):
    return compile_function(fn, threads=1, cache=KernelCache(str(root)))([A, B])[0]


def _entry(root) -> dict[str, str]:
    """The files of the one kernel in ``root``: its library, its sidecar and the Core-IR alias."""
    sidecars = {}
    for path in glob.glob(os.path.join(str(root), "*", "*.json")):
        sidecars["alias" if "alias_of" in json.loads(open(path).read()) else "sidecar"] = path
    (so,) = glob.glob(os.path.join(str(root), "*", "*.so"))
    return dict(sidecars, so=so)


def _rewrite(path: str, change) -> None:
    data = json.loads(open(path).read())
    change(data)
    with open(path, "w") as f:
        f.write(json.dumps(data))


def _rebuilt(root, fn=F, want=WANT_F) -> str:
    """Run from the (tampered) cache: one E7011 warning, the right result; its message."""
    with pytest.warns(MindCacheWarning) as caught:
        got = _run(root, fn)
    np.testing.assert_array_equal(got, want)
    codes = {w.message.diagnostic.code for w in caught if isinstance(w.message, MindCacheWarning)}
    assert codes == {"E7011"}
    return caught[0].message.diagnostic.message


def test_a_clean_entry_is_a_hit(tmp_path):
    np.testing.assert_array_equal(_run(tmp_path), WANT_F)
    k = compile_function(F, threads=1, cache=KernelCache(str(tmp_path))).kernel({})
    assert k.from_cache and k.library_path == _entry(tmp_path)["so"]


@pytest.mark.parametrize("alias_of", ["/" * 64, "/tmp/" + "a" * 59, "../" * 21 + "a", "A" * 64, "g" * 64,
                                      "0" * 63, 7])
def test_alias_of_must_be_a_cache_key(tmp_path, alias_of):
    _run(tmp_path)
    _rewrite(_entry(tmp_path)["alias"], lambda d: d.update(alias_of=alias_of))
    assert "alias_of is not a cache key" in _rebuilt(tmp_path)
    assert json.loads(open(_entry(tmp_path)["alias"]).read())["alias_of"] != alias_of


@pytest.mark.parametrize("which", ["alias", "sidecar"])
def test_a_smaller_declared_output_has_no_effect(tmp_path, which):
    _run(tmp_path)
    files = _entry(tmp_path)

    def shrink(d):
        d["signature"]["outputs"][0]["shape"] = [1, 1]
    _rewrite(files[which], shrink)
    if which == "sidecar":
        os.unlink(files["alias"])  # reach the sidecar through the MLIR-text key
    assert "signature differs" in _rebuilt(tmp_path)


@pytest.mark.parametrize("field,value", [("signature", None), ("openmp", "kmpc"), ("matmul_library", "avx512"),
                                         ("key", "0" * 64), ("format", "mind-cpu-kernel-v1"),
                                         ("library_sha256", "0" * 64), ("scheduled", "yes")])
def test_an_inconsistent_sidecar_is_evicted(tmp_path, field, value):
    _run(tmp_path)
    _rewrite(_entry(tmp_path)["alias"], lambda d: d.pop(field) if value is None else d.update({field: value}))
    _rebuilt(tmp_path)


@pytest.mark.parametrize("junk", [b"", b"{", b"[]", b"null", b"\xff\xfe", b"{}" * 40000])
def test_a_garbage_sidecar_is_evicted(tmp_path, junk):
    _run(tmp_path)
    with open(_entry(tmp_path)["alias"], "wb") as f:
        f.write(junk)
    _rebuilt(tmp_path)


def test_a_library_swapped_for_another_kernels_is_detected(tmp_path):
    other = tmp_path / "other"
    np.testing.assert_array_equal(_run(other, G), WANT_G)
    _run(tmp_path)
    shutil.copyfile(_entry(other)["so"], _entry(tmp_path)["so"])
    assert "does not match the SHA-256" in _rebuilt(tmp_path)
    np.testing.assert_array_equal(_run(tmp_path), WANT_F)  # and the rebuilt entry is a clean hit again


@pytest.mark.parametrize("damage", ["truncated", "missing", "empty", "group-writable", "symlink", "folder"])
def test_a_damaged_library_is_rebuilt(tmp_path, damage):
    _run(tmp_path)
    so = _entry(tmp_path)["so"]
    data = open(so, "rb").read()
    os.unlink(so)
    if damage == "truncated":
        open(so, "wb").write(data[: len(data) // 2])
    elif damage == "empty":
        open(so, "wb").close()
    elif damage == "group-writable":
        open(so, "wb").write(data)
        os.chmod(so, 0o775)
    elif damage == "symlink":
        open(str(tmp_path / "elsewhere.so"), "wb").write(data)
        os.symlink(tmp_path / "elsewhere.so", so)
    elif damage == "folder":
        os.mkdir(so)
        open(os.path.join(so, "inside"), "w").close()
    _rebuilt(tmp_path)


def test_a_foreign_library_is_rebuilt(tmp_path):
    _run(tmp_path)
    try:
        os.chown(_entry(tmp_path)["so"], 65534, -1)
    except OSError as e:
        pytest.skip(f"cannot change a file's owner here ({e})")
    assert "owned by" in _rebuilt(tmp_path)


@pytest.mark.parametrize("where", ["root", "subfolder"])
@pytest.mark.parametrize("problem", ["world-writable", "group-writable", "symlink", "foreign"])
def test_unsafe_kernel_folders_are_refused(tmp_path, where, problem):
    root = tmp_path / "cache"
    _run(root)
    target = root if where == "root" else os.path.dirname(_entry(root)["so"])
    if problem == "symlink":
        os.rename(target, str(target) + ".real")
        os.symlink(str(target) + ".real", target)
    elif problem == "foreign":
        try:
            os.chown(target, 65534, -1)
        except OSError as e:
            pytest.skip(f"cannot change a folder's owner here ({e})")
    else:
        os.chmod(target, 0o777 if problem == "world-writable" else 0o770)
    cache_store.forget_checks()
    with pytest.raises(MindError) as info:
        _run(root)
    assert info.value.codes == ["E7010"] and str(target) in info.value.diagnostics[0].message


def test_two_cached_kernels_load_side_by_side_in_one_process(tmp_path):
    """Each checked library is loaded under its own name (the dynamic loader reuses a library it
    loaded under the same name: a reused descriptor number would load the first kernel twice)."""
    _run(tmp_path, F)
    _run(tmp_path, G)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {HERE!r})
        from test_cache_security import F, G, A, B, WANT_F, WANT_G
        from mind.compiler.backend.cpu.api import compile_function
        from mind.compiler.backend.cpu.cache import KernelCache
        for fn, want in ((F, WANT_F), (G, WANT_G), (F, WANT_F)):
            run = compile_function(fn, threads=1, cache=KernelCache({str(tmp_path)!r}))
            assert run.kernel({{}}).from_cache
            np.testing.assert_array_equal(run([A, B])[0], want)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["ok"], r.stderr


def test_signatures_come_from_the_program():
    from mind.compiler.backend.linalg.emit import emit_mlir
    text, name = emit_mlir(F, {})
    assert mlir_signature(text, name) == kernel_signature(F, {})
    assert mlir_signature(K.matmul(4, 8, 2), "mm").outputs[0].shape == (4, 2)
    for odd in ("func.func @mm(%a: tensor<?x4xf32>, %o: memref<4xf32>) {",
                "func.func @mm(%o: memref<4xf32>, %a: tensor<4xf32>) {",
                "func.func @mm(%a: tensor<4xf32>, %o: memref<4xf32, strided<[1]>>) {",
                "func.func @mm(%a: tensor<4xf32>) -> tensor<4xf32> {", "func.func @other() {"):
        assert mlir_signature(odd, "mm") is None, odd


_KILLED_LINK = textwrap.dedent("""
    import os, subprocess, sys
    sys.path.insert(0, {here!r})
    import kernels as K
    from mind.compiler.backend.cpu.cache import KernelCache
    from mind.compiler.backend.cpu.engine import compile_kernel
    def killed(*args, **kwargs):  # the process dies while ld runs
        os.kill(os.getpid(), 9)
    subprocess.Popen = killed
    from mind.compiler.backend.cpu.options import CpuOptions
    compile_kernel(K.matmul(8, 16, 4), "mm", CpuOptions.resolve(threads=1, cache=KernelCache({root!r}), jit={jit}))
""")


@pytest.mark.parametrize("jit", [False, True])
def test_debris_of_a_killed_link_is_swept(tmp_path, jit):
    root = tmp_path / "cache"
    r = subprocess.run([sys.executable, "-c", _KILLED_LINK.format(here=HERE, root=str(root), jit=jit)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    (debris,) = glob.glob(str(root / "*" / ".link-*"))
    folder = os.path.dirname(debris)
    young = os.path.join(folder, ".link-young")
    os.mkdir(young)
    for name in (".mind-tmp-1-2-3", ".load-1-2.so", "keep-me"):
        open(os.path.join(folder, name), "w").close()
    old = time.time() - 2 * cache_store.DEBRIS_GRACE_S
    for name in (debris, os.path.join(folder, ".mind-tmp-1-2-3"), os.path.join(folder, ".load-1-2.so"),
                 os.path.join(folder, "keep-me")):
        os.utime(name, (old, old))
    compile_kernel(K.matmul(8, 16, 2), "mm", CpuOptions.resolve(threads=1, cache=KernelCache(str(root)), jit=False))  # a miss
    left = sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "*")) + glob.glob(os.path.join(folder, ".*")))
    assert ".link-young" in left and "keep-me" in left
    assert not [n for n in left if n.startswith((".mind-tmp-", ".load-")) or (n.startswith(".link-") and n != ".link-young")]


# -------------------------------------------------------------------------------------------------
# fuzzing: any content of any cache file gives the right result or a coded diagnostic

def _json_values():
    return st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=70)
                        | st.sampled_from(["0" * 64, "/" * 64, "../" * 21 + "x", "mind-cpu-kernel-v2"]),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                     max_size=4), max_leaves=12)


def _mutations():
    flips = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), min_size=1, max_size=8)
    return st.one_of(
        st.tuples(st.just("bytes"), st.binary(max_size=400)),
        st.tuples(st.just("flip"), flips),
        st.tuples(st.just("truncate"), st.integers(0, 1 << 20)),
        st.tuples(st.just("field"), st.tuples(st.sampled_from(["signature", "alias_of", "key", "openmp", "format",
                                                               "library_sha256", "matmul_library", "scheduled",
                                                               "threads"]), _json_values())),
    )


def _mutate(data: bytes, mutation) -> bytes:
    kind, arg = mutation
    if kind == "bytes":
        return arg
    if kind == "truncate":
        return data[: arg % (len(data) + 1)]
    if kind == "flip":
        out = bytearray(data)
        for pos, x in arg:
            if out:
                out[pos % len(out)] ^= x
        return bytes(out)
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    if isinstance(doc, dict):
        doc[arg[0]] = arg[1]
    return json.dumps(doc).encode()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A cache holding ``F``'s kernel (library, sidecar, alias) and its frontend entry."""
    root = tmp_path_factory.mktemp("pristine") / "cache"
    os.environ["MIND_CPU_JIT"] = "0"
    try:
        _run(root)
    finally:
        del os.environ["MIND_CPU_JIT"]
    return root


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(target=st.sampled_from(["so", "sidecar", "alias"]), mutation=_mutations())
@example(target="alias", mutation=("field", ("alias_of", "/" * 64)))
@example(target="so", mutation=("truncate", 100))
@example(target="sidecar", mutation=("bytes", b""))
def test_fuzzed_cache_files_give_the_right_result_or_a_coded_diagnostic(pristine, tmp_path_factory, target,
                                                                          mutation):
    root = tmp_path_factory.mktemp("fuzz") / "cache"
    shutil.copytree(pristine, root)
    cache_store.forget_checks()
    path = _entry(root)[target]
    with open(path, "rb") as f:
        data = f.read()
    if target == "so" and mutation[0] == "field":
        mutation = ("flip", [(len(data) // 2, 1)])
    with open(path, "wb") as f:
        f.write(_mutate(data, mutation))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MindCacheWarning)
        try:
            np.testing.assert_array_equal(_run(root), WANT_F)
        except MindError as e:
            assert "E7009" not in e.codes
    assert wait_for_cache_writes(60)
