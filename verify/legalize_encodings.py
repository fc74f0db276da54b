"""The other encodings of public MIND IR, legalized through the core of ``legalize_public``.

* ``proto``: the spec repository's Python prototype (``tools/core_ir``) prints
  ``%0 = Input {name=x} : tensor<f32[2, 2]>``, ``%1 = ConstTensor {dtype=f32, shape=(2,), value=[1.0, 2.0]}``,
  ``%2 = Add (%0, %1) : tensor<f32[2, 2]>``, ``%3 = MatMul (%0, %1)`` and ``outputs: %3``.  Each line
  is translated to the spec encoding's (op, arguments, type) and lowered by the same core.
* ``compiler``: the public compiler's ``--emit-ir`` text, ``module { ... }  // next_id = N`` with lines
  such as ``%4 = const.i64 7``, ``%0 = const.tensor F32 ["10", "20"] fill=Some(1.0)``,
  ``%2 = add %0, %1``, ``%3 = sum %2 axes=[0] keepdims=false``, ``%5 = slice %4 [SliceSpec { axis: 1,
  start: 0, end: Some(4), stride: 2 }]`` and ``output %4``.  It has no types and no inputs: a
  ``const.tensor`` with a fill becomes a ``const`` splat of that value, one without (``fill=None``)
  or with a symbolic shape an input named ``c<id>``; where an ``i64`` scalar constant meets a tensor
  of another dtype (``x * 2``) it is converted to that dtype, as a literal is in MIND source.
  Every ``output`` line is a result, in order.

``detect(text)`` names the encoding of a text that is not Core IR text; ``legalize(text)`` legalizes
it in whichever it is.
"""

from __future__ import annotations

import re
from typing import Any

from mind.ir.core import Module, Value
from mind.spec.dims import sym
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

from .legalize_public import Legalizer, _Fail, _int, _number

# -- the prototype's encoding ---------------------------------------------------------------------

_PROTO_LINE = re.compile(r"^%(?P<id>[A-Za-z0-9_]+)\s*=\s*(?P<op>[A-Za-z][A-Za-z0-9]*)"
                         r"(?:\s+\((?P<args>[^()]*)\))?(?:\s*\{(?P<attrs>.*)\})?\s*(?::\s*(?P<type>.+))?$")
_PROTO_TYPE = re.compile(r"^tensor\s*<\s*(?P<dt>[A-Za-z0-9]+)\s*\[(?P<dims>[^\]]*)\]\s*>$")
_BINOPS = {"Add", "Sub", "Mul", "Div"}


def _spec_type(t: str | None) -> str | None:
    """``tensor<f32[2, 2]>`` in the spec encoding's spelling ``Tensor<f32, [2, 2]>``."""
    if t is None:
        return None
    m = _PROTO_TYPE.match(t.strip())
    if m is None:
        raise _Fail("E1010", f"expected a type like `tensor<f32[2, 2]>`, found `{t.strip()[:60]}`")
    return f"Tensor<{m.group('dt')}, [{m.group('dims')}]>"


def _attr_map(text: str | None) -> dict[str, str]:
    """``k=v, k2=[...]`` (values may hold brackets and commas) as a dict of strings."""
    out: dict[str, str] = {}
    if not text:
        return out
    depth, key, cur = 0, None, []
    for ch in text + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "=" and depth == 0 and key is None:
            key, cur = "".join(cur).strip(), []
            continue
        if ch == "," and depth == 0:
            if key is not None:
                out[key] = "".join(cur).strip()
            key, cur = None, []
            continue
        cur.append(ch)
    return out


