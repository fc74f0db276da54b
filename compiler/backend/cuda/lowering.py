"""MLIR text of a function -> its kernels as PTX and a launch plan for ``mind.runtime.cuda``.

The middle's MLIR (``linalg.emit``) is fused, bufferized, mapped to the GPU and outlined
(``pipeline.gpu_mapping``); what stays in the host function is then a straight list of steps the
runtime can follow without MLIR: buffers (``memref.alloc``; ``memref.get_global`` for constants, their
bytes in the plan), kernel launches with constant grids and blocks (``gpu.launch_func``), copies
(``memref.copy``) and frees.  Any other host op means some part of the function did not map to the
GPU: E6003 names it.  Each ``gpu.module`` becomes PTX (``pipeline.to_ptx``).

The plan (JSON): ``signature``, ``modules`` (the kernel modules, in order, each one PTX text),
``temps`` (dtype, shape and, for a constant, its bytes in hex), ``steps``: ``{"launch": [module,
kernel], "grid": [x, y, z], "block": [x, y, z], "args": [[kind, n], ...]}`` with kind ``input``,
``output``, ``temp`` (a buffer, passed as a bare pointer) or ``index`` (a 64-bit integer), and
``{"copy": [kind, n], "to": [kind, n], "bytes": n, "offset": n}`` (a contiguous view's first byte).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from mind.runtime.memref import Signature

from ..linalg.context import Diagnostics, LoweringError, find_func, new_context, parse, run_pipeline
from ..linalg.payload import constant_index, untie_shared_inits
from ..linalg.pipeline import PipelineError, bufferize, prefusion
from ..linalg.sealed_contractions import seal_contractions, unseal_contractions
from .library_gemm import GemmLaunch, insert_gemm_calls, library_ptx
from .options import GRID_YZ_MAX, CudaOptions
from .pipeline import PTX_TARGET, gpu_mapping, to_parallel_loops, to_ptx
from .reductions import split_row_reductions

__all__ = ["GpuProgram", "lower_to_ptx", "lower_to_loops", "LoweringError"]

_ELEMENTS = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "i8": "bool", "i1": "bool"}
"""Buffer element types of a host function (an ``i1`` buffer holds one byte per element)."""


class GpuProgram:
    """The PTX of each kernel module (``ptx``: module name -> text) and the launch ``plan``."""

    def __init__(self, ptx: dict[str, str], plan: dict[str, Any]) -> None:
        self.ptx, self.plan = ptx, plan


def _read_only_inputs(func_op: Any) -> None:
    """Mark tensor arguments read-only for bufferization: they are the caller's buffers."""
    from mlir import ir
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    attrs = [ir.DictAttr.get({"bufferization.writable": ir.BoolAttr.get(False)}
                             if isinstance(t, ir.RankedTensorType) else {}) for t in ftype.inputs]
    func_op.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def _identity(mt: Any) -> bool:
    """An identity layout (MLIR elides it when it prints the type)."""
    text = str(mt)
    return "affine_map" not in text and "strided" not in text


def _buffer_spec(t: Any) -> dict[str, Any]:
    from mlir import ir
    mt = ir.MemRefType(t)
    elem = str(mt.element_type)
    if elem not in _ELEMENTS or not mt.has_static_shape or not _identity(mt):
        raise LoweringError("unsupported", f"a host buffer of type {t} (not a static, identity-layout buffer of "
                                    "f32, f64, i32, i64 or bool)")
    return {"dtype": _ELEMENTS[elem], "shape": list(mt.shape)}


def _contiguous_view(t: Any) -> tuple[dict[str, Any], int] | None:
    """The buffer spec of ``t`` and its offset in elements when its elements are one block of bytes:
    an identity layout (offset 0), or a view with a static offset and the strides of its own shape;
    None for any other view (a strided one: ``_views_copied_by_kernels`` makes its copies kernels)."""
    import re
    text = str(t)
    m = re.fullmatch(r"memref<([0-9x]*)(f32|f64|i32|i64|i8|i1), strided<\[([0-9, ]*)\], offset: ([0-9]+)>>", text)
    if m is None:
        return (_buffer_spec(t), 0) if _identity(t) else None
    shape = [int(d) for d in m.group(1).split("x") if d]
    strides = [int(x) for x in m.group(3).split(",") if x.strip()]
    step = 1
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n > 1 and stride != step:
            return None
        step *= n
    return {"dtype": _ELEMENTS[m.group(2)], "shape": shape}, int(m.group(4))


