"""Lexer: token kinds, spans, and every lexical error code at the right line:col."""

from __future__ import annotations

import pytest

from mind.compiler.frontend import lexer
from mind.compiler.frontend.lexer import tokenize
from mind.diagnostics import MindError


def kinds(src: str) -> list[str]:
    return tokenize(src).kinds


def test_tokens_of_a_benchmark_line():
    toks = tokenize("let a: Tensor[f32,(10,20)] = 1;")
    assert toks.pairs() == [
        ("let", "let"), ("IDENT", "a"), (":", ":"), ("IDENT", "Tensor"), ("[", "["),
        ("IDENT", "f32"), (",", ","), ("(", "("), ("INT", "10"), (",", ","), ("INT", "20"),
        (")", ")"), ("]", "]"), ("=", "="), ("INT", "1"), (";", ";"), ("EOF", ""),
    ]


def test_offsets_and_spans():
    src = "let x = 1\n  tensor.relu(x)"
    toks = tokenize(src, "f.mind")
    i = toks.texts.index("relu")
    assert src[toks.starts[i]:toks.ends[i]] == "relu"
    span = toks.source.span(toks.starts[i], toks.ends[i])
    assert (span.file, span.line, span.col, span.end_line, span.end_col) == ("f.mind", 2, 10, 2, 14)


@pytest.mark.parametrize("text", ["1.0", "2.", ".5", "1e-3", "1E+10", "3.14e2", "1_000.5"])
def test_float_forms(text):
    assert kinds(text) == ["FLOAT", "EOF"]


@pytest.mark.parametrize("text", ["0", "42", "1_000", "007"])
def test_int_forms(text):
    assert kinds(text) == ["INT", "EOF"]


def test_multichar_operators():
    assert kinds("-> :: == != <= >= && || - > : = ! |")[:-1] == [
        "->", "::", "==", "!=", "<=", ">=", "&&", "||", "-", ">", ":", "=", "!", "|"]


def test_keywords_and_contextual_words():
    assert kinds("fn let return import true false")[:-1] == [
        "fn", "let", "return", "import", "true", "false"]
    assert kinds("Tensor tensor diff f32 Valid")[:-1] == ["IDENT"] * 5


def test_newlines_separate_only_outside_brackets():
    assert kinds("a\n\n  b") == ["IDENT", "NL", "IDENT", "EOF"]
    assert kinds("f(a,\n b)\n[1,\n2]") == ["IDENT", "(", "IDENT", ",", "IDENT", ")", "NL",
                                         "[", "INT", ",", "INT", "]", "EOF"]
    assert kinds("{\n a\n}") == ["{", "NL", "IDENT", "NL", "}", "EOF"]
    assert kinds("\n\n a") == ["IDENT", "EOF"]


def test_comments():
    assert kinds("a // c\nb /* x */ c /* multi\nline */ d") == [
        "IDENT", "NL", "IDENT", "IDENT", "NL", "IDENT", "EOF"]
    assert kinds("a / b") == ["IDENT", "/", "IDENT", "EOF"]


def test_bytes_input_and_bom():
    assert kinds(b"let x = 1") == ["let", "IDENT", "=", "INT", "EOF"]
    assert kinds("\ufefflet") == ["let", "EOF"]
    assert kinds("\ufefflet".encode()) == ["let", "EOF"]


def lex_error(src, filename="t.mind"):
    with pytest.raises(MindError) as info:
        tokenize(src, filename)
    return [(d.code, d.span.line, d.span.col, d.span.end_col) for d in info.value.diagnostics]


def test_e1001_invalid_utf8():
    assert lex_error(b"let a = 1\nlet \xe9b = 2") == [("E1001", 2, 5, 6)]
    assert lex_error(b"\xff") == [("E1001", 1, 1, 2)]


