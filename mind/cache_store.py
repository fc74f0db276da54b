"""The one door to MIND's on-disk caches: where they are, whether they are on, and the checks every
folder and file in them passes before MIND reads or writes it (see ``docs/cache.md``).

Why checks: the caches hold what MIND executes (shared libraries it ``dlopen``s) or trusts (the Core
IR the frontend would otherwise compute), so whoever can write them can run code as the user.  The
rules are those ``ssh`` applies to ``~/.ssh``: a folder is used only if it is a real directory (not a
symbolic link), owned by the current user and not writable by group or others; folders MIND creates
are created ``0700`` whatever the umask.  Anything else is refused with E7010, which says what is
wrong and how to fix it: refusing is safer than silently running without a cache, which would hide
an attack (and a slow start) from the user.

Files are opened with ``O_NOFOLLOW`` and checked on the descriptor (``fstat``: a regular file of the
user's, not group/other-writable, within a size bound); their callers hash the bytes read from that
descriptor.  A file that fails is a damaged entry: ``evict`` removes it and warns (E7011, severity
warning, through Python's ``warnings`` as a ``MindCacheWarning``), and the caller rebuilds it.

Each folder is checked once per process (a handful of ``lstat`` calls on a warm start).  Turn every
on-disk cache off with ``MIND_CACHE=off``.
"""

from __future__ import annotations

import os
import stat
import time
import warnings

from mind.diagnostics import Diagnostic, MindError, error
from mind.disk import TEMP_PREFIX

__all__ = ["cache_dir", "caching_enabled", "trusted_folder", "open_entry", "read_entry", "evict", "warn",
           "sweep_debris", "is_key", "MindCacheWarning", "EntryProblem", "E_UNSAFE", "E_EVICTED",
           "DEBRIS_PREFIXES", "DEBRIS_GRACE_S", "forget_checks"]

E_UNSAFE = "E7010"
"""A cache folder is not safe to use (the diagnostic says why and how to fix it)."""
E_EVICTED = "E7011"
"""A damaged cache entry was removed and is rebuilt (a warning)."""

SETTING = "MIND_CACHE"
SETTINGS = ("on", "off")

DEBRIS_PREFIXES = (".link-", TEMP_PREFIX, ".load-")
"""Names of MIND's temporary files and folders in the cache (``codegen.link_shared``'s link folders,
``disk.replace_file``'s temporary files, the CPU engine's links for loading a checked library): what
a killed process can leave behind."""
DEBRIS_GRACE_S = 3600.0
"""Debris younger than this may belong to a process still writing it, and is left alone."""

_HEX = frozenset("0123456789abcdef")
_CHECKED: set[str] = set()
_SWEPT: set[str] = set()


class MindCacheWarning(UserWarning):
    """A damaged cache entry was removed and will be rebuilt; ``diagnostic`` is the coded warning
    (E7011, severity ``warning``) that ``mind`` prints and ``--json`` reports."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class EntryProblem(Exception):
    """A cache file that must not be used (its reason is the message)."""


def cache_dir() -> str:
    """The root of every cache: ``$MIND_CACHE_DIR``, else ``$XDG_CACHE_HOME/mind``, else
    ``~/.cache/mind`` (not created here)."""
    explicit = os.environ.get("MIND_CACHE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative value is invalid and ignored
        return os.path.join(xdg, "mind")
    return os.path.join(os.path.expanduser("~"), ".cache", "mind")


def caching_enabled() -> bool:
    """``$MIND_CACHE``: ``on`` (default) or ``off`` (no on-disk cache at all); anything else is E7002,
    not a silent default (a misspelt ``of`` would otherwise keep the caches on)."""
    value = os.environ.get(SETTING, "")
    if value not in ("", *SETTINGS):
        raise error("E7002", f"environment variable {SETTING}={value!r} is not a valid setting",
                    help="use on (cache compiled kernels and frontend results on disk) or off, or unset it "
                         "(default on)")
    return value != "off"


def is_key(name: object) -> bool:
    """Whether ``name`` is a cache key: 64 lowercase hex digits (so joining it to a folder can only
    name a file in that folder)."""
    return isinstance(name, str) and len(name) == 64 and _HEX.issuperset(name)


def trusted_folder(root: str, *parts: str, create: bool) -> str | None:
    """``root/parts...`` after checking ``root`` and each folder under it (once per process); with
    ``create``, missing ones are made ``0700``.  None when a folder is missing and not ``create``d.
    E7010 (``MindError``) when one is not safe to use; OSError when one cannot be created."""
    path = root
    for part in ("", *parts):
        if part:
            if part in (".", "..") or "/" in part or "\0" in part:
                raise ValueError(f"not a folder name: {part!r}")  # a bug of the caller, never input
            path = os.path.join(path, part)
        if path in _CHECKED:
            continue
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return None
            st = _make_folder(path, parents=(path == root))
        _require_safe(path, st)
        _CHECKED.add(path)
    return path


def _make_folder(path: str, parents: bool) -> os.stat_result:
    """Create ``path`` with mode 0700 whatever the umask (the umask can only remove bits: a mode it
    removed owner bits from is set again through a descriptor, never through a path)."""
    if parents:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return os.lstat(path)  # another process made it: checked like any other folder
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) != 0o700:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, 0o700)
            st = os.fstat(fd)
        finally:
            os.close(fd)
    return st


def _require_safe(path: str, st: os.stat_result) -> None:
    mode = st.st_mode
    fix = (f"point MIND_CACHE_DIR at a folder of your own, or set {SETTING}=off to turn MIND's "
           "on-disk caches off")
    if stat.S_ISLNK(mode):
        raise _unsafe(path, "is a symbolic link", f"replace it with a folder of your own "
                                                  f"(`rm {path} && mkdir -m 700 {path}`), or {fix}")
    if not stat.S_ISDIR(mode):
        raise _unsafe(path, "is not a folder", f"remove it, or {fix}")
    if st.st_uid != os.geteuid():
        raise _unsafe(path, f"is owned by {_user(st.st_uid)}, not by you ({_user(os.geteuid())})",
                      f"another account could plant code there that MIND would run; {fix}")
    if mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if mode & bit)
        raise _unsafe(path, f"is writable by {who} (mode {stat.S_IMODE(mode):04o})",
                      f"run `chmod 700 {path}`, or {fix}")


def _unsafe(path: str, problem: str, help: str) -> MindError:
    return error(E_UNSAFE, f"cache folder `{path}` {problem}: refusing to use it", help=help,
                 notes=("a cache folder must be a real folder, owned by you and writable by you alone, "
                        "like ~/.ssh",))


def _user(uid: int) -> str:
    try:
        import pwd
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def open_entry(path: str, max_bytes: int) -> tuple[int, bytes] | None:
    """A descriptor of the cache file ``path`` and its bytes, read through that descriptor; None when
    it does not exist.  ``EntryProblem`` when it is a link, not a regular file, not the user's,
    writable by group or others, or larger than ``max_bytes``.  The caller closes the descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise EntryProblem(f"cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise EntryProblem("is not a regular file")
        if st.st_uid != os.geteuid():
            raise EntryProblem(f"is owned by {_user(st.st_uid)}")
        if st.st_mode & 0o022:
            raise EntryProblem(f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})")
        if st.st_size > max_bytes:
            raise EntryProblem(f"is {st.st_size} bytes, over the bound of {max_bytes}")
        chunks = []
        left = st.st_size + 1  # one byte more: a file that grew since fstat is noticed
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise EntryProblem(f"is over the bound of {max_bytes} bytes")
        return fd, data
    except EntryProblem:
        os.close(fd)
        raise
    except OSError as e:
        os.close(fd)
        raise EntryProblem(f"cannot be read ({e.strerror or e})") from None


