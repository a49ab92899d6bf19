"""Workload pieces of the end-to-end acceptance runs: keyed producers with per-key sequence
numbers, consumer threads that log every delivery, a driver that splits and merges the topic
through the admin API as the run progresses, and the checks on what was delivered.

Everything here drives the public client API (``braid.Client``) and the admin client against a
real ``braid standalone``; nothing stands in for a component. Progress is measured in messages,
not time: the layout driver acts when the producers' acknowledged count crosses a threshold, and
every wait is a poll with a deadline.

A message's value is ``b"<key>|<seq>"``: the key's sequence number, so a consumer can check
per-key order and the harness can compare what was acknowledged with what was delivered.
"""

from __future__ import annotations

import concurrent.futures
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import braid
from braid.admin import AdminClient
from tests.support.polling import wait_for

Key = str
Seq = int


def value_of(key: Key, seq: Seq) -> bytes:
    return f"{key}|{seq}".encode()


def parse_value(value: bytes) -> tuple[Key, Seq]:
    key, _, seq = value.decode().rpartition("|")
    return key, int(seq)


# -- producing ----------------------------------------------------------------------------------


class KeyedProducers:
    """``producers`` threads, each with its own ``keys`` keys, publishing ``rounds`` messages
    per key in per-key sequence order with ``send_async`` (the fastest blocking-API path that
    still reports each message's outcome).

    ``gate(r)``, when given, is called by each thread before round ``r`` and returns once the
    round may start: the tests use it to keep production in step with the layout changes and
    the consumers (a condition, never a timer), so splits and merges happen while messages are
    being produced and consumed, not after.
    """

    def __init__(
        self,
        client: braid.Client,
        topic: str,
        *,
        producers: int = 3,
        keys: int = 200,
        rounds: int = 10,
        name: str = "p",
        gate: Callable[[int], None] | None = None,
        **producer_options: Any,
    ) -> None:
        self.client = client
        self.gate = gate
        self.topic = topic
        self.rounds = rounds
        self.key_sets = [[f"{name}{p}-k{k}" for k in range(keys)] for p in range(producers)]
        self.total = producers * keys * rounds
        self.acked: dict[Key, set[Seq]] = defaultdict(set)
        self.failures: list[BaseException] = []
        self._options = {"max_pending_messages": 2000, **producer_options}
        self._lock = threading.Lock()
        self._acked_count = 0
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []

    @property
    def acked_count(self) -> int:
        return self._acked_count

    def start(self) -> KeyedProducers:
        for index, keys in enumerate(self.key_sets):
            thread = threading.Thread(target=self._run, args=(keys,), name=f"producer-{index}")
            thread.start()
            self._threads.append(thread)
        return self

    def _run(self, keys: Sequence[Key]) -> None:
        try:
            producer = self.client.create_producer(self.topic, **self._options)
            try:
                for seq in range(self.rounds):
                    if self.gate is not None:
                        self.gate(seq)
                    for key in keys:
                        future = producer.send_async(value_of(key, seq), key=key)
                        future.add_done_callback(self._outcome(key, seq))
                producer.flush()
            finally:
                producer.close()
        except BaseException as exc:  # surfaced by join()
            self._errors.append(exc)

    def _outcome(self, key: Key, seq: Seq) -> Callable[[concurrent.futures.Future[Any]], None]:
        def done(future: concurrent.futures.Future[Any]) -> None:
            exc = future.exception()
            with self._lock:
                if exc is not None:
                    self.failures.append(exc)
                else:
                    self.acked[key].add(seq)
                    self._acked_count += 1

        return done

    def join(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            assert not thread.is_alive(), f"{thread.name} did not finish within {timeout}s"
        assert not self._errors, f"producer threads raised: {self._errors!r}"

    def acked_pairs(self) -> set[tuple[Key, Seq]]:
        with self._lock:
            return {(key, seq) for key, seqs in self.acked.items() for seq in seqs}


# -- consuming ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    consumer: str
    key: Key
    seq: Seq
    redelivery_count: int


@dataclass
class DeliveryLog:
    """Every delivery of one subscription, in the order the consumers took them."""

    entries: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, consumer: str, messages: Iterable[braid.Message]) -> None:
        parsed = [
            Delivery(consumer, *parse_value(m.value), m.redelivery_count)  # type: ignore[misc]
            for m in messages
        ]
        with self.lock:
            self.entries.extend(parsed)

    def snapshot(self) -> list[Delivery]:
        with self.lock:
            return list(self.entries)

    def delivered_pairs(self) -> set[tuple[Key, Seq]]:
        return {(d.key, d.seq) for d in self.snapshot()}