class ProtoLegalizer(Legalizer):
    ENCODING = "the spec prototype's encoding"

    def line(self, line: str, no: int) -> None:
        self._span = self.span(no)
        if line.startswith("outputs"):
            return super().line(line, no)
        m = _PROTO_LINE.match(line)
        if m is None:
            raise _Fail("E1010", "expected `%id = Opcode (operands) {attrs} : tensor<...>` or `outputs: ...`")
        name, op = m.group("id"), m.group("op")
        if name in self.values:
            raise _Fail("E4002", f"value %{name} is defined more than once")
        args = [a.strip() for a in (m.group("args") or "").split(",") if a.strip()]
        attrs = _attr_map(m.group("attrs"))
        spec_type = _spec_type(m.group("type"))
        if op == "Input":
            if "name" not in attrs:
                raise _Fail("E4004", "`Input` needs a name", help="write `Input {name=x}`")
            text = f'%{name} = Input() {{name: "{attrs["name"]}"}}' + (f" : {spec_type}" if spec_type else "")
        elif op == "ConstTensor":
            text = f"%{name} = ConstTensor({self._literal(attrs)})" + (f" : {spec_type}" if spec_type else "")
        elif op in _BINOPS:
            text = f"%{name} = BinOp({op}, {', '.join(args)})" + (f" : {spec_type}" if spec_type else "")
        else:
            text = f"%{name} = {op}({', '.join(args)})" + (f" : {spec_type}" if spec_type else "")
        super().line(text, no)

    @staticmethod
    def _literal(attrs: dict[str, str]) -> str:
        """The value of a ``ConstTensor`` as a nested literal of its shape (a scalar value fills it)."""
        value = attrs.get("value")
        if value is None:
            raise _Fail("E4005", "`ConstTensor` needs a value", label="const.C1")
        shape_text = attrs.get("shape", "()").strip()
        if not (shape_text.startswith("(") and shape_text.endswith(")")):
            raise _Fail("E1010", f"expected a shape like (2, 3), found `{shape_text[:40]}`")
        dims = [_int(d) for d in shape_text[1:-1].split(",") if d.strip()]
        if value.lstrip().startswith("[") or not dims:
            return value
        n = 1
        for d in dims:
            n *= d
        if n > 1 << 20:
            raise _Fail("E1012", "constant literal is too large")
        lit = _number(value.strip())
        for d in reversed(dims):
            lit = "[" + ", ".join([lit] * d) + "]"
        return lit


# -- the public compiler's --emit-ir text -------------------------------------------------------

_COMPILER_LINE = re.compile(r"^%(?P<id>[0-9]+)\s*=\s*(?P<op>[a-z_0-9.]+)\s*(?P<rest>.*)$")
_DTYPES = {"F32": DType.F32, "I32": DType.I32, "F64": DType.F64, "I64": DType.I64}
_SPEC = re.compile(r"(IndexSpec|SliceSpec)\s*\{([^{}]*)\}")


