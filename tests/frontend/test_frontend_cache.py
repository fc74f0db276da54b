"""The frontend's caches (``compiler/frontend/cache.py``): a disk hit gives back the same module
(text and spans) without running (or importing) the frontend's passes; anything that could make an
entry stale misses; failures are never cached; a damaged or planted entry never executes anything
and is rebuilt with a warning; entries stay small."""

from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mind.cache_store import MindCacheWarning
from mind.compiler.frontend import cache as fcache
from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = "fn f(x: Tensor<f32, [B, 4]>) -> Tensor<f32, [B, 4]> { relu(x) * 2.0 + 1.0 }"


@pytest.fixture
def disk_cache(cache_root):
    return cache_root


def _entries(root) -> list[str]:
    return sorted(glob.glob(os.path.join(str(root), "frontend", "*", "*.mir")))


def _spans(module) -> list:
    return [(f.span, [p.span for p in f.params], [(op.span, op.result.span) for op in f.ops])
            for f in module.functions]


@pytest.mark.parametrize("path", sorted(str(p) for p in (ROOT / "examples").rglob("*.mind")))
def test_a_disk_hit_is_the_module_the_frontend_makes(disk_cache, path):
    text = pathlib.Path(path).read_text()
    first = fcache.compile_cached(text, path)
    assert len(_entries(disk_cache)) == 1
    fcache.clear()  # forget the in-memory entry: the next call reads the file
    again = fcache.compile_cached(text, path)
    assert again is not first
    assert again.text() == compile_source(text, path).text()
    assert [f.name for f in again.functions] == [f.name for f in first.functions]
    assert _spans(again) == _spans(compile_source(text, path))  # what later diagnostics point at
    assert all(f.span is not None and f.span.file == path for f in again.functions)


_HIT = textwrap.dedent("""
    import sys
    from mind.compiler.frontend.cache import compile_cached
    m = compile_cached({src!r}, "<t>")
    print(m.sha256(), "mind.compiler.passes" in sys.modules, "mind.compiler.autodiff" in sys.modules)
""")


