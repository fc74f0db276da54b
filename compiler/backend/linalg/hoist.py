"""Broadcast-invariant work hoisted out of fused generics: what depends only on an operand read through a
broadcast is computed once per element of that operand, in a generic of its own.

Why: elementwise fusion (``linalg-fuse-elementwise-ops``, the ``prefusion`` pipeline) fuses a producer
into its consumer also when the consumer reads it through a broadcast, so the producer's body then runs
once per element of the *consumer*.  A log-softmax's ``log`` of its row sums (4096 values) became 4096 x
1000 logs, a norm's ``sqrt(mean + eps)`` one square root per element, a gradient's per-row scale one
division per element: the fused op did hundreds of times the work of the unfused program.  This pass
undoes exactly that: in each ``linalg.generic``, the body operations whose operands come only from
inputs read through one and the same broadcasting map (and from constants) move into a new all-parallel
generic over that input's shape, whose results the op then reads through that map.  The same
operations run on the same values, so results are bit-identical; only their count changes.

A map qualifies when it is a projected permutation that drops loops whose ranges multiply to more than
one (a real broadcast).  Nothing that reads an output (a reduction's accumulator), ``linalg.index``, or
an operation with regions moves.  The rewrite is target-neutral; the CPU lowering runs it right after
``prefusion``, so the schedules see the per-row work as the small op it is (a GPU target would pay a
kernel launch for the new generic, where recomputing per thread is cheap).  MLIR is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from .payload import generic_inputs, generic_loops, ops_named, product, static_shape

__all__ = ["hoist_broadcast_work"]

VARYING = object()
"""The source of a value that depends on an output block argument or on the loop indices themselves."""


def hoist_broadcast_work(module: Any) -> int:
    """Hoist every generic's broadcast-invariant body operations into generics of their own (see the
    module docstring).  Returns how many generics were created."""
    return sum(_hoist(op) for op in ops_named(module, "linalg.generic"))


def _broadcast_inputs(op: Any, n_in: int) -> dict[int, str]:
    """Input index -> its map's text, for the inputs read through a real broadcast with a static shape."""
    from mlir import ir
    loops = generic_loops(op)
    if loops is None:
        return {}
    ranges = loops[0]
    found: dict[int, str] = {}
    for i, attr in enumerate(list(op.attributes["indexing_maps"])[:n_in]):
        amap = ir.AffineMapAttr(attr).value
        dims = [e.position for e in amap.results if isinstance(e, ir.AffineDimExpr)]
        if len(dims) != len(amap.results) or len(set(dims)) != len(dims):
            continue
        dropped = product(r for d, r in enumerate(ranges) if d not in dims)
        if dims and dropped > 1 and static_shape(op.operands[i].type) is not None:
            found[i] = str(amap)
    return found


def _sources(op: Any, n_in: int) -> tuple[list[Any], dict[Any, Any]]:
    """The body's operations (terminator excluded) and, for each, the inputs it depends on: a frozenset
    of input indices, or ``VARYING``."""
    from mlir import ir
    block = op.regions[0].blocks[0]
    position = {a: i for i, a in enumerate(block.arguments)}
    body = [o.operation for o in list(block.operations)[:-1]]
    source: dict[Any, Any] = {}
    for inner in body:
        deps: set[int] = set()
        varying = inner.name == "linalg.index" or len(inner.regions) > 0
        for v in inner.operands:
            if isinstance(v.owner, ir.Block):
                k = position.get(v)  # None: an argument of an enclosing block, invariant
                if k is not None and k >= n_in:
                    varying = True
                elif k is not None:
                    deps.add(k)
                continue
            got = source.get(v.owner.operation, frozenset())  # not in the body: invariant
            if got is VARYING:
                varying = True
            else:
                deps |= got
        source[inner] = VARYING if varying else frozenset(deps)
    return body, source


def _hoist(op: Any) -> int:
    """Rewrite one generic; returns how many generics it created (0: left as it was)."""
    n_in = len(generic_inputs(op))
    broadcast = _broadcast_inputs(op, n_in)
    if not broadcast:
        return 0
    body, source = _sources(op, n_in)
    classes: dict[str, list[Any]] = {}  # map text -> the operations it hoists, in body order
    for inner in body:
        deps = source[inner]
        if deps is VARYING or not deps:
            continue
        maps = {broadcast.get(k) for k in deps}
        if len(maps) == 1 and None not in maps:
            classes.setdefault(maps.pop(), []).append(inner)
    if not classes:
        return 0
    args = list(op.regions[0].blocks[0].arguments)
    maps = list(op.attributes["indexing_maps"])
    replaced: dict[Any, tuple[Any, Any]] = {}  # old body value -> (new input, its map attribute)
    for map_text, found in list(classes.items()):
        moved, roots = _storable_roots(found)
        if not moved:
            del classes[map_text]
            continue
        classes[map_text] = moved
        inputs = sorted(frozenset().union(*(source[m] for m in moved)))
        results = _hoisted_generic(op, moved, roots, inputs, args)
        for root, value in zip(roots, results):
            replaced[root] = (value, maps[inputs[0]])
    if not classes:
        return 0
    _rebuild(op, n_in, replaced, {m for ms in classes.values() for m in ms})
    return len(classes)


