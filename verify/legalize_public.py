"""Legalizing the public MIND IR encoding (spec v1.0 ``ir.md``) into Core IR, and the common core of
the legalizers of the other public encodings (``legalize_encodings``: the spec's Python prototype's
``%2 = Add (%0, %1) : tensor<f32[2, 2]>`` and the public compiler's ``--emit-ir`` dump).

Lines ``%<id> = <Opcode>(<operands>) {attrs} : <type>``, ``#`` comments, a trailing
``outputs: %a, %b``; types ``Tensor<f32, [2, 3]>`` whose dims may be ``?``.  A ``?`` in an ``Input``
is an unknown extent: a fresh symbol ``Q<n>``, for all of whose values the dump must be correct.
A ``?`` in any other line's declared type asserts nothing about that extent.  Every public op is
rewritten into the 19 Core ops through ``mind.ir.builder.FunctionBuilder`` (so each result type
comes from the spec's rule), keeping the public line as the span of every op it produced; a line's
declared type (with the inferred extent where it says ``?``) becomes the declared type of its last
Core op, which the IR verifier then proves equal to the inferred one.  Deciding is the verifier's
job: the legalizer uses only the cheap symbolic path.  Anything not expressible in Core IR is a
coded diagnostic; nothing in the text is evaluated.  Numbers are ASCII digits only.
"""

from __future__ import annotations

import re
from typing import Any

from mind.diagnostics import Diagnostic, MindError, Span
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Module, Operation, Value
from mind.spec.dims import format_dim, sym
from mind.spec.dtypes import DType, parse_dtype
from mind.spec.ops import ConstraintUndecided, ConstraintViolation, OPS, TensorType

MAX_BYTES = 16 * 1024 * 1024
MAX_LINES = 200_000
MAX_RANK = 16
MAX_DIM = 1 << 48
MAX_CONST = 1 << 20

_LINE = re.compile(r"^%(?P<id>[A-Za-z0-9_]+)\s*=\s*(?:(?P<alias>%[A-Za-z0-9_]+)\s*$|"
                   r"(?P<op>[A-Za-z][A-Za-z0-9]*)\s*\((?P<args>.*)\)\s*(?P<attrs>\{[^{}]*\})?\s*"
                   r"(?::\s*(?P<type>.+))?$)")
_TYPE = re.compile(r"^Tensor\s*<\s*(?P<dt>[A-Za-z0-9]+)\s*,\s*\[(?P<dims>[^\]]*)\]\s*>$")
_NUMBER = re.compile(r"-?([0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|inf|nan)")
MAX_LITERAL_CHARS = 40  # a number longer than this fits no dtype (nor Python's int-from-string limit)
_SCALAR_TYPE = re.compile(r"^(?P<dt>[a-z][a-z0-9]*)$")


class _Skip(Exception):
    """A line that uses a value whose own line was reported: nothing more to say about it."""


class _Fail(Exception):
    def __init__(self, code: str, message: str, col: int = 1, label: str | None = None, help: str | None = None):
        self.code, self.message, self.col, self.label, self.help = code, message, col, label, help


