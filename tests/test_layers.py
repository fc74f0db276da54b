"""The package's layers, enforced: spec ← reference ← ir ← compiler / verify / conformance ← api / audit ← cli.

Every module of the package (found through ``pyproject.toml``'s ``package-dir`` and ``packages``)
is parsed with ``ast`` and every import is followed: module-level and function-local ones, ``if
TYPE_CHECKING`` ones, absolute and relative (``from . import x``).  Each module is mapped to its
layer through ``LAYERS``, the one table of layers, which ``docs/architecture.md`` prints.  A module
may import its own layer and the layers of lower rank; an import of a higher rank, or of another
layer of the same rank (sideways), is a violation, and so is an import cycle between modules.

Violations that other work is still removing are listed in ``KNOWN_VIOLATIONS`` (none today); the
test asserts that the violations found are exactly those, so a new one fails and removing one
forces the list to shrink.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (rank, layer, module patterns): a module belongs to the layer of its longest matching pattern.
#: A pattern ``p`` matches the module ``p`` and its submodules, ``p.*`` only the submodules.
#: ``mind.diagnostics`` is in the spec layer: it is where every layer's errors come from, and it
#: imports nothing but the spec (``mind.spec.errors``, ``mind.spec.record``).  The package ``mind``
#: itself (``mind.compile``) and ``mind.loader`` are the front door: they compile source through the
#: frontend, so they sit above the compiler, beside the CLI's layer below it.
LAYERS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "spec", ("mind.spec", "mind.diagnostics")),
    (1, "reference", ("mind.reference",)),
    (2, "ir", ("mind.*",)),  # mind/: the Core IR, calling conventions, file I/O, the backend registry
    (3, "compiler", ("mind.compiler",)),
    (3, "verify", ("mind.verify",)),
    (3, "conformance", ("mind.conformance",)),
    (4, "api", ("mind", "mind.loader")),
    # Adapters of other systems for the conformance runner: built on the exporters (compiler) and the
    # protocol (conformance), loaded by name (``python:`` implementations), imported by nothing.
    (4, "adapters", ("mind.conformance.adapters",)),
    # ``mind audit``: reads the compiler, the verifier and the conformance suite; only the CLI imports it.
    (4, "audit", ("mind.verify.audit",)),
    (5, "cli", ("mind.cli",)),
)

#: Violations still being removed (each names the modules on both sides; the test reports every
#: file:line).  None: a new one fails the test, and an entry here needs a reason written beside it.
KNOWN_VIOLATIONS: frozenset[str] = frozenset()


def package_modules(root: str = ROOT) -> dict[str, str]:
    """Module name -> file path, for every module of every package ``pyproject.toml`` declares."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as fh:
        setup = tomllib.load(fh)["tool"]["setuptools"]
    dirs = setup["package-dir"]
    modules: dict[str, str] = {}
    for package in setup["packages"]:
        mapped = max((p for p in dirs if package == p or package.startswith(p + ".")), key=len)
        folder = os.path.join(root, dirs[mapped], *package[len(mapped):].split(".")[1:])
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                modules[package if name == "__init__.py" else f"{package}.{name[:-3]}"] = os.path.join(folder, name)
    return modules


