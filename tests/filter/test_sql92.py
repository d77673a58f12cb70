"""SQL92 selector cases, with the outcomes Apache RocketMQ's Java evaluator gives."""
from __future__ import annotations

import unittest

from rmqtx.filter import FilterEvalError, FilterSyntaxError, compile_cached, compile_expression


def matches(text: str, **props: str) -> bool:
    return compile_expression(text).matches(props)


class BetweenTest(unittest.TestCase):
    def test_between_bounds_inclusive(self):
        expr = compile_expression("a BETWEEN 3 AND 5")
        got = {v: expr.matches({"a": v}) for v in ("2", "3", "4", "5", "6")}
        self.assertEqual(got, {"2": False, "3": True, "4": True, "5": True, "6": False})
        self.assertFalse(expr.matches({}))

    def test_not_between(self):
        expr = compile_expression("a NOT BETWEEN 3 AND 5")
        got = {v: expr.matches({"a": v}) for v in ("2", "3", "5", "6")}
        self.assertEqual(got, {"2": True, "3": False, "5": False, "6": True})
        self.assertFalse(expr.matches({}))

    def test_between_with_decimal_bounds_reads_property_as_double(self):
        self.assertTrue(matches("a BETWEEN 2.5 AND 3.5", a="3"))
        self.assertFalse(matches("a BETWEEN 2.5 AND 3.5", a="4"))


class TagsAndRegionTest(unittest.TestCase):
    def test_tags_in_and_region(self):
        expr = compile_expression("TAGS IN ('A','B') AND region = 'eu'")
        self.assertTrue(expr.matches({"TAGS": "A", "region": "eu"}))
        self.assertTrue(expr.matches({"TAGS": "B", "region": "eu"}))
        self.assertFalse(expr.matches({"TAGS": "C", "region": "eu"}))
        self.assertFalse(expr.matches({"TAGS": "A", "region": "us"}))
        self.assertFalse(expr.matches({"TAGS": "A"}))
        self.assertFalse(expr.matches({"region": "eu"}))
        self.assertEqual(expr.property_names, frozenset({"TAGS", "region"}))

    def test_names_are_case_sensitive_keywords_are_not(self):
        expr = compile_expression("tags in ('A') and Region = 'eu'")
        self.assertFalse(expr.matches({"TAGS": "A", "Region": "eu"}))
        self.assertTrue(expr.matches({"tags": "A", "Region": "eu"}))


class MissingPropertyTest(unittest.TestCase):
    """A missing property is null: comparisons are unknown, and unknown never matches."""

    UNKNOWN = ["a = 'x'", "a <> 'x'", "a = 3", "a <> 3", "a > 3", "a >= 3", "a < 3", "a <= 3",
               "a BETWEEN 1 AND 5", "a NOT BETWEEN 1 AND 5", "a IN ('x')", "a NOT IN ('x')",
               "NOT (a = 'x')", "NOT (a <> 'x')", "NOT (a > 3)", "NOT (a BETWEEN 1 AND 5)",
               "NOT (a IN ('x'))", "NOT (a NOT IN ('x'))", "a", "NOT a",
               "a = 'x' OR b = 'z'", "NOT (a = 'x' AND b = 'y')"]

    def test_unknown_does_not_match(self):
        for text in self.UNKNOWN:
            with self.subTest(text=text):
                expr = compile_expression(text)
                self.assertIsNone(expr.evaluate({"b": "y"}))
                self.assertFalse(expr.matches({"b": "y"}))

    def test_string_operators_are_false_not_unknown(self):
        # Java's CONTAINS/STARTSWITH/ENDSWITH (and their NOT forms) give FALSE for null.
        for op in ("CONTAINS", "STARTSWITH", "ENDSWITH"):
            with self.subTest(op=op):
                self.assertIs(compile_expression(f"a {op} 'x'").evaluate({}), False)
                self.assertIs(compile_expression(f"a NOT {op} 'x'").evaluate({}), False)
                self.assertTrue(matches(f"NOT (a {op} 'x')"))

    def test_known_false_or_unknown(self):
        self.assertTrue(matches("a = 'x' OR b = 'y'", b="y"))
        self.assertFalse(matches("a = 'x' AND b = 'y'", b="y"))
        self.assertIs(compile_expression("a = 'x' AND b = 'y'").evaluate({"b": "n"}), False)

    def test_property_compared_with_missing_property(self):
        # Java: null = x is null, but x = null is FALSE, so x <> null is TRUE.
        self.assertIsNone(compile_expression("a = b").evaluate({"b": "1"}))
        self.assertIs(compile_expression("a = b").evaluate({"a": "1"}), False)
        self.assertTrue(matches("a <> b", a="1"))

    def test_is_null(self):
        self.assertTrue(matches("a IS NULL"))
        self.assertFalse(matches("a IS NULL", a=""))
        self.assertTrue(matches("a IS NOT NULL", a=""))
        self.assertFalse(matches("a IS NOT NULL"))
        self.assertTrue(matches("a is null OR a = 'hello'"))
        self.assertTrue(matches("a is null OR a = 'hello'", a="hello"))
        self.assertFalse(matches("a is null OR a = 'hello'", a="abc"))