def _views_copied_by_kernels(func_op: Any) -> int:
    """Replace every ``memref.copy`` into anything but a whole buffer, or out of a view whose elements
    are not one block of bytes, by a ``linalg.generic`` that copies element by element (a kernel once
    mapped); returns how many.

    Why: the plan's copy step moves one block of bytes from a view's first byte to a buffer's first
    byte.  A copy into a strided view (a conv's phase placed at every second row and column of its
    result, ``tensor.insert_slice`` with strides) was planned as 120 contiguous bytes at the start of
    the result: wrong values on the GPU (conformance ``gen/conv2d/i64/normal/1`` on an H200), where a
    copy out of a strided view was refused (E6003)."""
    from mlir import ir
    copies: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == "memref.copy":
            src, dst = op.operands[0].type, op.operands[1].type
            if not _identity(dst) or _contiguous_view(src) is None:
                copies.append(op)
        return ir.WalkResult.ADVANCE

    func_op.operation.walk(visit)
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    for op in copies:
        src, dst = op.operands[0], op.operands[1]
        rank = ir.MemRefType(src.type).rank
        identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
        with op.location:
            copy = ir.Operation.create(
                "linalg.generic", results=[], operands=[src, dst], regions=1, ip=ir.InsertionPoint(op),
                attributes={"indexing_maps": ir.ArrayAttr.get([identity, identity]),
                            "iterator_types": ir.ArrayAttr.get([parallel] * rank),
                            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])})
            elem = ir.MemRefType(src.type).element_type
            body = copy.regions[0].blocks.append(elem, elem)
            ir.Operation.create("linalg.yield", operands=[body.arguments[0]], ip=ir.InsertionPoint(body))
        op.erase()
    return len(copies)


def _constant_bytes(module: Any, name: str, spec: dict[str, Any]) -> str:
    """The bytes (hex) of the ``memref.global`` ``name``'s initial value, in the buffer's layout."""
    import numpy as np
    from mlir import ir
    for op in module.body.operations:
        if op.operation.name == "memref.global" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            attr = ir.DenseElementsAttr(op.attributes["initial_value"])
            dtype = np.dtype(spec["dtype"])
            n = int(np.prod(spec["shape"], dtype=np.int64))
            if attr.is_splat:
                value = np.array(attr.get_splat_value().value if hasattr(attr.get_splat_value(), "value")
                                 else attr.get_splat_value(), dtype=dtype)
                return np.full(n, value, dtype=dtype).tobytes().hex()
            return np.asarray(np.array(attr), dtype=dtype).reshape(-1).tobytes().hex()
    raise LoweringError("plan", f"no memref.global @{name} for a constant")


