"""Keyed load that runs until stopped, from the official ``pulsar-client`` and from Braid's client,
with exact counts of what was acknowledged, lost and reordered.

Each load has one producer thread publishing rounds of keyed messages (value ``b"<key>|<seq>"``,
``seq`` the round) with asynchronous sends, flushing after each round (so at most one round is
in flight: the load is paced by the broker's acknowledgements, never by a timer), and consumer
threads that log every delivery before acknowledging it.

The counts (:class:`LoadReport`):

* **acknowledged** - messages whose send completed successfully (the client got a receipt);
* **lost** - acknowledged but never delivered to the subscription;
* **reordered** - deliveries where a key's sequence went backwards (first deliveries, per key and
  per consumer: :func:`tests.integration.e2e.workload.order_violations`);
* **duplicates** - a message delivered again; **failed** - sends that completed with an error
  (not acknowledged: not counted as lost).

* :class:`OfficialKeyedLoad` - ``persistent://`` topic, official client, ``Failover`` or
  ``Key_Shared`` consumers (individual acknowledgements);
* :class:`BraidKeyedLoad` - scalable ``topic://`` topic, ``braid.Client`` producer and a Stream
  consumer (cumulative acknowledgements).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulsar

import braid
from tests.integration.e2e.workload import (
    ConsumerGroup,
    Delivery,
    DeliveryLog,
    ack_cumulative,
    duplicates,
    order_violations,
    parse_value,
    value_of,
)
from tests.support.polling import Message, wait_for


@dataclass(frozen=True)
class LoadReport:
    """What one load's clients saw."""

    name: str
    acknowledged: int
    delivered: int
    lost: int
    reordered: int
    duplicates: int
    failed: int
    order_problems: tuple[str, ...] = ()

    def line(self) -> str:
        return (
            f"{self.name}: acknowledged={self.acknowledged} delivered={self.delivered} "
            f"lost={self.lost} reordered={self.reordered} duplicates={self.duplicates} "
            f"failed={self.failed}"
        )


class _KeyedProducerThread:
    """Rounds of ``send(key, seq, on_done)`` over ``keys`` until stopped; ``flush()`` per round."""

    def __init__(
        self,
        name: str,
        keys: list[str],
        send: Callable[[str, int, Callable[[BaseException | None], None]], None],
        flush: Callable[[], None],
    ) -> None:
        self.keys = keys
        self._send = send
        self._flush = flush
        self.acked: set[tuple[str, int]] = set()
        self.failed: list[str] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)

    @property
    def acked_count(self) -> int:
        return len(self.acked)

    def start(self) -> None:
        self._thread.start()

    def _done(self, key: str, seq: int) -> Callable[[BaseException | None], None]:
        def done(error: BaseException | None) -> None:
            with self._lock:
                if error is None:
                    self.acked.add((key, seq))
                else:
                    self.failed.append(f"{key}|{seq}: {error!r}")

        return done

    def _run(self) -> None:
        seq = 0
        try:
            while not self._stop.is_set():
                for key in self.keys:
                    self._send(key, seq, self._done(key, seq))
                self._flush()
                seq += 1
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self, within: float = 90.0) -> None:
        self._stop.set()
        self._thread.join(within)
        assert not self._thread.is_alive(), "the producer did not stop"

    def acked_pairs(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self.acked)


def _report(name: str, producer: _KeyedProducerThread, deliveries: list[Delivery]) -> LoadReport:
    acked = producer.acked_pairs()
    delivered = {(d.key, d.seq) for d in deliveries}
    problems = order_violations(deliveries)
    return LoadReport(
        name=name,
        acknowledged=len(acked),
        delivered=len(delivered),
        lost=len(acked - delivered),
        reordered=len(problems),
        duplicates=len(duplicates(deliveries)),
        failed=len(producer.failed),
        order_problems=tuple(problems[:10]),
    )


def _wait_delivered(
    producer: _KeyedProducerThread, log: DeliveryLog, within: float, name: str
) -> None:
    """Poll until every message ``producer`` got a receipt for was delivered."""
    acked = producer.acked_pairs()
    wait_for(
        lambda: acked <= log.delivered_pairs(),
        within=within,
        interval=0.05,
        message=lambda: f"{len(acked - log.delivered_pairs())} {name} messages to be delivered",
    )