def test_a_new_process_hits_without_importing_the_passes(disk_cache):
    env = dict(os.environ, MIND_CACHE_DIR=str(disk_cache))
    runs = [subprocess.run([sys.executable, "-c", _HIT.format(src=SOURCE)], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    cold, warm = (r.stdout.split() for r in runs)
    assert cold[0] == warm[0] == compile_source(SOURCE, "<t>").sha256()
    assert cold[1:] == ["True", "False"] and warm[1:] == ["False", "False"]


def test_a_different_name_text_or_frontend_misses(disk_cache, monkeypatch):
    fcache.compile_cached(SOURCE, "<a>")
    fcache.compile_cached(SOURCE, "<b>")  # spans and diagnostics name the file
    fcache.compile_cached(SOURCE + " ", "<a>")
    assert len(_entries(disk_cache)) == 3
    fcache.clear()
    monkeypatch.setattr(fcache, "_FINGERPRINT", ["edited frontend"])
    fcache.compile_cached(SOURCE, "<a>")
    assert len(_entries(disk_cache)) == 4


def test_failures_are_not_cached(disk_cache):
    bad = "fn f(x: Tensor<f32, [2]>) -> Tensor<f32, [3]> { x }"
    for _ in range(2):
        with pytest.raises(MindError):
            fcache.compile_cached(bad, "<bad>")
    assert _entries(disk_cache) == []


class _Planted:
    """A pickle that runs a command when unpickled (what the pickle-based cache would have executed)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _junk(entry: str, marker: str) -> list[bytes]:
    import pickle
    good = pathlib.Path(entry).read_bytes()
    header, _, body = good.partition(b"\n")
    return [b"", b"not an entry", pickle.dumps(_Planted(marker)), good[:-7],  # truncated
            header + b"\n" + body.replace(b"f32", b"f64"),  # the hash no longer matches
            good.replace(fcache.FORMAT.encode(), b"mind-frontend-v1"),
            header.split(b" ")[0] + b" " + b"0" * 64 + b"\n" + body]


def test_a_damaged_or_planted_entry_is_rebuilt_with_a_warning_and_never_executed(disk_cache, tmp_path_factory):
    marker = str(tmp_path_factory.mktemp("planted") / "ran")
    good = fcache.compile_cached(SOURCE, "<t>")
    (entry,) = _entries(disk_cache)
    for junk in _junk(entry, marker):
        pathlib.Path(entry).write_bytes(junk)
        fcache.clear()
        with pytest.warns(MindCacheWarning) as caught:
            assert fcache.compile_cached(SOURCE, "<t>").text() == good.text()
        diag = caught[0].message.diagnostic
        assert diag.code == "E7011" and diag.severity == "warning" and entry in diag.message
        assert pathlib.Path(entry).read_bytes() != junk
        assert not os.path.exists(marker)


def test_an_entry_that_is_not_a_plain_file_of_ours_is_rebuilt(disk_cache, tmp_path):
    good = fcache.compile_cached(SOURCE, "<t>")
    (entry,) = _entries(disk_cache)
    data = pathlib.Path(entry).read_bytes()
    elsewhere = tmp_path / "elsewhere.mir"
    elsewhere.write_bytes(data)
    for plant in ("symlink", "group-writable", "fifo"):
        os.unlink(entry)
        if plant == "symlink":
            os.symlink(elsewhere, entry)
        elif plant == "group-writable":
            pathlib.Path(entry).write_bytes(data)
            os.chmod(entry, 0o664)
        else:
            os.mkfifo(entry)
        fcache.clear()
        with pytest.warns(MindCacheWarning):
            assert fcache.compile_cached(SOURCE, "<t>").text() == good.text()
        assert not os.path.islink(entry) and (os.stat(entry).st_mode & 0o777) & 0o022 == 0


def test_large_modules_are_not_stored(disk_cache, monkeypatch):
    big = "fn main() -> Tensor<f32, [4096, 2048]> { ones((4096, 2048)) }"
    assert fcache.compile_cached(big, "<big>").functions
    assert _entries(disk_cache) == []  # 8M constant elements: not even printed
    monkeypatch.setattr(fcache, "MAX_ENTRY_BYTES", 100)
    fcache.compile_cached(SOURCE, "<t>")
    assert _entries(disk_cache) == []


def test_the_disk_layer_can_be_turned_off(disk_cache, monkeypatch):
    monkeypatch.setenv("MIND_FRONTEND_CACHE", "0")
    fcache.compile_cached(SOURCE, "<t>")
    assert _entries(disk_cache) == []
    assert fcache.compile_cached(SOURCE, "<u>", disk=False) is not None
    assert _entries(disk_cache) == []
    monkeypatch.delenv("MIND_FRONTEND_CACHE")
    monkeypatch.setenv("MIND_CACHE", "off")  # every disk cache
    fcache.compile_cached(SOURCE, "<v>")
    assert not disk_cache.exists()


def test_sources_fingerprint_follows_edits_additions_and_only_python_files(tmp_path):
    from mind.disk import sources_fingerprint
    (tmp_path / "a.py").write_text("x = 1\n")
    folders = [("pkg", str(tmp_path))]
    base = sources_fingerprint(folders)
    assert sources_fingerprint(folders) == base
    (tmp_path / "notes.txt").write_text("not code")
    assert sources_fingerprint(folders) == base
    (tmp_path / "a.py").write_text("x = 22\n")  # size and time change
    edited = sources_fingerprint(folders)
    assert edited != base
    st = os.stat(tmp_path / "a.py")
    os.utime(tmp_path / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # same size, newer
    touched = sources_fingerprint(folders)
    assert touched != edited
    (tmp_path / "b.py").write_text("")
    assert sources_fingerprint(folders) != touched
    assert sources_fingerprint([("pkg", str(tmp_path / "missing"))]) == sources_fingerprint([])


@pytest.mark.parametrize("name,value", [("MIND_FRONTEND_CACHE", "off"), ("MIND_FRONTEND_CACHE", "yes"),
                                        ("MIND_FRONTEND_CACHE", "2"), ("MIND_CACHE", "0"), ("MIND_CACHE", "Off"),
                                        ("MIND_CACHE", "of")])
def test_a_misspelt_switch_is_a_diagnostic(disk_cache, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(MindError) as info:
        fcache.compile_cached(SOURCE, "<t>")
    d = info.value.diagnostics[0]
    assert d.code == "E7002" and name in d.message and d.help
    assert _entries(disk_cache) == []


@pytest.fixture(scope="module")
def pristine_entry(tmp_path_factory):
    """The bytes of ``SOURCE``'s frontend entry."""
    root = tmp_path_factory.mktemp("pristine-frontend")
    old = os.environ.get("MIND_CACHE_DIR")
    os.environ["MIND_CACHE_DIR"] = str(root)
    try:
        fcache.clear()
        fcache.compile_cached(SOURCE, "<t>")
    finally:
        if old is None:
            del os.environ["MIND_CACHE_DIR"]
        else:
            os.environ["MIND_CACHE_DIR"] = old
        fcache.clear()
    (entry,) = _entries(root)
    return pathlib.Path(entry).read_bytes()


def _mutated(data: bytes, flips: list, cut: int, rehash: bool) -> bytes:
    out = bytearray(data)
    for pos, x in flips:
        out[pos % len(out)] ^= x
    out = bytes(out[: len(out) - cut % (len(out) + 1)])
    if rehash:  # what only MIND's own account could write: a hash that matches the damaged text
        import hashlib
        _, _, body = out.partition(b"\n")
        out = f"{fcache.FORMAT} {hashlib.sha256(body).hexdigest()}\n".encode() + body
    return out


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=300),
                         st.builds(lambda f, c, r: (f, c, r), st.lists(st.tuples(st.integers(0, 4096),
                                                                                 st.integers(1, 255)), max_size=6),
                                   st.integers(0, 64), st.booleans())))
