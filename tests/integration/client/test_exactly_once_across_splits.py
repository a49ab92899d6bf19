"""PIP-460 "Exactly-once" ("deduplication state must be carried over correctly during splits"),
with Braid's client on ``topic://`` against a real broker with the scalable-topic layer.

The receipt of a stored message is really lost: every client connection runs through a
:class:`~tests.support.frame_cut.FrameCutProxy` (the broker advertises it as its listener), which
drops that SEND_RECEIPT, lets the test split or merge the segment, and cuts the connection. The
client reconnects, finds its segment sealed and re-routes the unreceipted message to the
successor with the sequence id it was sent with; the successor inherited the sealed segment's
deduplication state (ADR 0055), so the message is stored exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import braid
from braid.broker.resources import NamespacePolicies
from braid.core.hashing import hash16
from braid.core.layout import SegmentLayout
from braid.core.names import SegmentTopicName, TopicName
from tests.integration.client.conftest import ScalableBroker, StepGate
from tests.support.frame_cut import FrameCutProxy, receipt_of
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(120)

NAMESPACE = "public/eos"


@pytest.fixture(scope="module")
def proxy() -> Iterator[FrameCutProxy]:
    cutter = FrameCutProxy()
    try:
        yield cutter
    finally:
        cutter.stop()


@pytest.fixture(scope="module")
def eos_broker(
    tmp_path_factory: pytest.TempPathFactory, proxy: FrameCutProxy
) -> Iterator[ScalableBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-eos")
    broker = ScalableBroker(
        data_dir, StepGate(), advertised_listeners=(f"internal:{proxy.url}",)
    ).start()
    try:
        proxy.start(broker.service.port)
        tenant, ns = NAMESPACE.split("/")
        broker.call(
            broker.stack.resources.create_namespace(
                tenant, ns, NamespacePolicies(deduplication_enabled=True)
            )
        )
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def client(eos_broker: ScalableBroker, proxy: FrameCutProxy) -> Iterator[braid.Client]:
    c = braid.Client(proxy.url, operation_timeout=15)
    try:
        yield c
    finally:
        c.close()


def key_in(layout: SegmentLayout, segment_id: int, n: int = 0) -> str:
    found = -1
    for i in range(100_000):
        key = f"k{i}"
        if layout.segments[segment_id].hash_range.contains(hash16(key)):
            found += 1
            if found == n:
                return key
    raise AssertionError(f"no key for segment {segment_id}")


def stored_values(broker: ScalableBroker, topic: str, count: int) -> list[bytes]:
    """Every message stored in the topic, read from the earliest position of every segment."""
    reader = braid.Client(broker.service_url, operation_timeout=15)
    try:
        consumer = reader.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
        got: list[bytes] = []

        def more() -> bool:
            got.extend(m.value for m in consumer.receive_many(100, timeout=0.05))
            return len(got) >= count

        wait_for(more, within=20, message=f"{count} messages of {topic}")
        # Anything stored twice would follow: give it the chance to show up.
        got.extend(m.value for m in consumer.receive_many(100, timeout=0.5))
        consumer.close()
        return got
    finally:
        reader.close()


def topic_name(name: str) -> str:
    return f"topic://{NAMESPACE}/{name}"


def test_pip460_exactly_once_a_resend_after_a_lost_receipt_across_a_split_is_stored_once(
    eos_broker: ScalableBroker, proxy: FrameCutProxy, client: braid.Client
) -> None:
    topic = topic_name("eos-split")
    name = TopicName.parse(topic)
    eos_broker.call(eos_broker.scalable.create_topic(name, 1))
    key = key_in(SegmentLayout.initial(1), 0)
    producer = client.create_producer(topic, producer_name="eos", batching=False)
    for i in range(3):
        producer.send(b"m%d" % i, key=key)
    assert producer.last_sequence_id == 2

    proxy.arm(receipt_of(3), lambda: eos_broker.call(eos_broker.scalable.split(name, 0)))
    resent = producer.send_async(b"m3", key=key)
    assert proxy.cut.wait(30) and proxy.error is None
    # The first copy is in the sealed parent; the resend reached a child and was dropped there.
    assert resent.result(30) == braid.MessageId.earliest()
    assert producer.last_sequence_id == 3
    producer.send(b"m4", key=key)
    producer.close()

    assert sorted(stored_values(eos_broker, topic, 5)) == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_pip460_exactly_once_a_resend_after_a_lost_receipt_across_a_merge_is_stored_once(
    eos_broker: ScalableBroker, proxy: FrameCutProxy, client: braid.Client
) -> None:
    topic = topic_name("eos-merge")
    name = TopicName.parse(topic)
    eos_broker.call(eos_broker.scalable.create_topic(name, 2))
    layout = SegmentLayout.initial(2)
    low, high = key_in(layout, 0), key_in(layout, 1)
    producer = client.create_producer(topic, producer_name="eos-m")  # batching on
    producer.send(b"low-0", key=low)
    producer.send(b"high-1", key=high)  # the producer's highest id now lives in the other parent
    producer.send(b"low-2", key=low)

    proxy.arm(receipt_of(3), lambda: eos_broker.call(eos_broker.scalable.merge(name, [0, 1])))
    resent = producer.send_async(b"low-3", key=low)
    assert proxy.cut.wait(30) and proxy.error is None
    assert resent.result(30) == braid.MessageId.earliest()
    producer.send(b"high-4", key=high)
    producer.send(b"low-5", key=low)
    producer.close()

    stored = stored_values(eos_broker, topic, 6)
    assert sorted(stored) == [b"high-1", b"high-4", b"low-0", b"low-2", b"low-3", b"low-5"]


def test_pip460_exactly_once_inherited_state_survives_a_broker_restart(
    tmp_path: Path,
) -> None:
    """The child's inherited state is in its dedup cursor: after the broker restarts (a new
    process would reload it the same way), a resend of what the sealed parent stored is still a
    duplicate on the child and a restarted producer continues after it."""
    topic = "topic://public/eosr/restart"
    name = TopicName.parse(topic)
    broker = ScalableBroker(tmp_path, StepGate()).start()
    try:
        broker.call(
            broker.stack.resources.create_namespace(
                "public", "eosr", NamespacePolicies(deduplication_enabled=True)
            )
        )
        broker.call(broker.scalable.create_topic(name, 1))
        key = key_in(SegmentLayout.initial(1), 0)
        with braid.Client(broker.service_url, operation_timeout=15) as c:
            producer = c.create_producer(topic, producer_name="r", batching=False)
            for i in range(4):
                producer.send(b"r%d" % i, key=key)
            producer.close()
        layout = broker.call(broker.scalable.split(name, 0))
    finally:
        broker.stop()
    child = next(s for s in layout.active_segments if s.hash_range.contains(hash16(key)))
    segment = str(SegmentTopicName.of(name, child.hash_range, child.segment_id))

    broker = ScalableBroker(tmp_path, StepGate()).start()
    try:
        topic_state = broker.call(broker.service.get_or_create_topic(segment, create=False))
        dedup = topic_state.dedup
        assert dedup is not None
        assert dedup.last_sequence_id(f"r-seg-{child.segment_id}") == 3
        assert dedup.is_duplicate(f"r-seg-{child.segment_id}", 3)
        assert not dedup.is_duplicate(f"r-seg-{child.segment_id}", 4)
        with braid.Client(broker.service_url, operation_timeout=15) as c:
            again = c.create_producer(topic, producer_name="r", batching=False)
            again.send(b"r4", key=key)
            assert again.last_sequence_id == 4  # continued after the inherited 3
            again.close()
    finally:
        broker.stop()