class ConsumerThread:
    """Receives on one consumer until stopped, logging every delivery before acknowledging it.

    ``ack`` is called with the consumer and each received batch (the Stream tests acknowledge
    cumulatively, the Queue tests individually). A stop closes the consumer without
    acknowledging what it did not acknowledge yet: that is redelivered to the others.
    """

    def __init__(
        self,
        name: str,
        consumer: Any,
        log: DeliveryLog,
        ack: Callable[[Any, list[braid.Message]], None],
    ) -> None:
        self.name = name
        self.consumer = consumer
        self.log = log
        self._ack = ack
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.received = 0
        self._thread = threading.Thread(target=self._run, name=f"consumer-{name}")
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                messages = self.consumer.receive_many(200, timeout=0.1)
                if not messages:
                    continue
                self.log.record(self.name, messages)
                self.received += len(messages)
                self._ack(self.consumer, messages)
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"consumer {self.name} did not stop"
        self.consumer.close()
        assert self.error is None, f"consumer {self.name} raised {self.error!r}"


class ConsumerGroup:
    """Consumers of one subscription joining and leaving, each on its own client (its own
    connection, as separate processes would be), all logging into one :class:`DeliveryLog`.

    ``subscribe(client, name)`` creates a member's consumer; ``ack`` acknowledges a batch.
    """

    def __init__(
        self,
        url: str,
        subscribe: Callable[[braid.Client, str], Any],
        ack: Callable[[Any, list[braid.Message]], None],
        log: DeliveryLog | None = None,
    ) -> None:
        self.url = url
        self._subscribe = subscribe
        self._ack = ack
        self.log = log or DeliveryLog()
        self.members: dict[str, tuple[braid.Client, ConsumerThread]] = {}
        self.events: list[str] = []

    def join(self, name: str) -> None:
        client = braid.Client(self.url, operation_timeout=30)
        try:
            consumer = self._subscribe(client, name)
        except BaseException:
            client.close()
            raise
        self.members[name] = (client, ConsumerThread(name, consumer, self.log, self._ack))
        self.events.append(f"+{name}")

    def leave(self, name: str) -> None:
        client, thread = self.members.pop(name)
        try:
            thread.stop()
        finally:
            client.close()
        self.events.append(f"-{name}")

    def close(self) -> None:
        errors = []
        for name in list(self.members):
            try:
                self.leave(name)
            except AssertionError as exc:
                errors.append(exc)
        assert not errors, errors


def ack_cumulative(consumer: Any, messages: list[braid.Message]) -> None:
    consumer.acknowledge_cumulative(messages[-1])


def ack_each(consumer: Any, messages: list[braid.Message]) -> None:
    for message in messages:
        consumer.acknowledge(message)


# -- changing the layout ------------------------------------------------------------------------


def active_segments(layout: dict[str, Any]) -> list[tuple[int, int, int]]:
    """``(start, end, id)`` of the active segments, in ring order."""
    return sorted(
        (info["hashRange"]["start"], info["hashRange"]["end"], int(sid))
        for sid, info in layout["segments"].items()
        if info["state"] == "ACTIVE"
    )


class LayoutDriver:
    """Splits and merges a topic through the admin API, one operation per :meth:`step`: a split
    of an active segment (at its midpoint, or at an explicit hash every third split) or a merge
    of two or three hash-adjacent active segments, chosen by a seeded generator so runs are
    repeatable, keeping the active count between ``min_active`` and ``max_active``."""

    def __init__(
        self,
        admin: AdminClient,
        topic: str,
        *,
        min_active: int = 2,
        max_active: int = 6,
        seed: int = 7,
    ) -> None:
        self.admin = admin
        self.topic = topic
        self.min_active = min_active
        self.max_active = max_active
        self.done: list[str] = []
        self._rng = random.Random(seed)
        self._splits = 0

    def step(self, kind: str | None = None) -> str:
        """One split or merge (``kind`` ``"split"``/``"merge"`` forces one); returns what it
        did."""
        active = active_segments(self.admin.scalable_topics.get(self.topic))
        count = len(active)
        split = self._rng.random() < 0.55
        if count <= self.min_active:
            split = True
        elif count >= self.max_active:
            split = False
        if kind is not None:
            split = kind == "split"
        if split:
            candidates = [s for s in active if s[1] - s[0] >= 2]
            start, end, sid = self._rng.choice(candidates)
            self._splits += 1
            split_hash = None
            if self._splits % 3 == 0:
                split_hash = self._rng.randint(start + 1, end)
            self.admin.scalable_topics.split(self.topic, sid, split_hash)
            where = "" if split_hash is None else f" at {split_hash:04x}"
            action = f"split {sid} [{start:04x}-{end:04x}]{where}"
        else:
            width = 3 if count - 2 >= self.min_active and self._rng.random() < 0.3 else 2
            index = self._rng.randrange(count - width + 1)
            ids = [s[2] for s in active[index : index + width]]
            self.admin.scalable_topics.merge(self.topic, ids)
            action = f"merge {ids}"
        self.done.append(action)
        return action


