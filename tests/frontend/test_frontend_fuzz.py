"""Fuzzing: whatever the input, the frontend returns an AST or raises MindError, nothing else."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, example, given, settings
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
def mutated(draw, corpus=CORPUS):
    src = draw(st.sampled_from(corpus))
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


# -- the `mind` command on fuzzed source (issue 22) ----------------------------------------------
# These use the hypothesis profile (fast `ci`, long `thorough`): never a traceback, never E7009,
# never a hang, nothing written but the output folder given.

DIMS = st.sampled_from([0, 1, 2, 3, 5])
HUGE_DIMS = st.sampled_from([0, 1, 3, 20000, 2**31, 2**40, int("9" * 30)])
UNARY = ["relu", "exp", "log", "sqrt", "tanh", "sigmoid", "abs", "neg", "-", "!"]
BINARY = ["+", "-", "*", "/", "@", "==", "<", "&&"]


@st.composite
def programs(draw, dims=DIMS):
    """Parameterless programs of builtins over literals and fills (often ill-typed on purpose)."""
    def expr(depth):
        choice = draw(st.integers(0, 7 if depth < 3 else 2))
        if choice == 0:
            return draw(st.sampled_from(["1", "2.5", "-0.0", "true", "1e38", "3e39", "2147483648", "0"]))
        if choice == 1:
            shape = draw(st.lists(dims, max_size=3))
            return f"{draw(st.sampled_from(['zeros', 'ones']))}([{', '.join(map(str, shape))}])"
        if choice == 2:
            n = draw(st.integers(1, 3))
            return "[" + ", ".join(draw(st.sampled_from(["1", "2.0", "-3", "true"])) for _ in range(n)) + "]"
        if choice == 3:
            f = draw(st.sampled_from(UNARY))
            return f"{f}({expr(depth + 1)})" if f not in ("-", "!") else f"{f}{expr(depth + 1)}"
        if choice == 4:
            return f"({expr(depth + 1)} {draw(st.sampled_from(BINARY))} {expr(depth + 1)})"
        if choice == 5:
            return f"sum({expr(depth + 1)}, axes=[{draw(st.integers(-2, 2))}])"
        if choice == 6:
            shape = draw(st.lists(dims, max_size=3))
            return f"reshape({expr(depth + 1)}, [{', '.join(map(str, shape))}])"
        return f"transpose({expr(depth + 1)})"
    return f"fn main() {{\n    {expr(0)}\n}}\n"


SOURCES = st.one_of(st.text(max_size=200), st.text(alphabet=ALPHABET, max_size=120), mutated(),
                    st.lists(st.sampled_from(FRAGMENTS), max_size=60).map(" ".join), programs())


def _command(command, source):
    from cli_fuzzing import run_sandboxed

    def argv(d):
        path = os.path.join(d, "p.mind")
        if command == "run":
            return ["run", path, "--backend", "reference", "--out", os.path.join(d, "out")]
        return [command, path] + (["--json"] if command == "ir" else [])
    return run_sandboxed({"p.mind": source.encode("utf-8", "surrogatepass")}, argv, outputs=("out",))


@given(SOURCES, st.sampled_from(["check", "ir"]))
def test_check_and_ir_on_fuzzed_source(source, command):
    _command(command, source)


@given(st.one_of(SOURCES, programs(HUGE_DIMS)), st.just("check"))
@example("fn main() -> Tensor<f32, [20000, 20000]> { zeros([20000, 1]) + ones([1, 20000]) }", "check")
@example("fn main() -> Tensor<i64, []> { " + "9" * 5000 + " }", "ir")
@example("fn A(){relu(zeros([0,2310000000000000000]))}", "check").via("an empty fill NumPy cannot represent: E7009")
@example("fn A(){relu(zeros([0,1000000000,3000000000]))}", "check").via("the same, built later by CSE")
def test_check_on_fuzzed_source_with_huge_sizes(source, command):
    _command(command, source)


SMALL_CORPUS = [p.read_text() for p in sorted(EXAMPLES.glob("*.mind"))]  # (the benchmarks take seconds to run)


@given(st.one_of(mutated(SMALL_CORPUS), programs()))
def test_run_on_fuzzed_source(source):
    _command("run", source)
