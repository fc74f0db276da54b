"""Core IR ``Function`` -> MLIR text (linalg/tensor/arith on static-shape tensors).

``emit_mlir(fn, shapes)`` first specializes every symbolic dim with the symbol environment
``shapes`` (types and the dims attributes ``shape``/``start``/``stop``), then emits one
``func.func`` in the execution engine's convention (see ``abi``): the parameters are tensor
arguments, the results are written into memref out-parameters, and the function returns nothing.

Conventions of the generated code:

* bool is ``i8`` holding 0 or 1 everywhere (never ``i1`` tensors: a vectorized ``vector<Nxi1>``
  store packs bits, which would not match a scalar reload or numpy's layout).  Comparisons produce
  an ``i1`` inside a body and widen it with ``arith.extui``.
* Elementwise ops are one ``linalg.generic`` each; broadcasting is expressed by the indexing maps
  (a missing operand axis is dropped, a size-1 operand axis against a larger result is the
  constant 0).
* The total cases of the spec are written out with ``arith`` ops: integer division selects a safe
  divisor before ``arith.divsi`` (``x / 0 = 0``, ``INT_MIN / -1 = INT_MIN``), float->int
  conversion clamps and maps NaN to 0 before ``arith.fptosi`` (which is poison out of range),
  ``reduce_max`` uses ``arith.maximumf`` (NaN-propagating, ``-0 < +0``), gather clamps its
  indices, ``exp``/``log`` are the vectorizable polynomial versions of ``mathlib``.
* Float constants are written as exact bit patterns (``0x7FC00000``), dense constants as hex
  strings of their little-endian bytes, so the text is exact and deterministic: it depends only
  on the function and the shapes (no dict or set iteration order, no object ids).
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mind.diagnostics import error
from mind.ir.core import Function, Value
from mind.spec.dims import substitute
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

from .mathlib import exp_text, log_text

__all__ = ["emit_mlir", "specialize_type", "kernel_name", "ELEM"]

# Core IR dtype -> MLIR element type inside kernels (bool is one byte, see the module docstring)
ELEM = {DType.BOOL: "i8", DType.I32: "i32", DType.I64: "i64", DType.F32: "f32", DType.F64: "f64"}

E_UNSUPPORTED = "E6003"


def kernel_name(fn: Function) -> str:
    return "mind_" + re.sub(r"[^A-Za-z0-9_]", "_", fn.name)


def _concrete(d: Any, env: Mapping[str, int], what: object) -> int:
    """``d`` with the symbols of ``env`` substituted; ``what`` (formatted only on error) names it."""
    v = substitute(d, env) if not isinstance(d, int) else d
    if not isinstance(v, int):
        raise error(E_UNSUPPORTED, f"cannot compile: {what} has a symbolic extent without a value",
                    help="call the function with concrete arrays (symbolic dims are specialized per call)")
    return int(v)


def specialize_type(t: TensorType, env: Mapping[str, int]) -> tuple[DType, tuple[int, ...]]:
    shape = t.shape
    if all(type(d) is int for d in shape):  # the common case: nothing to substitute
        return t.dtype, tuple(shape)
    return t.dtype, tuple(_concrete(d, env, t) for d in shape)


def _tty(shape: Sequence[int], elem: str) -> str:
    return f"tensor<{''.join(f'{s}x' for s in shape)}{elem}>"


def _mty(shape: Sequence[int], elem: str) -> str:
    return f"memref<{''.join(f'{s}x' for s in shape)}{elem}>"


def _fbits(v: float, elem: str) -> str:
    if elem == "f32":
        return "0x%08X" % struct.unpack("<I", struct.pack("<f", v))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]


def _scalar_lit(v: Any, elem: str) -> str:
    if elem in ("f32", "f64"):
        return _fbits(float(v), elem)
    return str(int(v))


class _T:
    """A tensor SSA value during emission: its name, static shape and element type."""

    __slots__ = ("name", "shape", "elem", "dtype")

    def __init__(self, name: str, shape: tuple[int, ...], elem: str, dtype: DType):
        self.name, self.shape, self.elem, self.dtype = name, shape, elem, dtype

    @property
    def ty(self) -> str:
        return _tty(self.shape, self.elem)


def _dims(n: int) -> str:
    return ", ".join(f"d{i}" for i in range(n))


def _map(rank: int, exprs: Sequence[str]) -> str:
    return f"affine_map<({_dims(rank)}) -> ({', '.join(exprs)})>"


def _reads(name: str, lines: Sequence[str], result: str) -> bool:
    """Whether the body ``lines`` (or its yielded ``result``) use the SSA value ``name``."""
    use = re.compile(re.escape(name) + r"(?![0-9A-Za-z_$.])")
    return result == name or any(use.search(ln) for ln in lines)


def _bcast_map(src: Sequence[int], out: Sequence[int]) -> str:
    r, R = len(src), len(out)
    exprs = []
    for j, s in enumerate(src):
        k = R - r + j
        exprs.append("0" if (s == 1 and out[k] != 1) else f"d{k}")
    return _map(R, exprs)


class _Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def fresh(self, hint: str = "v") -> str:
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    # ----------------------------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], elem: str) -> str:
        e = self.fresh("e")
        self.emit(f"{e} = tensor.empty() : {_tty(shape, elem)}")
        return e

    def filled(self, shape: tuple[int, ...], elem: str, lit: str | None = None, scalar: str | None = None) -> str:
        e = self.empty(shape, elem)
        if scalar is None:
            scalar = self.fresh("c")
            self.emit(f"{scalar} = arith.constant {lit} : {elem}")
        f = self.fresh("f")
        t = _tty(shape, elem)
        self.emit(f"{f} = linalg.fill ins({scalar} : {elem}) outs({e} : {t}) -> {t}")
        return f

    def generic(self, out_shape: tuple[int, ...], out_elem: str, ins: Sequence[_T], maps: Sequence[str],
                iterators: Sequence[str], body: Callable[[list[str], str], tuple[list[str], str]],
                init: str | None = None, out_map: str | None = None, out_tshape: tuple[int, ...] | None = None) -> str:
        """One linalg.generic; ``body(args, out_arg) -> (lines, yielded)``.

        A generic without reduction loops whose body reads its init (``out_arg``) through the
        identity map gets that init as one more *input* and a fresh ``tensor.empty`` as its init
        (what MLIR's own ``MoveInitOperandsToInput`` pattern does).  Why: MLIR's elementwise
        fusion (``linalg-fuse-elementwise-ops``, MLIR 22) keeps the result of a producer whose
        body reads its init as an extra output of the fused op, indexed by the consumer's map of
        that operand; when that map leaves out a loop of the consumer (a broadcast, a matmul's
        column loop), the fused body reads back what its previous iteration wrote and adds again,
        so the value is counted once per iteration of that loop (``reduce_sum`` over no axes,
        ``init + x``, feeding a batched matmul doubled column 1: conformance case prog/0284).
        A generic that reads its init to update only part of it (a non-identity out map) keeps
        its init: fusion never takes such a producer (its result map is not a permutation).
        """
        rank = len(iterators)
        tshape = out_tshape if out_tshape is not None else out_shape
        t = _tty(tshape, out_elem)
        identity_out = _map(rank, [f"d{i}" for i in range(rank)])
        if out_map is None:
            out_map = identity_out
        if init is None:
            init = self.empty(tshape, out_elem)
        args = [self.fresh("a") for _ in ins]
        oarg = self.fresh("o")
        lines, res = body(args, oarg)
        ins_names = [x.name for x in ins]
        ins_types = [x.ty for x in ins]
        bb_args = [f"{a}: {x.elem}" for a, x in zip(args, ins)]
        maps = list(maps)
        if out_map == identity_out and all(i == "parallel" for i in iterators) \
                and _reads(oarg, lines, res):
            ins_names.append(init)
            ins_types.append(t)
            bb_args.append(f"{oarg}: {out_elem}")
            maps.append(out_map)
            init, oarg = self.empty(tshape, out_elem), self.fresh("o")
        r = self.fresh("g")
        its = ", ".join(f'"{i}"' for i in iterators)
        ins_txt = ""
        if ins_names:
            ins_txt = f"ins({', '.join(ins_names)} : {', '.join(ins_types)}) "
        self.emit(f"{r} = linalg.generic {{indexing_maps = [{', '.join(maps + [out_map])}], "
                  f"iterator_types = [{its}]}} {ins_txt}outs({init} : {t}) {{")
        bb = ", ".join(bb_args + [f"{oarg}: {out_elem}"])
        self.emit(f"^bb0({bb}):")
        for ln in lines:
            self.emit("  " + ln)
        self.emit(f"  linalg.yield {res} : {out_elem}")
        self.emit(f"}} -> {t}")
        return r

    def elementwise(self, out_shape: tuple[int, ...], out_elem: str, ins: Sequence[_T],
                    body: Callable[[list[str]], tuple[list[str], str]]) -> str:
        maps = [_bcast_map(x.shape, out_shape) for x in ins]
        return self.generic(out_shape, out_elem, ins, maps, ["parallel"] * len(out_shape),
                            lambda args, o: body(args))

    def pad(self, x: _T, value: str, lo: Sequence[int], interior: Sequence[int], shape: tuple[int, ...]) -> str:
        """``x`` placed at ``lo + i * (interior + 1)`` in a tensor of ``shape`` filled with ``value``.

        A generic that reads ``x`` at clamped indices and selects ``value`` outside (no strided
        ``insert_slice``: its copies need a runtime library and mis-lower under the schedule).
        """
        rank = len(shape)

        def body(args: list[str], o: str) -> tuple[list[str], str]:
            b = _Body(self)
            ids: list[str] = []
            conds: list[str] = []
            for k in range(rank):
                i = b.op(f"linalg.index {k} : index")
                n, l, s = x.shape[k], lo[k], interior[k] + 1
                if l == 0 and s == 1 and n == shape[k]:
                    ids.append(i)
                    continue
                q = i
                if l:
                    q = b.op(f"arith.subi {i}, {b.const(str(l), 'index')} : index")
                z = b.const("0", "index")
                j = q
                if s != 1:
                    sc = b.const(str(s), "index")
                    rem = b.op(f"arith.remsi {q}, {sc} : index")
                    conds.append(b.op(f"arith.cmpi eq, {rem}, {z} : index"))
                    j = b.op(f"arith.divsi {q}, {sc} : index")
                conds.append(b.op(f"arith.cmpi sge, {q}, {z} : index"))
                conds.append(b.op(f"arith.cmpi slt, {j}, {b.const(str(n), 'index')} : index"))
                j = b.op(f"arith.maxsi {j}, {z} : index")
                j = b.op(f"arith.minsi {j}, {b.const(str(n - 1), 'index')} : index")
                ids.append(j)
            val = b.op(f"tensor.extract {x.name}[{', '.join(ids)}] : {x.ty}")
            if not conds:
                return b.lines, val
            c = conds[0]
            for c2 in conds[1:]:
                c = b.op(f"arith.andi {c}, {c2} : i1")
            return b.lines, b.op(f"arith.select {c}, {val}, {value} : {x.elem}")
        return self.generic(shape, x.elem, [], [], ["parallel"] * rank, body)

    def reshape(self, x: _T, shape: tuple[int, ...]) -> _T:
        if x.shape == shape:
            return x
        cur, cur_shape = x.name, x.shape
        n = int(np.prod(x.shape, dtype=np.int64)) if x.shape else 1
        # to rank 1
        if len(cur_shape) == 0:
            r = self.fresh("r")
            self.emit(f"{r} = tensor.expand_shape {cur} [] output_shape [1] : {_tty((), x.elem)} into "
                      f"{_tty((1,), x.elem)}")
            cur, cur_shape = r, (1,)
        elif len(cur_shape) > 1:
            r = self.fresh("r")
            grp = "[" + ", ".join(str(i) for i in range(len(cur_shape))) + "]"
            self.emit(f"{r} = tensor.collapse_shape {cur} [{grp}] : {_tty(cur_shape, x.elem)} into "
                      f"{_tty((n,), x.elem)}")
            cur, cur_shape = r, (n,)
        if len(shape) == 0:
            r = self.fresh("r")
            self.emit(f"{r} = tensor.collapse_shape {cur} [] : {_tty(cur_shape, x.elem)} into {_tty((), x.elem)}")
            cur = r
        elif len(shape) > 1:
            r = self.fresh("r")
            grp = "[" + ", ".join(str(i) for i in range(len(shape))) + "]"
            self.emit(f"{r} = tensor.expand_shape {cur} [{grp}] output_shape [{', '.join(map(str, shape))}] : "
                      f"{_tty(cur_shape, x.elem)} into {_tty(shape, x.elem)}")
            cur = r
        return _T(cur, shape, x.elem, x.dtype)


# ---------------------------------------------------------------------------------------------
# scalar bodies
# ---------------------------------------------------------------------------------------------

class _Body:
    """Collects scalar lines with fresh names from the emitter."""

    def __init__(self, em: _Emitter):
        self.em = em
        self.lines: list[str] = []

    def op(self, rhs: str, hint: str = "s") -> str:
        v = self.em.fresh(hint)
        self.lines.append(f"{v} = {rhs}")
        return v

    def const(self, lit: str, elem: str) -> str:
        return self.op(f"arith.constant {lit} : {elem}", "k")


def _is_float(elem: str) -> bool:
    return elem in ("f32", "f64")


def _int_div(b: _Body, x: str, y: str, elem: str) -> str:
    bits = 32 if elem == "i32" else 64
    zero, one = b.const("0", elem), b.const("1", elem)
    m1, mn = b.const("-1", elem), b.const(str(-(1 << (bits - 1))), elem)
    bz = b.op(f"arith.cmpi eq, {y}, {zero} : {elem}")
    am = b.op(f"arith.cmpi eq, {x}, {mn} : {elem}")
    bm = b.op(f"arith.cmpi eq, {y}, {m1} : {elem}")
    ov = b.op(f"arith.andi {am}, {bm} : i1")
    bad = b.op(f"arith.ori {bz}, {ov} : i1")
    ys = b.op(f"arith.select {bad}, {one}, {y} : {elem}")
    q = b.op(f"arith.divsi {x}, {ys} : {elem}")   # INT_MIN / 1 = INT_MIN covers the overflow case
    return b.op(f"arith.select {bz}, {zero}, {q} : {elem}")


_CMPF = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_CMPI = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_CMPU = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def _convert(b: _Body, x: str, src: DType, dst: DType) -> str:
    se, de = ELEM[src], ELEM[dst]
    if src is dst:
        return x
    if dst is DType.BOOL:
        if src.is_float:
            z = b.const(_fbits(0.0, se), se)
            c = b.op(f"arith.cmpf une, {x}, {z} : {se}")
        else:
            z = b.const("0", se)
            c = b.op(f"arith.cmpi ne, {x}, {z} : {se}")
        return b.op(f"arith.extui {c} : i1 to i8")
    if src is DType.BOOL:
        if dst.is_float:
            return b.op(f"arith.uitofp {x} : i8 to {de}")
        return b.op(f"arith.extui {x} : i8 to {de}")
    if src.is_float and dst.is_float:
        return b.op(f"arith.{'extf' if se == 'f32' else 'truncf'} {x} : {se} to {de}")
    if src.is_int and dst.is_int:
        return b.op(f"arith.{'extsi' if se == 'i32' else 'trunci'} {x} : {se} to {de}")
    if src.is_int and dst.is_float:
        return b.op(f"arith.sitofp {x} : {se} to {de}")
    # float -> int: truncate toward zero, saturate, NaN -> 0
    bits = 32 if de == "i32" else 64
    lo = b.const(_fbits(-float(1 << (bits - 1)), se), se)
    hi = b.const(_fbits(float(1 << (bits - 1)), se), se)
    fz = b.const(_fbits(0.0, se), se)
    below = b.op(f"arith.cmpf olt, {x}, {lo} : {se}")
    above = b.op(f"arith.cmpf oge, {x}, {hi} : {se}")
    nan = b.op(f"arith.cmpf uno, {x}, {x} : {se}")
    c1 = b.op(f"arith.select {below}, {lo}, {x} : {se}")
    bad = b.op(f"arith.ori {above}, {nan} : i1")
    c2 = b.op(f"arith.select {bad}, {fz}, {c1} : {se}")
    q = b.op(f"arith.fptosi {c2} : {se} to {de}")
    mx = b.const(str((1 << (bits - 1)) - 1), de)
    return b.op(f"arith.select {above}, {mx}, {q} : {de}")


# ---------------------------------------------------------------------------------------------
# ops
# ---------------------------------------------------------------------------------------------

def _const_value(em: _Emitter, value: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> str:
    elem = ELEM[dtype]
    arr = np.asarray(value, dtype=dtype.numpy).reshape(shape)
    t = _tty(shape, elem)
    if arr.size == 0:
        return em.empty(shape, elem)
    flat = arr.reshape(-1)
    if dtype is DType.BOOL:
        raw = flat.astype(np.uint8)
    else:
        raw = flat
    raw_bytes = np.ascontiguousarray(raw).astype(raw.dtype.newbyteorder("<")).tobytes()
    item = raw.dtype.itemsize
    first = raw_bytes[:item]
    r = em.fresh("k")
    if raw_bytes == first * flat.size:
        if dtype is DType.BOOL:
            lit = str(int(flat[0]))
        elif dtype.is_float:
            lit = _fbits(float(flat[0]), elem)
        else:
            lit = str(int(flat[0]))
        em.emit(f"{r} = arith.constant dense<{lit}> : {t}")
    elif dtype is DType.BOOL:
        em.emit(f"{r} = arith.constant dense<[{', '.join(str(int(v)) for v in flat)}]> : {_tty((flat.size,), elem)}")
        return em.reshape(_T(r, (flat.size,), elem, dtype), shape).name
    else:
        em.emit(f'{r} = arith.constant dense<"0x{raw_bytes.hex().upper()}"> : {t}')
    return r


def _lower_op(em: _Emitter, op: str, xs: list[_T], attrs: Mapping[str, Any], dtype: DType,
              shape: tuple[int, ...]) -> str:
    elem = ELEM[dtype]
    if op == "const":
        return _const_value(em, attrs["value"], dtype, shape)

    if op in ("add", "sub", "mul", "div"):
        e = xs[0].elem
        fl = _is_float(e)

        def body(args: list[str]) -> tuple[list[str], str]:
            b = _Body(em)
            x, y = args
            if op == "div" and not fl:
                r = _int_div(b, x, y, e)
            else:
                name = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}[op]
                r = b.op(f"arith.{name}{'f' if fl else 'i'} {x}, {y} : {e}")
            return b.lines, r
        return em.elementwise(shape, elem, xs, body)

    if op in ("exp", "log"):
        def body(args: list[str]) -> tuple[list[str], str]:
            prefix = em.fresh("m")[1:]
            return (exp_text if op == "exp" else log_text)(args[0], elem, prefix)
        return em.elementwise(shape, elem, xs, body)

    if op == "compare":
        e, src = xs[0].elem, xs[0].dtype
        direction = attrs["direction"]

        def body(args: list[str]) -> tuple[list[str], str]:
            b = _Body(em)
            x, y = args
            if src.is_float:
                c = b.op(f"arith.cmpf {_CMPF[direction]}, {x}, {y} : {e}")
            elif src is DType.BOOL:
                c = b.op(f"arith.cmpi {_CMPU[direction]}, {x}, {y} : {e}")
            else:
                c = b.op(f"arith.cmpi {_CMPI[direction]}, {x}, {y} : {e}")
            return b.lines, b.op(f"arith.extui {c} : i1 to i8")
        return em.elementwise(shape, elem, xs, body)

    if op == "select":
        def body(args: list[str]) -> tuple[list[str], str]:
            b = _Body(em)
            p, t, f = args
            z = b.const("0", "i8")
            c = b.op(f"arith.cmpi ne, {p}, {z} : i8")
            return b.lines, b.op(f"arith.select {c}, {t}, {f} : {elem}")
        return em.elementwise(shape, elem, xs, body)

    if op == "convert":
        src = xs[0].dtype
        if src is dtype:
            return xs[0].name

        def body(args: list[str]) -> tuple[list[str], str]:
            b = _Body(em)
            return b.lines, _convert(b, args[0], src, dtype)
        return em.elementwise(shape, elem, xs, body)

    if op in ("reduce_sum", "reduce_max"):
        x = xs[0]
        axes = tuple(attrs["axes"])
        rank = len(x.shape)
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        count = 1
        for a in axes:
            count *= x.shape[a]
        if op == "reduce_sum":
            init_lit = (_fbits(-0.0 if count > 0 else 0.0, elem) if _is_float(elem) else "0")
        else:
            if _is_float(elem):
                init_lit = _fbits(float("-inf"), elem)
            elif dtype is DType.BOOL:
                init_lit = "0"
            else:
                init_lit = str(dtype.int_min)
        init = em.filled(kept, elem, init_lit)
        if not axes:
            red = x.name if op == "reduce_max" else None
        else:
            red = None
        if red is None:
            def body(args: list[str], o: str) -> tuple[list[str], str]:
                b = _Body(em)
                v = args[0]
                if op == "reduce_sum":
                    r = b.op(f"arith.add{'f' if _is_float(elem) else 'i'} {o}, {v} : {elem}")
                elif _is_float(elem):
                    r = b.op(f"arith.maximumf {o}, {v} : {elem}")
                elif dtype is DType.BOOL:
                    r = b.op(f"arith.maxui {o}, {v} : {elem}")
                else:
                    r = b.op(f"arith.maxsi {o}, {v} : {elem}")
                return b.lines, r
            its = ["reduction" if i in axes else "parallel" for i in range(rank)]
            out_map = _map(rank, [f"d{i}" for i in range(rank) if i not in axes])
            red = em.generic(kept, elem, [x], [_map(rank, [f"d{i}" for i in range(rank)])], its, body,
                             init=init, out_map=out_map)
        return em.reshape(_T(red, kept, elem, dtype), shape).name

    if op == "reshape":
        return em.reshape(xs[0], shape).name

    if op == "transpose":
        perm = tuple(attrs["permutation"])
        x = xs[0]
        rank = len(perm)
        inv = [0] * rank
        for k, p in enumerate(perm):
            inv[p] = k
        m = _map(rank, [f"d{inv[a]}" for a in range(rank)])
        return em.generic(shape, elem, [x], [m], ["parallel"] * rank, lambda a, o: ([], a[0]))

    if op == "slice":
        x = xs[0]
        rank = len(shape)
        if rank == 0:
            return x.name
        if any(s == 0 for s in shape):
            return em.empty(shape, elem)
        # Every dim is first cut (extract_slice) to the window of indices it reads, so the generic's
        # input extent is exactly what its map touches.  Why: a map ``d_i + 0`` simplifies to
        # ``d_i``, and so does the composition of two reversals (``(m - 1) - ((m - 1) - d_i)``)
        # when elementwise fusion merges two step -1 slices; linalg then takes that loop's range
        # from the input's extent, and a larger one made the fused loop write past the result
        # (heap corruption; found by tests/backend_cpu/test_differential_fusion.py).
        starts = [int(b0) for b0 in attrs["start"]]
        steps = [int(s) for s in attrs["step"]]
        lows = [b0 if s > 0 else b0 + (m - 1) * s for b0, s, m in zip(starts, steps, shape)]
        sizes = [(m - 1) * abs(s) + 1 for s, m in zip(steps, shape)]
        if lows != [0] * rank or tuple(sizes) != x.shape:
            cut = em.fresh("x")
            sub = _tty(tuple(sizes), elem)
            em.emit(f"{cut} = tensor.extract_slice {x.name}[{', '.join(map(str, lows))}] "
                    f"[{', '.join(map(str, sizes))}] [{', '.join('1' for _ in sizes)}] : {x.ty} to {sub}")
            x = _T(cut, tuple(sizes), elem, x.dtype)
        exprs = []
        for i, (s, size) in enumerate(zip(steps, sizes)):
            if s == 1:
                exprs.append(f"d{i}")
            else:
                exprs.append(f"d{i} * {s} + {0 if s > 0 else size - 1}")
        return em.generic(shape, elem, [x], [_map(rank, exprs)], ["parallel"] * rank, lambda a, o: ([], a[0]))

    if op == "pad":
        x, v = xs
        if len(shape) == 0:
            return x.name
        sc = em.fresh("p")
        em.emit(f"{sc} = tensor.extract {v.name}[] : {v.ty}")
        if x.shape and 0 in x.shape:
            return em.filled(shape, elem, scalar=sc)
        return em.pad(x, sc, [int(l) for l in attrs["lo"]], [int(i) for i in attrs["interior"]], shape)

    if op == "gather":
        x, idx = xs
        axis = int(attrs["axis"])
        n = x.shape[axis]
        if n == 0 or 0 in shape:
            lit = _fbits(0.0, elem) if _is_float(elem) else "0"
            return em.filled(shape, elem, lit)
        rank = len(shape)
        ri = len(idx.shape)
        imap = _map(rank, [f"d{axis + j}" for j in range(ri)])
        ie = idx.elem

        def body(args: list[str], o: str) -> tuple[list[str], str]:
            b = _Body(em)
            z = b.const("0", ie)
            hi = b.const(str(n - 1), ie)
            c = b.op(f"arith.maxsi {args[0]}, {z} : {ie}")
            c = b.op(f"arith.minsi {c}, {hi} : {ie}")
            ci = b.op(f"arith.index_cast {c} : {ie} to index")
            ids = []
            for k in range(rank):
                if axis <= k < axis + ri:
                    continue
                ids.append(b.op(f"linalg.index {k} : index"))
            pre = ids[:axis]
            post = ids[axis:]
            r = b.op(f"tensor.extract {x.name}[{', '.join(pre + [ci] + post)}] : {x.ty}")
            return b.lines, r
        return em.generic(shape, elem, [idx], [imap], ["parallel"] * rank, body)

    if op == "matmul":
        a, b_ = xs
        fl = _is_float(elem)
        zero = _fbits(0.0, elem) if fl else "0"
        init = em.filled(shape, elem, zero)
        if a.shape[-1] == 0 or 0 in shape:
            return init
        if len(a.shape) == 2 and len(b_.shape) == 2:
            r = em.fresh("mm")
            t = _tty(shape, elem)
            em.emit(f"{r} = linalg.matmul ins({a.name}, {b_.name} : {a.ty}, {b_.ty}) outs({init} : {t}) -> {t}")
            return r
        R = len(shape)  # loops: batch..., m, n, k
        nb = R - 2
        L = R + 1

        def opmap(src: tuple[int, ...], last2: list[str]) -> str:
            exprs = []
            sb = src[:-2]
            for j, s in enumerate(sb):
                k = nb - len(sb) + j
                exprs.append("0" if (s == 1 and shape[k] != 1) else f"d{k}")
            return _map(L, exprs + last2)
        ma = opmap(a.shape, [f"d{nb}", f"d{nb + 2}"])
        mb = opmap(b_.shape, [f"d{nb + 2}", f"d{nb + 1}"])
        mo = _map(L, [f"d{i}" for i in range(R)])

        def body(args: list[str], o: str) -> tuple[list[str], str]:
            bb = _Body(em)
            p = bb.op(f"arith.mul{'f' if fl else 'i'} {args[0]}, {args[1]} : {elem}")
            return bb.lines, bb.op(f"arith.add{'f' if fl else 'i'} {o}, {p} : {elem}")
        return em.generic(shape, elem, [a, b_], [ma, mb], ["parallel"] * R + ["reduction"], body,
                          init=init, out_map=mo)

    if op == "conv2d":
        x, w = xs
        fl = _is_float(elem)
        zero = _fbits(0.0, elem) if fl else "0"
        init = em.filled(shape, elem, zero)
        if 0 in shape or 0 in x.shape or 0 in w.shape:
            return init
        (pt, pb), (pl, pr) = [tuple(int(v) for v in p) for p in attrs["padding"]]
        dh, dw = (int(v) for v in attrs["lhs_dilation"])
        sh, sw = (int(v) for v in attrs["strides"])
        rh, rw = (int(v) for v in attrs["rhs_dilation"])
        N, H, W, C = x.shape
        KH, KW, _, O = w.shape
        HP, WP = (H - 1) * dh + 1 + pt + pb, (W - 1) * dw + 1 + pl + pr
        src = x
        if (pt, pb, pl, pr, dh, dw) != (0, 0, 0, 0, 1, 1):
            # Zeros, then x written into its (strided) window of them by one generic over x whose
            # output map is the window: ``0 + x`` (the body reads its init, or elementwise fusion
            # would drop the zeros as unread; -0 becoming +0 cannot change a conv, whose sums start
            # at +0).  One in-place fill and one contiguous copy, where the gathering ``em.pad``
            # generic (clamped ``tensor.extract``) stays scalar, and no insert_slice (its strided
            # memref.copy needs a runtime library).
            # A window offset of 0 with unit step would print as a pure ``d1`` whose extent then
            # has to equal the padded one (verifier): such a dim gets one extra leading row that the
            # conv skips through an extract_slice (a subview, no copy).
            eh = 1 if (pt, dh) == (0, 1) and pb else 0
            ew = 1 if (pl, dw) == (0, 1) and pr else 0
            full = (N, HP + eh, WP + ew, C)
            padded = em.filled(full, elem, zero)

            def at(d: str, step: int, off: int) -> str:
                return (f"{d} * {step}" if step != 1 else d) + (f" + {off}" if off else "")
            wmap = _map(4, ["d0", at("d1", dh, pt + eh), at("d2", dw, pl + ew), "d3"])

            def place(args: list[str], o: str) -> tuple[list[str], str]:
                bb = _Body(em)
                return bb.lines, bb.op(f"arith.add{'f' if fl else 'i'} {o}, {args[0]} : {elem}")
            r = em.generic(full, elem, [x], [_map(4, ["d0", "d1", "d2", "d3"])], ["parallel"] * 4,
                           place, init=padded, out_map=wmap)
            if eh or ew:
                cut = em.fresh("x")
                em.emit(f"{cut} = tensor.extract_slice {r}[0, {eh}, {ew}, 0] [{N}, {HP}, {WP}, {C}] [1, 1, 1, 1] : "
                        f"{_tty(full, elem)} to {_tty((N, HP, WP, C), elem)}")
                r = cut
            src = _T(r, (N, HP, WP, C), elem, dtype)
        # The named op (same loops n, y, x, o, i, j, c and body as a generic; integers wrap, as
        # the named op's muli/addi do) is what conv_schedule tiles, decomposes and vectorizes.
        r = em.fresh("cv")
        t = _tty(shape, elem)
        em.emit(f"{r} = linalg.conv_2d_nhwc_hwcf {{dilations = dense<[{rh}, {rw}]> : tensor<2xi64>, "
                f"strides = dense<[{sh}, {sw}]> : tensor<2xi64>}} ins({src.name}, {w.name} : {src.ty}, {w.ty}) "
                f"outs({init} : {t}) -> {t}")
        return r

    raise error(E_UNSUPPORTED, f"the cpu backend cannot lower op `{op}`")


def _spec_attrs(op: str, attrs: Mapping[str, Any], env: Mapping[str, int]) -> dict[str, Any]:
    out = dict(attrs)
    for key in ("shape", "start", "stop"):
        if key in out:
            out[key] = tuple(_concrete(d, env, f"attribute {key} of {op}") for d in out[key])
    return out


def emit_mlir(fn: Function, shapes: Mapping[str, int] | None = None) -> tuple[str, str]:
    """MLIR text of ``fn`` specialized to the symbol values ``shapes``; returns (text, func name)."""
    env = dict(shapes or {})
    em = _Emitter()
    name = kernel_name(fn)
    values: dict[int, _T] = {}
    sig: list[str] = []
    for i, p in enumerate(fn.params):
        dtype, shape = specialize_type(p.type, env)
        a = f"%arg{i}"
        sig.append(f"{a}: {_tty(shape, ELEM[dtype])}")
        values[id(p)] = _T(a, shape, ELEM[dtype], dtype)
    outs: list[tuple[str, tuple[int, ...], str]] = []
    for j, r in enumerate(fn.results):
        dtype, shape = specialize_type(r.type, env)
        o = f"%out{j}"
        sig.append(f"{o}: {_mty(shape, ELEM[dtype])}")
        outs.append((o, shape, ELEM[dtype]))
    for op in fn.ops:
        dtype, shape = specialize_type(op.result.type, env)
        xs = [values[id(v)] for v in op.operands]
        attrs = _spec_attrs(op.op, op.attrs, env)
        em.emit(f"// {op.op} -> %{op.result.name}")
        name_ = _lower_op(em, op.op, xs, attrs, dtype, shape)
        values[id(op.result)] = _T(name_, shape, ELEM[dtype], dtype)
    for (o, shape, elem), r in zip(outs, fn.results):
        v = values[id(r)]
        em.emit(f"bufferization.materialize_in_destination {v.name} in restrict writable {o} : "
                f"({v.ty}, {_mty(shape, elem)}) -> ()")
    em.emit("return")
    text = f"func.func @{name}({', '.join(sig)}) {{\n" + "\n".join(em.lines) + "\n}\n"
    return text, name
