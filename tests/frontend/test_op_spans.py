"""Every op the frontend emits carries the source range of the expression it comes from.

Runtime errors (E6004), autodiff's diagnostics, bisection and ``mind audit`` findings then name the
op's source line and column, not only its function.  The spans are ``SourceSpan``s, resolved on
first read; they must behave exactly as the plain ``Span`` they stand for.
"""

from __future__ import annotations

import pickle

from mind.compiler.frontend.api import compile_source, lower_source
from mind.compiler.frontend.lexer import SourceSpan
from mind.diagnostics import Span

TEXT = ("fn f(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> {\n"
        "    let y = exp(x);\n"
        "    y * 2.0 + log(y)\n"
        "}\n")


def _col(line: str, needle: str) -> int:
    return line.index(needle) + 1


def test_each_op_names_its_expression():
    fn = lower_source(TEXT, "s.mind").functions[0]
    where = {op.op: op.span for op in fn.ops if op.op != "const"}
    lines = TEXT.splitlines()
    assert (where["exp"].line, where["exp"].col) == (2, _col(lines[1], "exp(x)"))
    assert (where["exp"].end_line, where["exp"].end_col) == (2, _col(lines[1], ";"))
    assert (where["log"].line, where["log"].col) == (3, _col(lines[2], "log(y)"))
    assert (where["mul"].line, where["mul"].col) == (3, _col(lines[2], "y * 2.0"))
    assert all(span.file == "s.mind" for span in where.values())


def test_canonicalization_keeps_the_spans():
    fn = compile_source(TEXT, "s.mind").functions[0]
    assert fn.ops and all(op.span is not None for op in fn.ops if op.op != "const")


def test_a_source_span_equals_hashes_and_pickles_as_its_plain_span():
    op = next(op for op in lower_source(TEXT, "s.mind").functions[0].ops if op.op == "log")
    lazy = op.span
    assert isinstance(lazy, SourceSpan)
    plain = Span("s.mind", 3, lazy.col, 3, lazy.end_col)
    assert lazy == plain and plain == lazy and hash(lazy) == hash(plain)
    back = pickle.loads(pickle.dumps(lazy))
    assert type(back) is Span and back == plain
    assert lazy.to_json() == plain.to_json()


def test_the_ops_of_a_gradient_point_at_the_op_they_differentiate():
    from mind.compiler.autodiff.transform import grad_function

    loss = ("fn f(x: Tensor<f32, [3]>) -> f32 {\n"
            "    sum(exp(x * x), axes=[0], keepdims=false)\n"
            "}\n")
    fn = lower_source(loss, "g.mind").functions[0]
    forward = {op.op: op.span for op in fn.ops}
    grad = grad_function(fn)
    spans = [op.span for op in grad.ops if op.op != "const"]
    assert None not in spans and set(spans) <= set(forward.values())
    # d(x * x) = g * x + g * x: the add that sums the two contributions is the VJP of the mul
    assert [op.span for op in grad.ops if op.op == "add"] == [forward["mul"]]
