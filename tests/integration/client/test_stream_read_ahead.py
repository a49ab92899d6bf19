"""A Stream consumer reads the segments it attaches ahead before they are readable (ADR 0075): the
broker dispatches a child's first window while its parent is still being read, the client holds
it, nothing of the child reaches the application before the parent is drained, and the hand-over
delivers the held messages at once, in order. A segment attached ahead and then given to another
consumer is dropped here and read by that one, whole.

Against a real broker with the scalable-topic layer; the broker's own consumer counters show what
was dispatched.
"""

from __future__ import annotations

import pytest

import braid
from braid.broker.consumer import Consumer
from braid.core.hashing import hash16
from braid.core.names import TopicName
from braid.core.topic_layout import segment_topic_name
from tests.integration.client.conftest import ScalableBroker
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(120)


def _broker_consumers(
    broker: ScalableBroker, segment_topic: str, subscription: str
) -> list[Consumer]:
    async def find() -> list[Consumer]:
        topic = await broker.service.get_or_create_topic(segment_topic, create=False)
        sub = topic.subscriptions.get(subscription)
        return sub.consumers if sub is not None else []

    return broker.call(find())


def test_a_child_read_ahead_is_held_until_its_parent_is_drained_then_delivered_at_once(
    scalable_broker: ScalableBroker, scalable_topic: str, sclient: braid.Client
) -> None:
    name = TopicName.parse(scalable_topic)
    scalable_broker.call(scalable_broker.scalable.create_topic(name, 1))
    consumer = sclient.subscribe_stream(scalable_topic, "s", initial_position="earliest")
    producer = sclient.create_producer(scalable_topic, batching=False)
    for i in range(5):
        producer.send(f"k-{i}".encode(), key="k")
    layout = scalable_broker.call(scalable_broker.scalable.split(name, 0))  # 0 -> 1, 2
    (child,) = [
        sid
        for sid, info in layout.segments.items()
        if info.is_active and info.hash_range.contains(hash16("k"))
    ]
    for i in range(5, 10):
        producer.send(f"k-{i}".encode(), key="k")
    producer.close()

    parent = [consumer.receive(timeout=30) for _ in range(5)]
    assert [m.value for m in parent] == [f"k-{i}".encode() for i in range(5)]
    child_topic = segment_topic_name(scalable_topic, layout, child)

    def read_ahead() -> bool:
        return (
            sum(c.messages_out for c in _broker_consumers(scalable_broker, child_topic, "s")) == 5
        )

    # The child was dispatched ahead while the parent is not acknowledged ...
    wait_for(read_ahead, within=20, message="the child's messages dispatched ahead")
    # ... and none of it reaches the application before the parent is drained.
    assert consumer.receive_many(10, timeout=0.3) == []

    consumer.acknowledge_cumulative(parent[-1])
    rest = []
    while len(rest) < 5:
        got = consumer.receive_many(10, timeout=30)
        assert got, f"stalled after {[m.value for m in rest]}"
        rest.extend(got)
    assert [m.value for m in rest] == [f"k-{i}".encode() for i in range(5, 10)]
    consumer.acknowledge_cumulative(rest[-1])
    consumer.close()


def test_a_segment_read_ahead_and_then_given_to_another_consumer_is_read_there_whole(
    scalable_broker: ScalableBroker, scalable_topic: str, sclient: braid.Client
) -> None:
    name = TopicName.parse(scalable_topic)
    scalable_broker.call(scalable_broker.scalable.create_topic(name, 2))
    first = sclient.subscribe_stream(
        scalable_topic, "s", initial_position="earliest", consumer_name="b-first"
    )
    producer = sclient.create_producer(scalable_topic, batching=False)
    before = scalable_broker.call(scalable_broker.scalable.get_layout(name))
    zero_key = next(
        key
        for key in (f"k{i}" for i in range(100))
        if before.segments[0].hash_range.contains(hash16(key))
    )
    for i in range(3):
        producer.send(f"{zero_key}-{i}".encode(), key=zero_key)
    layout = scalable_broker.call(scalable_broker.scalable.split(name, 0))  # 0 -> 2, 3
    for i in range(3, 6):
        producer.send(f"{zero_key}-{i}".encode(), key=zero_key)
    producer.close()
    (child,) = [
        sid
        for sid, info in layout.segments.items()
        if info.is_active and info.hash_range.contains(hash16(zero_key))
    ]
    child_topic = segment_topic_name(scalable_topic, layout, child)

    def dispatched_to(consumer_name: str) -> int:
        return sum(
            c.messages_out
            for c in _broker_consumers(scalable_broker, child_topic, "s")
            if c.consumer_name == consumer_name
        )

    # b-first reads segments 0 and 1 and reads the child ahead (not acknowledging anything).
    wait_for(lambda: dispatched_to("b-first") == 3, within=20, message="the child read ahead")
    # a-late joins: the fresh deal gives it segment 0, so the child it blocks goes with it.
    late = sclient.subscribe_stream(
        scalable_topic, "s", initial_position="earliest", consumer_name="a-late"
    )
    got: list[bytes] = []
    counts: list[int] = []
    while len(got) < 6:
        batch = late.receive_many(10, timeout=30)
        assert batch, f"a-late stalled after {got}"
        got.extend(m.value for m in batch)
        counts.extend(m.redelivery_count for m in batch)
        late.acknowledge_cumulative(batch[-1])
    assert got == [f"{zero_key}-{i}".encode() for i in range(6)]
    # What b-first had read ahead comes to a-late as a redelivery (ADR 0075, consequences).
    assert counts[3:] == [1, 1, 1]
    # b-first never delivered what it had read ahead of the child.
    assert [
        m.value
        for m in first.receive_many(10, timeout=0.3)
        if m.value.startswith(zero_key.encode())
    ] == []
    late.close()
    first.close()
