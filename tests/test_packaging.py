"""Packaging and hygiene: wheel contents, cheap imports, README == CI."""

from __future__ import annotations

import os
import re
import subprocess
import sys

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)


def test_packages_cover_every_package_directory():
    tool = _pyproject()["tool"]["setuptools"]
    package_dir = tool["package-dir"]
    packages = set(tool["packages"])
    missing = []
    for pkg, folder in package_dir.items():
        base = os.path.join(ROOT, folder)
        for root, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(root, base)
                name = pkg if rel == "." else pkg + "." + rel.replace(os.sep, ".")
                if name not in packages:
                    missing.append(name)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"


def test_package_data_ships_conformance_cases_and_grammar():
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    assert "*.ebnf" in data["mind.spec"]
    assert any(p.startswith("suite/cases") for p in data["mind.conformance"]) and "*.json" in data["mind.conformance"]


def test_import_mind_is_cheap():
    code = ("import sys, mind, mind.ir.core, mind.ir.parser, mind.ir.printer, mind.ir.verify, "
            "mind.reference.interpreter, mind.cli.main, mind.spec.accuracy, mind.conformance.run\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mlir', 'sympy', 'z3', 'llvmlite', 'torch', 'jax'))\n"
            "print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"importing mind pulls in {r.stdout.strip()}"


def test_readme_test_command_is_the_ci_command():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    test_cmds = [b.strip() for b in blocks if "pytest" in b]
    assert len(test_cmds) == 1, test_cmds
    ci_lines = [l.strip() for l in ci.splitlines() if "pytest" in l and not l.strip().startswith("#")]
    assert ci_lines == [test_cmds[0]]
