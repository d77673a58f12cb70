"""Expression nodes of the SQL92 filter, built as closures over a property dict.

Each factory mirrors one of RocketMQ's ``create*`` methods: the same compile-time operand
checks (raising ``ExpressionError``) and the same three-valued evaluation, where ``None``
is Java's null (unknown) and only ``True`` matches.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

from rmqtx.filter.javalang import FROM_STRING, FilterEvalError, JLong, double_cmp, jcompare, ordered_cmp

Props = dict[str, str]
Evaluator = Callable[[Props], object]


class ExpressionError(Exception):
    """An operand combination RocketMQ rejects while building the expression."""


class Expr:
    """A compiled node plus the facts Java's factories inspect (constant? boolean? property?)."""

    __slots__ = ("fn", "boolean", "literal", "fixed", "value", "prop", "text", "junction", "terms")

    def __init__(self, fn: Evaluator, *, boolean: bool = False, literal: bool = False,
                 fixed: bool = False, value: Any = None, prop: str | None = None) -> None:
        self.fn = fn
        self.boolean = boolean      # Java BooleanExpression
        self.literal = literal      # Java ConstantExpression (what the operand checks look at)
        self.fixed = fixed          # value known now and evaluation cannot throw
        self.value = value
        self.prop = prop            # name when this is a PropertyExpression
        self.text = ""              # source text, for error messages
        self.junction = ""          # "AND"/"OR" when this node is a flattened chain of terms
        self.terms: tuple[Evaluator, ...] = ()


def _fixed(value: object, *, boolean: bool, literal: bool) -> Expr:
    return Expr(lambda p: value, boolean=boolean, literal=literal, fixed=True, value=value)


def literal(value: object) -> Expr:
    """String/number literal, or TRUE/FALSE/NULL (which Java types as boolean constants)."""
    return _fixed(value, boolean=value is None or type(value) is bool, literal=True)


def prop(name: str) -> Expr:
    return Expr(lambda p: p.get(name), prop=name)


def negate(e: Expr) -> Expr:
    """Unary minus: numbers negate, anything else (strings, booleans, null) becomes null."""
    if e.fixed or e.prop is not None:
        v = e.value
        if type(v) in (int, JLong, float):
            return _fixed(type(v)(-v), boolean=False, literal=False)
        return _fixed(None, boolean=False, literal=False)
    inner = e.fn

    def ev(p: Props) -> object:
        inner(p)  # still evaluated: it may throw
        return None
    return Expr(ev)


def as_boolean(e: Expr) -> Expr:
    """Operands of AND/OR/NOT: a bare property is cast (non-null strings are FALSE)."""
    if e.boolean:
        return e
    if e.prop is not None:
        name = e.prop

        def cast(p: Props) -> object:
            return None if p.get(name) is None else False
        return Expr(cast, boolean=True)
    raise ExpressionError(f"expression does not produce a boolean value: {e.text}")


def not_(e: Expr) -> Expr:
    inner = as_boolean(e).fn

    def ev(p: Props) -> object:
        v = inner(p)
        return None if v is None else not v
    return Expr(ev, boolean=True)


def _junction(kind: str, left: Expr, right: Expr) -> Expr:
    """Chains flatten into one n-ary node: same result and order as Java's left-nested pairs."""
    fns: list[Evaluator] = []
    for e in (left, right):
        e = as_boolean(e)
        fns.extend(e.terms if e.junction == kind else (e.fn,))
    terms = tuple(fns)
    stop = kind == "OR"  # the value that decides the result at once

    def ev(p: Props) -> object:
        unknown = False
        for f in terms:
            v = f(p)
            if v is stop:
                return stop
            if v is None:
                unknown = True
        return None if unknown else not stop
    node = Expr(ev, boolean=True)
    node.junction, node.terms = kind, terms
    return node


def and_(left: Expr, right: Expr) -> Expr:
    return _junction("AND", left, right)


def or_(left: Expr, right: Expr) -> Expr:
    return _junction("OR", left, right)


