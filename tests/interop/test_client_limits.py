"""Caps on producers and consumers with the official client (ADR 0044): per topic
(``maxProducersPerTopic``, ``maxConsumersPerTopic``), per subscription
(``maxConsumersPerSubscription``) and per connection (``maxProducersPerConnection``,
``maxConsumersPerConnection``) - the one over a cap gets ProducerBusy / ConsumerBusy naming the
key, the others go on, and a closed one frees its place."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker

_names = itertools.count()


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-client-limits")
    background = BackgroundBroker(
        data_dir,
        max_producers_per_topic=2,
        max_consumers_per_topic=3,
        max_consumers_per_subscription=2,
        max_producers_per_connection=5,
        max_consumers_per_connection=6,
    ).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.fixture
def client(capped: BackgroundBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(capped.service_url, operation_timeout_seconds=10)
    try:
        yield c
    finally:
        c.close()


def _topic() -> str:
    return f"persistent://public/default/limits-{next(_names)}"


@pytest.mark.timeout(60)
def test_producers_stop_at_max_producers_per_topic_and_a_closed_one_frees_its_place(
    client: pulsar.Client,
) -> None:
    topic = _topic()
    first = client.create_producer(topic)
    client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)
    first.send(b"still served")
    first.close()
    client.create_producer(topic).send(b"a place was freed")


@pytest.mark.timeout(60)
def test_consumers_stop_at_the_subscription_and_topic_caps(client: pulsar.Client) -> None:
    topic = _topic()
    shared = pulsar.ConsumerType.Shared
    client.subscribe(topic, "a", consumer_type=shared)
    client.subscribe(topic, "a", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "a", consumer_type=shared)  # maxConsumersPerSubscription=2
    client.subscribe(topic, "b", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "c", consumer_type=shared)  # maxConsumersPerTopic=3


@pytest.mark.timeout(60)
def test_one_connection_stops_at_its_producer_and_consumer_caps(capped: BackgroundBroker) -> None:
    one = pulsar.Client(capped.service_url, operation_timeout_seconds=10)
    other = pulsar.Client(capped.service_url, operation_timeout_seconds=10)
    try:
        producers = [one.create_producer(_topic()) for _ in range(5)]
        with pytest.raises(pulsar.ProducerBusy):
            one.create_producer(_topic())  # maxProducersPerConnection=5
        other.create_producer(_topic())  # another connection has its own
        consumers = [one.subscribe(_topic(), "s") for _ in range(6)]
        with pytest.raises(pulsar.ConsumerBusy):
            one.subscribe(_topic(), "s")  # maxConsumersPerConnection=6
        producers[0].close()
        consumers[0].close()
        one.create_producer(_topic())
        one.subscribe(_topic(), "s")
    finally:
        one.close()
        other.close()
