"""Fuzzing: whatever the input, the frontend returns an AST or raises MindError, nothing else."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mind.compiler.frontend.ast import Module, walk
from mind.compiler.frontend.lexer import tokenize
from mind.compiler.frontend.parser import parse
from mind.diagnostics import MindError

from .helpers import BENCH, EXAMPLES

CORPUS = [p.read_text() for p in sorted(BENCH.glob("*.mind"))] + \
         [p.read_text() for p in sorted(EXAMPLES.glob("*.mind"))]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
ALPHABET = st.sampled_from(list("letfnreturnimportTensor[]()<>{}|,;:.=+-*/@!&?\"\\ \n\t0123456789eE_xyz#é"))
FRAGMENTS = ["let", "fn", "return", "import", "(", ")", "[", "]", "{", "}", "<", ">", ",", ";", "\n",
             "|", "||", "&&", "==", "->", "::", "=", "Tensor", "tensor", "diff", "f32", "x", "1", "2.5",
             "\"s\"", "/*", "*/", "//", "-", "!", "@", "?", ".", "1e", "\"", "tensor.matmul"]


def check(source) -> None:
    try:
        m = parse(source, "fuzz.mind")
    except MindError as err:
        assert err.diagnostics
        for d in err.diagnostics:
            assert d.code.startswith("E1") and d.span is not None and d.span.line >= 1
        str(err)  # rendering never fails either
        return
    assert isinstance(m, Module)
    n = len(m.source.text)
    for node in walk(m):
        assert 0 <= node.span[0] <= node.span[1] <= n


@SETTINGS
@given(st.text(max_size=200))
def test_random_text(source):
    check(source)


@SETTINGS
@given(st.text(alphabet=ALPHABET, max_size=120))
def test_random_text_from_the_language_alphabet(source):
    check(source)


@SETTINGS
@given(st.binary(max_size=120))
def test_random_bytes(data):
    check(data)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60))
def test_random_token_soup(parts):
    check(" ".join(parts))


@st.composite
def mutated(draw):
    src = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["delete", "insert", "swap", "dup", "delete_token"]))
        n = len(src)
        i = draw(st.integers(0, max(n - 1, 0)))
        if op == "delete" and n:
            j = draw(st.integers(i, min(n, i + 8)))
            src = src[:i] + src[j:]
        elif op == "insert":
            src = src[:i] + draw(st.sampled_from(FRAGMENTS)) + src[i:]
        elif op == "swap" and n > 1:
            j = draw(st.integers(0, n - 1))
            a, b = min(i, j), max(i, j)
            src = src[:a] + src[b] + src[a + 1:b] + src[a] + src[b + 1:]
        elif op == "dup" and n:
            j = draw(st.integers(i, min(n, i + 20)))
            src = src[:j] + src[i:j] + src[j:]
        elif op == "delete_token":
            try:
                toks = tokenize(src)
            except MindError:
                continue
            k = draw(st.integers(0, len(toks) - 1))
            src = src[:toks.starts[k]] + src[toks.ends[k]:]
    return src


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_programs(source):
    check(source)


@SETTINGS
@given(mutated())
def test_mutated_programs_as_bytes(source):
    data = bytearray(source.encode())
    if data:
        data[len(data) // 2] ^= 0x80  # often breaks UTF-8
    check(bytes(data))