def _matches(module: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return module.startswith(pattern[:-1])
    return module == pattern or module.startswith(pattern + ".")


def layer_of(module: str) -> tuple[int, str]:
    best = max(((pattern, rank, layer) for rank, layer, patterns in LAYERS for pattern in patterns
                if _matches(module, pattern)), key=lambda row: len(row[0]))
    return best[1], best[2]


def imports(module: str, path: str, modules: dict[str, str]) -> Iterator[tuple[int, str]]:
    """(line, imported package module) for every import in ``path``, resolved to the longest module
    of the package it names (``from a import b`` names ``a.b`` when that is a module)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(parts + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                yield node.lineno, name


def import_graph(root: str) -> tuple[dict[str, str], dict[str, dict[str, list[int]]]]:
    """The modules and, per module, the package modules it imports with the lines that do."""
    modules = package_modules(root)
    graph: dict[str, dict[str, list[int]]] = {m: {} for m in modules}
    for module, path in modules.items():
        for line, target in imports(module, path, modules):
            if target == module:
                continue
            lines = graph[module].setdefault(target, [])
            if line not in lines:
                lines.append(line)
    return modules, graph


def cycles(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def violations(root: str = ROOT) -> dict[str, list[str]]:
    """Each violation -> the ``file:line`` places that make it."""
    modules, graph = import_graph(root)
    found: dict[str, list[str]] = {}

    def where(module: str, target: str) -> list[str]:
        return [f"{os.path.relpath(modules[module], root)}:{line}" for line in sorted(graph[module][target])]

    for module, targets in graph.items():
        rank, layer = layer_of(module)
        for target in targets:
            target_rank, target_layer = layer_of(target)
            if target_layer == layer or target_rank < rank:
                continue
            kind = "upward" if target_rank > rank else "sideways"
            found[f"{kind}: {module} ({layer}) imports {target} ({target_layer})"] = where(module, target)
    for component in cycles(graph):
        members = set(component)
        found["cycle: " + ", ".join(component)] = [
            place for m in component for t in sorted(set(graph[m]) & members) for place in where(m, t)]
    return found


def test_every_module_has_a_layer_and_a_file():
    modules = package_modules()
    assert "mind.spec.ops.base" in modules and "mind.cli.main" in modules
    for module in modules:
        assert layer_of(module)[1] in {layer for _, layer, _ in LAYERS}


def test_no_import_crosses_the_layers_except_the_known_ones():
    found = violations()
    new = {v: found[v] for v in sorted(set(found) - KNOWN_VIOLATIONS)}
    gone = sorted(KNOWN_VIOLATIONS - set(found))
    assert not new, "imports against the layers (see docs/architecture.md, Layers):\n" + "\n".join(
        f"  {v}\n    at {', '.join(places)}" for v, places in new.items())
    assert not gone, "fixed, so remove from KNOWN_VIOLATIONS: " + "; ".join(gone)


def test_the_spec_layer_is_clean():
    """No known violation starts in the spec layer: it imports nothing above itself."""
    for v in KNOWN_VIOLATIONS:
        kind, rest = v.split(": ", 1)
        importers = rest.split(", ") if kind == "cycle" else [rest.split(" ")[0]]
        assert all(layer_of(m)[1] != "spec" for m in importers), v


def test_the_checker_sees_function_local_relative_and_sideways_imports(tmp_path):
    """A planted upward import inside a function body, a relative one and a sideways one are each
    reported with their file and line, and a planted two-module cycle is found."""
    pkg = tmp_path / "spec"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from mind.compiler import x\n")
    (pkg / "b.py").write_text("from . import c\n")
    (pkg / "c.py").write_text("from .b import y\n")
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "__init__.py").write_text("")
    (tmp_path / "verify" / "d.py").write_text("import mind.compiler.x\n")
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "__init__.py").write_text("")
    (tmp_path / "compiler" / "x.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "mind.spec" = "spec", "mind.verify" = "verify", '
        '"mind.compiler" = "compiler" }\npackages = ["mind.spec", "mind.verify", "mind.compiler"]\n')
    found = violations(str(tmp_path))
    assert found == {
        "upward: mind.spec.a (spec) imports mind.compiler.x (compiler)": ["spec/a.py:2"],
        "sideways: mind.verify.d (verify) imports mind.compiler.x (compiler)": ["verify/d.py:1"],
        "cycle: mind.spec.b, mind.spec.c": ["spec/b.py:1", "spec/c.py:1"],
    }


def layer_table_markdown() -> str:
    rows = ["| Rank | Layer | Modules |", "|---|---|---|"]
    for rank, layer, prefixes in LAYERS:
        rows.append(f"| {rank} | {layer} | {', '.join(f'`{p}`' for p in prefixes)} |")
    return "\n".join(rows) + "\n"


def test_architecture_doc_prints_the_layer_table():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        doc = fh.read()
    assert layer_table_markdown() in doc, "docs/architecture.md must print:\n" + layer_table_markdown()


def test_importing_the_op_table_loads_only_the_spec_layer():
    """``import mind.spec.ops`` (and the rest of the spec) loads no module of a higher layer and no
    third-party package: the spec stands on the standard library (NumPy is imported lazily, where
    arrays are made)."""
    code = ("import sys, mind.spec.ops, mind.spec.table, mind.spec.accuracy\n"
            "print(' '.join(sorted(m for m in sys.modules if m == 'mind' or m.startswith('mind.')"
            " or m.split('.')[0] in ('numpy', 'z3', 'sympy', 'mlir', 'llvmlite'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    loaded = r.stdout.split()
    assert "mind.spec.ops" in loaded
    outside = [m for m in loaded if m not in ("mind", "mind.version")
               and not (m.startswith("mind.") and layer_of(m)[1] == "spec")]
    # ``mind`` itself is the parent package, loaded first by any ``import mind.x``; it imports
    # nothing at load time but its version string (``tests/test_packaging.py`` keeps it cheap).
    assert outside == [], f"importing the spec loads {outside}"
