"""The public MIND conformance cases: YAML files in the public spec's format (its
``conformance.md``, "Test format"), read unchanged, and the verdict on what an implementation did
with each.

A case gives a program (``input.source``: MIND source; ``input.ir_module``: an IR module in any
public encoding or Core IR text) and what must happen (``expected.status: success`` with
``output.result`` values, ``output.ir`` text or ``output.gradient_module``; or ``status: error``
with ``error.code``, ``error.message_contains`` and ``error.location``).  This module reads the
files (PyYAML's safe loader; no anchors or aliases, at most ``MAX_CASE_BYTES`` per file; a file
that is not a case is E7004 at its line and column), and ``judge`` compares an ``Observation`` of
the implementation with the case: ``pass``, ``fail`` or ``not-applicable``, each with its reasons.
Running the implementation is the caller's (``mind conformance run-public`` runs MIND).

How each field is checked (``docs/conformance.md``, "The public YAML cases"):

* ``error.code`` against the public catalogue's code for the implementation's first diagnostic
  (``Observation.public_code``: where MIND's code differs, the public one);
* ``error.message_contains`` is a substring of that diagnostic's message, ignoring case;
* ``error.location`` (``line``, ``column``, 1-based in the program text) is where it starts;
* ``result``: the one result's ``dtype``, ``shape``, and ``values`` within ``tolerance``
  (|got − expected| ≤ tolerance · max(1, |expected|); exact without one; NaN matches NaN) or a
  ``values_pattern`` (``all_zeros``, ``all_ones``);
* ``ir``: Core IR text, compared line by line with the canonical IR (surrounding blank space and
  ``\\r`` ignored); IR in another encoding cannot be compared (not applicable), nor can a
  ``gradient_module`` (the format does not say of which function with respect to what);
* a field this reader does not know, under ``input`` or ``expected``, makes the case not
  applicable (never a silent pass); ``profile`` other than the implementation's is not applicable.
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from mind.diagnostics import Diagnostic, MindError, Span, error
from mind.spec.errors import lookup

MAX_CASE_BYTES = 1 << 20
MAX_VALUES = 1 << 20  # elements of an expected result
CASE_SUFFIXES = (".yaml", ".yml")
STATUSES = ("success", "error")
OUTCOMES = ("pass", "fail", "not-applicable")

#: values_pattern -> the value every element has
PATTERNS: dict[str, float] = {"all_zeros": 0.0, "all_ones": 1.0}

#: The fields a case may have, by where they are; any other under ``input`` or ``expected`` makes
#: the case not applicable.  Top-level fields other than these are metadata and ignored.
TOP_FIELDS = ("description", "category", "profile", "input", "expected")
INPUT_FIELDS = ("source", "ir_module")
EXPECTED_FIELDS = ("status", "output", "error")
OUTPUT_FIELDS = ("result", "ir", "gradient_module")
RESULT_FIELDS = ("dtype", "shape", "values", "values_pattern", "tolerance")
ERROR_FIELDS = ("code", "message_contains", "location")
LOCATION_FIELDS = ("line", "column")


@dataclass(frozen=True)
class ResultSpec:
    dtype: str | None
    shape: tuple[int, ...] | None
    values: Any  # nested lists of floats, or None
    pattern: str | None
    tolerance: float


@dataclass(frozen=True)
class ErrorSpec:
    code: str | None
    message_contains: str | None
    line: int | None
    column: int | None


@dataclass(frozen=True)
class PublicCase:
    id: str  # the file's path under the folder, without its suffix
    path: str
    description: str
    category: str
    profile: str
    kind: str  # "source" or "ir_module"
    text: str
    status: str  # "success" or "error"
    result: ResultSpec | None = None
    ir: str | None = None
    gradient_module: str | None = None
    error: ErrorSpec | None = None
    unknown: tuple[str, ...] = ()  # fields this reader does not know ("expected.output.stdout")


@dataclass
class Observation:
    """What the implementation did with a case.  ``not_applicable``: why it could not run it."""

    status: str = "success"  # or "error"
    code: str | None = None  # the first diagnostic's code, and the public catalogue's for it
    public_code: str | None = None
    message: str | None = None
    line: int | None = None
    column: int | None = None
    results: list[Any] | None = None  # arrays, when the program ran
    ir_text: str | None = None  # canonical Core IR text of the program
    not_applicable: str | None = None

    @staticmethod
    def of_error(d: Diagnostic, public_code: str) -> "Observation":
        span = d.span
        return Observation("error", d.code, public_code, d.message, span.line if span else None,
                           span.col if span else None)

    def describe_error(self) -> str:
        where = f" at {self.line}:{self.column}" if self.line is not None else ""
        code = self.code if self.public_code in (None, self.code) else f"{self.code} (public {self.public_code})"
        return f"{code}{where}: {self.message}"


@dataclass
class Verdict:
    case: PublicCase
    outcome: str
    reasons: list[str] = field(default_factory=list)
    observation: Observation | None = None

    def to_json(self) -> dict[str, Any]:
        obs = self.observation
        observed = None
        if obs is not None:
            observed = {"status": obs.status, "code": obs.code, "public_code": obs.public_code,
                        "message": obs.message, "line": obs.line, "column": obs.column}
        return {"id": self.case.id, "file": self.case.path, "description": self.case.description,
                "category": self.case.category, "profile": self.case.profile, "outcome": self.outcome,
                "reasons": list(self.reasons), "observed": observed}


# -- reading -------------------------------------------------------------------------------------

def case_files(root: str) -> list[tuple[str, str]]:
    """(case id, path) of every ``*.yaml``/``*.yml`` regular file under ``root`` (or ``root`` itself
    if it is a file), sorted by id; folders are not followed through symbolic links."""
    if os.path.isfile(root):
        stem = os.path.splitext(os.path.basename(root))[0]
        return [(stem, root)]
    if not os.path.isdir(root):
        raise error("E7001", f"cannot read `{root}`: no such folder or file",
                    help="name a folder of public conformance cases (*.yaml), or one case file")
    found: list[tuple[str, str]] = []
    for path in _walk(root):
        rel = os.path.relpath(path, root)
        found.append((os.path.splitext(rel)[0].replace(os.sep, "/"), path))
    if not found:
        raise error("E7001", f"`{root}` holds no public conformance case (*.yaml or *.yml)",
                    help="name the folder holding the cases, e.g. the public spec's tests/conformance")
    return sorted(found)


def _walk(folder: str) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise error("E7001", f"cannot read the folder `{folder}`: {exc.strerror or exc}") from None
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path)
        elif entry.name.endswith(CASE_SUFFIXES) and entry.is_file():
            yield entry.path


def load_cases(root: str, select: tuple[str, ...] = ()) -> list[PublicCase]:
    """Every case under ``root`` whose id matches a ``select`` glob (all without one); E7004 with
    the file, line and column of every file that is not a case (none is run then)."""
    cases: list[PublicCase] = []
    problems: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for case_id, path in case_files(root):
        if select and not any(fnmatch.fnmatchcase(case_id, g) for g in select):
            continue
        try:
            cases.append(read_case(case_id, path, sources))
        except MindError as exc:
            problems.extend(exc.diagnostics)
    if problems:
        raise MindError(problems[:50], sources)
    return cases


def read_case(case_id: str, path: str, sources: dict[str, str] | None = None) -> PublicCase:
    from mind.driver_io import read_source

    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise error("E7001", f"cannot read `{path}`: {exc.strerror or exc}") from None
    if size > MAX_CASE_BYTES:
        raise MindError([Diagnostic("E7004", f"`{path}` has {size} bytes; a case file has at most "
                                             f"{MAX_CASE_BYTES}", Span(path, 1, 1, 1, 2))])
    text = read_source(path)
    if sources is not None:
        sources[path] = text
    root = _parse_yaml(text, path)
    return _case(case_id, path, root)


class _Node:
    """A YAML node with its value, for reporting a bad field at its line and column."""

    __slots__ = ("node", "value", "path", "where")

    def __init__(self, node: Any, value: Any, path: str, where: str) -> None:
        self.node, self.value, self.path, self.where = node, value, path, where

    def bad(self, what: str, help: str | None = None) -> MindError:
        mark = self.node.start_mark
        line, col = mark.line + 1, mark.column + 1
        return MindError([Diagnostic("E7004", f"{self.where}: {what}" if self.where else what, Span(self.path, line, col, line, col + 1),
                                     help=help or "see the public spec's conformance.md, \"Test format\"")])

    def mapping(self) -> dict[str, "_Node"]:
        import yaml

        if not isinstance(self.node, yaml.MappingNode) or not isinstance(self.value, dict):
            raise self.bad("expected a mapping of fields")
        if len(self.value) != len(self.node.value):
            seen: set[Any] = set()
            for key_node, _ in self.node.value:
                if key_node.value in seen:
                    raise _Node(key_node, None, self.path, self.where).bad(f"`{key_node.value}` appears twice")
                seen.add(key_node.value)
            raise self.bad("two fields have the same name")
        out: dict[str, _Node] = {}
        # the constructed dict keeps the order of the nodes (no key repeats)
        for (key_node, node), (key, value) in zip(self.node.value, self.value.items()):
            if not isinstance(key, str):
                raise _Node(key_node, key, self.path, self.where).bad("a field name is a word")
            out[key] = _Node(node, value, self.path, f"{self.where}.{key}".lstrip("."))
        return out

    def text(self) -> str:
        if not isinstance(self.value, str):
            raise self.bad("expected text")
        return self.value

    def integer(self) -> int:
        if type(self.value) is not int:
            raise self.bad("expected an integer")
        return self.value

    def number(self) -> float:
        x = _as_number(self.value)
        if x is None or type(self.value) is bool:
            raise self.bad("expected a number")
        return x


def _parse_yaml(text: str, path: str) -> _Node:
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        """PyYAML's safe loader without anchors and aliases (a few lines could otherwise stand for
        an exponential number of values)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, "aliases (`*name`) are not allowed in a case",
                                                  event.start_mark)
            return super().compose_node(parent, index)

    loader = NoAliasLoader(text)
    try:
        node = loader.get_single_node()
        value = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = getattr(exc, "problem", None) or str(exc)
        raise MindError([Diagnostic("E7004", f"not YAML that a case may use: {problem}",
                                    Span(path, line, col, line, col + 1),
                                    help="a case is plain YAML: mappings, lists, text and numbers")]) from None
    finally:
        loader.dispose()
    if node is None:
        raise MindError([Diagnostic("E7004", "the file is empty", Span(path, 1, 1, 1, 2))])
    return _Node(node, value, path, "")