def _host_plan(module: Any, func_op: Any, sig: Signature, gemms: dict[str, GemmLaunch]) -> dict[str, Any]:
    """The steps of the host function (see the module's text); ``gemms``: the launch of each call of
    the GEMM (``library_gemm``)."""
    from mlir import ir
    from mlir.dialects import gpu

    block = func_op.regions[0].blocks[0]
    n_in = len(sig.inputs)
    where: dict[Any, list[Any]] = {}
    for i, arg in enumerate(block.arguments):
        where[arg] = ["input", i] if i < n_in else ["output", i - n_in]
    constants: dict[Any, int] = {}
    temps: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    modules: list[str] = []

    def const(v: Any) -> int:
        if v not in constants:
            raise LoweringError("plan", "a launch whose grid or block is not a constant")
        return constants[v]

    for op in block.operations:
        name = op.operation.name
        if name == "arith.constant":
            if str(op.result.type) == "index":  # grid and block extents, tile sizes passed to kernels
                constants[op.result] = ir.IntegerAttr(op.attributes["value"]).value
        elif name in ("memref.alloc", "memref.alloca"):
            where[op.result] = ["temp", len(temps)]
            temps.append(_buffer_spec(op.result.type))
        elif name == "memref.get_global":
            spec = _buffer_spec(op.result.type)
            spec["init"] = _constant_bytes(module, ir.FlatSymbolRefAttr(op.attributes["name"]).value, spec)
            where[op.result] = ["temp", len(temps)]
            temps.append(spec)
        elif name == "gpu.launch_func":
            launch = gpu.LaunchFuncOp(op.operation) if not isinstance(op, gpu.LaunchFuncOp) else op
            if list(launch.asyncDependencies) or launch.dynamicSharedMemorySize is not None:
                raise LoweringError("plan", "an asynchronous launch or one with dynamic shared memory")
            mod, fn = ir.SymbolRefAttr(launch.kernel).value
            if mod not in modules:
                modules.append(mod)
            args = []
            for v in launch.kernelOperands:
                if v in where:
                    args.append(where[v])
                elif v in constants:
                    args.append(["index", constants[v]])
                else:
                    raise LoweringError("plan", f"a kernel argument the plan cannot give: {v}")
            steps.append({"launch": [mod, fn],
                          "grid": [const(launch.gridSizeX), const(launch.gridSizeY), const(launch.gridSizeZ)],
                          "block": [const(launch.blockSizeX), const(launch.blockSizeY), const(launch.blockSizeZ)],
                          "args": args})
        elif name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in gemms:
            gemm = gemms[ir.FlatSymbolRefAttr(op.attributes["callee"]).value]
            if any(v not in where for v in op.operands):
                raise LoweringError("plan", "a GEMM operand the plan does not know")
            mod = gemm.module
            if mod not in modules:
                modules.append(mod)
            steps.append({"launch": [mod, mod], "grid": list(gemm.grid), "block": list(gemm.block),
                          "args": [where[v] for v in op.operands] + [["index", x] for x in gemm.ints]})
        elif name == "memref.copy":
            src, dst = op.operands[0], op.operands[1]
            if src not in where or dst not in where:
                raise LoweringError("plan", "a copy between buffers the plan does not know")
            view = _contiguous_view(src.type)
            if view is None or not _identity(dst.type):  # _views_copied_by_kernels made them kernels
                raise LoweringError("plan", f"a copy between views the plan cannot give ({src.type} to {dst.type})")
            spec, offset = view
            import numpy as np
            itemsize = np.dtype(spec["dtype"]).itemsize
            nbytes = int(np.prod(spec["shape"], dtype=np.int64)) * itemsize
            steps.append({"copy": where[src], "to": where[dst], "bytes": nbytes, "offset": offset * itemsize})
        elif name in ("memref.collapse_shape", "memref.expand_shape", "memref.subview") and op.operands[0] in where:
            # a reshape of a contiguous buffer: the same bytes; a strided view with static offsets and
            # strides: the kernel that takes it as a bare pointer applies the offset and strides of its type
            if name == "memref.subview" and "?" in str(op.result.type):
                raise LoweringError("unsupported", f"a view with dynamic offsets or strides ({op.result.type})")
            where[op.result] = where[op.operands[0]]
        elif name in ("memref.dealloc", "func.return"):
            continue
        else:
            raise LoweringError("unsupported", f"`{name}` stays on the host: this part of the function does not "
                                               "map to the GPU yet")
    return {"signature": sig.to_json(), "modules": modules, "temps": temps, "steps": steps}


_HOST_OPS = frozenset({"arith.constant", "memref.alloc", "memref.alloca", "memref.get_global", "memref.dealloc",
                       "memref.copy", "memref.collapse_shape", "memref.expand_shape", "memref.subview", "scf.parallel",
                       "func.call", "func.return"})
"""Ops that stay in the host function: buffers, views, copies, the parallel loops that become kernels,
the GEMM's calls (``library_gemm``)."""