class OfficialKeyedLoad:
    """The official client on a ``persistent://`` topic: one producer, ``consumers`` consumers of
    one subscription (``Failover`` by default, or ``Key_Shared``)."""

    def __init__(
        self,
        service_url: str,
        topic: str,
        *,
        keys: int = 16,
        consumers: int = 1,
        consumer_type: pulsar.ConsumerType = pulsar.ConsumerType.Failover,
    ) -> None:
        self.topic = topic
        self.client = pulsar.Client(
            service_url,
            operation_timeout_seconds=60,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.log = DeliveryLog()
        self._consumer_stop = threading.Event()
        self._consumer_errors: list[BaseException] = []
        self._consumers = [
            self.client.subscribe(
                topic,
                "acceptance",
                consumer_type=consumer_type,
                consumer_name=f"c{i}",
                initial_position=pulsar.InitialPosition.Earliest,
            )
            for i in range(consumers)
        ]
        self._threads = [
            threading.Thread(target=self._consume, args=(f"c{i}", c), daemon=True)
            for i, c in enumerate(self._consumers)
        ]
        self._producer = self.client.create_producer(
            topic, send_timeout_millis=0, block_if_queue_full=True, batching_max_messages=keys
        )
        self.producer = _KeyedProducerThread(
            "official", [f"k{i}" for i in range(keys)], self._send, self._producer.flush
        )

    def _send(self, key: str, seq: int, done: Callable[[BaseException | None], None]) -> None:
        def callback(result: pulsar.Result, _msg_id: Any) -> None:
            done(None if result == pulsar.Result.Ok else RuntimeError(str(result)))

        self._producer.send_async(value_of(key, seq), callback, partition_key=key)

    def _consume(self, name: str, consumer: pulsar.Consumer) -> None:
        try:
            while not self._consumer_stop.is_set():
                try:
                    message = consumer.receive(timeout_millis=100)
                except pulsar.Timeout:
                    continue
                key, seq = parse_value(message.data())
                with self.log.lock:
                    self.log.entries.append(Delivery(name, key, seq, message.redelivery_count()))
                consumer.acknowledge(message)
        except BaseException as exc:
            self._consumer_errors.append(exc)

    def start(self) -> OfficialKeyedLoad:
        for thread in self._threads:
            thread.start()
        self.producer.start()
        return self

    @property
    def acked_count(self) -> int:
        return self.producer.acked_count

    def stop_producing(self) -> None:
        self.producer.stop()
        assert self.producer.error is None, f"official producer raised {self.producer.error!r}"

    def wait_delivered(self, within: float = 60.0) -> None:
        _wait_delivered(self.producer, self.log, within, "official")

    def report(self) -> LoadReport:
        return _report("official", self.producer, self.log.snapshot())

    def close(self) -> None:
        self._consumer_stop.set()
        for thread in self._threads:
            thread.join(30)
        self.client.close()
        assert not self._consumer_errors, f"official consumer raised {self._consumer_errors!r}"


class BraidKeyedLoad:
    """Braid's client on a scalable ``topic://`` topic: one producer, one Stream consumer."""

    def __init__(self, service_url: str, topic: str, *, keys: int = 16) -> None:
        self.topic = topic
        self.client = braid.Client(service_url, operation_timeout=60)
        self.group = ConsumerGroup(
            service_url,
            lambda client, name: client.subscribe_stream(
                topic, "acceptance", consumer_name=name, initial_position="earliest"
            ),
            ack_cumulative,
        )
        # No send timeout, as the official load's producer (send_timeout_millis=0): a send in
        # flight to a broker cut off waits for the connection to drop, then goes to the new owner.
        self._producer = self.client.create_producer(
            topic, max_pending_messages=1000, send_timeout=0
        )
        self.producer = _KeyedProducerThread(
            "braid", [f"b{i}" for i in range(keys)], self._send, self._producer.flush
        )

    def _send(self, key: str, seq: int, done: Callable[[BaseException | None], None]) -> None:
        future = self._producer.send_async(value_of(key, seq), key=key)
        future.add_done_callback(lambda f: done(f.exception()))

    def start(self) -> BraidKeyedLoad:
        self.group.join("s0")
        self.producer.start()
        return self

    @property
    def acked_count(self) -> int:
        return self.producer.acked_count

    def stop_producing(self) -> None:
        self.producer.stop()
        assert self.producer.error is None, f"braid producer raised {self.producer.error!r}"

    def wait_delivered(self, within: float = 60.0) -> None:
        _wait_delivered(self.producer, self.group.log, within, "braid")

    def report(self) -> LoadReport:
        return _report("braid", self.producer, self.group.log.snapshot())

    def close(self) -> None:
        try:
            self._producer.close()
            self.group.close()
        finally:
            self.client.close()


def run_until(condition: Callable[[], bool], within: float, what: Message) -> float:
    """Poll ``condition`` (loads keep running meanwhile); returns the seconds it took."""
    started = time.monotonic()
    wait_for(condition, within=within, interval=0.05, message=what)
    return time.monotonic() - started


__all__ = ["BraidKeyedLoad", "LoadReport", "OfficialKeyedLoad", "run_until"]