def _split_top(s: str) -> list[str]:
    """Split on commas outside brackets/parentheses."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth < 0:
                raise _Fail("E1011", "unbalanced brackets")
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        if depth > 32:
            raise _Fail("E1012", "brackets nested too deeply")
    if depth != 0:
        raise _Fail("E1011", "unclosed bracket")
    tail = "".join(cur).strip()
    if tail or out:
        out.append(tail)
    return out


def _int(s: str) -> int:
    s = s.strip()
    if not re.fullmatch(r"-?[0-9]{1,16}", s):
        raise _Fail("E1005", f"`{s[:40]}` is not an integer of at most 16 digits")
    return int(s)


def _number(s: str) -> str:
    """``s`` if it is a number literal (ASCII digits, or ``inf``/``nan``) short enough to convert."""
    if len(s) > MAX_LITERAL_CHARS:
        raise _Fail("E1012", f"number `{s[:20]}...` is longer than {MAX_LITERAL_CHARS} characters")
    if not _NUMBER.fullmatch(s):
        raise _Fail("E1005", f"`{s[:40]}` is not a number")
    return s


def _int_list(s: str) -> list[int]:
    s = s.strip()
    if not (s.startswith("[") and s.endswith("]")):
        raise _Fail("E1010", f"expected a list like [0, 1], found `{s[:40]}`")
    body = s[1:-1].strip()
    return [_int(x) for x in body.split(",")] if body else []


class Legalizer:
    """The spec's encoding, and the core the other encodings' legalizers (subclasses that parse their
    own lines) build on: values by name, ``emit``/``lower``/``declare``, the outputs, the report."""

    ENCODING = "the spec's encoding (ir.md)"

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.b = FunctionBuilder("main", limits=None)  # the cheap path only: deciding is the verifier's
        self.values: dict[str, Value] = {}
        self.outputs: list[Value] = []
        self.diags: list[Diagnostic] = []
        self.nq = 0
        self.counts = {"public": 0}
        self.input_names: set[str] = set()
        self.failed: set[str] = set()  # ids of lines already reported
        self._declared = False  # whether the current line's declared type has been given to its value
        self._lines: list[str] | None = None

    def span(self, line: int, col: int = 1, end: int | None = None) -> Span:
        if self._lines is None:
            self._lines = self.text.split("\n")
        src = self._lines[line - 1] if 1 <= line <= len(self._lines) else ""
        return Span(self.filename, line, col, line, end if end is not None else max(len(src) + 1, col + 1))

    def run(self) -> tuple[Module, list[str]]:
        if len(self.text) > MAX_BYTES:
            raise MindError([Diagnostic("E1012", f"dump is over {MAX_BYTES} bytes", self.span(1))],
                            {self.filename: self.text})
        lines = self.text.split("\n")
        if len(lines) > MAX_LINES:
            raise MindError([Diagnostic("E1012", f"dump has over {MAX_LINES} lines", self.span(1))],
                            {self.filename: self.text})
        for no, raw in enumerate(lines, 1):
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("//"):
                continue
            indent = len(raw) - len(raw.lstrip()) + 1
            try:
                self.line(line, no)
            except _Skip:
                self._poison(line)
            except _Fail as f:
                self._poison(line)
                self.diags.append(Diagnostic(f.code, f.message, self.span(no, indent), label=f.label, help=f.help))
            if any(d.code.startswith("E1") for d in self.diags):
                break  # syntax errors: stop at the first, like the Core parser
        if self.diags:
            raise MindError(self.diags, {self.filename: self.text})
        fn = self.b.finish(self.outputs, self.span(1))
        n_core = len(fn.ops)
        note = (f"legalized public MIND IR ({self.ENCODING}) into Core IR: {self.counts['public']} public ops "
                f"became {n_core} Core ops in @main ({len(fn.params)} inputs, {len(self.outputs)} outputs)")
        return Module([fn]), [note]

    # ------------------------------------------------------------------------------------------
    def parse_type(self, s: str | None, wildcards: bool = False) -> TensorType | None:
        """A declared type; a ``?`` dim is a fresh symbol, or (``wildcards``) None: no claim."""
        if s is None:
            return None
        s = s.strip()
        m = _TYPE.match(s)
        if m is None:
            m2 = _SCALAR_TYPE.match(s)
            if m2 is None:
                raise _Fail("E1010", f"expected a type like `Tensor<f32, [2, 3]>`, found `{s[:60]}`")
            dt, dims_text = m2.group("dt"), ""
        else:
            dt, dims_text = m.group("dt"), m.group("dims")
        dtype = parse_dtype(dt)
        if dtype is None:
            raise _Fail("E2005", f"dtype `{dt}` has no Core IR counterpart", help="Core IR dtypes: bool, i32, i64, f32, f64")
        dims: list[Any] = []
        for part in (p.strip() for p in dims_text.split(",")) if dims_text.strip() else ():
            if part == "?" and wildcards:
                dims.append(None)
            elif part == "?":
                dims.append(sym(f"Q{self.nq}"))
                self.nq += 1
            else:
                v = _int(part)
                if v < 0:
                    raise _Fail("E3006", f"negative dimension {v}")
                if v > MAX_DIM:
                    raise _Fail("E1012", f"dimension {v} is over the limit")
                dims.append(v)
        if len(dims) > MAX_RANK:
            raise _Fail("E1012", f"rank {len(dims)} is over the limit of {MAX_RANK}")
        return TensorType(dtype, tuple(dims))

    def _poison(self, line: str) -> None:
        m = re.match(r"%([A-Za-z0-9_]+)\s*=", line)
        if m and m.group(1) not in self.values:
            self.failed.add(m.group(1))

    def val(self, s: str) -> Value:
        s = s.strip()
        if s.startswith("%") and s[1:] in self.failed:
            raise _Skip()
        v = self.values.get(s[1:]) if s.startswith("%") else None
        if v is None:
            raise _Fail("E4001" if s.startswith("%") else "E1010",
                        f"use of undefined value {s[:40]}" if s.startswith("%") else f"expected a value, found `{s[:40]}`")
        return v

    def output(self, s: str) -> Value:
        """A value named as a module output (an undefined one is E4003, as in the public catalogue)."""
        s = s.strip()
        if s.startswith("%") and s[1:] not in self.values and s[1:] not in self.failed:
            raise _Fail("E4003", f"output {s[:40]} is not defined", help="outputs name values defined above")
        return self.val(s)

    def emit(self, op: str, *operands: Value, declared: TensorType | None = None, **attrs: Any) -> Value:
        """Emit one Core op; ``declared`` (a line's type, for its last op) becomes its declared
        result type, with the inferred extent wherever it says ``?``."""
        try:
            v = self.b.emit(op, *operands, span=self._span, **attrs)
        except (ConstraintViolation, ConstraintUndecided) as exc:
            # not settled by the cheap path: keep the op with a complete declared type and let the
            # verifier decide (and report, with a counterexample); without one there is no type
            if declared is not None and None not in declared.shape:
                ordered = {a.name: attrs[a.name] for a in OPS[op].attrs if a.name in attrs}
                result = Value(self.b.fresh_name(None), declared, self._span)
                self.b.ops.append(Operation(op, tuple(operands), ordered, result, self._span))
                return result
            if isinstance(exc, ConstraintViolation):
                c = OPS[op].constraint(exc.label)
                raise _Fail(c.code, exc.detail, label=f"{op}.{exc.label}", help=exc.help)
            raise _Fail("E3011", f"the result type of `{op}` depends on `?` dims; declare it", label=f"{op}.{exc.label}",
                        help="give the line a `: Tensor<...>` type without `?`")
        if declared is not None:
            self.declare(v, declared)
        return v

    def declare(self, v: Value, declared: TensorType) -> None:
        """Give ``v`` (the line's last Core op's result) the line's declared type, keeping the
        inferred extent wherever it says ``?``; the verifier proves it equal to the inferred one."""
        got = v.type
        if got.dtype is not declared.dtype or got.rank != declared.rank:
            raise _Fail("E4010", f"the line declares {_show(declared)}, but legalizes to {got}")
        v.type = TensorType(declared.dtype, tuple(g if d is None else d for g, d in zip(got.shape, declared.shape)))
        self._declared = True

    def line(self, line: str, no: int) -> None:
        self._span = self.span(no)
        if line.startswith("outputs"):
            rest = line[len("outputs"):].lstrip()
            if not rest.startswith(":"):
                raise _Fail("E1010", "expected `outputs: %a, %b`")
            for x in rest[1:].split(","):
                if x.strip():
                    try:
                        self.outputs.append(self.output(x))
                    except _Skip:  # a value whose line was reported: the rest are still checked
                        pass
            return
        m = _LINE.match(line)
        if m is None:
            raise _Fail("E1010", "expected `%id = Opcode(operands) {attrs} : type` or `outputs: ...`")
        name = m.group("id")
        if name in self.values:
            raise _Fail("E4002", f"value %{name} is defined more than once")
        if m.group("alias"):
            self.values[name] = self.val(m.group("alias"))
            return
        self.counts["public"] += 1
        op, args_text, attrs_text = m.group("op"), m.group("args"), m.group("attrs")
        declared = self.parse_type(m.group("type"), wildcards=op != "Input")
        args = _split_top(args_text)
        self._declared = op == "Input"
        n_ops = len(self.b.ops)
        v = self.lower(op, args, attrs_text, declared)
        if declared is not None and not self._declared:  # constants: their type comes from the literal
            if len(self.b.ops) == n_ops or self.b.ops[-1].result is not v:
                raise _Fail("E4010", f"`{op}` declares {_show(declared)}, but produces no new value of that type")
            self.declare(v, declared)
        self.values[name] = v

    def lower(self, op: str, args: list[str], attrs_text: str | None, declared: TensorType | None) -> Value:
        def need(n: int) -> None:
            if len(args) != n:
                raise _Fail("E4009", f"`{op}` takes {n} arguments, got {len(args)}")

        if op == "Input":
            if declared is None:
                raise _Fail("E4004", "`Input` needs a type")
            nm = re.search(r'name\s*[:=]\s*"?([A-Za-z_][A-Za-z0-9_]{0,63})"?', attrs_text or "")
            if nm is None:
                raise _Fail("E4004", "`Input` needs a name", help='write `Input() {name: "x"}`')
            if nm.group(1) in self.input_names:
                raise _Fail("E4002", f"input name \"{nm.group(1)}\" is declared twice",
                            help="every Input needs its own name")
            self.input_names.add(nm.group(1))
            return self.b.param(nm.group(1), declared, self._span)
        if op in ("ConstI64", "ConstF32", "ConstF64"):
            need(1)
            dt = {"ConstI64": DType.I64, "ConstF32": DType.F32, "ConstF64": DType.F64}[op]
            lit = _number(args[0])
            if dt is DType.I64 and not re.fullmatch(r"-?[0-9]+", lit):
                raise _Fail("E1005", f"`{lit[:40]}` is not an integer")
            if dt is DType.I64 and not dt.int_min <= int(lit) <= dt.int_max:
                raise _Fail("E4005", f"{lit[:40]} does not fit in i64", label="const.C1")
            return self.b.const(int(lit) if dt is DType.I64 else float(lit), dt, self._span)
        if op == "ConstTensor":
            need(1)
            return self.const_tensor(args[0], declared)
        if op == "BinOp":
            need(3)
            kind = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}.get(args[0])
            if kind is None:
                raise _Fail("E4006", f"unknown BinOp kind `{args[0][:20]}`", help="Add, Sub, Mul, Div")
            return self.emit(kind, self.val(args[1]), self.val(args[2]), declared=declared)
        if op in ("Sum", "Mean"):
            if len(args) not in (2, 3):
                raise _Fail("E4009", f"`{op}` takes (value, [axes], keepdims)")
            x = self.val(args[0])
            axes = _int_list(args[1])
            keep = (args[2].strip() == "true") if len(args) == 3 else False
            if len(args) == 3 and args[2].strip() not in ("true", "false"):
                raise _Fail("E1010", "keepdims is `true` or `false`")
            r = x.type.rank
            # duplicates stay, for reduce_sum.C2 to report (the public spec makes them errors)
            axes = list(range(r)) if not axes else sorted(a + r if a < 0 else a for a in axes)
            s = self.emit("reduce_sum", x, declared=declared if op == "Sum" else None, axes=tuple(axes),
                          keepdims=keep)
            if op == "Sum":
                return s
            count = 1
            for a in axes:
                d = x.type.shape[a] if 0 <= a < r else 1
                if not isinstance(d, int):
                    raise _Fail("E4006", "`Mean` over a symbolic dim is not expressible in Core IR "
                                         "(no op turns a dimension into a value)")
                count *= d
            if count > _largest(x.type.dtype):
                raise _Fail("E4005", f"the element count {count} of `Mean` does not fit in {x.type.dtype.value}",
                            label="const.C1")
            c = self.b.const(count, x.type.dtype, self._span)
            return self.emit("div", s, c, declared=declared)
        if op == "Reshape":
            need(2)
            x = self.val(args[0])
            target = _int_list(args[1].replace("?", "-1"))
            if -1 in target:
                known = 1
                for t in target:
                    if t != -1:
                        known *= t
                total = 1
                for d in x.type.shape:
                    if not isinstance(d, int):
                        raise _Fail("E4006", "`?` in a reshape target of a symbolic shape is not expressible")
                    total *= d
                if target.count(-1) > 1 or known == 0 or total % known:
                    raise _Fail("E3007", f"cannot infer the `?` of reshape {target}", label="reshape.C2")
                target = [total // known if t == -1 else t for t in target]
            return self.emit("reshape", x, declared=declared, shape=tuple(target))
        if op == "Transpose":
            need(2)
            x = self.val(args[0])
            perm = _int_list(args[1]) or list(range(x.type.rank))[::-1]
            return self.emit("transpose", x, declared=declared, permutation=tuple(perm))
        if op in ("ExpandDims", "Squeeze"):
            need(2)
            x = self.val(args[0])
            axes = _int_list(args[1])
            shp = list(x.type.shape)
            if op == "ExpandDims":
                r = len(shp) + len(axes)
                norm = sorted(a + r if a < 0 else a for a in axes)
                if any(not 0 <= a < r for a in norm) or len(set(norm)) != len(norm):
                    raise _Fail("E3004", f"invalid ExpandDims axes {axes}")
                for a in norm:
                    shp.insert(a, 1)
            else:
                r = len(shp)
                norm = sorted(a + r if a < 0 else a for a in axes) if axes else \
                    [i for i, d in enumerate(shp) if d == 1]
                if any(not 0 <= a < r for a in norm):
                    raise _Fail("E3004", f"invalid Squeeze axes {axes}")
                for a in norm:
                    if isinstance(shp[a], int) and shp[a] != 1:
                        raise _Fail("E3009", f"axis {a} has extent {shp[a]}, not 1")
                shp = [d for i, d in enumerate(shp) if i not in norm]
            return self.emit("reshape", x, declared=declared, shape=tuple(shp))
        if op in ("Index", "Slice"):
            need(2)
            x = self.val(args[0])
            body = args[1].strip()
            if not (body.startswith("[") and body.endswith("]")):
                raise _Fail("E1010", f"expected `[...]` in `{op}`")
            items = [p.strip() for p in body[1:-1].split(",")] if body[1:-1].strip() else []
            r = x.type.rank
            if op == "Index" and len(items) != r:
                raise _Fail("E4007", f"`Index` needs one index per axis: {r}, found {len(items)}",
                            help="a scalar element is indexed on every axis; `Slice` takes a window")
            if len(items) > r:
                raise _Fail("E3004", f"`{op}` names {len(items)} axes of a rank-{r} value")
            start, stop, step = [0] * r, list(x.type.shape), [1] * r
            for i, it in enumerate(items):
                n = x.type.shape[i]
                if op == "Index":
                    k = _int(it)
                    if k < 0:
                        if not isinstance(n, int):
                            raise _Fail("E4006", "a negative index into a symbolic dim is not expressible")
                        k += n
                    start[i], stop[i] = k, k + 1
                    continue
                parts = it.split(":")
                if len(parts) not in (2, 3):
                    raise _Fail("E1010", f"expected `start:stop(:step)`, found `{it[:40]}`")
                st = _int(parts[2]) if len(parts) == 3 and parts[2].strip() else 1
                if st == 0:
                    raise _Fail("E3006", f"step of axis {i} is 0", label="slice.C2")
                b = _int(parts[0]) if parts[0].strip() else (0 if st > 0 else None)
                e = _int(parts[1]) if parts[1].strip() else (n if st > 0 else None)
                if b is None or e is None or (isinstance(b, int) and b < 0) or (isinstance(e, int) and e < 0):
                    if not isinstance(n, int):
                        raise _Fail("E4006", "negative or defaulted bounds with a negative step on a symbolic "
                                             "dim are not expressible")
                    b, e = slice(b, e, st).indices(n)[:2]
                start[i], stop[i], step[i] = b, e, st
            s = self.emit("slice", x, declared=declared if op == "Slice" else None, start=tuple(start),
                          stop=tuple(stop), step=tuple(step))
            if op == "Index":
                shp = tuple(d for i, d in enumerate(s.type.shape) if i >= len(items))
                return self.emit("reshape", s, declared=declared, shape=shp)
            return s
        if op == "Gather":
            if len(args) not in (2, 3):
                raise _Fail("E4009", "`Gather` takes (value, indices[, axis])")
            axis = _int(args[2]) if len(args) == 3 else 0
            return self.emit("gather", self.val(args[0]), self.val(args[1]), declared=declared, axis=axis)
        if op in ("Dot", "MatMul"):
            need(2)
            a, b = self.val(args[0]), self.val(args[1])
            if a.type.rank == 0 or b.type.rank == 0:
                return self.emit("mul", a, b, declared=declared)
            va, vb = a.type.rank == 1, b.type.rank == 1
            if va:
                a = self.emit("reshape", a, shape=(1,) + a.type.shape)
            if vb:
                b = self.emit("reshape", b, shape=b.type.shape + (1,))
            out = self.emit("matmul", a, b, declared=None if (va or vb) else declared)
            if va or vb:
                shp = out.type.shape
                shp = shp[:-2] + ((shp[-2],) if not va else ()) + ((shp[-1],) if not vb else ())
                out = self.emit("reshape", out, declared=declared, shape=tuple(shp))
            return out
        if op == "Conv2d":
            need(4)
            x, w = self.val(args[0]), self.val(args[1])
            strides = _int_list(args[2])
            pad = args[3].strip()
            if pad == "Valid":
                padding = ((0, 0), (0, 0))
            elif pad == "Same":
                pp = []
                for i in range(2):
                    n, k = (x.type.shape[1 + i] if x.type.rank == 4 else 1), (w.type.shape[i] if w.type.rank == 4 else 1)
                    s = strides[i] if i < len(strides) else 1
                    if s < 1:
                        raise _Fail("E3006", f"stride {s} of spatial axis {i} is not positive", label="conv2d.C6")
                    if not isinstance(k, int) or (not isinstance(n, int) and s != 1):
                        raise _Fail("E4006", "`Same` padding with symbolic extents is expressible only for stride 1 "
                                             "and a static filter")
                    total = max(k - 1, 0) if s == 1 else max((-(-n // s) - 1) * s + k - n, 0)
                    pp.append((total // 2, total - total // 2))
                padding = tuple(pp)
            else:
                m = re.fullmatch(r"Custom\(\s*\[\s*\[([^\]]*)\]\s*,\s*\[([^\]]*)\]\s*\]\s*\)", pad)
                if m is None:
                    raise _Fail("E1010", "padding is `Same`, `Valid` or `Custom([[t, b], [l, r]])`")
                tb = [_int(v) for v in m.group(1).split(",")]
                lr = [_int(v) for v in m.group(2).split(",")]
                if len(tb) != 2 or len(lr) != 2:
                    raise _Fail("E4007", "Custom padding needs two pairs", label="conv2d.C5")
                padding = (tuple(tb), tuple(lr))
            return self.emit("conv2d", x, w, declared=declared, strides=tuple(strides), padding=padding,
                             lhs_dilation=(1, 1), rhs_dilation=(1, 1))
        if op == "Relu":  # select(compare(x, 0, le), 0, x), as docs/spec/index.md and the frontend
            need(1)
            x = self.val(args[0])
            z = self.b.const(0, x.type.dtype, self._span)
            c = self.emit("compare", x, z, direction="le")
            return self.emit("select", c, z, x, declared=declared)
        if op == "Neg":  # mul by -1 (negates a zero's sign too), as docs/spec/index.md and the frontend
            need(1)
            x = self.val(args[0])
            m = self.b.const(-1, x.type.dtype, self._span)
            return self.emit("mul", x, m, declared=declared)
        if op in ("Exp", "Log"):
            need(1)
            return self.emit(op.lower(), self.val(args[0]), declared=declared)
        raise _Fail("E4006", f"public op `{op[:40]}` has no Core IR legalization",
                    help="supported: Input, ConstI64/F32/F64, ConstTensor, BinOp, Sum, Mean, Reshape, Transpose, "
                         "ExpandDims, Squeeze, Index, Slice, Gather, Dot, MatMul, Conv2d, Relu, Neg, Exp, Log")

    def const_tensor(self, lit: str, declared: TensorType | None) -> Value:
        import numpy as np

        if len(lit) > MAX_CONST * 24:
            raise _Fail("E1012", "constant literal is too large")
        if not re.fullmatch(r"[\s\[\],0-9eE.+\-a-z]*", lit):
            raise _Fail("E1002", "invalid character in a constant literal")

        def parse(s: str, depth: int) -> Any:
            s = s.strip()
            if depth > 32:
                raise _Fail("E1012", "constant literal nested too deeply")
            if s.startswith("["):
                if not s.endswith("]"):
                    raise _Fail("E1011", "unclosed `[` in a constant literal")
                inner = s[1:-1].strip()
                return [parse(p, depth + 1) for p in _split_top(inner)] if inner else []
            if s in ("true", "false"):
                return s == "true"
            s = _number(s)
            return float(s) if any(c in s for c in ".eEn") else int(s)
        value = parse(lit, 0)
        dtype = declared.dtype if declared is not None else DType.F32
        try:
            arr = np.array(value, dtype=dtype.numpy)
        except (ValueError, OverflowError, TypeError):
            raise _Fail("E4005", "constant literal is ragged or does not fit its dtype", label="const.C1")
        if arr.size > MAX_CONST:
            raise _Fail("E1012", "constant literal is too large")
        return self.b.emit("const", span=self._span, value=arr)


def legalize(text: str, filename: str = "<dump>") -> tuple[Module, list[str]]:
    """Parse a public MIND IR dump in the spec's encoding and rewrite it into a Core IR module;
    returns it with notes.  ``legalize_encodings.legalize`` takes every encoding."""
    return Legalizer(text, filename).run()


def _largest(dtype: DType) -> float:
    """The largest finite value of a numeric dtype (the count a `Mean` divides by must fit)."""
    import numpy as np

    return dtype.int_max if dtype.is_int else float(np.finfo(dtype.numpy).max)


def _show(t: TensorType) -> str:
    return f"{t.dtype.value}[{', '.join('?' if d is None else format_dim(d) for d in t.shape)}]"