def _wrap_serial_runs(func_op: Any) -> None:
    """Put each run of other ops of the host function (a rank-0 op's loads, arithmetic and store, a
    reduction to a scalar's sequential loops) into a parallel loop of one iteration, which the GPU
    mapping turns into a kernel of one thread: every op of the function then runs on the GPU.  A run
    whose values are used after it is left as it is (the plan then names its first op)."""
    from mlir import ir

    block = func_op.regions[0].blocks[0]
    runs: list[list[Any]] = [[]]
    for op in block.operations:
        if op.operation.name in _HOST_OPS:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(op.operation)
    runs = [r for r in runs if r]
    if not runs:
        return
    index = ir.IndexType.get()
    first = block.operations[0]
    with ir.InsertionPoint(first):
        zero = ir.Operation.create("arith.constant", results=[index],
                                   attributes={"value": ir.IntegerAttr.get(index, 0)}).result
        one = ir.Operation.create("arith.constant", results=[index],
                                  attributes={"value": ir.IntegerAttr.get(index, 1)}).result
    for run in runs:
        if any(not _within(use.owner, run) for o in run for r in o.results for use in r.uses):
            continue
        with ir.InsertionPoint(run[0]):
            loop = ir.Operation.create("scf.parallel", results=[], operands=[zero, one, one],
                                       attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 1, 0])},
                                       regions=1)
        body = loop.regions[0].blocks.append(index)
        with ir.InsertionPoint(body):
            terminator = ir.Operation.create("scf.reduce", operands=[])
        for o in run:
            o.move_before(terminator)


def _sink_input_loads(func_op: Any, n_inputs: int) -> None:
    """Move a host load of an input (a scalar such as ``pad``'s value) into the one parallel loop that
    uses it: inputs are never written, so the loop reads the same value, on the GPU."""
    block = func_op.regions[0].blocks[0]
    inputs = list(block.arguments)[:n_inputs]
    for op in list(block.operations):
        o = op.operation
        if o.name != "memref.load" or not any(o.operands[0] == a for a in inputs):
            continue
        users = [use.owner.operation for use in o.results[0].uses]
        loops = []
        for u in users:
            while u is not None and u.parent is not None and u.parent.name != "func.func":
                u = u.parent.operation
            loops.append(u)
        if loops and all(u is not None and u.name == "scf.parallel" and u == loops[0] for u in loops):
            body = loops[0].regions[0].blocks[0]
            o.move_before(body.operations[0])  # its indices are constants, defined above the loop


