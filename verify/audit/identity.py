"""Tool identity: what an auditor must know to account for the tool that produced a bundle.

MIND's version and a SHA-256 of its own Python sources (contents, not modification times: two
checkouts of the same code have the same hash), every third-party distribution it depends on with
the exact version read from the installed metadata (the transitive closure of ``mind-lang``'s
requirements: NumPy, Z3, cvc5, sympy, MLIR/LLVM, llvmlite, the CUDA components, ...), the two
solvers' own version strings, and the host.  The host is described by facts that are the same for
every process on one machine (operating system, machine, CPU model, core count, Python), so two
bundles made on one machine are byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from importlib import metadata, util
from typing import Any

DISTRIBUTION = "mind-lang"

#: The import packages whose ``.py`` files make MIND's source hash (every package of pyproject.toml's
#: ``package-dir``).
SOURCE_PACKAGES = ("mind", "mind.spec", "mind.reference", "mind.compiler", "mind.verify", "mind.conformance")

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def source_hash() -> tuple[str, int]:
    """SHA-256 over (package, relative path, contents) of every ``.py`` file of MIND, and how many."""
    h = hashlib.sha256()
    count = 0
    for package in SOURCE_PACKAGES:
        spec = util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec else []
        for root in roots:
            files = []
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
                files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
            for path in sorted(files):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, "rb") as fh:
                    data = fh.read()
                h.update(f"{package}/{rel}\0{len(data)}\0".encode())
                h.update(data)
                count += 1
    return h.hexdigest(), count


def _requirements(dist: str) -> list[tuple[str, bool]]:
    """(name, has an environment marker) of ``dist``'s requirements that no ``extra`` asks for."""
    out = []
    for req in metadata.requires(dist) or []:
        if "extra ==" in req.replace("extra==", "extra =="):
            continue
        m = _NAME.match(req)
        if m:
            out.append((m.group(1), ";" in req))
    return out


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dependencies() -> list[dict[str, Any]]:
    """Every installed distribution MIND depends on, directly or not, with its exact version and
    licence as its metadata states them; sorted by name.  A requirement that is not installed is
    listed with ``version`` null, unless an environment marker makes it conditional (``; python_version
    < "3.12"``): one not installed is then one this environment does not need."""
    seen: dict[str, dict[str, Any]] = {}
    todo = [(r, m, True) for r, m in _requirements(DISTRIBUTION)]
    while todo:
        name, marker, direct = todo.pop()
        key = _canonical(name)
        if key in seen:
            seen[key]["direct"] = seen[key]["direct"] or direct
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if not marker:
                seen[key] = {"name": key, "version": None, "direct": direct, "license": None}
            continue
        meta = dist.metadata
        licence = meta.get("License-Expression") or meta.get("License") or None
        if licence and len(licence) > 120:  # a whole licence text pasted into the field
            licence = licence.splitlines()[0][:120]
        seen[key] = {"name": key, "version": dist.version, "direct": direct, "license": licence}
        todo += [(r, m, False) for r, m in _requirements(name)]
    return [seen[k] for k in sorted(seen)]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host() -> dict[str, Any]:
    return {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
            "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
            "python": f"{platform.python_implementation()} {platform.python_version()}"}


def tool_identity(command: list[str], options: dict[str, Any]) -> dict[str, Any]:
    from mind.version import __version__
    from mind.spec.version import SPEC_VERSION
    from mind.verify.audit.solvers import solver_versions

    digest, count = source_hash()
    return {"name": "mind", "version": __version__, "spec_version": SPEC_VERSION,
            "source_sha256": digest, "source_files": count, "dependencies": dependencies(),
            "solvers": solver_versions(), "host": host(), "command": command, "options": options}
