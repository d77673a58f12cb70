"""Lexer and recursive-descent parser for RocketMQ's SQL92 message selector (SelectorParser.jj).

The grammar levels, keyword set and token shapes follow the Java grammar, including its
quirks: NOT is a unary operator binding tighter than comparisons, there is no ``!=``, and,
as in Java, parsing stops at the first token that cannot continue the expression.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, NamedTuple, cast

from rmqtx.filter import expression as ex
from rmqtx.filter.javalang import INT_MAX, LONG_MAX, FilterEvalError, JLong

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                      "CONTAINS", "STARTSWITH", "ENDSWITH"})
_SKIP = re.compile(r"(?:[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*[^*]*\*+(?:[^/*][^*]*\*+)*/)+")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_STRING = re.compile(r"'(?:''|[^'])*'")
_PUNCT = ("<>", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-")
_ORDER = frozenset({">", ">=", "<", "<="})
_STRING_OPS = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})
_NEGATABLE = _STRING_OPS | {"BETWEEN", "IN"}
_OPERAND_START = "a literal, a property name, '(', NOT, '+' or '-'"


class FilterSyntaxError(ValueError):
    """The selector text is not a valid RocketMQ SQL92 expression; says where and what was expected."""

    def __init__(self, message: str, text: str, position: int) -> None:
        self.position = position
        self.line = text.count("\n", 0, position) + 1
        self.column = position - (text.rfind("\n", 0, position) + 1) + 1
        super().__init__(f"{message} at line {self.line}, column {self.column}")


class Token(NamedTuple):
    kind: str   # keyword in upper case, INT, FLOAT, STRING, ID, a punctuation mark, or EOF
    text: str
    pos: int

    def describe(self) -> str:
        return "end of input" if self.kind == "EOF" else repr(self.text)


class _Lexer:
    """Produces tokens on demand, as JavaCC does, so text after where parsing stops is never read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.ahead: list[Token] = []

    def peek(self, k: int = 0) -> Token:
        while len(self.ahead) <= k:
            self.ahead.append(self._scan())
        return self.ahead[k]

    def take(self) -> Token:
        self.peek()
        return self.ahead.pop(0)

    def _scan(self) -> Token:
        text = self.text
        skip = _SKIP.match(text, self.pos)
        pos = skip.end() if skip else self.pos
        if pos >= len(text):
            self.pos = pos
            return Token("EOF", "", pos)
        ch = text[pos]
        m: re.Match[str] | None
        if ch.isascii() and (ch.isdigit() or ch == "."):
            dec, flt = _DECIMAL.match(text, pos), _FLOAT.match(text, pos)
            if flt and (not dec or flt.end() > dec.end()):
                kind, m = "FLOAT", flt
            elif dec:
                kind, m = "INT", dec
            else:
                raise FilterSyntaxError("unexpected character '.'", text, pos)
        elif m := _ID.match(text, pos):
            kind = m.group().upper() if m.group().upper() in KEYWORDS else "ID"
        elif ch == "'":
            m = _STRING.match(text, pos)
            if m is None:
                raise FilterSyntaxError("unterminated string literal", text, pos)
            kind = "STRING"
        else:
            punct = next((p for p in _PUNCT if text.startswith(p, pos)), None)
            if punct is None:
                hint = " (not-equal is written <>)" if text.startswith("!=", pos) else ""
                raise FilterSyntaxError(f"unexpected character {ch!r}{hint}", text, pos)
            self.pos = pos + len(punct)
            return Token(punct, punct, pos)
        self.pos = m.end()
        return Token(kind, m.group(), pos)


