"""Property test: compiled selectors agree with a plain tree-walking model of the Java evaluator."""
from __future__ import annotations

import math
import re
import unittest

from hypothesis import given, settings, strategies as st

from rmqtx.filter import FilterEvalError, FilterSyntaxError, compile_expression

NAMES = ("a", "b", "c")
VALUES = ("1", "3", "-2", "2.5", "abc", "true", "TRUE", "", " 3", "3 ", "1e1", "NaN", "007",
          "+4", "99999999999", "x'y")


class JavaError(Exception):
    """Where Java's evaluate would throw."""


# ---- model of Java values: (type tag, value) with tags I(nteger) L(ong) D(ouble) S B -------

def to_int(s: str, bits: int) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise JavaError(s)
    n = int(s)
    if not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
        raise JavaError(s)
    return n


def to_double(s: str) -> float:
    s = s.strip(" ")
    m = re.fullmatch(r"([+-]?)(NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[dDfF]?", s)
    if not m or (m.group(2) in ("NaN", "Infinity") and s[-1] in "dDfF"):
        raise JavaError(s)
    body = {"NaN": "nan", "Infinity": "inf"}.get(m.group(2), m.group(2))
    return float(m.group(1) + body)


CONVERT = {"I": lambda s: to_int(s, 32), "L": lambda s: to_int(s, 64), "D": to_double,
           "B": lambda s: s.lower() == "true"}


def double_key(x: float) -> tuple:
    return (1, 0.0, 0.0) if math.isnan(x) else (0, x, math.copysign(1, x))


def sign(a, b) -> int:
    return (a > b) - (a < b)


def java_compare(left: tuple, right: tuple) -> int:
    (lt, lv), (rt, rv) = left, right
    if lt == rt:
        return sign(double_key(lv), double_key(rv)) if lt == "D" else sign(lv, rv)
    if lt == "S":
        return java_compare((rt, CONVERT[rt](lv)), right)
    if rt == "S":
        if lt == "B":
            raise JavaError("ClassCastException")
        return java_compare(left, (lt, CONVERT[lt](rv)))
    if "B" in (lt, rt):
        return -1
    if "D" in (lt, rt):
        return sign(double_key(float(lv)), double_key(float(rv)))
    return sign(lv, rv)


def operand(node, props):
    kind, x = node
    if kind == "prop":
        return None if props.get(x) is None else ("S", props[x])
    return {"int": "I", "long": "L", "float": "D", "str": "S", "bool": "B"}[kind], x


def evaluate(node, props):
    """Three-valued result of the model: True, False, None; raises JavaError."""
    op = node[0]
    if op == "cast":
        return None if node[1] not in props else False
    if op == "not":
        v = evaluate(node[1], props)
        return None if v is None else not v
    if op in ("and", "or"):
        decisive = op == "or"
        lv = evaluate(node[1], props)
        if lv is decisive:
            return decisive
        rv = evaluate(node[2], props)
        if rv is decisive:
            return decisive
        return None if None in (lv, rv) else not decisive
    if op == "isnull":
        missing = node[2] not in props
        return missing != node[1]
    if op == "in":
        _, negated, name, values = node
        return None if name not in props else (props[name] in values) != negated
    if op == "strop":
        _, kind, negated, name, search = node
        v = props.get(name)
        if v is None or not search:
            return False
        found = {"CONTAINS": search in v, "STARTSWITH": v.startswith(search),
                 "ENDSWITH": v.endswith(search)}[kind]
        return found != negated
    if op == "between":
        _, negated, name, low, high = node
        if negated:
            return evaluate(("or", ("cmp", "<", ("prop", name), low), ("cmp", ">", ("prop", name), high)), props)
        return evaluate(("and", ("cmp", ">=", ("prop", name), low), ("cmp", "<=", ("prop", name), high)), props)
    _, cmp_op, left, right = node
    lv, rv = operand(left, props), operand(right, props)
    if cmp_op in ("=", "<>"):
        if lv is None:
            result = True if rv is None else None
        elif rv is None:
            result = False
        else:
            result = java_compare(lv, rv) == 0
        return result if cmp_op == "=" or result is None else not result
    if lv is None or rv is None:
        return None
    if lv[0] == rv[0] == "S":
        lv, rv = ("D", to_double(lv[1])), ("D", to_double(rv[1]))
    c = java_compare(lv, rv)
    return {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[cmp_op]


def model_matches(node, props) -> bool:
    try:
        return evaluate(node, props) is True
    except JavaError:
        return False


# ---- random expression trees and their SQL text ----------------------------------------------

props_st = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES))
prop_st = st.tuples(st.just("prop"), st.sampled_from(NAMES))
number_st = st.one_of(st.tuples(st.just("int"), st.integers(-5, 5)),
                      st.tuples(st.just("long"), st.sampled_from([3_000_000_000, 99_999_999_999])),
                      st.tuples(st.just("float"), st.sampled_from([0.5, 2.5, 3.0, -1.5, 1e1])))
