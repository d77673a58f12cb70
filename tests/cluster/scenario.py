"""The failover scenario every client runs against a two-group cluster: sends spread over both
groups and keep succeeding while one is down (kill -9), consumers rebalance over every queue of
both groups, and after the group comes back every acked message has been consumed at least once."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from tests.cluster.harness import QUEUES, TOPIC, ClientProc, Lines, TwoGroups, stored
from testkit.ha import Proc, wait_until

#: Acks each phase waits for; bounded so a run stays short.
SPREAD_ACKS = 20  # per group before the kill and after the restart
DOWN_ACKS = 60  # on the surviving group while the other is down
PRODUCER_THREADS = 2
SEND_TIMEOUT = 3.0  # both clients' default: a send in flight to the killed group fails within it


def queue_names(*brokers: str) -> set[str]:
    return {f"{b}:{q}" for b in brokers for q in range(QUEUES)}


@dataclass
class Run:
    """What one scenario run saw, for the caller's extra checks."""

    cluster: TwoGroups
    brokers: dict[str, str]
    consumers: list[ClientProc]
    producer: ClientProc
    killed_at: float = 0.0
    restarted_at: float = 0.0
    backlog: set[str] = field(default_factory=set)  # keys acked by b, unconsumed when it was killed
    produced: Lines | None = None
    shares: list[list[set[str]]] = field(default_factory=list)  # per phase, the consumers' shares


