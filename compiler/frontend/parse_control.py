"""The parser's rules for control flow, structs, constants, attributes and indexing, and the
diagnostics for constructs MIND does not have.

``ControlSyntax`` is a mixin of ``parser._Parser`` (it uses the parser's token lists and error
helpers: ``k``, ``t``, ``e``, ``i``, ``_err``, ``_unexpected``, ``_close``, ``parse_expr`` ...).
The grammar is ``spec/grammar/mind.ebnf``; what each construct means is ``docs/frontend.md``.

A construct outside the language is reported as E1013 with its name and what to write instead
(``UNSUPPORTED``), at the token that starts it, rather than as "expected X, found Y".
"""

from __future__ import annotations

from typing import Any

from . import ast as A

#: Words that start a construct MIND does not have, when they begin a statement and are followed by
#: a name or a block: (the message, what to write instead).  They are not reserved words.
UNSUPPORTED: dict[str, tuple[str, str]] = {
    "enum": ("`enum` types are not supported",
             "use integer or bool tensors for tags, and `if` or `where` to choose"),
    "impl": ("`impl` blocks (methods) are not supported",
             "write free functions: `fn area(r: Rect) -> f32 { ... }`"),
    "trait": ("traits are not supported",
              "write free functions; every function is generic over the shapes of its arguments"),
    "type": ("type aliases are not supported", "write the type out, or define a `struct`"),
    "mod": ("inline modules are not supported", "put the functions at the top level of the file"),
    "unsafe": ("`unsafe` code is not supported", "MIND has no unsafe operations; remove `unsafe`"),
    "extern": ("`extern` functions are not supported",
               "MIND cannot call foreign code; write the function in MIND"),
    "static": ("`static` items are not supported", "write `const NAME: T = value`"),
    "async": ("`async` code is not supported",
              "MIND programs are pure tensor computations; remove `async`"),
    "macro_rules": ("macros are not supported", "write a function"),
    "match": ("`match` is not supported",
              "write `if` / `else if` / `else` (a tensor condition lowers to `select`), or "
              "`where(cond, a, b)`"),
}
#: Unsupported expression starts (token kind -> (the message, what to write instead)).
UNSUPPORTED_PREFIX: dict[str, tuple[str, str]] = {
    "&": ("references `&x` are not supported", "tensors are values: pass `x` itself"),
    "match": UNSUPPORTED["match"],
    "loop": ("`loop` as an expression is not supported",
             "use `loop { ... }` as a statement and assign to a `let mut` variable before `break`"),
    "for": ("`for` as an expression is not supported", "use `for` as a statement"),
    "while": ("`while` as an expression is not supported", "use `while` as a statement"),
}
_LOOP_HELP = "loops look like `for i in 0..n { ... }`, `while cond { ... }` or `loop { ... }`"