def _grid_fits(trips: list[int], tile: tuple[int, ...]) -> bool:
    """Whether a parallel loop of these trip counts, tiled by ``tile`` (dims past it untiled), keeps
    its grid's y and z within the hardware's limit."""
    grid = [-(-t // tile[d]) if d < len(tile) else t for d, t in enumerate(trips[:3])]
    return all(g <= GRID_YZ_MAX for g in grid[1:])


def _contiguous_dim_first(func_op: Any, tile: tuple[int, ...]) -> int:
    """Reverse the dims of every parallel loop of the host function, so that the last one (the
    contiguous dim of the buffer the loop writes, row-major) is tiled first and mapped to threadIdx.x:
    a warp's 32 threads then read and write 32 neighbouring elements (one 128-byte line of f32), where
    the first dim would give 32 rows, 32 lines per access.  A loop whose grid would then exceed the
    y/z limit keeps its order.  Returns how many loops were reversed.

    Why legal: a parallel loop's iterations are independent, so any order of its dims computes the
    same; the body sees each induction variable under its old meaning (uses are permuted with them)."""
    from mlir import ir
    reversed_loops = 0
    for op in func_op.regions[0].blocks[0].operations:
        o = op.operation
        if o.name != "scf.parallel":
            continue
        args = list(o.regions[0].blocks[0].arguments)
        n = len(args)
        if n < 2:
            continue
        operands = list(o.operands)
        lbs, ubs, steps = operands[:n], operands[n:2 * n], operands[2 * n:3 * n]
        bounds = [(constant_index(a), constant_index(b), constant_index(c)) for a, b, c in zip(lbs, ubs, steps)]
        if any(x is None for b in bounds for x in b):
            continue
        trips = [max(0, -(-(ub - lb) // st)) for lb, ub, st in bounds]
        if not _grid_fits(trips[::-1], tile):
            continue
        for i, v in enumerate(lbs[::-1] + ubs[::-1] + steps[::-1]):
            o.operands[i] = v
        uses = [(use.owner, use.operand_number, d) for d, a in enumerate(args) for use in a.uses]
        for owner, number, d in uses:
            owner.operands[number] = args[n - 1 - d]
        reversed_loops += 1
    return reversed_loops


def _within(op: Any, run: list[Any]) -> bool:
    """Whether ``op`` is one of the ops of ``run`` or lies in one's regions (binding objects compare
    by the operation they wrap, never by Python identity)."""
    op = op.operation
    while op is not None:
        if any(op == o for o in run):
            return True
        parent = op.parent
        op = parent.operation if parent is not None and parent.name != "func.func" else None
    return False


KERNELS = "mind_kernels"
"""The one kernel module every generic kernel of a function ends in (``_merge_kernel_modules``)."""


def _merge_kernel_modules(module: Any) -> int:
    """Move every outlined kernel into one ``gpu.module`` (``KERNELS``), each ``gpu.func`` renamed
    after the module it came from, and point the launches at them; returns how many kernels.

    Why: ``gpu-kernel-outlining`` makes one module per kernel, and each module is one PTX text, one
    ``ptxas`` run per architecture (0.05-0.1 s each: 4.4 of 5.7 s of an MLP train step's 56 kernels)
    and one module load at run time.  Modules holding anything but kernels (a global a kernel reads)
    are left as they are."""
    from mlir import ir

    kernels: list[tuple[Any, str]] = []
    for op in module.body.operations:
        o = op.operation
        if o.name != "gpu.module":
            continue
        body = [inner.operation for inner in o.regions[0].blocks[0].operations]
        if [b.name for b in body] == ["gpu.func"]:
            kernels.append((o, ir.StringAttr(o.attributes["sym_name"]).value))
    if len(kernels) < 2:
        return len(kernels)
    renamed: dict[tuple[str, str], str] = {}
    target, _ = kernels[0]
    target_block = target.regions[0].blocks[0]
    for source, name in kernels:
        func = source.regions[0].blocks[0].operations[0].operation
        old = ir.StringAttr(func.attributes["sym_name"]).value
        func.attributes["sym_name"] = ir.StringAttr.get(name)
        renamed[(name, old)] = name
        if source != target:
            func.move_after(target_block.operations[len(target_block.operations) - 1].operation)
    target.attributes["sym_name"] = ir.StringAttr.get(KERNELS)
    for source, _ in kernels[1:]:
        source.erase()

    def relink(op: Any) -> Any:
        if op.name == "gpu.launch_func":
            mod, fn = ir.SymbolRefAttr(op.attributes["kernel"]).value  # @module::@func
            if (mod, fn) in renamed:
                op.attributes["kernel"] = ir.SymbolRefAttr.get([KERNELS, renamed[(mod, fn)]])
        return ir.WalkResult.ADVANCE

    module.operation.walk(relink)
    return len(kernels)


def _ptx_of(module: Any) -> dict[str, str]:
    from mlir import ir
    from mlir.dialects import gpu
    out = {}
    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            obj = gpu.ObjectAttr(ir.ArrayAttr(op.attributes["objects"])[0])
            out[ir.StringAttr(op.attributes["sym_name"]).value] = obj.object.decode("utf-8")
    return out


class _Stages:
    """A lowering in progress: its MLIR context, diagnostics and the stage it is at (the stage a
    failure names)."""

    def __init__(self) -> None:
        self.ctx = new_context()
        self.diags = Diagnostics(self.ctx)
        self.stage = "parse"

    def run(self, pipeline: str, module: Any, stage: str) -> None:
        self.stage = stage
        run_pipeline(self.ctx, pipeline, module, stage, self.diags)

    @contextmanager
    def session(self) -> Iterator["_Stages"]:
        """Inside the context: anything the bindings raise becomes a ``LoweringError`` naming the
        stage; the diagnostics handler is detached at the end."""
        from mlir import ir
        try:
            with self.ctx, ir.Location.unknown():
                try:
                    yield self
                except LoweringError:
                    raise
                except Exception as e:  # noqa: BLE001 - anything from the bindings is a lowering failure
                    raise LoweringError(self.stage, f"{type(e).__name__}: {str(e).strip()}",
                                        self.diags.messages) from None
        finally:
            self.diags.detach()


def _pipelines(options: CudaOptions) -> list[str]:
    try:
        return [prefusion().render(), bufferize().render(), to_parallel_loops().render(),
                gpu_mapping(options.tile).render(), to_ptx().render()]
    except PipelineError as e:
        raise LoweringError("pipeline", str(e)) from None


def _to_loops(st: _Stages, mlir_text: str, func_name: str, sig: Signature, options: CudaOptions,
              library: bool) -> tuple[Any, dict[str, GemmLaunch]]:
    """Stages 1 to 4 up to the GPU mapping (``docs/backend-cuda.md``): the module whose host function
    is buffers, copies, parallel loop nests (their last dim first) and the library kernels' calls
    (none with ``library`` False: their ops become loop nests too)."""
    pipelines = _pipelines(options)
    module = parse(st.ctx, mlir_text, st.stage, st.diags)
    if not module.operation.verify():
        raise LoweringError("verify", "the module does not verify", st.diags.messages)
    _read_only_inputs(find_func(module, func_name))
    try:
        seal_contractions(module, func_name)  # fusion would make them generics, which the GEMM does not take
        st.run(pipelines[0], module, "fusion")
        unseal_contractions(module, func_name)
        if not module.operation.verify():
            raise LoweringError(st.stage, "elementwise fusion made an invalid module")
    except LoweringError:  # as on the cpu: the unfused module instead
        st.diags.messages.clear()
        st.stage = "parse"
        module = parse(st.ctx, mlir_text, st.stage, st.diags)
        _read_only_inputs(find_func(module, func_name))
    st.stage = "split reductions"
    split_row_reductions(module, find_func(module, func_name))
    # cse merged identical inits (two matmuls' zero fills): each user gets its own, or one-shot
    # bufferization computes one result in place in another's out-parameter and overwrites it
    untie_shared_inits(module)
    st.run(pipelines[1], module, "bufferize")
    _views_copied_by_kernels(find_func(module, func_name))
    st.stage = "gemm"
    gemms = insert_gemm_calls(module, find_func(module, func_name)) if library else {}
    st.run(pipelines[2], module, "parallel loops")
    st.stage = "serial parts"
    _sink_input_loads(find_func(module, func_name), len(sig.inputs))
    _wrap_serial_runs(find_func(module, func_name))
    _contiguous_dim_first(find_func(module, func_name), options.tile)
    return module, gemms


def lower_to_loops(mlir_text: str, func_name: str, sig: Signature, options: CudaOptions, *,
                   library: bool = True) -> tuple[Any, Any, dict[str, GemmLaunch]]:
    """The module of ``_to_loops``, its MLIR context (which the caller must keep while it uses the
    module) and the library kernels' launches by callee: what the GPU mapping starts from.  The tests
    run it on the CPU (``tests/backend_cuda/host_emulation.py``), which checks every stage but the
    mapping itself against the reference on machines without a GPU."""
    st = _Stages()
    with st.session():
        module, gemms = _to_loops(st, mlir_text, func_name, sig, options, library)
    return module, st.ctx, gemms


def lower_to_ptx(mlir_text: str, func_name: str, sig: Signature, options: CudaOptions) -> GpuProgram:
    """Compile ``func_name`` of ``mlir_text`` (the middle's output, signature ``sig``) for the GPU;
    every MLIR failure is a ``LoweringError`` (``api`` reports it as E6012, an unmapped part as E6003)."""
    pipelines = _pipelines(options)
    st = _Stages()
    with st.session():
        module, gemms = _to_loops(st, mlir_text, func_name, sig, options, library=True)
        st.run(pipelines[3], module, "gpu mapping")
        st.stage = "kernel module"
        _merge_kernel_modules(module)
        st.stage = "plan"
        plan = _host_plan(module, find_func(module, func_name), sig, gemms)
        st.run(pipelines[4], module, "ptx")
        ptx = _ptx_of(module)
        ptx.update({g.module: library_ptx(g.elem, PTX_TARGET, g.window) for g in gemms.values()})
    missing = [m for m in plan["modules"] if m not in ptx]
    if missing:
        raise LoweringError("ptx", f"no PTX for the kernel module(s) {', '.join(missing)}")
    return GpuProgram({m: ptx[m] for m in plan["modules"]}, plan)
