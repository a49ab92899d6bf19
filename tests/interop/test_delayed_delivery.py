"""Delayed delivery (``deliver_after`` / ``deliver_at``) with the official client, on a broker whose
clock the test moves: a delayed message waits for its time while others flow, and arrives once the
broker's clock reaches it. (The real-time check, across a SIGKILL, is in
``test_standalone_restart_features.py``.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pulsar
import pytest

from braid.clock import ManualClock
from tests.support.broker_stack import BackgroundBroker


@pytest.fixture
def clock() -> ManualClock:
    # The client stamps deliver_after with its own wall clock: start the broker's clock there
    # (one broker per test, so a test's moves do not leave the next test's clock ahead).
    return ManualClock(start_ms=time.time_ns() // 1_000_000)


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[BackgroundBroker]:
    data_dir = tmp_path / "braid-delayed"
    # Keep-alive far away: moving the clock must not look like a silent connection.
    background = BackgroundBroker(
        data_dir, broker_clock=clock, keep_alive_interval_seconds=86_400
    ).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.fixture
def client(broker: BackgroundBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        yield c
    finally:
        c.close()


def _consumer(client: pulsar.Client, topic: str, kind: pulsar.ConsumerType) -> pulsar.Consumer:
    return client.subscribe(
        topic, "sub", consumer_type=kind, initial_position=pulsar.InitialPosition.Earliest
    )


def _nothing(consumer: pulsar.Consumer) -> None:
    with pytest.raises(pulsar.Timeout):
        msg = consumer.receive(timeout_millis=300)
        raise AssertionError(f"delivered early: {msg.data()!r}")


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
def test_a_delayed_message_waits_for_the_brokers_clock_while_others_flow(
    broker: BackgroundBroker, clock: ManualClock, client: pulsar.Client, topic: str, kind: object
) -> None:
    consumer = _consumer(client, topic, kind)  # type: ignore[arg-type]
    producer = client.create_producer(topic)
    producer.send(b"later", partition_key="k", deliver_after=timedelta(minutes=10))
    producer.send(b"now", partition_key="other")
    first = consumer.receive(timeout_millis=10_000)
    assert first.data() == b"now"
    consumer.acknowledge(first)
    _nothing(consumer)
    broker.run(clock.advance, 9 * 60)
    _nothing(consumer)
    broker.run(clock.advance, 61)
    late = consumer.receive(timeout_millis=10_000)
    assert late.data() == b"later"
    consumer.acknowledge(late)


def test_deliver_at_orders_delayed_messages_by_their_time(
    broker: BackgroundBroker, clock: ManualClock, client: pulsar.Client, topic: str
) -> None:
    consumer = _consumer(client, topic, pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    now_ms = clock.now_ms()
    for name, delay_s in (("c", 300), ("a", 100), ("b", 200)):
        producer.send(name.encode(), deliver_at=now_ms + delay_s * 1000)
    got = []
    for _ in range(3):
        broker.run(clock.advance, 100)
        msg = consumer.receive(timeout_millis=10_000)
        got.append(msg.data())
        consumer.acknowledge(msg)
    assert got == [b"a", b"b", b"c"]


def test_exclusive_subscriptions_ignore_the_delay_as_pulsar_does(
    client: pulsar.Client, topic: str
) -> None:
    consumer = _consumer(client, topic, pulsar.ConsumerType.Exclusive)
    client.create_producer(topic).send(b"x", deliver_after=timedelta(hours=1))
    assert consumer.receive(timeout_millis=10_000).data() == b"x"


def test_a_delayed_message_stays_held_when_its_consumer_leaves(
    broker: BackgroundBroker, clock: ManualClock, client: pulsar.Client, topic: str
) -> None:
    first = _consumer(client, topic, pulsar.ConsumerType.Shared)
    client.create_producer(topic).send(b"later", deliver_after=timedelta(minutes=5))
    _nothing(first)
    first.close()
    # The subscription still holds it back for whoever consumes next.
    second = _consumer(client, topic, pulsar.ConsumerType.Shared)
    _nothing(second)
    broker.run(clock.advance, 301)
    assert second.receive(timeout_millis=10_000).data() == b"later"