class ControlSyntax:
    """Parser rules for ``if``, loops, structs, ``const``, ``#[...]``, ``x[...]`` and casts."""

    __slots__ = ()
    k: list[str]
    t: list[str]
    e: list[int]
    i: int
    nostruct: bool
    nopath: bool

    # -- helpers ----------------------------------------------------------------------------------
    def _start(self, i: int) -> int:
        return self.e[i] - len(self.t[i])

    def unsupported(self, i: int, message: str, instead: str) -> Any:
        """E1013 at token ``i``: ``message`` names a construct MIND does not have, ``instead``
        says what to write."""
        return self._err("E1013", message, i, instead)

    def _body(self, what: str) -> A.Block:
        """The block after a loop or branch header (line breaks before `{` are allowed)."""
        self._skip_nl()
        if self.k[self.i] != "{":
            raise self._unexpected(f"`{{` to start the body of `{what}`",
                                   _LOOP_HELP if what != "if" else
                                   "write `if cond { ... } else { ... }`")
        return self.parse_block()

    def _header(self) -> A.Expr:
        """A condition or loop range: an expression in which `Name {` starts no struct literal."""
        saved = self.nostruct
        self.nostruct = True
        try:
            return self.parse_expr()
        finally:
            self.nostruct = saved

    # -- control flow -----------------------------------------------------------------------------
    def parse_if(self) -> A.If:
        k = self.k
        i0 = self.i
        self.i += 1
        if k[self.i] == "let":
            raise self.unsupported(self.i, "`if let` is not supported", "test a bool value: `if c { ... }`")
        cond = self._header()
        then = self._body("if")
        orelse: A.Block | A.If | None = None
        j = self.i
        while k[j] == "NL":
            j += 1
        if k[j] == "else":
            self.i = j + 1
            self._skip_nl()
            if k[self.i] == "if":
                orelse = self.parse_if()
            else:
                orelse = self._body("if")
        end = (orelse or then).span[1]
        return A.If(cond, then, orelse, (self._start(i0), end))

    def parse_for(self) -> A.For:
        k = self.k
        i0 = self.i
        self.i += 1
        target = self.parse_pattern()
        if k[self.i] != "in":
            raise self._unexpected("`in`", "loops over a range look like `for i in 0..n { ... }`")
        self.i += 1
        it = self._header()
        body = self._body("for")
        return A.For(target, it, body, (self._start(i0), body.span[1]))

    def parse_while(self) -> A.While:
        i0 = self.i
        self.i += 1
        if self.k[self.i] == "let":
            raise self.unsupported(self.i, "`while let` is not supported", "write `while cond { ... }`")
        cond = self._header()
        body = self._body("while")
        return A.While(cond, body, (self._start(i0), body.span[1]))

    def parse_loop(self) -> A.Loop:
        i0 = self.i
        self.i += 1
        body = self._body("loop")
        return A.Loop(body, (self._start(i0), body.span[1]))

    def parse_jump(self) -> A.Stmt:
        """``break`` or ``continue`` (without a label or a value)."""
        i = self.i
        self.i = i + 1
        kind = self.k[i + 1]
        if kind not in ("NL", ";", "}", "EOF"):
            raise self.unsupported(i + 1, f"`{self.t[i]}` with a value or a label is not supported",
                                   f"assign the value to a `let mut` variable, then `{self.t[i]}`")
        span = (self._start(i), self.e[i])
        return A.Break(span) if self.k[i] == "break" else A.Continue(span)

    # -- items ------------------------------------------------------------------------------------
    def parse_struct(self) -> A.StructDef:
        k = self.k
        i0 = self.i
        self.i += 1
        ni = self._expect("IDENT", "a struct needs a name: `struct Params { w: Tensor<f32, [4, 2]> }`")
        if k[self.i] == "<":
            raise self.unsupported(self.i, "generic structs are not supported",
                                   "use symbolic dimensions in the field types instead")
        if k[self.i] != "{":
            raise self.unsupported(self.i, "tuple and unit structs are not supported",
                                   "name the fields: `struct P { w: Tensor<f32, [2]> }`")
        op = self.i
        self.i += 1
        fields: list[A.Param] = []
        while True:
            self._skip_nl()
            if k[self.i] == "pub":
                self.i += 1
            pi = self.i
            if k[pi] != "IDENT":
                break
            self.i += 1
            self._expect(":", "every field needs a type: `w: Tensor<f32, [4, 2]>`")
            ty = self.parse_type()
            fields.append(A.Param(self.t[pi], ty, (self._start(pi), ty.span[1])))
            self._skip_nl()
            if k[self.i] != ",":
                break
            self.i += 1
        self._skip_nl()
        j = self._close("}", op, "a field, `,` or `}`")
        return A.StructDef(self.t[ni], tuple(fields), (self._start(i0), self.e[j]),
                           (self._start(ni), self.e[ni]))

    def parse_const(self) -> A.ConstDef:
        k = self.k
        i0 = self.i
        self.i += 1
        ni = self._expect("IDENT", "constants look like `const EPS: f32 = 1e-5`")
        ty = None
        if k[self.i] == ":":
            self.i += 1
            ty = self.parse_type()
        self._expect("=", "a constant needs a value: `const EPS: f32 = 1e-5`")
        self._skip_nl()
        value = self.parse_expr()
        return A.ConstDef(self.t[ni], ty, value, (self._start(i0), value.span[1]),
                          (self._start(ni), self.e[ni]))

    def skip_attribute(self) -> None:
        """``#[...]`` or ``#![...]``: attributes are accepted and have no effect."""
        i = self.i + 1
        if self.k[i] == "!":
            i += 1
        if self.k[i] != "[":
            self.i = i
            raise self._unexpected("`[` after `#`", "attributes look like `#[inline]`")
        self.i = i + 1
        depth = 1
        k = self.k
        while depth:
            kind = k[self.i]
            if kind == "EOF":
                self._close("]", i, "`]`")
            if kind == "[":
                depth += 1
            elif kind == "]":
                depth -= 1
            self.i += 1

    # -- expressions ------------------------------------------------------------------------------
    def is_struct_lit(self, i: int) -> bool:
        """Whether the name at ``i`` followed by `{` starts a struct literal: `Name { field: ...`
        always, `Name {}` and the shorthand `Name { a, b }` only outside conditions."""
        k = self.k
        j = i + 2
        while k[j] == "NL":
            j += 1
        if k[j] == "IDENT" and k[j + 1] == ":":
            return True
        if self.nostruct:
            return False
        return k[j] == "}" or (k[j] == "IDENT" and k[j + 1] in (",", "}", "NL"))

    def parse_struct_lit(self, i: int) -> A.StructLit:
        k = self.k
        op = i + 1
        self.i = op + 1
        saved = self.nostruct
        self.nostruct = False
        fields: list[A.Keyword] = []
        try:
            while True:
                self._skip_nl()
                fi = self.i
                if k[fi] != "IDENT":
                    break
                self.i += 1
                if k[self.i] == ":":
                    self.i += 1
                    self._skip_nl()
                    value = self.parse_expr()
                else:  # shorthand `a` for `a: a`
                    value = A.Name(self.t[fi], (self._start(fi), self.e[fi]))
                fields.append(A.Keyword(self.t[fi], value, (self._start(fi), value.span[1])))
                self._skip_nl()
                if k[self.i] != ",":
                    break
                self.i += 1
            self._skip_nl()
            if k[self.i] == "..":
                raise self.unsupported(self.i, "struct update syntax `..base` is not supported",
                                       "list every field")
            j = self._close("}", op, "a field, `,` or `}`")
        finally:
            self.nostruct = saved
        return A.StructLit(self.t[i], tuple(fields), (self._start(i), self.e[j]))

    def parse_index(self, value: A.Expr) -> A.Index:
        """``value[...]``: indices, `start:stop:step` slices, `...`, and ranges `a..b`."""
        k = self.k
        op = self.i
        self._enter(op)
        self.i = op + 1
        items: list[Any] = []
        saved = self.nostruct, self.nopath
        self.nostruct, self.nopath = False, True
        while k[self.i] != "]":
            items.append(self._index_item())
            if k[self.i] != ",":
                break
            self.i += 1
        self.nostruct, self.nopath = saved
        j = self._close("]", op, "`,` or `]`")
        self.depth -= 1
        return A.Index(value, tuple(items), (value.span[0], self.e[j]))

    def _index_item(self) -> Any:
        k = self.k
        i0 = self.i
        kind = k[i0]
        if kind == "...":
            self.i = i0 + 1
            return A.EllipsisItem((self._start(i0), self.e[i0]))
        start = None
        if kind not in (":", "::"):
            start = self.parse_expr()
            kind = k[self.i]
            if kind not in (":", "::"):
                return start
        stop = step = None
        end = self.e[self.i]
        if kind == "::":  # `a::k`: no stop, then the step
            self.i += 1
            if k[self.i] not in (",", "]"):
                step = self.parse_expr()
        else:
            self.i += 1
            if k[self.i] not in (":", ",", "]"):
                stop = self.parse_expr()
            if k[self.i] == ":":
                end = self.e[self.i]
                self.i += 1
                if k[self.i] not in (",", "]"):
                    step = self.parse_expr()
        last = step or stop
        begin = start.span[0] if start is not None else self._start(i0)
        return A.SliceItem(start, stop, step, (begin, last.span[1] if last is not None else end))
