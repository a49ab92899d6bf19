"""Messages larger than ``maxMessageSize`` with the official client (issue 31): with
``chunking_enabled`` (batching off) the client splits a 20 MiB payload into chunks of the size the
broker advertises in CONNECTED, the broker stores them as ordinary entries, and consumers and
readers get the payload back whole; without chunking the send is refused with ``MessageTooBig``.
A broker configured with a smaller ``maxMessageSize`` makes smaller chunks (more of them), on a
Shared subscription too; the broker's own refusal of an oversize frame is pinned in
``test_bad_input.py``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from braid.core.names import TopicName
from tests.support.broker_stack import BackgroundBroker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

_MIB = 1024 * 1024


def _stored_entries(broker: BackgroundBroker, topic: str) -> int:
    name = str(TopicName.parse(topic))
    entries: int = broker.run(lambda: broker.service.topics[name].ledger.number_of_entries)
    return entries


def test_a_20_mib_payload_round_trips_in_chunks(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    assert broker.stack.config.max_message_size == 5 * _MIB  # Pulsar's default
    consumer = client.subscribe(topic, "sub")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    payload = os.urandom(20 * _MIB)
    producer.send(payload, properties={"sha": hashlib.sha256(payload).hexdigest()})
    producer.send(b"small after big")

    received = consumer.receive(timeout_millis=60_000)
    assert len(received.data()) == len(payload) and received.data() == payload
    assert received.properties()["sha"] == hashlib.sha256(payload).hexdigest()
    consumer.acknowledge(received)
    assert consumer.receive(timeout_millis=10_000).data() == b"small after big"
    read = reader.read_next(60_000)
    assert read.data() == payload
    # Five chunks of at most 5 MiB (the metadata takes room in each) and the small message.
    assert _stored_entries(broker, topic) == 6


def test_an_oversize_send_without_chunking_is_refused(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    with pytest.raises(pulsar.MessageTooBig):
        producer.send(b"x" * (5 * _MIB + 1))
    producer.send(b"the producer still works")


@pytest.fixture(scope="module")
def small_max(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-small-max")
    background = BackgroundBroker(data_dir, max_message_size=256 * 1024).start()
    try:
        yield background
    finally:
        background.stop()


def test_the_brokers_max_message_size_sets_the_chunk_size_on_a_shared_subscription(
    small_max: BackgroundBroker,
) -> None:
    topic = "persistent://public/default/small-chunks"
    client = pulsar.Client(small_max.service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
        payloads = [os.urandom(1 * _MIB + i) for i in range(3)]
        for payload in payloads:
            producer.send(payload)
        got = []
        for _ in payloads:
            msg = consumer.receive(timeout_millis=60_000)
            got.append(msg.data())
            consumer.acknowledge(msg)
        assert got == payloads
        assert _stored_entries(small_max, topic) >= 3 * 5  # 1 MiB in chunks under 256 KiB
        with pytest.raises(pulsar.MessageTooBig):
            client.create_producer(topic, batching_enabled=False).send(b"y" * (300 * 1024))
    finally:
        client.close()