def in_step(
    driver: LayoutDriver,
    operations: int,
    rounds: int,
    *,
    consumed: Callable[[], int] | None = None,
    per_round: int = 0,
    lead: int = 2,
    within: float = 30.0,
) -> Callable[[int], None]:
    """A :class:`KeyedProducers` gate: round ``r`` starts once the driver has done its share of
    operations for round ``r - lead``, and (with ``consumed``) once the consumers are at most
    ``lead`` rounds behind."""

    def gate(r: int) -> None:
        ops_needed = min(operations, max(0, r - lead) * operations // rounds)
        wait_for(
            lambda: len(driver.done) >= ops_needed,
            within=within,
            interval=0.005,
            message=lambda: f"{ops_needed} layout changes before round {r} ({driver.done})",
        )
        if consumed is not None:
            needed = max(0, r - lead) * per_round
            wait_for(
                lambda: consumed() >= needed,
                within=within,
                interval=0.005,
                message=lambda: f"{needed} messages consumed before round {r} (at {consumed()})",
            )

    return gate


def wait_progress(progress: Callable[[], int], threshold: int, within: float = 60.0) -> None:
    """Poll until ``progress()`` reaches ``threshold``."""
    wait_for(
        lambda: progress() >= threshold,
        within=within,
        interval=0.01,
        message=lambda: f"progress {threshold} (at {progress()})",
    )


def drive_layout(
    driver: LayoutDriver,
    progress: Callable[[], int],
    total: int,
    operations: int,
    *,
    on_step: Callable[[int], None] | None = None,
    within: float = 30.0,
) -> None:
    """Run ``operations`` layout changes spread over the run: operation ``i`` once
    ``progress()`` reaches ``(i + 1) / (operations + 1)`` of ``total``; ``on_step(i)`` after
    each (consumers join and leave there)."""
    for i in range(operations):
        wait_progress(progress, total * (i + 1) // (operations + 2), within)
        driver.step()
        if on_step is not None:
            on_step(i)


# -- checks -------------------------------------------------------------------------------------


def missing(acked: set[tuple[Key, Seq]], log: DeliveryLog) -> set[tuple[Key, Seq]]:
    return acked - log.delivered_pairs()


def order_violations(deliveries: Sequence[Delivery]) -> list[str]:
    """Per-key order: for each key the sequence of *first* deliveries (across all consumers of
    the subscription, in the order they were taken) increases, and so does each consumer's own
    sequence of first deliveries. Redeliveries of a message seen before are not order events."""
    problems: list[str] = []
    seen: set[tuple[Key, Seq]] = set()
    last_first: dict[Key, Seq] = {}
    seen_by: set[tuple[str, Key, Seq]] = set()
    last_by: dict[tuple[str, Key], Seq] = {}
    for d in deliveries:
        if (d.key, d.seq) not in seen:
            seen.add((d.key, d.seq))
            previous = last_first.get(d.key, -1)
            if d.seq < previous:
                problems.append(f"{d.key}: seq {d.seq} first delivered after seq {previous}")
            last_first[d.key] = max(previous, d.seq)
        if (d.consumer, d.key, d.seq) not in seen_by:
            seen_by.add((d.consumer, d.key, d.seq))
            previous = last_by.get((d.consumer, d.key), -1)
            if d.seq < previous:
                problems.append(
                    f"{d.key}: consumer {d.consumer} took seq {d.seq} after seq {previous}"
                )
            last_by[(d.consumer, d.key)] = max(previous, d.seq)
    return problems


def duplicates(deliveries: Sequence[Delivery]) -> list[Delivery]:
    """Deliveries of a message that was delivered before."""
    seen: set[tuple[Key, Seq]] = set()
    again = []
    for d in deliveries:
        if (d.key, d.seq) in seen:
            again.append(d)
        seen.add((d.key, d.seq))
    return again


def wait_delivered(
    acked: Callable[[], set[tuple[Key, Seq]]], log: DeliveryLog, within: float = 60.0
) -> None:
    """Poll until every acknowledged message was delivered, or fail naming a few missing."""

    def report() -> str:
        left = acked() - log.delivered_pairs()
        return f"every acknowledged message delivered ({len(left)} missing: {sorted(left)[:10]})"

    wait_for(lambda: acked() <= log.delivered_pairs(), within=within, interval=0.05, message=report)


__all__ = [
    "ConsumerGroup",
    "ConsumerThread",
    "Delivery",
    "DeliveryLog",
    "KeyedProducers",
    "LayoutDriver",
    "ack_cumulative",
    "ack_each",
    "active_segments",
    "drive_layout",
    "duplicates",
    "in_step",
    "missing",
    "order_violations",
    "parse_value",
    "value_of",
    "wait_delivered",
    "wait_progress",
]
