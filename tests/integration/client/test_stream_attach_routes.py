"""A Stream consumer reaches the segments it is assigned through the broker its assignment names
(ADR 0073), with no lookup per segment - sealed ones too, which the DAG names no broker for -
and still reaches a segment whose advertised broker is wrong, by looking it up.

The client's lookups are counted by a spy that calls the real lookup (nothing is replaced).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

import braid
import braid.client.context as client_context
from braid.client.dag import assignment_from_pb
from braid.client.lookup import lookup_broker
from braid.client.pool import ConnectionPool
from braid.core.consumer_assignment import Assignment
from braid.core.names import TopicName
from braid.protocol import pb
from tests.integration.client.conftest import ScalableBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The topics the client looks up from now on (the real lookup runs)."""
    seen: list[str] = []
    real = lookup_broker

    async def counted(pool: ConnectionPool, topic: str) -> str:
        seen.append(topic)
        return await real(pool, topic)

    monkeypatch.setattr(client_context, "lookup_broker", counted)
    yield seen


def _reshape(broker: ScalableBroker, producer: braid.Producer, name: TopicName) -> None:
    """Split segment 0, then split its first child: four sealed or active segments, each given
    keyed messages while active."""
    for key in ("a", "b", "c"):
        producer.send(f"{key}-0".encode(), key=key)
    broker.call(broker.scalable.split(name, 0))  # 0 -> 1, 2
    for key in ("a", "b", "c"):
        producer.send(f"{key}-1".encode(), key=key)
    broker.call(broker.scalable.split(name, 1))  # 1 -> 3, 4
    for key in ("a", "b", "c"):
        producer.send(f"{key}-2".encode(), key=key)


def test_a_stream_consumer_walks_sealed_segments_without_a_lookup(
    scalable_broker: ScalableBroker, scalable_topic: str, sclient: braid.Client, lookups: list[str]
) -> None:
    name = TopicName.parse(scalable_topic)
    scalable_broker.call(scalable_broker.scalable.create_topic(name, 1))
    consumer = sclient.subscribe_stream(scalable_topic, "s", initial_position="earliest")
    producer = sclient.create_producer(scalable_topic, batching=False)
    _reshape(scalable_broker, producer, name)
    producer.close()

    got: list[bytes] = []
    while len(got) < 9:
        message = consumer.receive(timeout=30)
        assert message is not None, f"stalled after {got}"
        got.append(message.value)
        consumer.acknowledge_cumulative(message)
    consumer.close()
    for key in ("a", "b", "c"):
        assert [v for v in got if v.startswith(key.encode())] == [
            f"{key}-{i}".encode() for i in range(3)
        ]
    # Segments 0 and 1 were sealed before the consumer reached them: read without a lookup.
    assert [t for t in lookups if t.startswith("segment://")] == []


def test_an_assigned_broker_that_does_not_answer_is_looked_up_instead(
    scalable_broker: ScalableBroker,
    scalable_topic: str,
    sclient: braid.Client,
    lookups: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every assignment names a broker nobody listens on (a stale answer: the owner moved).
    def stale(assignment: pb.ScalableConsumerAssignment, tls: bool = False) -> Assignment:
        parsed = assignment_from_pb(assignment, tls)
        return Assignment.of(
            parsed.layout_epoch,
            [
                dataclasses.replace(segment, broker_url="pulsar://127.0.0.1:9")
                for segment in parsed.segments.values()
            ],
        )

    monkeypatch.setattr("braid.client.assignment_session.assignment_from_pb", stale)
    name = TopicName.parse(scalable_topic)
    scalable_broker.call(scalable_broker.scalable.create_topic(name, 1))
    producer = sclient.create_producer(scalable_topic, batching=False)
    producer.send(b"x", key="a")
    producer.close()
    scalable_broker.call(scalable_broker.scalable.split(name, 0))  # 0 sealed, with the message

    consumer = sclient.subscribe_stream(scalable_topic, "s", initial_position="earliest")
    message = consumer.receive(timeout=30)
    assert message is not None and message.value == b"x"
    consumer.close()
    assert any(t.startswith("segment://") for t in lookups)
