"""The scalable-topic story of ``braid demo``, told with the Braid client on a running standalone.

A scalable topic is created with two segments through the admin REST API. A Braid producer sends
keyed orders - every customer's orders numbered 1, 2, 3, ... - while a Stream consumer bills them
and acknowledges cumulatively. Meanwhile the topic is split (at a midpoint, and at an explicit
hash) and merged, and then the broker is killed (SIGKILL) and started again; neither client is
told anything, they follow the segment DAG and reconnect by themselves. At the end the demo checks
what it can see from the outside: every order the broker acknowledged was billed, and for every
customer the orders were billed in order (a redelivery after the crash is counted, not an error:
delivery is at least once).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess
from braid.client import Client
from braid.core.message_id import MessageId, message_position

Emit = Callable[[str], None]

TOPIC = "topic://demo/orders/events"
SUBSCRIPTION = "billing"
CUSTOMERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy")
#: Orders per customer per second (so about 10 x this in all).
ROUNDS_PER_SECOND = 40


def _customers() -> list[str]:
    return [f"{name}-{i}" for i in range(3) for name in CUSTOMERS]


def _segment(message_id: MessageId) -> str:
    position = message_position(message_id)
    return "?" if position is None else str(position.segment_id)


def _active(layout: dict[str, Any]) -> str:
    active = sorted(
        (info["hashRange"]["start"], info["hashRange"]["end"], sid)
        for sid, info in layout["segments"].items()
        if info["state"] == "ACTIVE"
    )
    return " ".join(f"[{sid}: {start:04x}-{end:04x}]" for start, end, sid in active)


@dataclass
class _Ledger:
    """What the demo observed: orders the broker acknowledged, and what was billed."""

    acked: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    billed: list[tuple[str, int]] = field(default_factory=list)
    failed: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def acked_count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())

    @property
    def billed_count(self) -> int:
        with self.lock:
            return len(self.billed)


class _Shop(threading.Thread):
    """The producer: one order per customer per round, ``ROUNDS_PER_SECOND`` rounds a second."""

    def __init__(self, client: Client, ledger: _Ledger) -> None:
        super().__init__(name="demo-orders", daemon=True)
        self.producer = client.create_producer(TOPIC, producer_name="demo-shop")
        self.ledger = ledger
        self.stop = threading.Event()
        self.samples: dict[str, MessageId] = {}  # each customer's first order

    def run(self) -> None:
        number = 0
        next_round = time.monotonic()
        while not self.stop.is_set():
            number += 1
            for customer in _customers():
                future = self.producer.send_async(f"order {number}".encode(), key=customer)
                future.add_done_callback(self._confirmed(customer, number))
            next_round += 1 / ROUNDS_PER_SECOND
            self.stop.wait(max(0.0, next_round - time.monotonic()))
        self.producer.flush()

    def _confirmed(self, customer: str, number: int) -> Callable[[Any], None]:
        def done(future: Any) -> None:
            exc = future.exception()
            with self.ledger.lock:
                if exc is not None:
                    self.ledger.failed.append(exc)
                    return
                self.ledger.acked[customer].add(number)
                if number == 1:
                    self.samples[customer] = future.result()

        return done


class _Billing(threading.Thread):
    """The Stream consumer: bills orders, acknowledging cumulatively after each batch."""

    def __init__(self, client: Client, ledger: _Ledger) -> None:
        super().__init__(name="demo-billing", daemon=True)
        self.consumer = client.subscribe_stream(
            TOPIC, SUBSCRIPTION, consumer_name="billing-1", initial_position="earliest"
        )
        self.ledger = ledger
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                messages = self.consumer.receive_many(500, timeout=0.1)
                if not messages:
                    continue
                with self.ledger.lock:
                    for message in messages:
                        self.ledger.billed.append((message.key or "", int(message.value[6:])))
                self.consumer.acknowledge_cumulative(messages[-1])
        except BaseException as exc:  # reported by the demo
            self.error = exc


def _verify(ledger: _Ledger, emit: Emit) -> bool:
    with ledger.lock:
        acked = {(k, n) for k, numbers in ledger.acked.items() for n in numbers}
        billed = list(ledger.billed)
    seen: set[tuple[str, int]] = set()
    last: dict[str, int] = {}
    out_of_order = twice = 0
    for customer, number in billed:
        if (customer, number) in seen:
            twice += 1
            continue
        seen.add((customer, number))
        if number < last.get(customer, 0):
            out_of_order += 1
        last[customer] = max(last.get(customer, 0), number)
    missing = len(acked - seen)
    emit(
        f"      {len(acked)} orders acknowledged by the broker, {len(seen)} distinct orders "
        f"billed for {len(last)} customers"
    )
    emit(
        f"      missing: {missing}   out of order (per customer): {out_of_order}   "
        f"billed again after the crash (at least once): {twice}   send errors: "
        f"{len(ledger.failed)}"
    )
    ok = missing == 0 and out_of_order == 0 and not ledger.failed
    emit(
        "      OK: every acknowledged order was billed, in order for every customer"
        if ok
        else "      FAILED: see the counts above"
    )
    return ok


def _wait(condition: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _dag(admin: AdminClient, emit: Emit) -> None:
    stats = admin.scalable_topics.stats(TOPIC)
    emit(
        f"      epoch {stats['epoch']}: {stats['activeSegments']} active and "
        f"{stats['sealedSegments']} sealed segments"
    )
    for sid, seg in sorted(stats["segments"].items(), key=lambda item: int(item[0])):
        subs = seg.get("topicStats", {}).get("subscriptions", {})
        backlog = subs.get(SUBSCRIPTION, {}).get("msgBacklog", "-")
        children = ", ".join(str(c) for c in seg["childIds"]) or "-"
        emit(
            f"      segment {sid:>2} {seg['hashRange']:<11} {seg['state']:<7} "
            f"children {children:<6} '{SUBSCRIPTION}' backlog {backlog}"
        )


def run_scalable_story(broker: StandaloneProcess, emit: Emit, step: Callable[[str], None]) -> bool:
    """Tell the story on a running ``broker``; ``step(title)`` opens each numbered step.
    Returns whether the final verification passed."""
    ledger = _Ledger()
    with AdminClient(broker.web_url) as admin:
        step("create a scalable topic with 2 segments (admin REST API)")
        admin.scalable_topics.create(TOPIC, segments=2)
        emit(
            f"      PUT /admin/v2/scalable/demo/orders/events {{numInitialSegments: 2}} -> {TOPIC}"
        )
        emit(f"      epoch 0: active {_active(admin.scalable_topics.get(TOPIC))}")

        step("produce keyed orders with the Braid client; a Stream consumer bills them")
        client = Client(broker.service_url, operation_timeout=30)
        try:
            billing = _Billing(client, ledger)
            shop = _Shop(client, ledger)
            emit(
                f"      {len(_customers())} customers, each with its own order numbers 1, 2, 3, "
                f"...; about {len(_customers()) * ROUNDS_PER_SECOND} orders/s"
            )
            billing.start()
            shop.start()
            _wait(lambda: len(shop.samples) == len(_customers()), 10)
            by_segment: dict[str, list[str]] = defaultdict(list)
            for customer, mid in sorted(dict(shop.samples).items()):
                by_segment[_segment(mid)].append(customer)
            for where, customers in sorted(by_segment.items()):
                emit(
                    f"      segment {where} took the orders of {len(customers)} customers "
                    f"({', '.join(customers[:3])}, ...): the hash of the key decides"
                )
            _wait(lambda: ledger.acked_count > 600, 10)
            emit(
                f"      so far: {ledger.acked_count} orders acknowledged, "
                f"{ledger.billed_count} billed"
            )

            step("split and merge while orders flow (clients follow the segment DAG)")
            operations: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                ("split segment 0 at its midpoint", lambda: admin.scalable_topics.split(TOPIC, 0)),
                (
                    "split segment 1 at hash c000",
                    lambda: admin.scalable_topics.split(TOPIC, 1, 0xC000),
                ),
                ("merge segments 2 and 3", lambda: admin.scalable_topics.merge(TOPIC, [2, 3])),
                (
                    "merge segments 6, 4 and 5",
                    lambda: admin.scalable_topics.merge(TOPIC, [6, 4, 5]),
                ),
                ("split segment 7 at its midpoint", lambda: admin.scalable_topics.split(TOPIC, 7)),
            ]
            for title, operation in operations:
                target = ledger.acked_count + 500
                _wait(lambda t=target: ledger.acked_count >= t, 10)  # type: ignore[misc]
                layout = operation()
                emit(f"      {title:<32} -> epoch {layout['epoch']}: {_active(layout)}")
            _wait(lambda: ledger.billed_count >= ledger.acked_count - 100, 10)
            emit(
                f"      so far: {ledger.acked_count} orders acknowledged, "
                f"{ledger.billed_count} billed"
            )

            step("crash the broker (SIGKILL) mid-stream, start it again on the same data dir")
            before = ledger.acked_count
            broker.kill()
            started = time.monotonic()
            emit("      broker killed; orders keep being sent (they wait in the producer)")
            broker.start()
            emit(f"      back up in {time.monotonic() - started:.1f}s")
            recovered = _wait(lambda: ledger.acked_count > before + 600, 30)
            emit(
                f"      producer and consumer reconnected by themselves: "
                f"{ledger.acked_count - before} more orders acknowledged"
                if recovered
                else "      the producer did not recover within 30 s"
            )
            shop.stop.set()
            shop.join(30)
            _wait(lambda: ledger.billed_count >= ledger.acked_count, 30)
            _wait(lambda: _all_billed(ledger), 30)
            billing.stop.set()
            billing.join(10)
            if billing.error is not None:
                emit(f"      the consumer failed: {billing.error!r}")
        finally:
            client.close()

        step("verify: nothing lost, every customer's orders in order")
        ok = _verify(ledger, emit) and billing.error is None

        step("the segment DAG now (GET /admin/v2/scalable/demo/orders/events/stats)")
        _dag(admin, emit)
    return ok


def _all_billed(ledger: _Ledger) -> bool:
    with ledger.lock:
        billed = set(ledger.billed)
        return all((k, n) in billed for k, numbers in ledger.acked.items() for n in numbers)


__all__ = ["TOPIC", "run_scalable_story"]