def read_entry(path: str, max_bytes: int) -> bytes | None:
    """The bytes of the cache file ``path`` (``open_entry`` without the descriptor)."""
    opened = open_entry(path, max_bytes)
    if opened is None:
        return None
    os.close(opened[0])
    return opened[1]


def evict(paths: "list[str] | tuple[str, ...]", reason: str) -> None:
    """Remove the files of a damaged entry (those already gone are fine) and warn that it is rebuilt."""
    for p in paths:
        try:
            if stat.S_ISDIR(os.lstat(p).st_mode):  # a folder planted under an entry's name
                import shutil
                shutil.rmtree(p)  # never follows links (fd-based on Linux)
            else:
                os.unlink(p)
        except OSError:
            pass  # already gone, or not ours to remove: the next check reports it again
    warn(f"removed a damaged cache entry `{paths[0]}`: {reason}; it is rebuilt",
         help="nothing to do if this is rare (a full disk, a crash); if it repeats, something else "
              "is writing into MIND's cache folder")


def warn(message: str, help: str | None = None) -> None:
    """Issue the coded warning E7011 (a ``MindCacheWarning``)."""
    diag = Diagnostic(E_EVICTED, message, help=help, severity="warning")
    warnings.warn(MindCacheWarning(diag), stacklevel=3)


def sweep_debris(root: str) -> int:
    """Remove what killed processes left in the cache under ``root`` (once per process): entries whose
    names start with ``DEBRIS_PREFIXES``, older than ``DEBRIS_GRACE_S``, in ``root`` and in its
    folders of entries (``xx/`` and ``frontend/xx/``).  Only folders that pass the checks are
    touched.  Returns how many were removed."""
    if root in _SWEPT:
        return 0
    _SWEPT.add(root)
    removed = 0
    cutoff = time.time() - DEBRIS_GRACE_S
    for folder in _entry_folders(root):
        try:
            with os.scandir(folder) as it:
                found = [e for e in it if e.name.startswith(DEBRIS_PREFIXES)]
        except OSError:
            continue
        for e in found:
            removed += _remove_if_old(e, cutoff)
    return removed


def _entry_folders(root: str) -> list[str]:
    """``root`` and its two-hex-digit folders, and those of ``root/frontend``, that pass the checks."""
    out = []
    for base, parts in ((root, ()), (os.path.join(root, "frontend"), ("frontend",))):
        try:
            if trusted_folder(root, *parts, create=False) is None:
                continue
            with os.scandir(base) as it:
                names = sorted(e.name for e in it if len(e.name) == 2 and _HEX.issuperset(e.name))
        except (MindError, OSError):
            continue
        out.append(base)
        for name in names:
            try:
                if trusted_folder(root, *parts, name, create=False) is not None:
                    out.append(os.path.join(base, name))
            except MindError:
                continue
    return out


def _remove_if_old(entry: "os.DirEntry[str]", cutoff: float) -> int:
    try:
        st = entry.stat(follow_symlinks=False)
        if st.st_mtime > cutoff or st.st_uid != os.geteuid():
            return 0
        if stat.S_ISDIR(st.st_mode):
            import shutil
            shutil.rmtree(entry.path)  # never follows links (fd-based on Linux)
        else:
            os.unlink(entry.path)
        return 1
    except OSError:
        return 0


def forget_checks() -> None:
    """Forget which folders were checked and swept (tests change them within one process)."""
    _CHECKED.clear()
    _SWEPT.clear()