class NumberStringTest(unittest.TestCase):
    """Property strings are converted to the literal's Java type; a failed conversion throws."""

    def test_integer_literal_uses_integer_valueof(self):
        self.assertTrue(matches("a > 3", a="10"))
        self.assertTrue(matches("a = 10", a="10"))
        self.assertTrue(matches("a = 10", a="+10"))
        self.assertFalse(matches("a > 3", a="3.5"))   # Integer.valueOf("3.5") throws
        self.assertFalse(matches("a <= 3", a="3.5"))
        self.assertFalse(matches("a > 3", a=" 5"))    # no trimming
        self.assertFalse(matches("a > 3", a="3000000000"))  # out of int range throws
        self.assertTrue(matches("a > 3000000000", a="3000000001"))  # Long literal, Long.valueOf

    def test_decimal_literal_uses_double_valueof(self):
        self.assertTrue(matches("a > 3.0", a="3.5"))
        self.assertTrue(matches("a > 3.0", a=" 3.5 "))   # Double.valueOf trims
        self.assertTrue(matches("a > 3.0", a="1e1"))
        self.assertTrue(matches("a > 3.0", a="4d"))
        self.assertTrue(matches("a > 3.0", a="NaN"))     # Double.compareTo puts NaN on top
        self.assertTrue(matches("a > 3.1E10", a=str(3.1415e10)))

    def test_failed_conversion_is_an_error_not_a_false(self):
        expr = compile_expression("a = 3")
        with self.assertRaises(FilterEvalError):
            expr.evaluate({"a": "abc"})
        self.assertFalse(expr.matches({"a": "abc"}))
        self.assertFalse(matches("a <> 3", a="abc"))  # NOT of an error is still an error

    def test_error_aborts_the_whole_expression_unless_short_circuited(self):
        self.assertFalse(matches("a > 3 OR b = 'x'", a="abc", b="x"))
        self.assertTrue(matches("b = 'x' OR a > 3", a="abc", b="x"))
        self.assertFalse(matches("b = 'y' AND a > 3", a="abc", b="x"))

    def test_string_equality_is_exact(self):
        self.assertTrue(matches("a = '10'", a="10"))
        self.assertFalse(matches("a = '10'", a="10.0"))
        self.assertTrue(matches("a = b", a="3.14", b="3.14"))
        self.assertFalse(matches("a = b", a="3.14", b="3.140"))

    def test_two_properties_order_as_doubles(self):
        self.assertTrue(matches("a > b", a="20", b="10"))
        self.assertFalse(matches("a > b", a="10", b="20"))
        self.assertTrue(matches("a > b", a="10", b="9.5"))
        self.assertFalse(matches("a > b", a="x", b="1"))

    def test_boolean_literals(self):
        self.assertTrue(matches("a = TRUE OR b = FALSE", a="true", b="false"))
        self.assertFalse(matches("a = TRUE OR b = FALSE", a="false", b="true"))
        self.assertTrue(matches("a = TRUE", a="TRUE"))
        self.assertTrue(matches("a <> TRUE", a="yes"))
        self.assertFalse(matches("TRUE = a", a="true"))  # Java casts the Boolean to String: error

    def test_negative_and_long_literals(self):
        self.assertTrue(matches("a < -1", a="-2"))
        self.assertTrue(matches("a = -2147483648", a="-2147483648"))
        self.assertTrue(matches("a = 5L", a="5"))
        self.assertTrue(matches("a BETWEEN -5 AND -1", a="-3"))

    def test_literal_comparisons(self):
        self.assertTrue(matches("1 = 1.0"))
        self.assertTrue(matches("2 > 1.5"))
        self.assertTrue(matches("TRUE"))
        self.assertFalse(matches("FALSE"))
        self.assertFalse(matches("NULL"))
        self.assertTrue(matches("NULL IS NULL"))


class PrecedenceTest(unittest.TestCase):
    def test_and_binds_tighter_than_or(self):
        text = "a = '1' OR b = '1' AND c = '1'"
        self.assertTrue(matches(text, a="1"))
        self.assertFalse(matches(text, b="1", c="0", a="0"))
        self.assertFalse(matches("(a = '1' OR b = '1') AND c = '1'", a="1", c="0"))

    def test_not_binds_tightest(self):
        self.assertFalse(matches("NOT FALSE AND FALSE"))
        self.assertTrue(matches("NOT FALSE OR FALSE"))
        # (NOT a) IS NULL: true exactly when a is missing.
        self.assertTrue(matches("NOT a IS NULL"))
        self.assertFalse(matches("NOT a IS NULL", a="x"))
        self.assertTrue(matches("NOT (a = '1') AND b = '1'", a="0", b="1"))
        self.assertFalse(matches("NOT (a = '1' AND b = '1')", a="1", b="1"))
        # Java parses NOT a = 'x' as (NOT a) = 'x': a Boolean compared with a String never matches.
        self.assertFalse(matches("NOT a = 'x'", a="y"))
        self.assertTrue(matches("NOT NOT (a = 'x')", a="x"))

    def test_comparisons_bind_tighter_than_equality(self):
        self.assertTrue(matches("a > 1 = TRUE", a="2"))
        self.assertTrue(matches("a > 1 = b < 1", a="2", b="0"))

    def test_nesting(self):
        self.assertTrue(matches("(" * 60 + "a = '1'" + ")" * 60, a="1"))
        with self.assertRaises(FilterSyntaxError) as ctx:
            compile_expression("(" * 5000 + "a = '1'" + ")" * 5000)
        self.assertIn("nested too deeply", str(ctx.exception))

    def test_long_chains_do_not_recurse(self):
        text = " OR ".join(f"a = '{i}'" for i in range(3000))
        self.assertTrue(matches(text, a="2999"))
        self.assertFalse(matches(text, a="x"))