def _case(case_id: str, path: str, root: _Node) -> PublicCase:
    top = root.mapping()
    unknown: list[str] = []
    if "input" not in top or "expected" not in top:
        raise root.bad("a case has `input` and `expected`")
    inp = top["input"].mapping()
    unknown += [f"input.{k}" for k in inp if k not in INPUT_FIELDS]
    kinds = [k for k in INPUT_FIELDS if k in inp]
    if len(kinds) != 1:
        raise top["input"].bad("one of `source` (MIND source) and `ir_module` (an IR module), not both")
    exp = top["expected"].mapping()
    unknown += [f"expected.{k}" for k in exp if k not in EXPECTED_FIELDS]
    if "status" not in exp or exp["status"].value not in STATUSES:
        raise (exp.get("status") or top["expected"]).bad("`status` is `success` or `error`")
    status = exp["status"].value
    result = ir = gradient = err = None
    if "output" in exp:
        out = exp["output"].mapping()
        unknown += [f"expected.output.{k}" for k in out if k not in OUTPUT_FIELDS]
        if "result" in out:
            result = _result(out["result"], unknown)
        ir = out["ir"].text() if "ir" in out else None
        gradient = out["gradient_module"].text() if "gradient_module" in out else None
    if "error" in exp:
        err = _error(exp["error"], unknown)
    if status == "error" and err is None:
        raise top["expected"].bad("`status: error` needs an `error` with its `code`")
    if status == "success" and err is not None:
        raise exp["error"].bad("a case that expects success has no `error`")

    def meta(name: str, default: str) -> str:
        return top[name].text() if name in top and top[name].value is not None else default

    return PublicCase(case_id, path, meta("description", ""), meta("category", ""), meta("profile", "cpu"),
                      kinds[0], inp[kinds[0]].text(), status, result, ir, gradient, err, tuple(unknown))


