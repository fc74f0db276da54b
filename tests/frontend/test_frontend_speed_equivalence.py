"""The fast paths of the frontend agree with the precise ones.

``lexer.tokenize`` lexes valid input with one ``findall`` and list-level operations, and falls back
to ``lexer._tokenize_precise`` (the single-pass reference lexer, which makes every diagnostic) when
the fast matches do not tile the text; line breaks are filtered by a bracket check or, when one lies
inside brackets, by ``lexer._filter_newlines``.  Whatever the input, the result (tokens, or the
diagnostics raised) must be exactly what the precise lexer gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mind.compiler.frontend import ast as A
from mind.compiler.frontend import lexer
from mind.compiler.frontend.parser import parse
from mind.diagnostics import MindError

from .helpers import BENCH, EXAMPLES

FILES = sorted(BENCH.glob("*.mind")) + sorted(EXAMPLES.glob("*.mind"))
CORPUS = [p.read_text() for p in FILES]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
ALPHABET = st.sampled_from(
    list("letfnreturnimportTensor[]()<>{}|,;:.=+-*/@!&?\"\\ \n\t\r0123456789eE_xyz#é'%^²\u00a0")
    + ["//", "/*", "*/", "\n", "  ", "->", "::", "1.5", ".5", "2.", "1e-3", "1_0", "\\u{41}", "0x", "0b1", "..",
       "...", "+=", "if", "α"])
FRAGMENTS = ["let", "fn", "return", "import", "(", ")", "[", "]", "{", "}", "<", ">", ",", ";",
             "\n", "\n\n", "|", "||", "&&", "==", "->", "::", "=", "Tensor", "tensor", "f32", "x",
             "1", "2.5", '"s"', '"a\\n"', "/*", "*/", "/* c */", "/* c\n */", "// c\n", "-", "!",
             "@", "?", ".", "1e", '"', "tensor.matmul", " ", "\t"]


def outcome(fn, text: str):
    try:
        toks = fn(text)
    except MindError as err:
        return "error", [(d.code, d.message, d.span, d.help, d.notes) for d in err.diagnostics]
    return toks.kinds, toks.texts, toks.starts, toks.ends


def check(text: str) -> None:
    fast = outcome(lambda s: lexer.tokenize(s, "t.mind"), text)
    def precise_lexer(s):
        t = lexer.decode_source(s, "t.mind")
        return lexer._tokenize_precise(t, lexer.SourceMap("t.mind", t))

    precise = outcome(precise_lexer, text)
    assert fast == precise


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_examples_lex_the_same(path):
    check(path.read_text())


@pytest.mark.parametrize("text", [
    "", "\n", "\n\n a", "a\n", "a  ", "a // c", "a /* c */", "a /* c\n */ b", "/* c\n */ a",
    "f(a,\n b)\n[1,\n2]", "{\n a\n}", ")\n(", "a\n)\n\nb", "((((((((((a\n))))))))))",
    "x = 1 /* unterminated", 'p = "a // b"\nq', "1.5.2", "a # b", "\ufefflet", "a\r\nb",
    "fn f() {\n let a = (1,\n 2)\n a\n}", "[(\n)]", "(]\n", '"(\n"', "tensor<f32[2]>= 1",
])
def test_edge_cases_lex_the_same(text):
    check(text)


@SETTINGS
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_random_language_text_lexes_the_same(text):
    check(text)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_random_token_soup_lexes_the_same(parts):
    check(" ".join(parts))
    check("".join(parts))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=60))
def test_random_text_lexes_the_same(text):
    check(text)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(CORPUS), st.integers(0, 10_000), st.integers(0, 12),
       st.sampled_from(FRAGMENTS))
def test_mutated_programs_lex_the_same(src, at, cut, fragment):
    i = at % (len(src) + 1)
    check(src[:i] + fragment + src[i + cut:])
    check(src[:i] + src[i + cut:])


def test_kind_table_stays_bounded(monkeypatch):
    monkeypatch.setattr(lexer, "_KIND_CACHE_LIMIT", len(lexer._KINDS.base) + 10)
    src = " ".join(f"name{i} {i}" for i in range(100))
    assert lexer.tokenize(src).kinds[:4] == ["IDENT", "INT", "IDENT", "INT"]
    assert len(lexer._KINDS) <= len(lexer._KINDS.base) + 10
    assert lexer._KINDS["let"] == "let" and lexer._KINDS["\n"] == "NL"
    check(src)


# -- the AST: nodes are no longer frozen, but compare and hash by value as before -------------------

def test_nodes_compare_and_hash_by_fields():
    a = parse("let h = tensor.relu(x) + b", "a.mind")
    b = parse("let h = tensor.relu(x) + b", "b.mind")
    assert a == b and hash(a) == hash(b)  # `source` is not compared
    assert a.stmts[0].value == b.stmts[0].value and hash(a.stmts[0]) == hash(b.stmts[0])
    assert A.IntLit(1, (0, 1)) != A.BoolLit(1, (0, 1))
    assert len({A.Name("x", (0, 1)), A.Name("x", (0, 1)), A.Name("x", (2, 3))}) == 2


def test_parse_of_examples_is_stable():
    for path in FILES:
        src = Path(path).read_text()
        assert A.dump(parse(src)) == A.dump(parse(src))