def _storable(t: Any) -> bool:
    """Whether a tensor of ``t`` may carry a hoisted value: a float, or an integer of whole bytes (a
    tensor of ``i1`` bufferizes to a memref of ``i1``, whose loads the LLVM lowering asserts on)."""
    from mlir import ir
    return isinstance(t, ir.FloatType) or (isinstance(t, ir.IntegerType) and ir.IntegerType(t).width % 8 == 0)


def _storable_roots(moved: list[Any]) -> tuple[list[Any], list[Any]]:
    """``moved`` less every operation whose value would leave it with a type that is not
    ``_storable`` (a comparison's ``i1``), and less what reads such an operation; and the values of
    the rest that something outside it reads (the new generic's results)."""
    while True:
        members = set(moved)
        roots = [r for m in moved for r in m.results if any(use.owner.operation not in members for use in r.uses)]
        bad = {r.owner.operation for r in roots if not _storable(r.type)}
        if not bad:
            return moved, roots
        kept = []
        for m in moved:  # body order: a reader comes after what it reads
            if m in bad or any(getattr(v.owner, "operation", None) in bad for v in m.operands):
                bad.add(m)
            else:
                kept.append(m)
        moved = kept


def _hoisted_generic(op: Any, moved: list[Any], roots: list[Any], inputs: list[int], args: list[Any]) -> list[Any]:
    """A new generic before ``op`` computing ``roots`` (values of ``moved`` that something else reads)
    from ``op``'s inputs ``inputs`` (those ``moved`` reads, all through one map) over their shape;
    returns its results."""
    from mlir import ir
    shape = static_shape(op.operands[inputs[0]].type)
    assert shape is not None
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(len(shape)))
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    with op.location:
        ip = ir.InsertionPoint(op)
        inits = [ir.Operation.create("tensor.empty", results=[ir.RankedTensorType.get(shape, r.type)], ip=ip).results[0]
                 for r in roots]
        new = ir.Operation.create(
            "linalg.generic", results=[i.type for i in inits],
            operands=[op.operands[k] for k in inputs] + inits, regions=1, ip=ip,
            attributes={"indexing_maps": ir.ArrayAttr.get([identity] * (len(inputs) + len(inits))),
                        "iterator_types": ir.ArrayAttr.get([parallel] * len(shape)),
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), len(inits)])})
        block = new.regions[0].blocks.append(*([args[k].type for k in inputs] + [r.type for r in roots]))
        mapping = {args[k]: block.arguments[i] for i, k in enumerate(inputs)}
        _clone_into(block, moved, mapping, op.regions[0].blocks[0])
        ir.Operation.create("linalg.yield", operands=[mapping[r] for r in roots], ip=ir.InsertionPoint(block))
    return list(new.results)


def _clone_into(block: Any, ops: list[Any], mapping: dict[Any, Any], source: Any) -> None:
    """Clone ``ops`` (in order) at the end of ``block``, their operands renamed through ``mapping``
    (which receives the clones' results); an operation of the block ``source`` that one of them reads
    and that is not in ``mapping`` (a constant inside the body) is cloned first."""
    from mlir import ir
    ip = ir.InsertionPoint(block)

    def clone(inner: Any) -> None:
        for v in inner.operands:
            owner = v.owner
            if v not in mapping and not isinstance(owner, ir.Block) and owner.operation.parent is not None and \
                    owner.operation.block == source:
                clone(owner.operation)
        copy = inner.clone(ip=ip)
        for i, v in enumerate(copy.operands):
            if v in mapping:
                copy.operands[i] = mapping[v]
        for old, new in zip(inner.results, copy.results):
            mapping[old] = new

    for inner in ops:
        clone(inner)


def _rebuild(op: Any, n_in: int, replaced: dict[Any, tuple[Any, Any]], moved: set[Any]) -> None:
    """Replace ``op`` by a generic that reads the hoisted values as inputs instead of computing them
    (``replaced``), without ``moved`` in its body and without the inputs its body no longer reads."""
    from mlir import ir
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    body = list(block.operations)
    maps = list(op.attributes["indexing_maps"])
    used = {k for k in range(n_in) if any(use.owner.operation not in moved for use in args[k].uses)}
    keep = sorted(used)
    extra = list(replaced.items())
    inputs = [op.operands[k] for k in keep] + [value for _, (value, _) in extra]
    outputs = list(op.operands)[n_in:]
    attributes = {name: op.attributes[name] for name in op.attributes}
    attributes["indexing_maps"] = ir.ArrayAttr.get([maps[k] for k in keep] + [m for _, (_, m) in extra] + maps[n_in:])
    attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(inputs), len(outputs)])
    with op.location:
        new = ir.Operation.create("linalg.generic", results=[r.type for r in op.results],
                                  operands=inputs + outputs, regions=1, ip=ir.InsertionPoint(op),
                                  attributes=attributes)
        types = [args[k].type for k in keep] + [old.type for old, _ in extra] + [a.type for a in args[n_in:]]
        nblock = new.regions[0].blocks.append(*types)
        nargs = list(nblock.arguments)
        mapping = {args[k]: nargs[i] for i, k in enumerate(keep)}
        mapping.update({old: nargs[len(keep) + i] for i, (old, _) in enumerate(extra)})
        mapping.update({a: nargs[len(keep) + len(extra) + i] for i, a in enumerate(args[n_in:])})
        _clone_into(nblock, [o.operation for o in body if o.operation not in moved], mapping, block)
    for old, fresh in zip(op.results, new.results):
        old.replace_all_uses_with(fresh)
    op.erase()