def _result(node: _Node, unknown: list[str]) -> ResultSpec:
    f = node.mapping()
    unknown += [f"expected.output.result.{k}" for k in f if k not in RESULT_FIELDS]
    dtype = f["dtype"].text().lower() if "dtype" in f else None
    shape = None
    if "shape" in f:
        s = f["shape"]
        if not isinstance(s.value, list) or any(type(d) is not int or d < 0 for d in s.value):
            raise s.bad("a shape is a list of extents (integers ≥ 0)")
        shape = tuple(s.value)
    values = None
    if "values" in f:
        values = _values(f["values"])
        if shape is not None and _shape_of(values) != shape:
            raise f["values"].bad(f"the values have shape {list(_shape_of(values))}, the case says {list(shape)}")
    pattern = f["values_pattern"].text() if "values_pattern" in f else None
    tolerance = f["tolerance"].number() if "tolerance" in f else 0.0
    if not tolerance >= 0:
        raise f["tolerance"].bad("a tolerance is a number ≥ 0")
    return ResultSpec(dtype, shape, values, pattern, tolerance)


def _values(node: _Node) -> Any:
    """Nested lists of numbers (ints, floats, `.nan`, `.inf`, numeric text, booleans) as floats."""
    count = 0

    def conv(v: Any) -> Any:
        nonlocal count
        if isinstance(v, list):
            items = [conv(x) for x in v]
            shapes = {_shape_of(x) for x in items}
            if len(shapes) > 1:
                raise node.bad("the values are not a rectangular array (rows of different lengths)")
            return items
        count += 1
        if count > MAX_VALUES:
            raise node.bad(f"more than {MAX_VALUES} values")
        x = _as_number(v)
        if x is None:
            raise node.bad(f"`{v}` is not a number")
        return x
    return conv(node.value)


