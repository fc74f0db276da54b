"""Translation validation of the canonicalizer: for every example and conformance program of small
shape (and gradient programs), the canonical form is proved equal to the program it came from (or a
refinement of it: a float sum of one element replaced by the element) for every input."""

from __future__ import annotations

from pathlib import Path

import pytest

z3 = pytest.importorskip("z3")

from mind.compiler.autodiff.transform import grad_values, inline_function  # noqa: E402
from mind.compiler.frontend.api import lower_source  # noqa: E402
from mind.compiler.passes import canonicalize  # noqa: E402
from mind.conformance.suite import load_suite  # noqa: E402
from mind.ir.builder import FunctionBuilder  # noqa: E402
from mind.ir.parser import parse_module  # noqa: E402
from mind.loader import load_module  # noqa: E402
from mind.spec.ops import TensorType  # noqa: E402
from mind.verify.equiv import check_equiv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MAX_ELEMENTS = 5000  # parameters and results together, symbolic dims taken as 2
SYMBOLIC_EXTENT = 2


def _elements(fn) -> int:
    total = 0
    for v in [*fn.params, *fn.results]:
        n = 1
        for d in v.type.shape:
            n *= d if isinstance(d, int) else SYMBOLIC_EXTENT
        total += n
    return total


def _shapes(fn) -> dict[str, TensorType]:
    return {p.name: TensorType(p.type.dtype, tuple(d if isinstance(d, int) else SYMBOLIC_EXTENT for d in p.type.shape))
            for p in fn.params if not all(isinstance(d, int) for d in p.type.shape)}


def _programs():
    out = []
    for path in sorted([*ROOT.glob("examples/*.mind"), *ROOT.glob("examples/bench/*.mind"), *ROOT.glob("examples/*.mir")]):
        # MIND source as lowered, before canonicalization; Core IR text as written
        module = lower_source(path.read_text(), str(path)) if path.suffix == ".mind" else load_module(str(path))[0]
        out += [(f"{path.relative_to(ROOT)}:{f.name}", f) for f in module.functions]
    suite = load_suite()
    for entry in suite.entries:  # all but the generated tier (which repeats their shapes)
        if entry.status != "success":
            continue
        case = suite.case(entry)
        if case.get("source") != "generated" and "ir" in case:
            out += [(f"{case['id']}:{f.name}", f) for f in parse_module(case["ir"], case["id"]).functions]
    return [(name, f) for name, f in out if _elements(f) <= MAX_ELEMENTS]


PROGRAMS = _programs()


def test_most_programs_are_small_enough():
    assert len(PROGRAMS) >= 100  # all but the few large benchmark programs


@pytest.mark.parametrize("name", [n for n, _ in PROGRAMS])
def test_canonical_form_is_equal(name):
    fn = dict(PROGRAMS)[name]
    rep = check_equiv(fn, canonicalize(fn), _shapes(fn))
    assert rep.verdict == "equal", (rep.verdict, rep.reason, rep.counterexample)


# programs that exercise the rules (identities, compositions, CSE of commuted operands), from source
SOURCES = {
    "identities": "let x: Tensor[f32,(4,4)] = 1;\nlet y = x * 1.0 + 0.0;\nlet z = x * 1.0;\ny + z - 0.0",
    "int identities": "fn g(x: Tensor<i32, [3]>) { (x + 0, x - 0, x * 1, x / 1, tensor.where(true, x, x + 1)) }",
    "commuted": "fn h(x: Tensor<f64, [3]>, y: Tensor<f64, [3]>) { (x + y, y + x, x * y, y * x, tensor.sum(x, axes=[0]), "
                "tensor.sum(x, axes=[0]), tensor.cast(x, f64), tensor.softmax(x)) }",
    "movement": "fn m(x: Tensor<f32, [2, 3]>) { (tensor.transpose(tensor.transpose(x)), "
                "tensor.reshape(tensor.reshape(x, (3, 2)), (6,))) }",
    "activations": "fn f(x: Tensor<f32, [B, 3]>) -> Tensor<f32, [B, 3]> { tensor.tanh(x) + tensor.sigmoid(x) }",
}


@pytest.mark.parametrize("name", list(SOURCES))
def test_canonical_form_of_source_is_equal(name):
    for raw in lower_source(SOURCES[name]).functions:
        rep = check_equiv(raw, canonicalize(raw), _shapes(raw))
        assert rep.verdict == "equal", (rep.verdict, rep.reason, rep.counterexample)


def test_gradient_program_canonical_form_is_equal():
    """Autodiff's clean-up (the shared canonicalizer on the raw gradient program) is validated too."""
    src = ("fn loss(x: Tensor<f32, [2, 3]>, w: Tensor<f32, [3, 2]>) -> Tensor<f32, []> "
           "{ tensor.sum(tensor.relu(tensor.matmul(x, w)) * 2.0, axes=[0, 1]) }")
    fn = lower_source(src).functions[0]
    b = FunctionBuilder("loss_grad")
    params = [b.param(p.name, p.type) for p in fn.params]
    outs = inline_function(b, fn, params)
    raw = b.finish(outs + grad_values(b, outs[0], params))
    canon = canonicalize(raw)
    assert len(canon.ops) < len(raw.ops)
    rep = check_equiv(raw, canon)
    assert rep.verdict == "equal", (rep.verdict, rep.reason, rep.counterexample)
