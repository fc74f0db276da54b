"""The standard library's modules: which names each provides, how dotted names and imports resolve,
and the names that MIND refuses with a reason.

Every builtin is visible without an import (the public spec's rule); ``import`` and ``use`` only
check that the path names something.  Modules (``std::`` is an optional prefix, ``::`` and ``.``
are the same separator):

* ``tensor``: every builtin (the public compiler's ``tensor.*`` calls);
* ``math``: the elementwise functions; ``nn``: activations and losses;
* ``diff``: ``grad``, ``backward``, ``vjp``, ``jvp``, ``value_and_grad``, ``jacobian``;
* ``core``, ``io``: names that exist in the public library but have no meaning in a pure tensor
  program (``print``, ``assert`` ...), refused where they are called (E1013, ``REFUSED``).
"""

from __future__ import annotations

from typing import Any

from . import builtins_array, builtins_math
from .builtins import BUILTINS, b_max, b_maximum, b_minimum, register
from .values import suggest

register(builtins_math.TABLE)
register(builtins_array.TABLE)
register(builtins_math.minmax_table({"max": b_max}, {"maximum": b_maximum, "minimum": b_minimum}))

#: The autodiff entry points (``diffcalls``), which take functions rather than tensors.
DIFF = ("grad", "backward", "vjp", "jvp", "value_and_grad", "jacobian")

#: Names of the public standard library that MIND does not provide: (message, what to write).
REFUSED: dict[str, tuple[str, str]] = {}
for _n in ("print", "println", "eprint", "eprintln", "debug", "dbg"):
    REFUSED[_n] = (f"`{_n}` is not supported: a MIND program is a pure tensor computation",
                   "return the value instead; `mind run` prints every result with its dtype and shape")
for _n in ("random_normal", "randn", "rand", "random_uniform", "uniform", "normal", "randint"):
    REFUSED[_n] = (f"`{_n}` is not supported: MIND programs are deterministic",
                   "pass the tensor as a parameter (`mind run --input w=w.npy`), or build it with "
                   "`full`, `arange` or `linspace`")
for _n in ("assert", "panic", "unreachable"):
    REFUSED[_n] = (f"`{_n}` is not supported: checks run at compile time",
                   "the compiler checks every shape and dtype; for a value, return a bool tensor")

_MATH = ("abs", "neg", "exp", "log", "log2", "log10", "sqrt", "pow", "sin", "cos", "tan", "floor",
         "ceil", "round", "trunc", "sign", "tanh", "sigmoid", "minimum", "maximum", "min", "max",
         "clip", "clamp", "where", "cast")
_NN = ("relu", "sigmoid", "tanh", "softmax", "log_softmax", "conv2d", "matmul")

#: module path -> the names it provides (``None``: every builtin).
MODULES: dict[tuple[str, ...], Any] = {
    ("tensor",): None,
    ("math",): frozenset(_MATH),
    ("nn",): frozenset(_NN),
    ("diff",): frozenset(DIFF),
    ("core",): frozenset(("assert", "panic", "unreachable")),
    ("io",): frozenset(("print", "println", "eprint", "eprintln", "debug")),
}


def module_of(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The module named by ``path`` (``std::`` optional), or ``None``."""
    if path and path[0] == "std":
        path = path[1:]
    return path if path in MODULES else None


def provides(module: tuple[str, ...], name: str) -> bool:
    names = MODULES[module]
    if names is None:
        return name in BUILTINS or name in DIFF
    return name in names


def known_names() -> list[str]:
    """Every callable name of the library (for "did you mean")."""
    return sorted(set(BUILTINS) | set(DIFF))


def split_qualified(dotted: str) -> tuple[tuple[str, ...] | None, str]:
    """``"std.math.sin"`` -> ``(("math",), "sin")``; a name without a module prefix gives
    ``(None, name)``; an unknown prefix gives ``(prefix path, name)`` for the caller to report."""
    parts = tuple(dotted.split("."))
    if len(parts) == 1:
        return None, parts[0]
    return parts[:-1], parts[-1]


def check_import(E: Any, s: Any) -> None:
    """``import a::b``, ``import a::{b, c}``, ``import std.tensor``: the module must exist and provide
    the names."""
    path = tuple(s.path)
    if s.names is not None:
        module, names = path, list(s.names)
    elif module_of(path) is not None or (path[0] == "std" and len(path) == 2):
        module, names = path, []  # `import std.tensor`: a whole module
    else:
        module, names = path[:-1], [path[-1]]
    found = module_of(module)
    if found is None:
        shown = "::".join(module) or "::".join(path)
        E.report("E2008", f"`{shown}` is not a module of MIND's standard library", s.span,
                 "its modules are " + ", ".join(f"`{'::'.join(m)}`" for m in MODULES) +
                 " (`std::` may precede them), e.g. `import diff::grad`")
        return
    for n in names:
        refused = REFUSED.get(n)
        if refused is not None:
            E.report("E1013", refused[0], s.span, refused[1])
        elif not provides(found, n):
            E.report("E2008", f"`{'::'.join(found)}` has no `{n}`", s.span,
                     suggest(n, known_names() if MODULES[found] is None else MODULES[found]))