class FailoverScenario:
    """Mixed into a TestCase that says how to start a producer and a consumer process (Python or Java client)."""

    topics = [TOPIC]

    def producer_argv(self, cluster: TwoGroups, prefix: str) -> list[str]:
        raise NotImplementedError

    def consumer_argv(self, cluster: TwoGroups, group: str) -> list[str]:
        raise NotImplementedError

    def covered(self, consumers: list[ClientProc], expected: set[str]) -> list[set[str]] | None:
        """The consumers' shares when they are disjoint, non-empty and together exactly ``expected``."""
        for c in consumers:
            c.check_alive()
        shares = [c.snapshot().queues for c in consumers]
        union = set().union(*shares)
        if union != expected or sum(map(len, shares)) != len(expected) or not all(shares):
            return None
        return shares

    def create_topic(self, cluster: TwoGroups, brokers: dict[str, str], topic: str) -> None:
        """On every group's master."""
        for addr in brokers.values():
            cluster.create_topic(addr, topic)

    def consumed_keys(self, consumers: list[ClientProc]) -> set[str]:
        got: set[str] = set()
        for c in consumers:
            got |= set(c.snapshot().consumed)
        return got

    def acks(self, producer: ClientProc, broker: str, since: float = 0.0) -> int:
        producer.check_alive()
        return sum(1 for t, _, b in producer.snapshot().ack_order if b == broker and t >= since)

    def failover(self, cluster: TwoGroups, a: Proc, b: Proc, restart_b: Callable[[], object],
                 while_up: Callable[[Run], None] = lambda run: None,
                 while_down: Callable[[Run], None] = lambda run: None,
                 before_checks: Callable[[Run], None] = lambda run: None,
                 names: tuple[str, str] = ("a", "b")) -> Run:
        """The whole scenario; the callbacks add work while both groups are up, while b is down, and
        after the keyed producer stopped (before the consumption checks)."""
        survivor, victim = names  # the brokerNames of a (stays up) and b (killed): ("b", "a") with (b, a) kills group a
        brokers = {survivor: a.addr, victim: b.addr}
        cluster.wait_registered(brokers)
        for topic in self.topics:
            self.create_topic(cluster, brokers, topic)
            cluster.wait_route(topic, {survivor, victim})
        consumers = [cluster.start_client(self.consumer_argv(cluster, "C_cluster"), f"consumer{i}") for i in range(2)]
        for c in consumers:
            c.wait_started()
        producer = cluster.start_client(self.producer_argv(cluster, "k"), "producer")
        producer.wait_started()
        run = Run(cluster, brokers, consumers, producer)

        # both groups: two consumers share the eight queues of a and b; sends go to both
        run.shares.append(wait_until(lambda: self.covered(consumers, queue_names(survivor, victim)), 60,
                                     "the consumers to share every queue of both groups", step=0.1))
        wait_until(lambda: self.acks(producer, survivor) >= SPREAD_ACKS and self.acks(producer, victim) >= SPREAD_ACKS, 60,
                   "acked sends on both groups", step=0.1)
        while_up(run)

        # the consumers hold their listeners, so b has a backlog of acked, unconsumed messages when it dies
        for c in consumers:
            c.tell("pause")
        paused_at = time.monotonic()
        # twice the backlog asked for below: an ack read late (output buffering) may have been delivered before the hold
        wait_until(lambda: self.acks(producer, victim, paused_at) >= 2 * SPREAD_ACKS, 60, "acked sends on b while consumers hold",
                   step=0.1)
        b.kill9()
        run.killed_at = time.monotonic()
        run.backlog = {key for key, (broker, _, _) in producer.snapshot().acked.items() if broker == victim} - self.consumed_keys(consumers)
        self.assertGreaterEqual(len(run.backlog), SPREAD_ACKS)

        # group b is gone: the NameServers drop it, sends go on to a, consumers share a's queues
        cluster.wait_registered({survivor: a.addr})
        for c in consumers:
            c.tell("resume")
        wait_until(lambda: self.acks(producer, survivor, run.killed_at) >= DOWN_ACKS, 60, "acked sends on a while b is down", step=0.1)
        run.shares.append(wait_until(lambda: self.covered(consumers, queue_names(survivor)), 60,
                                     "the consumers to share a's queues", step=0.1))
        while_down(run)

        # group b comes back with its store: registered again, sent to and consumed from again
        restart_b()
        run.restarted_at = time.monotonic()
        cluster.wait_registered(brokers)
        for topic in self.topics:
            cluster.wait_route(topic, {survivor, victim})
        wait_until(lambda: self.acks(producer, victim, run.restarted_at) >= SPREAD_ACKS, 60, "acked sends on b after its restart",
                   step=0.1)
        run.shares.append(wait_until(lambda: self.covered(consumers, queue_names(survivor, victim)), 60,
                                     "the consumers to share both groups' queues again", step=0.1))
        run.produced = producer.finish()
        before_checks(run)

        # no send failed outside the kill's in-flight window: at most one per sending thread
        self.assertLessEqual(len(run.produced.failed), PRODUCER_THREADS, run.produced.failed)
        for when, key, error in run.produced.failed:
            self.assertGreaterEqual(when, run.killed_at - 0.5, (key, error))
            self.assertLess(when, run.killed_at + SEND_TIMEOUT + 5, (key, error))

        # every acked message consumed at least once (b's were waiting in its store)
        acked = set(run.produced.acked)
        wait_until(lambda: acked <= self.consumed_keys(consumers), 60, f"the consumers to see all {len(acked)} acked messages",
                   step=0.2)
        self.assertLessEqual(run.backlog, self.consumed_keys(consumers))
        # and every stored position of every queue of both groups was delivered
        for topic in self.topics:
            self.assert_all_positions_consumed(run, topic)
        return run

    def assert_all_positions_consumed(self, run: Run, topic: str) -> None:
        ends = stored(run.brokers, topic)
        self.assertTrue(all(ends.values()), f"a queue of {topic} got nothing: {ends}")

        seen: dict[tuple[str, str, int, int], str] = {}

        def missing() -> list[tuple[str, int, int]]:
            for c in run.consumers:
                seen.update(c.snapshot().positions)
            return [(b, q, o) for (b, q), end in ends.items() for o in range(end) if (topic, b, q, o) not in seen]
        try:
            wait_until(lambda: not missing(), 60, f"every stored message of {topic} delivered", step=0.2)
        except AssertionError:
            gone = missing()
            self.fail(f"{len(gone)} stored messages of {topic} never delivered, e.g. {gone[:10]}")
        if topic == TOPIC:  # keyed: a message stored twice only if its send was in flight to b when b died
            keys = Counter(key for (t, _, _, _), key in seen.items() if t == topic)
            twice = {key: n for key, n in keys.items() if n > 1}
            self.assertLessEqual(len(twice), PRODUCER_THREADS, twice)
            # each acked send's answer named the queue and offset where the consumers found it
            wrong = {key: where for key, where in run.produced.acked.items() if seen.get((topic, *where)) != key}
            self.assertEqual(wrong, {}, "acked at a position holding another message (or none)")