class CompilerDumpLegalizer(Legalizer):
    ENCODING = "the public compiler's --emit-ir text"

    def line(self, line: str, no: int) -> None:
        self._span = self.span(no)
        line = line.split("//", 1)[0].strip()
        if line in ("", "module {", "}"):
            return
        if line.startswith("output "):
            self.outputs.append(self.output(line[len("output "):]))
            return
        m = _COMPILER_LINE.match(line)
        if m is None:
            raise _Fail("E1010", "expected `%id = op operands attributes`, `output %id` or `module { ... }`")
        name, op, rest = m.group("id"), m.group("op"), m.group("rest").strip()
        if name in self.values:
            raise _Fail("E4002", f"value %{name} is defined more than once")
        self.counts["public"] += 1
        self._declared = True
        rule = _RULES.get(op)
        if rule is None:
            raise _Fail("E4006", f"`{op}` has no Core IR legalization",
                        help="supported: " + ", ".join(sorted(_RULES)))
        self.values[name] = rule(self, name, rest)

    # operands and attributes
    def operand(self, s: str) -> Value:
        return self.val(s.strip().rstrip(","))

    @staticmethod
    def attr(rest: str, key: str, default: str | None = None) -> str:
        m = re.search(rf"\b{key}=(\[[^\]]*\]|\([^)]*\)|\S+)", rest)
        if m is None:
            if default is None:
                raise _Fail("E1010", f"expected `{key}=...`")
            return default
        return m.group(1)

    def harmonize(self, a: Value, b: Value) -> tuple[Value, Value]:
        """An i64 scalar constant meeting another dtype takes that dtype (as a literal does)."""
        if a.type.dtype is b.type.dtype:
            return a, b
        if b.type.rank == 0 and b.type.dtype is DType.I64:
            return a, self.emit("convert", b, dtype=a.type.dtype)
        if a.type.rank == 0 and a.type.dtype is DType.I64:
            return self.emit("convert", a, dtype=b.type.dtype), b
        return a, b  # binary.C1 reports the mismatch

    # the rules, one per op
    def const_i64(self, name: str, rest: str) -> Value:
        return self.lower("ConstI64", [rest], None, None)

    def const_tensor(self, name: str, rest: str) -> Value:  # type: ignore[override]
        m = re.fullmatch(r"([A-Za-z0-9]+)\s*\[(?P<dims>[^\]]*)\]\s*fill=(?P<fill>Some\((?P<v>[^)]*)\)|None)", rest)
        if m is None:
            raise _Fail("E1010", 'expected `const.tensor F32 ["2", "3"] fill=Some(1.0)`')
        dt = _DTYPES.get(m.group(1))
        if dt is None:
            raise _Fail("E2005", f"dtype `{m.group(1)}` has no Core IR counterpart",
                        help="Core IR dtypes: bool, i32, i64, f32, f64")
        dims: list[Any] = []
        for part in (p.strip().strip('"') for p in m.group("dims").split(",") if p.strip()):
            dims.append(int(part) if re.fullmatch(r"[0-9]{1,12}", part) else sym(part) if
                        re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", part) else None)
            if dims[-1] is None:
                raise _Fail("E1010", f"`{part[:40]}` is not a dimension")
        t = TensorType(dt, tuple(dims))
        if m.group("v") is None or not all(isinstance(d, int) for d in dims):
            return self.b.param(f"c{name}", t, self._span)  # a value not known at compile time
        value = float(_number(m.group("v"))) if dt.is_float else int(float(_number(m.group("v"))))
        return self.b.splat(value, dt, tuple(dims), self._span)

    def binop(self, name: str, rest: str, op: str) -> Value:
        parts = [p for p in rest.split(",")]
        if len(parts) != 2:
            raise _Fail("E4009", f"`{op}` takes two operands")
        a, b = self.harmonize(self.operand(parts[0]), self.operand(parts[1]))
        return self.emit(op, a, b)

    def reduce(self, name: str, rest: str, op: str) -> Value:
        x = rest.split()[0]
        axes = self.attr(rest, "axes", "[]")
        keep = self.attr(rest, "keepdims", "false")
        return self.lower("Sum" if op == "sum" else "Mean", [x, axes, keep], None, None)

    def reshape(self, name: str, rest: str) -> Value:
        x, _, dims = rest.partition(" ")
        return self.lower("Reshape", [x, dims.replace('"', "")], None, None)

    def expand_dims(self, name: str, rest: str) -> Value:
        x = self.operand(rest.split()[0])
        axis = _int(self.attr(rest, "axis"))
        r = x.type.rank + 1
        if not -r <= axis < r:
            raise _Fail("E3004", f"axis {axis} is out of range for `expand_dims` of rank {x.type.rank}")
        shape = list(x.type.shape)
        shape.insert(axis + r if axis < 0 else axis, 1)
        return self.emit("reshape", x, shape=tuple(shape))

    def squeeze(self, name: str, rest: str) -> Value:
        return self.lower("Squeeze", [rest.split()[0], self.attr(rest, "axes", "[]")], None, None)

    def transpose(self, name: str, rest: str) -> Value:
        return self.lower("Transpose", [rest.split()[0], self.attr(rest, "perm", "[]")], None, None)

    def matmul(self, name: str, rest: str) -> Value:
        return self.lower("MatMul", [p.strip() for p in rest.split(",")], None, None)

    def conv2d(self, name: str, rest: str) -> Value:
        parts = rest.split()
        if len(parts) < 2:
            raise _Fail("E4009", "`conv2d` takes an input and a filter")
        strides = "[" + self.attr(rest, "strides", "(1, 1)").strip("()") + "]"
        padding = {"valid": "Valid", "same": "Same"}.get(self.attr(rest, "padding", "valid").lower())
        if padding is None:
            raise _Fail("E1010", "padding is `valid` or `same`")
        return self.lower("Conv2d", [parts[0], parts[1], strides, padding], None, None)

    def index_or_slice(self, name: str, rest: str, op: str) -> Value:
        x = self.operand(rest.split()[0])
        r = x.type.rank
        start, stop, step = [0] * r, list(x.type.shape), [1] * r
        drop = []
        for kind, body in _SPEC.findall(rest):
            fields = dict((k.strip(), v.strip()) for k, _, v in (f.partition(":") for f in body.split(",")))
            axis = _int(fields.get("axis", "0"))
            if not 0 <= axis < r:
                raise _Fail("E3004", f"axis {axis} is out of range for rank {r}")
            n = x.type.shape[axis]
            if kind == "IndexSpec":
                i = _int(fields.get("index", "0"))
                if isinstance(n, int) and not -n <= i < n:
                    raise _Fail("E3006", f"index {i} is out of bounds for axis {axis} of extent {n}")
                i = i + n if i < 0 else i
                start[axis], stop[axis] = i, i + 1
                drop.append(axis)
                continue
            k = _int(fields.get("stride", "1"))
            if k == 0:
                raise _Fail("E3006", f"step of axis {axis} is 0", label="slice.C2")
            b = _int(fields.get("start", "0"))
            end = fields.get("end", "None")
            e = None if end == "None" else _int(end[len("Some("):-1] if end.startswith("Some(") else end)
            if not isinstance(n, int):
                raise _Fail("E4006", "a slice of a symbolic extent is not expressible in Core IR here")
            b, e, _ = slice(b, e, k).indices(n)
            start[axis], stop[axis], step[axis] = b, (-1 if k < 0 and e < -1 else e), k
        s = self.emit("slice", x, start=tuple(start), stop=tuple(stop), step=tuple(step))
        if drop:
            s = self.emit("reshape", s, shape=tuple(d for i, d in enumerate(s.type.shape) if i not in drop))
        return s

    def gather(self, name: str, rest: str) -> Value:
        x = rest.split()[0]
        idx = self.attr(rest, "indices")
        return self.lower("Gather", [x, idx, self.attr(rest, "axis", "0")], None, None)

    def unsupported(self, name: str, rest: str) -> Value:
        raise _Fail("E4006", "the convolution gradient ops of the public compiler have no Core IR "
                             "legalization", help="differentiate the Core IR with `mind grad` instead")


_RULES: dict[str, Any] = {
    "const.i64": CompilerDumpLegalizer.const_i64,
    "const.tensor": CompilerDumpLegalizer.const_tensor,
    **{op: (lambda self, name, rest, op=op: CompilerDumpLegalizer.binop(self, name, rest, op))
       for op in ("add", "sub", "mul", "div")},
    "sum": lambda self, name, rest: CompilerDumpLegalizer.reduce(self, name, rest, "sum"),
    "mean": lambda self, name, rest: CompilerDumpLegalizer.reduce(self, name, rest, "mean"),
    "reshape": CompilerDumpLegalizer.reshape,
    "expand_dims": CompilerDumpLegalizer.expand_dims,
    "squeeze": CompilerDumpLegalizer.squeeze,
    "transpose": CompilerDumpLegalizer.transpose,
    "dot": CompilerDumpLegalizer.matmul,
    "matmul": CompilerDumpLegalizer.matmul,
    "conv2d": CompilerDumpLegalizer.conv2d,
    "index": lambda self, name, rest: CompilerDumpLegalizer.index_or_slice(self, name, rest, "index"),
    "slice": lambda self, name, rest: CompilerDumpLegalizer.index_or_slice(self, name, rest, "slice"),
    "gather": CompilerDumpLegalizer.gather,
    "conv2d_grad_input": CompilerDumpLegalizer.unsupported,
    "conv2d_grad_filter": CompilerDumpLegalizer.unsupported,
}

#: encoding name -> legalizer (``spec`` is ``legalize_public.Legalizer`` itself).
LEGALIZERS: dict[str, type[Legalizer]] = {"spec": Legalizer, "proto": ProtoLegalizer,
                                           "compiler": CompilerDumpLegalizer}


def detect(text: str) -> str:
    """``compiler`` (``module {``), ``proto`` (``%2 = Add (%0, %1)``, ``Input {name=x}``) or ``spec``."""
    for raw in text.splitlines():
        s = raw.split("#", 1)[0].strip()
        if not s or s.startswith("//"):
            continue
        if s.startswith("module"):
            return "compiler"
        m = re.match(r"^%[A-Za-z0-9_]+\s*=\s*([A-Za-z][A-Za-z0-9]*)(\s*)(.?)", s)
        if m is not None:
            if m.group(1)[0].islower():
                return "compiler"
            return "proto" if m.group(3) != "(" or m.group(2) else "spec"
    return "spec"


def legalize(text: str, filename: str = "<dump>") -> tuple[Module, list[str]]:
    """Parse a public MIND IR dump in any of its encodings (``detect``) and rewrite it into a Core IR
    module; returns it with notes (the first names the encoding)."""
    return LEGALIZERS[detect(text)](text, filename).run()