class StringOperatorTest(unittest.TestCase):
    def test_contains_startswith_endswith(self):
        props = {"a": "order-paid-eu"}
        for text, want in [("a CONTAINS 'paid'", True), ("a CONTAINS 'x'", False),
                           ("a STARTSWITH 'order'", True), ("a STARTSWITH 'paid'", False),
                           ("a ENDSWITH '-eu'", True), ("a ENDSWITH 'order'", False),
                           ("a NOT CONTAINS 'x'", True), ("a NOT STARTSWITH 'order'", False),
                           ("a NOT ENDSWITH 'us'", True), ("a CONTAINS ''", False),
                           ("a NOT CONTAINS ''", False), ("a contains 'PAID'", False)]:
            with self.subTest(text=text):
                self.assertIs(compile_expression(text).matches(props), want)

    def test_quotes_and_comments(self):
        self.assertTrue(matches("TAGS is not null and TAGS='''''tag'''''", TAGS="''tag''"))
        self.assertTrue(matches("a = 'x' -- trailing comment\n", a="x"))
        self.assertTrue(matches("/* lead */ a /* mid */ = 'x'", a="x"))


class SyntaxErrorTest(unittest.TestCase):
    def assert_error(self, text: str, column: int, fragment: str) -> None:
        with self.assertRaises(FilterSyntaxError) as ctx:
            compile_expression(text)
        err = ctx.exception
        self.assertEqual(err.column, column, str(err))
        self.assertIn(f"column {column}", str(err))
        self.assertIn(fragment, str(err))

    def test_issue_cases(self):
        self.assert_error("a >", 4, "end of input")
        self.assert_error("a BETWEEN 1", 12, "AND")
        self.assert_error("'unclosed", 1, "unterminated string")
        self.assert_error("a IN ()", 7, "string")
        self.assert_error("AND", 1, "'AND'")

    def test_more_bad_input(self):
        self.assert_error("a != 1", 3, "<>")
        self.assert_error("a = 1 AND", 10, "end of input")
        self.assert_error("(a = 1", 7, "')'")
        self.assert_error("a IS 1", 6, "NULL")
        self.assert_error("a NOT LIKE 'x'", 7, "BETWEEN")
        self.assert_error("a IN ('x' 'y')", 11, "')'")
        self.assert_error("a CONTAINS b", 12, "string")
        self.assert_error("", 1, "end of input")

    def test_operand_checks_java_makes(self):
        self.assert_error("a > 'x'", 3, "cannot be ordered")
        self.assert_error("a > TRUE", 3, "cannot be ordered")
        self.assert_error("a = NULL", 3, "NULL")
        self.assert_error("TRUE = 1", 6, "cannot be compared")
        self.assert_error("a BETWEEN 5 AND 3", 3, "BETWEEN")
        self.assert_error("a BETWEEN NULL AND 3", 3, "NULL")
        self.assert_error("'x' IN ('x')", 5, "property")
        self.assert_error("1", 1, "boolean")
        self.assert_error("a = 1 AND 2", 7, "boolean")
        self.assert_error("a > 99999999999999999999", 5, "long range")
        self.assert_error("a > 0.0", 5, "double range")
        self.assert_error("a\n  AND >", 7, "'>'")

    def test_error_reports_line(self):
        with self.assertRaises(FilterSyntaxError) as ctx:
            compile_expression("a = 1\nAND b >")
        self.assertEqual((ctx.exception.line, ctx.exception.column, ctx.exception.position), (2, 8, 13))

    def test_trailing_tokens_are_ignored_like_java(self):
        # SelectorParser.jj has no <EOF> at the end of JmsSelector.
        self.assertTrue(matches("a = '1' b = '2'", a="1"))
        self.assertTrue(matches("a = '1')", a="1"))


class CacheTest(unittest.TestCase):
    def test_compile_cached_returns_same_object(self):
        self.assertIs(compile_cached("a = 'cache'"), compile_cached("a = 'cache'"))
        with self.assertRaises(FilterSyntaxError):
            compile_cached("a >")


if __name__ == "__main__":
    unittest.main()
