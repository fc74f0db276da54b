"""Split an LLVM IR module (text) into parts that LLVM can optimize and compile independently.

Why: LLVM's code generation is about half of a large kernel's compile time (train_step) and runs on
one core.  A kernel with OpenMP regions is several functions (the entry, its C-interface
wrapper and one outlined function per parallel region), so its module can be cut between functions,
each part compiled on its own core, and the objects linked together (``codegen``).

The cut is made on the text MLIR's translation produces: header entities (types, globals, declarations,
attributes, metadata) go to every part; each function definition to exactly one part.  A function
defined in one part and referenced from another gets external linkage with default visibility instead of
``internal``, and a matching ``declare`` in the referencing part.  Not ``hidden``: a hidden symbol is
known to be in the same module, so its address is taken PC-relative (``R_X86_64_PC32``: an OpenMP
outlined function passed to the fork call), and a JIT that maps each part wherever it finds room
cannot resolve that when the parts land more than 2 GiB apart (MCJIT, the loader before JITLink,
asserted in ``RuntimeDyldELF`` and aborted a long-running process with torch and jax loaded); with
default visibility the address comes through a GOT entry and a call through a stub, both within
the referencing part.  The shared library is linked ``-Bsymbolic`` (``codegen``), so such references bind
inside it.  Private
globals are copied into each part, which is only sound for constants; an exported mutable global
(``@x = global i32 0``) is defined in one part and declared ``external`` in the others that use it; a
module with an internal mutable global, or any line this splitter does not recognize, is not split
(``None``).  The partition depends on the
text alone (never on the machine), so the objects, and the library linked from them, are as
deterministic as a single object.
"""

from __future__ import annotations

import re
from typing import Sequence

__all__ = ["split_module", "SPLIT_MIN_LINES", "SPLIT_PARTS"]

SPLIT_MIN_LINES = 400
"""Below this many lines of function bodies, one part: the split and the second thread cost more
than they save (``docs/backend-cpu.md``, Measurements, has the gains above it)."""

SPLIT_PARTS = 2
"""Fixed, not the machine's core count, so that every machine compiles the same objects."""

_MIN_SHARE = 0.2  # the smaller part must carry at least this share of the lines to be worth a thread

class _Patterns:
    """The regular expressions, compiled on first use (most modules are one function and
    never get this far)."""

    _compiled: "_Patterns | None" = None

    def __init__(self) -> None:
        self.define = re.compile(r"^define (?P<linkage>(?:internal |private |hidden |dso_local )*)(?P<ret>\S+) "
                                 r"@(?P<name>[-\w.$]+)\((?P<params>[^()]*)\)(?P<rest>[^{]*)\{$")
        self.param = re.compile(r"^(?P<type>ptr|i\d+|half|bfloat|float|double|"
                                r"<\d+ x (?:ptr|i\d+|half|bfloat|float|double)>)"
                                r"(?P<attrs>(?: (?:noalias|nocapture|readonly|writeonly|nonnull|noundef|align \d+))*)"
                                r"(?: %[-\w.$]+)?$")
        self.symbol = re.compile(r"@([-\w.$]+)")
        self.header = re.compile(r"^(?:$|;|source_filename |target |%[-\w.$]+ = type |declare |attributes #\d+ = |!)")
        self.constant_global = re.compile(
            r"^@[-\w.$]+ = (?:private |internal )?(?:unnamed_addr |local_unnamed_addr )?constant ")
        # an exported mutable scalar (the ``kmpc_gomp`` serial switch): defined in one part only
        self.exported_global = re.compile(r"^@(?P<name>[-\w.$]+) = (?:dso_local )?global "
                                          r"(?P<type>i\d+|ptr|float|double) [^,]+(?:, align \d+)?$")
        self.attribute_refs = re.compile(r"(?:#\d+ ?)*")

    @classmethod
    def get(cls) -> "_Patterns":
        if cls._compiled is None:
            cls._compiled = cls()
        return cls._compiled


class _Function:
    __slots__ = ("name", "lines", "declaration", "internal")

    def __init__(self, name: str, lines: list[str], declaration: str, internal: bool) -> None:
        self.name = name
        self.lines = lines
        self.declaration = declaration
        self.internal = internal