@example(content=([], 0, True))
@example(content=([(40, 1)], 0, False))
def test_fuzzed_frontend_entries_give_the_module_or_a_coded_diagnostic(disk_cache, pristine_entry, content):
    want = compile_source(SOURCE, "<t>").text()
    fcache.clear()
    fcache.compile_cached(SOURCE, "<t>")
    (entry,) = _entries(disk_cache)
    data = content if isinstance(content, bytes) else _mutated(pristine_entry, *content)
    pathlib.Path(entry).write_bytes(data)
    fcache.clear()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MindCacheWarning)
        try:
            got = fcache.compile_cached(SOURCE, "<t>")
        except MindError as e:  # only a text whose hash was recomputed can get this far
            assert isinstance(content, tuple) and content[2] and "E7009" not in e.codes
            return
    if not (isinstance(content, tuple) and content[2]):
        assert got.text() == want  # damage without a matching hash is always rebuilt


@pytest.mark.parametrize("spans", [b"[1]", b'[{"span": null, "params": 5}]', b'[{"span": [1, 2]}]',
                                   b'[{"span": null, "ops": {"99": null}}]', b'[{"span": null, "ops": {"x": null}}]',
                                   b"{}", b"[]", b'[{"span": ["f", "1", 1, 1, 1]}]'])
def test_an_entry_with_a_bad_span_table_is_rebuilt_even_with_a_matching_hash(disk_cache, spans):
    import hashlib
    good = fcache.compile_cached(SOURCE, "<t>")
    (entry,) = _entries(disk_cache)
    _, _, body = pathlib.Path(entry).read_bytes().partition(b"\n")
    body = spans + b"\n" + body.partition(b"\n")[2]
    pathlib.Path(entry).write_bytes(f"{fcache.FORMAT} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    fcache.clear()
    with pytest.warns(MindCacheWarning):
        assert fcache.compile_cached(SOURCE, "<t>").text() == good.text()