class _Parser:
    """One method per grammar production of SelectorParser.jj."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lexer = _Lexer(text)
        self.names: set[str] = set()
        self.end = 0  # end offset of the last consumed token

    def take(self) -> Token:
        tok = self.lexer.take()
        self.end = tok.pos + len(tok.text)
        return tok

    def peek(self, k: int = 0) -> Token:
        return self.lexer.peek(k)

    def fail(self, expected: str, tok: Token) -> FilterSyntaxError:
        return FilterSyntaxError(f"expected {expected} but found {tok.describe()}", self.text, tok.pos)

    def expect(self, kind: str, expected: str) -> Token:
        if self.peek().kind != kind:
            raise self.fail(expected, self.peek())
        return self.take()

    def build(self, start: int, at: Token, factory: Callable[..., ex.Expr], *args: Any) -> ex.Expr:
        """Run a node factory, reporting Java's operand-check failures at the operator token."""
        try:
            node = factory(*args)
        except ex.ExpressionError as exc:
            raise FilterSyntaxError(str(exc), self.text, at.pos) from None
        node.text = self.text[start:self.end]
        return node

    def selector(self) -> ex.Expr:
        start = self.peek()
        return self.build(start.pos, start, ex.as_boolean, self.or_expr())

    def or_expr(self) -> ex.Expr:
        start = self.peek().pos
        left = self.and_expr()
        while self.peek().kind == "OR":
            op = self.take()
            left = self.build(start, op, ex.or_, left, self.and_expr())
        return left

    def and_expr(self) -> ex.Expr:
        start = self.peek().pos
        left = self.equality()
        while self.peek().kind == "AND":
            op = self.take()
            left = self.build(start, op, ex.and_, left, self.equality())
        return left

    def equality(self) -> ex.Expr:
        start = self.peek().pos
        left = self.comparison()
        while True:
            op = self.peek()
            if op.kind in ("=", "<>"):
                self.take()
                factory = ex.equal if op.kind == "=" else ex.not_equal
                left = self.build(start, op, factory, left, self.comparison())
            elif op.kind == "IS":
                self.take()
                negated = self.peek().kind == "NOT"
                if negated:
                    self.take()
                self.expect("NULL", "NULL after IS NOT" if negated else "NULL or NOT NULL after IS")
                left = self.build(start, op, ex.is_not_null if negated else ex.is_null, left)
            else:
                return left

    def comparison(self) -> ex.Expr:
        start = self.peek().pos
        left = self.unary()
        while True:
            op = self.peek()
            negated = op.kind == "NOT"
            kind = self.peek(1).kind if negated else op.kind
            if negated and kind not in _NEGATABLE:
                raise self.fail("CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT", self.peek(1))
            if kind in _ORDER:
                self.take()
                left = self.build(start, op, ex.compare, op.kind, left, self.unary())
                continue
            if kind not in _NEGATABLE:
                return left
            self.take()
            if negated:
                self.take()
            if kind in _STRING_OPS:
                left = self.build(start, op, ex.string_test, kind, left, self.string_literal(), negated)
            elif kind == "BETWEEN":
                low = self.unary()
                self.expect("AND", "AND between the BETWEEN bounds")
                factory = ex.not_between if negated else ex.between
                left = self.build(start, op, factory, left, low, self.unary())
            else:
                left = self.build(start, op, ex.in_, left, self.in_list(), negated)

    def in_list(self) -> list[str]:
        self.expect("(", "'(' after IN")
        values = [self.string_literal()]
        while self.peek().kind == ",":
            self.take()
            values.append(self.string_literal())
        self.expect(")", "',' or ')' in the IN list")
        return values

    def string_literal(self) -> str:
        tok = self.expect("STRING", "a 'string' literal")
        return tok.text[1:-1].replace("''", "'")

    def unary(self) -> ex.Expr:
        op = self.peek()
        if op.kind == "+":
            self.take()
            return self.unary()
        if op.kind in ("-", "NOT"):
            self.take()
            factory = ex.negate if op.kind == "-" else ex.not_
            return self.build(op.pos, op, factory, self.unary())
        return self.primary()

    def primary(self) -> ex.Expr:
        tok = self.peek()
        if tok.kind == "(":
            self.take()
            inner = self.or_expr()
            self.expect(")", "')'")
            return inner
        if tok.kind == "ID":
            self.take()
            self.names.add(tok.text)
            return self.build(tok.pos, tok, ex.prop, tok.text)
        if tok.kind == "STRING":
            value: object = self.string_literal()
        elif tok.kind in ("INT", "FLOAT", "TRUE", "FALSE", "NULL"):
            self.take()
            value = self.number(tok) if tok.kind in ("INT", "FLOAT") else \
                {"TRUE": True, "FALSE": False, "NULL": None}[tok.kind]
        else:
            raise self.fail(_OPERAND_START, tok)
        return self.build(tok.pos, tok, ex.literal, value)

    def number(self, tok: Token) -> object:
        """Java's literal typing: Integer when it fits, else Long; Double must be finite and non-zero."""
        if tok.kind == "INT":
            value = int(tok.text.rstrip("lL"))
            if value > LONG_MAX:
                raise FilterSyntaxError(f"integer literal {tok.text} exceeds the long range", self.text, tok.pos)
            return value if value <= INT_MAX else JLong(value)
        real = float(tok.text)
        if real == float("inf") or real < 5e-324:
            raise FilterSyntaxError(f"float literal {tok.text} is outside Java's positive double range",
                                    self.text, tok.pos)
        return real


class CompiledExpression:
    """A parsed selector; ``matches`` is what the broker calls per message."""

    __slots__ = ("text", "property_names", "_fn")

    def __init__(self, text: str, root: ex.Expr, property_names: frozenset[str]) -> None:
        self.text = text
        self.property_names = property_names
        self._fn = root.fn

    def evaluate(self, properties: dict[str, str] | None) -> bool | None:
        """Java's three-valued result; raises FilterEvalError where Java's evaluate throws."""
        return cast("bool | None", self._fn(properties or {}))  # a compiled selector's root is boolean

    def matches(self, properties: dict[str, str] | None) -> bool:
        """Only TRUE matches: unknown (null) and evaluation errors do not, as in the Java broker."""
        try:
            return self._fn(properties or {}) is True
        except FilterEvalError:
            return False

    def __repr__(self) -> str:
        return f"CompiledExpression({self.text!r})"


def compile_expression(text: str) -> CompiledExpression:
    """Parse a SQL92 selector, raising FilterSyntaxError for what RocketMQ would reject."""
    parser = _Parser(text)
    try:
        root = parser.selector()
    except RecursionError:
        raise FilterSyntaxError("expression is nested too deeply", text, parser.end) from None
    return CompiledExpression(text, root, frozenset(parser.names))


@functools.lru_cache(maxsize=1024)
def compile_cached(text: str) -> CompiledExpression:
    """compile_expression memoised, so each subscription string is parsed once."""
    return compile_expression(text)