def _equal_fn(left: Expr, right: Expr) -> Evaluator:
    """null = x is null, x = null is FALSE, null = null is TRUE; else compare after conversion."""
    if left.prop is not None and right.fixed:
        name, c = left.prop, right.value
        if c is None:
            return lambda p: p.get(name) is None
        if type(c) is str:
            return lambda p: None if (v := p.get(name)) is None else v == c
        conv = FROM_STRING[type(c)]
        if type(c) is float:
            return lambda p: None if (v := p.get(name)) is None else double_cmp(conv(v), c) == 0
        return lambda p: None if (v := p.get(name)) is None else conv(v) == c
    lf, rf = left.fn, right.fn

    def ev(p: Props) -> object:
        lv, rv = lf(p), rf(p)
        if lv is None:
            return rv is None or None
        if rv is None:
            return False
        return jcompare(lv, rv) == 0
    return ev


def equal(left: Expr, right: Expr) -> Expr:
    for e in (left, right):
        if e.literal and e.value is None:
            raise ExpressionError(f"'{e.text}' cannot be compared")
    if left.literal and right.literal and left.boolean and not right.boolean:
        raise ExpressionError(f"'{left.text}' cannot be compared with '{right.text}'")
    return Expr(_equal_fn(left, right), boolean=True)


def not_equal(left: Expr, right: Expr) -> Expr:
    return not_(equal(left, right))


_NULL = literal(None)


def is_null(e: Expr) -> Expr:
    return Expr(_equal_fn(e, _NULL), boolean=True)


def is_not_null(e: Expr) -> Expr:
    return not_(is_null(e))


_ORDER_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def _check_orderable(e: Expr) -> None:
    if (e.literal and type(e.value) not in (int, JLong, float)) or (not e.literal and e.boolean):
        raise ExpressionError(f"{e.text} cannot be ordered with > >= < <=")


def compare(op: str, left: Expr, right: Expr) -> Expr:
    """> >= < <=: null on either side is null; two strings compare as doubles."""
    _check_orderable(left)
    _check_orderable(right)
    test = _ORDER_OPS[op]
    if left.prop is not None and right.fixed and right.value is not None:
        name, c = left.prop, right.value  # c is a number: the checks above reject the rest
        conv = FROM_STRING[type(c)]
        if type(c) is float:
            return Expr(lambda p: None if (v := p.get(name)) is None else test(double_cmp(conv(v), c), 0),
                        boolean=True)
        return Expr(lambda p: None if (v := p.get(name)) is None else test(conv(v), c), boolean=True)
    lf, rf = left.fn, right.fn

    def ev(p: Props) -> object:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        return test(ordered_cmp(lv, rv), 0)
    return Expr(ev, boolean=True)


def between(e: Expr, low: Expr, high: Expr) -> Expr:
    """x BETWEEN a AND b is x >= a AND x <= b; constant bounds must be non-null and ordered."""
    if low.literal and high.literal:
        if low.value is None or high.value is None:
            raise ExpressionError("BETWEEN bounds cannot be NULL")
        try:
            reversed_bounds = jcompare(high.value, low.value) < 0
        except FilterEvalError as exc:
            raise ExpressionError(f"BETWEEN bounds {low.text} and {high.text} are not comparable") from exc
        if reversed_bounds:
            raise ExpressionError(
                f"BETWEEN lower bound {low.text} must not be greater than upper bound {high.text}")
    return and_(compare(">=", e, low), compare("<=", e, high))


def not_between(e: Expr, low: Expr, high: Expr) -> Expr:
    return or_(compare("<", e, low), compare(">", e, high))


def in_(e: Expr, values: list[str], negated: bool) -> Expr:
    if e.prop is None:
        raise ExpressionError(f"IN needs a property on its left, not {e.text}")
    name, members = e.prop, frozenset(values)
    return Expr(lambda p: None if (v := p.get(name)) is None else (v in members) != negated,
                boolean=True)


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {"CONTAINS": operator.contains, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}


def string_test(kind: str, e: Expr, search: str, negated: bool) -> Expr:
    """CONTAINS/STARTSWITH/ENDSWITH: an empty pattern, null or non-string is FALSE, even negated."""
    if not search:
        return Expr(lambda p: False, boolean=True)
    test, inner = _STRING_TESTS[kind], e.fn
    return Expr(lambda p: type(v := inner(p)) is str and test(v, search) != negated, boolean=True)