def _as_number(v: Any) -> float | None:
    """``v`` as a float: a number, a bool, or text that reads as a number (YAML 1.1 reads ``1e-6``
    as text); None for anything else."""
    if type(v) in (int, float, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _shape_of(v: Any) -> tuple[int, ...]:
    shape = []
    while isinstance(v, list):
        shape.append(len(v))
        v = v[0] if v else None
    return tuple(shape)


def _error(node: _Node, unknown: list[str]) -> ErrorSpec:
    f = node.mapping()
    unknown += [f"expected.error.{k}" for k in f if k not in ERROR_FIELDS]
    code = f["code"].text().strip() if "code" in f else None
    if code is None:
        raise node.bad("an expected error names its `code`")
    line = column = None
    if "location" in f:
        loc = f["location"].mapping()
        unknown += [f"expected.error.location.{k}" for k in loc if k not in LOCATION_FIELDS]
        line = loc["line"].integer() if "line" in loc else None
        column = loc["column"].integer() if "column" in loc else None
    contains = f["message_contains"].text() if "message_contains" in f else None
    return ErrorSpec(code, contains, line, column)


# -- the verdict ---------------------------------------------------------------------------------

def judge(case: PublicCase, obs: Observation) -> Verdict:
    """Compare what the implementation did with what the case expects."""
    fails: list[str] = []
    na: list[str] = [f"the case checks `{k}`, which this runner does not know" for k in case.unknown]
    if obs.not_applicable:
        na.append(obs.not_applicable)
    elif case.status == "error":
        _check_error(case.error, obs, fails)  # type: ignore[arg-type]
    elif obs.status == "error":
        fails.append(f"expected success, got {obs.describe_error()}")
    else:
        if case.result is not None:
            _check_result(case.result, obs.results, fails, na)
        if case.ir is not None:
            _check_ir(case.ir, obs.ir_text, fails, na)
        if case.gradient_module is not None:
            na.append("`gradient_module` does not say which function's gradient, with respect to which "
                      "inputs, it is (MIND prints one with `mind grad FILE --fn F --wrt X`)")
    outcome = "fail" if fails else ("not-applicable" if na else "pass")
    return Verdict(case, outcome, fails + na, obs)


def not_applicable(case: PublicCase, why: str) -> Verdict:
    return judge(case, Observation(not_applicable=why))


def _check_error(want: ErrorSpec, obs: Observation, fails: list[str]) -> None:
    if obs.status != "error":
        fails.append(f"expected error {want.code}, but the program compiled and ran")
        return
    if want.code is not None and want.code != obs.public_code:
        what = lookup(obs.code).title if obs.code else "no code"
        mine = f"; MIND's own code is {obs.code}" if obs.code != obs.public_code else ""
        fails.append(f"code {obs.public_code} ({what}{mine}), expected {want.code}")
    if want.message_contains is not None and want.message_contains.lower() not in (obs.message or "").lower():
        fails.append(f"message {obs.message!r} does not contain {want.message_contains!r}")
    for name, got, exp in (("line", obs.line, want.line), ("column", obs.column, want.column)):
        if exp is not None and got != exp:
            fails.append(f"{name} {got if got is not None else 'unknown'}, expected {exp}")


def _check_result(want: ResultSpec, results: list[Any] | None, fails: list[str], na: list[str]) -> None:
    import numpy as np

    if results is None:
        na.append("the program has no result to compare")
        return
    if len(results) != 1:
        fails.append(f"{len(results)} results, the case describes one")
        return
    got = np.asarray(results[0])
    if want.dtype is not None and got.dtype.name != _NUMPY_NAMES.get(want.dtype, want.dtype):
        fails.append(f"dtype {_MIND_NAMES.get(got.dtype.name, got.dtype.name)}, expected {want.dtype}")
    if want.shape is not None and tuple(got.shape) != want.shape:
        fails.append(f"shape {list(got.shape)}, expected {list(want.shape)}")
        return
    if want.pattern is not None:
        if want.pattern in PATTERNS:
            _compare(got, np.full(got.shape, PATTERNS[want.pattern]), want.tolerance, want.pattern, fails)
        else:
            na.append(f"values_pattern {want.pattern!r} is not one this runner knows ({', '.join(PATTERNS)})")
    if want.values is not None:
        expected = np.asarray(want.values, dtype=np.float64)
        if expected.shape != got.shape:
            fails.append(f"shape {list(got.shape)}, the expected values have {list(expected.shape)}")
        else:
            _compare(got, expected, want.tolerance, "values", fails)


def _compare(got: Any, expected: Any, tolerance: float, what: str, fails: list[str]) -> None:
    import numpy as np

    g = got.astype(np.float64)
    bad = []
    for index in np.ndindex(g.shape):
        a, b = float(g[index]), float(expected[index])
        if math.isnan(b) and math.isnan(a):
            continue
        if math.isinf(b) or math.isinf(a) or math.isnan(a) or math.isnan(b):
            ok = a == b
        else:
            ok = abs(a - b) <= tolerance * max(1.0, abs(b))
        if not ok:
            bad.append((index, a, b))
            if len(bad) == 3:
                break
    if bad:
        where = "; ".join(f"at {list(i)}: {a!r}, expected {b!r}" for i, a, b in bad)
        fails.append(f"{what} differ (tolerance {tolerance:g}): {where}")


def _check_ir(want: str, got: str | None, fails: list[str], na: list[str]) -> None:
    if not _is_core_ir(want):
        na.append("`ir` is in another IR encoding than Core IR text; MIND's canonical IR (`mind ir`) is "
                  "Core IR, so the texts cannot be compared")
        return
    if got is None:
        na.append("the program has no IR to compare")
        return
    if _lines(want) != _lines(got):
        diff = next(((i + 1, a, b) for i, (a, b) in enumerate(zip(_lines(got), _lines(want))) if a != b), None)
        at = f" first at line {diff[0]}: {diff[1]!r}, expected {diff[2]!r}" if diff else \
            f" ({len(_lines(got))} lines, expected {len(_lines(want))})"
        fails.append("the canonical IR differs:" + at)


def _is_core_ir(text: str) -> bool:
    """Core IR text starts with `func` (after blank lines and `//` comments)."""
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("//"):
            return s.startswith("func")
    return False


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.replace("\r", "").strip().splitlines()]


_NUMPY_NAMES = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "bool": "bool"}
_MIND_NAMES = {v: k for k, v in _NUMPY_NAMES.items()}


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    counts = {o: 0 for o in OUTCOMES}
    for v in verdicts:
        counts[v.outcome] += 1
    counts["total"] = len(verdicts)
    return counts