def _parse_define(line: str) -> tuple[str, str, bool] | None:
    """(name, declaration text, internal?) of a ``define`` line, or None if it is not one we can
    declare elsewhere (unknown parameter types or attributes, linkage we do not handle)."""
    pat = _Patterns.get()
    m = pat.define.match(line)
    if m is None:
        return None
    linkage = m.group("linkage").split()
    if any(k not in ("internal", "dso_local") for k in linkage):
        return None
    types = []
    params = m.group("params").strip()
    listed = params.split(", ") if params else []
    for i, p in enumerate(listed):
        if p.strip() == "..." and i == len(listed) - 1:
            types.append("...")  # variadic (the ``__kmpc_fork_call`` of ``kmpc_gomp``)
            continue
        pm = pat.param.match(p.strip())
        if pm is None:
            return None
        types.append(pm.group("type"))
    rest = m.group("rest").strip()
    if rest and not pat.attribute_refs.fullmatch(rest):
        return None  # section, comdat, personality, gc...: not something MLIR emits for kernels
    internal = "internal" in linkage
    # an internal function referenced across parts becomes external, default visibility (module docstring)
    decl = f"declare {m.group('ret')} @{m.group('name')}({', '.join(types)})"
    return m.group("name"), decl, internal


def _read(text: str) -> tuple[list[str], list[_Function], dict[str, tuple[str, str]]] | None:
    """(header lines, functions, exported mutable globals: name -> (definition, type)), or None."""
    pat = _Patterns.get()
    header: list[str] = []
    functions: list[_Function] = []
    exported: dict[str, tuple[str, str]] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("define "):
            parsed = _parse_define(line)
            if parsed is None:
                return None
            j = i + 1
            while j < len(lines) and lines[j] != "}":
                j += 1
            if j == len(lines):
                return None
            name, decl, internal = parsed
            functions.append(_Function(name, lines[i:j + 1], decl, internal))
            i = j + 1
            continue
        if line.startswith("@"):
            g = pat.exported_global.match(line)
            if g is not None:
                exported[g.group("name")] = (line, g.group("type"))
                i += 1
                continue
            if not pat.constant_global.match(line):
                return None  # an internal mutable (or unusual) global cannot be copied into each part
        elif not pat.header.match(line):
            return None
        header.append(line)
        i += 1
    return header, functions, exported


def _partition(functions: Sequence[_Function], parts: int) -> list[list[_Function]]:
    """Largest first onto the lightest part (ties: the lower index); order within a part follows
    the module, so the result is a function of the text only."""
    loads = [0] * parts
    owner: dict[str, int] = {}
    for f in sorted(functions, key=lambda f: (-len(f.lines), f.name)):
        k = min(range(parts), key=lambda p: (loads[p], p))
        owner[f.name] = k
        loads[k] += len(f.lines)
    return [[f for f in functions if owner[f.name] == k] for k in range(parts)]


def split_module(text: str, parts: int = SPLIT_PARTS, min_lines: int | None = None) -> list[str] | None:
    """``parts`` module texts that together define what ``text`` defines, or None when the module
    is too small (``min_lines``, default ``SPLIT_MIN_LINES``), cannot be balanced, or has something
    this splitter does not handle."""
    if min_lines is None:
        min_lines = SPLIT_MIN_LINES
    if text.count("\ndefine ") + text.startswith("define ") < max(parts, 2) or text.count("\n") < min_lines:
        return None  # one function (a one-thread kernel) or a small module: nothing to gain
    sizes = [seg[:seg.find("\n}\n")].count("\n") for seg in text.split("\ndefine ")[1:]]
    if max(sizes) > (1 - _MIN_SHARE) * sum(sizes):
        return None  # one function dominates (a kernel and its C wrapper): known before any regex
    read = _read(text)
    if read is None:
        return None
    header, functions, exported = read
    total = sum(len(f.lines) for f in functions)
    if parts < 2 or len(functions) < parts or total < min_lines:
        return None
    groups = _partition(functions, parts)
    if min(sum(len(f.lines) for f in g) for g in groups) < _MIN_SHARE * total:
        return None  # one function dominates: a second thread would idle
    home = {f.name: k for k, g in enumerate(groups) for f in g}
    crossing: set[str] = set()  # defined in one part, referenced from another
    uses: list[set[str]] = []
    for k, g in enumerate(groups):
        used = {s for f in g for line in f.lines[1:] for s in _Patterns.get().symbol.findall(line)}
        uses.append(used)
        crossing |= {s for s in used if s in home and home[s] != k}
    # an exported mutable global lives in the first part that uses it (part 0 if none does); the
    # other parts that use it declare it, and the linker (ld, the JIT) binds them to that one definition
    global_home = {name: next((k for k in range(parts) if name in uses[k]), 0) for name in exported}
    out = []
    for k, g in enumerate(groups):
        decls = [f.declaration for f in functions if f.name in uses[k] and home[f.name] != k]
        decls += [exported[name][0] if global_home[name] == k else f"@{name} = external global {exported[name][1]}"
                  for name in sorted(exported) if global_home[name] == k or name in uses[k]]
        body: list[str] = []
        for f in g:
            first = f.lines[0]
            if f.name in crossing and f.internal:
                first = first.replace("define internal ", "define ", 1)
            body.append(first)
            body.extend(f.lines[1:])
        out.append("\n".join(header + decls + body) + "\n")
    return out