def test_e1002_invalid_character():
    assert lex_error("let a = 1\nlet b = a $ 2") == [("E1002", 2, 11, 12)]
    assert lex_error("let x² = 1") == [("E1002", 1, 6, 7)]  # not an identifier character
    assert lex_error("a ~ b") == [("E1002", 1, 3, 4)]
    assert lex_error("a\x00") == [("E1002", 1, 2, 3)]
    assert lex_error("a\u00a0b") == [("E1002", 1, 2, 3)]  # a no-break space


def test_e1003_unterminated_string():
    assert lex_error('let a = 1\nf(x, padding="same)\n') == [("E1003", 2, 14, 15)]


def test_e1004_invalid_escape():
    assert lex_error('f(p="a\\qb")') == [("E1004", 1, 7, 9)]
    assert lex_error('f(p="\\u{110000000}")')[0][0] == "E1004"


def test_e1005_invalid_numeric_literal():
    assert lex_error("let a = 12abc") == [("E1005", 1, 9, 14)]
    assert lex_error("x\n  1e") == [("E1005", 2, 3, 5)]
    assert lex_error("1.5.2") == [("E1005", 1, 1, 6)]
    assert lex_error("1__0") == [("E1005", 1, 1, 5)]
    assert lex_error("1e+") == [("E1005", 1, 1, 4)]


def test_e1006_unterminated_block_comment():
    assert lex_error("a\n  /* never closed\n b") == [("E1006", 2, 3, 5)]


def test_several_lexical_errors_are_all_reported():
    codes = [c for c, *_ in lex_error('a $ b\n1x\n"bad \\q"\n"open')]
    assert codes == ["E1002", "E1005", "E1004", "E1003"]


def test_lexical_errors_are_capped():
    assert len(lex_error("$" * 100)) == lexer.MAX_ERRORS


def test_e1012_size_limit(monkeypatch):
    monkeypatch.setattr(lexer, "MAX_SOURCE_CHARS", 10)
    assert lex_error("let a = 1 + 2 + 3")[0][0] == "E1012"


def test_error_renders_with_caret():
    with pytest.raises(MindError) as info:
        tokenize("let a = 12abc", "t.mind")
    text = str(info.value)
    assert "error[E1005]" in text and "t.mind:1:9" in text and "        ^^^^^" in text


@pytest.mark.parametrize("text, value", [("0x2A", 42), ("0XfF", 255), ("0b1010", 10), ("0o52", 42),
                                         ("0x_ff".replace("_", ""), 255), ("0b1_0", 2)])
def test_radix_literals(text, value):
    from mind.compiler.frontend.parser import parse_expr

    assert kinds(text) == ["RADIX", "EOF"]
    assert parse_expr(text).value == value


@pytest.mark.parametrize("text", ["0x", "0b12", "0o8", "0xg", "0x1.5"])
def test_bad_radix_literals(text):
    assert lex_error(text)[0][0] == "E1005"


def test_unicode_identifiers():
    assert tokenize("let α = 1; let größe = α; 変数 + _ñ1").pairs()[:4] == [
        ("let", "let"), ("IDENT", "α"), ("=", "="), ("INT", "1")]
    assert [k for k in kinds("変数 + _ñ1")] == ["IDENT", "+", "IDENT", "EOF"]


def test_new_operators_and_punctuation():
    assert kinds("a += 1 % b .. c ..= d ... #[x] &y ^z -= *= /= %=")[:-1] == [
        "IDENT", "+=", "INT", "%", "IDENT", "..", "IDENT", "..=", "IDENT", "...", "#", "[", "IDENT", "]",
        "&", "IDENT", "^", "IDENT", "-=", "*=", "/=", "%="]
    assert kinds("0..n")[:-1] == ["INT", "..", "IDENT"]  # not the float `0.`


def test_a_line_starting_with_a_binary_operator_continues_the_statement():
    assert kinds("a\n  + b\n  .sum()\n- c")[:-1] == ["IDENT", "+", "IDENT", ".", "IDENT", "(", ")", "NL", "-",
                                                    "IDENT"]


def test_new_keywords():
    words = "mut if else for in while loop break continue struct pub as const match"
    assert kinds(words)[:-1] == words.split()