text_st = st.sampled_from(["abc", "3", "1", "x'y", "TRUE", ""])
equal_operand = st.one_of(prop_st, number_st, st.tuples(st.just("str"), text_st),
                          st.tuples(st.just("bool"), st.booleans()))


def _valid_equality(t) -> bool:
    _, _, left, right = t
    return not (left[0] == "bool" and right[0] not in ("bool", "prop"))


leaf_st = st.one_of(
    st.tuples(st.just("cmp"), st.sampled_from(["=", "<>"]), equal_operand, equal_operand).filter(_valid_equality),
    st.tuples(st.just("cmp"), st.sampled_from(["<", "<=", ">", ">="]),
              st.one_of(prop_st, number_st), st.one_of(prop_st, number_st)),
    st.tuples(st.just("between"), st.booleans(), st.sampled_from(NAMES),
              number_st, number_st).map(lambda t: t if t[4][1] >= t[3][1] else (*t[:3], t[4], t[3])),
    st.tuples(st.just("in"), st.booleans(), st.sampled_from(NAMES),
              st.lists(text_st, min_size=1, max_size=3).map(tuple)),
    st.tuples(st.just("isnull"), st.booleans(), st.sampled_from(NAMES)),
    st.tuples(st.just("strop"), st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]), st.booleans(),
              st.sampled_from(NAMES), text_st),
    st.tuples(st.just("cast"), st.sampled_from(NAMES)),
)
tree_st = st.recursive(
    leaf_st,
    lambda sub: st.one_of(st.tuples(st.just("not"), sub),
                          st.tuples(st.sampled_from(["and", "or"]), sub, sub)),
    max_leaves=8,
)


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def render_operand(node) -> str:
    kind, x = node
    if kind == "prop":
        return x
    if kind == "str":
        return quote(x)
    if kind == "bool":
        return "TRUE" if x else "FALSE"
    if kind == "float":
        return ("-" if x < 0 else "") + repr(abs(x)).upper()
    return str(x) + ("L" if kind == "long" else "")


def render(node, kw, min_prec: int = 0) -> str:
    """SQL text with only the parentheses precedence needs (OR < AND < everything else)."""
    op = node[0]
    if op in ("and", "or"):
        prec = 1 if op == "or" else 2
        text = f"{render(node[1], kw, prec)} {kw(op.upper())} {render(node[2], kw, prec + 1)}"
        return f"({text})" if prec < min_prec else text
    if op == "not":
        return f"{kw('NOT')} ({render(node[1], kw)})"
    if op == "cast":
        return node[1]
    if op == "cmp":
        return f"{render_operand(node[2])} {node[1]} {render_operand(node[3])}"
    if op == "between":
        _, negated, name, low, high = node
        return (f"{name} {kw('NOT ') if negated else ''}{kw('BETWEEN')} {render_operand(low)} "
                f"{kw('AND')} {render_operand(high)}")
    if op == "in":
        _, negated, name, values = node
        return f"{name} {kw('NOT ') if negated else ''}{kw('IN')} ({', '.join(map(quote, values))})"
    if op == "isnull":
        return f"{node[2]} {kw('IS')} {kw('NOT ') if node[1] else ''}{kw('NULL')}"
    _, kind, negated, name, search = node
    return f"{name} {kw('NOT ') if negated else ''}{kw(kind)} {quote(search)}"


class ReferenceModelTest(unittest.TestCase):
    @settings(max_examples=600, deadline=None)
    @given(tree=tree_st, samples=st.lists(props_st, min_size=1, max_size=8), lower=st.booleans())
    def test_compiled_matches_model(self, tree, samples, lower):
        text = render(tree, str.lower if lower else str)
        compiled = compile_expression(text)
        for props in samples:
            self.assertEqual(compiled.matches(props), model_matches(tree, props), (text, props))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(
        ["a", "b", "1", "2.5", "'x'", "'", "(", ")", "=", "<>", ">", "<=", "AND", "OR", "NOT", "IN",
         "BETWEEN", "IS", "NULL", "TRUE", "CONTAINS", ",", "-", "+", ".", "!", "/*", "*/", "\n"]),
        max_size=12), props_st)
    def test_arbitrary_text_fails_only_with_syntax_error(self, tokens, props):
        try:
            compiled = compile_expression(" ".join(tokens))
        except FilterSyntaxError:
            return
        try:
            compiled.evaluate(props)
        except FilterEvalError:
            pass
        self.assertIn(compiled.matches(props), (True, False))


if __name__ == "__main__":
    unittest.main()
