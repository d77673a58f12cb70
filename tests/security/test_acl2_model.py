"""ACL 2.0's records and matching rules, without a broker (the broker-level decisions are in test_acl2.py)."""

from __future__ import annotations

import unittest

from rmqtx.acl2.model import ALLOW, DENY, LITERAL, PATTERN_ANY, PREFIXED, Acl, Entry, Policy, Resource, ip_in_range, java_sort


def entry(key: str, decision: str = ALLOW, actions: tuple[str, ...] = ("Pub",), ips: list[str] | None = None) -> Entry:
    return Entry(Resource.parse(key), list(actions), ips, decision)


class ResourceTest(unittest.TestCase):
    def test_keys_parse_as_apache_reads_them(self) -> None:
        self.assertEqual(Resource.parse("*"), Resource("Any", None, PATTERN_ANY))
        self.assertEqual(Resource.parse("topic:*"), Resource("Topic", None, PATTERN_ANY))
        self.assertEqual(Resource.parse("Topic:ab*"), Resource("Topic", "ab", PREFIXED))
        self.assertEqual(Resource.parse("Group:g1"), Resource("Group", "g1", LITERAL))
        self.assertIsNone(Resource.parse("Queue:q"))
        self.assertIsNone(Resource.parse(" "))
        self.assertEqual([Resource.parse(k).key for k in ("*", "Topic:*", "Topic:ab*", "Cluster:c")],  # type: ignore[union-attr]
                         ["*", "Topic:*", "Topic:ab*", "Cluster:c"])
        self.assertEqual(Resource.group("%RETRY%g1"), Resource("Group", "g1", LITERAL))

    def test_matching(self) -> None:
        t = Resource.topic("abc")
        self.assertTrue(Resource.parse("Topic:ab*").matches(t))  # type: ignore[union-attr]
        self.assertFalse(Resource.parse("Topic:ac*").matches(t))  # type: ignore[union-attr]
        self.assertTrue(Resource.parse("*").matches(Resource.group("g")))  # type: ignore[union-attr]
        self.assertFalse(Resource.parse("Group:*").matches(t))  # type: ignore[union-attr]

    def test_source_ips(self) -> None:
        self.assertTrue(ip_in_range("10.1.2.3", "10.0.0.0/8"))
        self.assertFalse(ip_in_range("11.1.2.3", "10.0.0.0/8"))
        self.assertTrue(ip_in_range("127.0.0.1", "127.0.0.1"))
        self.assertFalse(ip_in_range("127.0.0.1", "127.0.0.2"))
        self.assertTrue(entry("Topic:t", ips=[]).matches(Resource.topic("t"), ["Pub"], "1.2.3.4"))
        self.assertFalse(entry("Topic:t", ips=["10.0.0.0/8"]).matches(Resource.topic("t"), ["Pub"], "1.2.3.4"))


class DecisionOrderTest(unittest.TestCase):
    def decide(self, *entries: Entry, topic: str = "abc", default: tuple[Entry, ...] = ()) -> Entry | None:
        policies = [Policy("Custom", list(entries))] + ([Policy("Default", list(default))] if default else [])
        return Acl("User:u", policies).decide(Resource.topic(topic), ["Pub"], "127.0.0.1")

    def test_literal_before_prefixed_before_any(self) -> None:
        for order in ((0, 1, 2), (2, 1, 0), (1, 2, 0)):
            es = [entry("Topic:*", DENY), entry("Topic:ab*", DENY), entry("Topic:abc", ALLOW)]
            self.assertEqual(self.decide(*(es[i] for i in order)).decision, ALLOW)  # type: ignore[union-attr]
        self.assertEqual(self.decide(entry("*", ALLOW), entry("Topic:*", DENY)).decision, DENY)  # type: ignore[union-attr]

    def test_longer_prefix_first(self) -> None:
        d = self.decide(entry("Topic:a*", DENY), entry("Topic:ab*", ALLOW))
        self.assertEqual(d.resource.key, "Topic:ab*")  # type: ignore[union-attr]
        d = self.decide(entry("Topic:ab*", ALLOW), entry("Topic:a*", DENY))
        self.assertEqual(d.resource.key, "Topic:ab*")  # type: ignore[union-attr]

    def test_custom_before_default_and_actions(self) -> None:
        self.assertIsNone(self.decide(entry("Topic:abc", ALLOW, ("Sub",))))
        self.assertEqual(self.decide(entry("Topic:abc", ALLOW, ("All",))).decision, ALLOW)  # type: ignore[union-attr]
        self.assertEqual(self.decide(entry("Topic:x", ALLOW), default=(entry("Topic:*", DENY),)).decision, DENY)  # type: ignore[union-attr]
        self.assertEqual(self.decide(entry("Topic:*", ALLOW), default=(entry("Topic:abc", DENY),)).decision, ALLOW)  # type: ignore[union-attr]

    def test_java_sort_is_java_timsort_on_short_lists(self) -> None:
        items = [5, 3, 9, 1, 1, 7]
        java_sort(items, lambda a, b: (a > b) - (a < b))
        self.assertEqual(items, [1, 1, 3, 5, 7, 9])
        items = [(1, "a"), (0, "b"), (1, "c"), (0, "d")]  # stable, as Java's
        java_sort(items, lambda a, b: a[0] - b[0])
        self.assertEqual(items, [(0, "b"), (0, "d"), (1, "a"), (1, "c")])


if __name__ == "__main__":
    unittest.main()
