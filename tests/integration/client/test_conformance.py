"""Conformance criteria C1-C15 (``docs/client.md#conformance-map``) on ``topic://`` topics, one or
more tests per criterion, against a real in-process broker with the scalable-topic layer installed
(the ``scalable_broker`` fixture: what ``braid standalone`` runs). Splits and merges go through the
real controller; its :class:`StepGate` holds one between two of its steps when a test needs a
segment sealed while its successor is not published yet.

The same criteria on ``persistent://`` topics through a broker without scalable topics (the
migration bridge, and C15) are in ``test_conformance_legacy.py``; the end-to-end acceptance runs
on ``braid standalone`` are in ``tests/integration/e2e/``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import braid
from braid.broker.resources import AutoTopicCreationOverride, NamespacePolicies
from braid.client.layout_source import DagWatchLayoutSource
from braid.core.hashing import hash16
from braid.core.layout import SegmentLayout
from braid.core.message_id import message_position
from braid.core.names import TopicName
from braid.core.topic_layout import TopicLayout
from tests.integration.client.conftest import ScalableBroker
from tests.support.avro_schemas import READING
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(60)


# -- helpers ------------------------------------------------------------------------------------


def create(broker: ScalableBroker, topic: str, segments: int = 2) -> None:
    broker.call(broker.scalable.create_topic(TopicName.parse(topic), segments))


def split(broker: ScalableBroker, topic: str, segment_id: int) -> SegmentLayout:
    return broker.call(broker.scalable.split(TopicName.parse(topic), segment_id))


def merge(broker: ScalableBroker, topic: str, ids: list[int]) -> SegmentLayout:
    return broker.call(broker.scalable.merge(TopicName.parse(topic), ids))


def stats(broker: ScalableBroker, topic: str) -> dict[str, Any]:
    return broker.call(broker.scalable.stats(TopicName.parse(topic)))


def key_in(layout: SegmentLayout, segment_id: int, n: int = 0) -> str:
    """The ``n``-th key (of ``k0, k1, ...``) that routes to ``segment_id``."""
    found = -1
    for i in range(100_000):
        key = f"k{i}"
        if layout.segments[segment_id].hash_range.contains(hash16(key)):
            found += 1
            if found == n:
                return key
    raise AssertionError(f"no key for segment {segment_id}")


def layout_seen_by(handle: Any) -> TopicLayout:
    """The layout a blocking producer or consumer currently routes on."""
    inner = getattr(handle, "_producer", None) or handle._consumer
    return inner._source.current  # type: ignore[no-any-return]


def receive(
    consumer: Any, count: int, within: float = 15.0, *, ack: bool = False
) -> list[braid.Message]:
    """``count`` messages; with ``ack``, each batch is acknowledged cumulatively as it comes
    (a Stream consumer moves on to a split's children only once it has acknowledged all it
    received from the parent)."""
    got: list[braid.Message] = []

    def more() -> bool:
        batch = consumer.receive_many(count - len(got), timeout=0.05)
        if batch and ack:
            consumer.acknowledge_cumulative(batch[-1])
        got.extend(batch)
        return len(got) >= count

    wait_for(
        more,
        within=within,
        message=lambda: f"{count} messages (got {len(got)})",
    )
    return got


def segment_of(message: braid.Message | braid.MessageId) -> int:
    mid = message.message_id if isinstance(message, braid.Message) else message
    position = message_position(mid)
    assert position is not None
    return position.segment_id


@pytest.fixture
def held_split(scalable_broker: ScalableBroker) -> Iterator[ScalableBroker]:
    """The broker, with the step gate released whatever the test did."""
    try:
        yield scalable_broker
    finally:
        scalable_broker.gate.release()


# -- C1 layout tracking -------------------------------------------------------------------------


def test_c1_the_dag_watch_resolves_the_topic_and_applies_every_newer_layout(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    producer = sclient.create_producer(scalable_topic)
    inner = producer._producer
    assert isinstance(inner._source, DagWatchLayoutSource)
    layout = layout_seen_by(producer)
    assert layout.topic == scalable_topic and layout.active_ids == (0, 1)
    assert layout.controller_broker_url == scalable_broker.service_url
    assert {r.broker_url for r in layout.routes.values()} == {scalable_broker.service_url}
    assert layout.route(1).topic == f"segment://{scalable_topic[8:]}/8000-ffff-1"

    split(scalable_broker, scalable_topic, 0)
    merge(scalable_broker, scalable_topic, [3, 1])
    wait_for(lambda: layout_seen_by(producer).epoch == 2, message="epoch 2 at the client")
    assert layout_seen_by(producer).active_ids == (2, 4)
    producer.send(b"still routed", key="k")


def test_c1_a_layout_pruned_by_sealed_segment_gc_is_accepted(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic)
    producer.send(b"before", key="k")
    split(scalable_broker, scalable_topic, 0)
    controller = scalable_broker.scalable.local_controller(TopicName.parse(scalable_topic))
    assert controller is not None
    # Retention 0 and no subscription: the sealed root is pruned at once.
    assert scalable_broker.call(controller.collect_garbage()) == [0]
    wait_for(lambda: 0 not in layout_seen_by(producer).dag.segments, message="the pruned DAG")
    layout = layout_seen_by(producer)
    assert layout.epoch == 2 and layout.active_ids == (1, 2)
    assert layout.dag.segments[1].parent_ids == ()  # the roots are the former children
    producer.send(b"after", key="k")


def test_c1_a_persistent_name_resolves_through_the_dag_watch_to_a_legacy_segment(
    scalable_broker: ScalableBroker, sclient: braid.Client
) -> None:
    topic = "persistent://public/default/c1-legacy-bridge"
    producer = sclient.create_producer(topic)
    assert isinstance(producer._producer._source, DagWatchLayoutSource)
    layout = layout_seen_by(producer)
    assert layout.all_legacy and layout.route(0).topic == topic
    stream = sclient.subscribe_stream(topic, "s", initial_position="earliest")
    producer.send_many([b"a", b"b"], keys=["x", "x"])
    assert [m.value for m in receive(stream, 2)] == [b"a", b"b"]


# -- C2 routing -----------------------------------------------------------------------------------


def test_c2_every_key_lands_in_the_active_segment_covering_its_hash(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    split(scalable_broker, scalable_topic, 0)
    layout = split(scalable_broker, scalable_topic, 3)  # uneven: 0000-3fff, 4000-5fff, ...
    producer = sclient.create_producer(scalable_topic)
    wait_for(lambda: layout_seen_by(producer).epoch == layout.epoch)
    keys = [f"user-{i}" for i in range(300)]
    ids = producer.send_many([b"x"] * len(keys), keys=keys)
    for key, mid in zip(keys, ids, strict=True):
        assert segment_of(mid) == layout.find_active_segment(hash16(key)).segment_id
    keyless = producer.send_many([b"y"] * 8)
    assert {segment_of(m) for m in keyless} == set(layout_seen_by(producer).active_ids)


# -- C3 order and C4 segment-gone retry -----------------------------------------------------------


def test_c3_per_key_order_holds_across_a_split_with_sends_in_flight(
    held_split: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    broker = held_split
    create(broker, scalable_topic, 2)
    keys = [f"k{i}" for i in range(20)]
    producer = sclient.create_producer(scalable_topic, batching_max_delay=0.001)
    stream = sclient.subscribe_stream(scalable_topic, "c3", initial_position="earliest")
    first = [producer.send_async(b"%d" % i, key=keys[i % 20]) for i in range(200)]
    broker.gate.arm("parents-terminated")
    done = broker.submit(broker.scalable.split(TopicName.parse(scalable_topic), 0))
    assert broker.gate.reached.wait(10)
    during = [producer.send_async(b"%d" % i, key=keys[i % 20]) for i in range(200, 400)]
    broker.gate.release()
    done.result(10)
    after = [producer.send_async(b"%d" % i, key=keys[i % 20]) for i in range(400, 600)]
    for future in first + during + after:
        future.result(10)
    got = receive(stream, 600, ack=True)
    for key in keys:
        values = [int(m.value) for m in got if m.key == key]
        assert values == sorted(values) and len(values) == 30, key
    assert {segment_of(m) for m in got} >= {2, 3}  # the children took the moved keys


def test_c4_a_split_holds_only_the_keys_it_moves_then_reroutes_them(
    held_split: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    broker = held_split
    create(broker, scalable_topic, 2)
    layout = SegmentLayout.initial(2)
    moved_key, other_key = key_in(layout, 0), key_in(layout, 1)
    producer = sclient.create_producer(scalable_topic, batching=False)
    producer.send(b"warm", key=moved_key)
    producer.send(b"warm", key=other_key)
    broker.gate.arm("parents-terminated")  # segment 0 sealed, its children not published yet
    done = broker.submit(broker.scalable.split(TopicName.parse(scalable_topic), 0))
    assert broker.gate.reached.wait(10)
    moved = producer.send_async(b"moved", key=moved_key)
    wait_for(lambda: producer._producer._held is not None, message="the producer re-routing")
    other = producer.send_async(b"other", key=other_key)
    assert segment_of(other.result(10)) == 1  # keys of other segments are not held
    assert not moved.done()  # TopicTerminated on segment 0: waits for the new layout
    broker.gate.release()
    done.result(10)
    assert segment_of(moved.result(10)) in (2, 3)  # re-routed to a child, no error surfaced
    assert segment_of(producer.send(b"next", key=moved_key)) in (2, 3)


def test_c4_a_split_whose_layout_comes_late_is_waited_for_not_failed(
    held_split: ScalableBroker, scalable_topic: str
) -> None:
    # A controller leader killed between sealing a split's parent and publishing the layout is
    # replaced only once its metadata session expires: the producer waits up to its operation
    # timeout (10 attempts, about 6.5 s, made sends fail with TopicTerminatedError before).
    broker = held_split
    create(broker, scalable_topic, 2)
    key = key_in(SegmentLayout.initial(2), 0)
    client = braid.Client(broker.service_url, operation_timeout=30)
    try:
        producer = client.create_producer(scalable_topic, batching=False)
        producer.send(b"warm", key=key)
        broker.gate.arm("parents-terminated")
        done = broker.submit(broker.scalable.split(TopicName.parse(scalable_topic), 0))
        assert broker.gate.reached.wait(10)
        moved = producer.send_async(b"moved", key=key)
        held_at = time.monotonic()
        wait_for(
            lambda: moved.done() or time.monotonic() - held_at > 9.0,
            within=30,
            message="the send to the sealed segment to stay held for 9 s",
        )
        assert not moved.done(), moved.exception()
        broker.gate.release()
        done.result(10)
        assert segment_of(moved.result(10)) in (2, 3)
    finally:
        client.close()


# -- C5 sequence ids ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dedup_namespace(scalable_broker: ScalableBroker) -> str:
    policies = NamespacePolicies(deduplication_enabled=True)
    scalable_broker.call(
        scalable_broker.stack.resources.create_namespace("public", "sdedup", policies)
    )
    return "topic://public/sdedup"


def test_c5_sequence_ids_continue_per_named_producer_and_duplicates_are_dropped(
    scalable_broker: ScalableBroker, sclient: braid.Client, dedup_namespace: str
) -> None:
    topic = f"{dedup_namespace}/c5"
    create(scalable_broker, topic, 1)
    with sclient.create_producer(topic, producer_name="c5") as producer:
        producer.send_many([b"a", b"b", b"c"], keys=["k", "k", "k"])
        assert producer.last_sequence_id == 2
    with sclient.create_producer(topic, producer_name="c5") as again:
        duplicate = again.send(b"b again", key="k", sequence_id=1)
        assert duplicate == braid.MessageId.earliest()  # dropped by the segment's dedup
        assert again.last_sequence_id == 2
        assert again.send(b"d", key="k") != braid.MessageId.earliest()
        assert again.last_sequence_id == 3
    reader = sclient.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    assert [m.value for m in receive(reader, 4)] == [b"a", b"b", b"c", b"d"]


# -- C6 access modes ------------------------------------------------------------------------------


def test_c6_exclusive_producers_attach_every_segment_at_create(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 3)
    owner = sclient.create_producer(scalable_topic, access_mode="exclusive")
    assert set(owner._producer._segments) == {0, 1, 2}  # eager, before any send
    with pytest.raises(braid.ProducerBusyError):
        sclient.create_producer(scalable_topic, access_mode="exclusive")
    owner.close()
    fenced_out = sclient.create_producer(scalable_topic, access_mode="exclusive_with_fencing")
    fenced_out.send(b"mine", key="k")


# -- C7 Stream ------------------------------------------------------------------------------------


def test_c7_earliest_reaches_the_controller_and_cumulative_acks_move_every_cursor(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    layout = SegmentLayout.initial(2)
    producer = sclient.create_producer(scalable_topic)
    keys = [key_in(layout, 0), key_in(layout, 1)]
    producer.send_many([b"%d" % i for i in range(20)], keys=keys * 10)
    # The subscription is new: it starts at the earliest message because the registration
    # says so (CommandScalableTopicSubscribe.initial_position).
    stream = sclient.subscribe_stream(scalable_topic, "c7", initial_position="earliest")
    got = receive(stream, 20)
    assert {segment_of(m) for m in got} == {0, 1}
    stream.acknowledge_cumulative(got[-1])  # one ack, both segments

    def backlogs() -> list[int]:
        segments = stats(scalable_broker, scalable_topic)["segments"].values()
        return [s["topicStats"]["subscriptions"]["c7"]["msgBacklog"] for s in segments]

    wait_for(lambda: backlogs() == [0, 0], message=lambda: f"no backlog (now {backlogs()})")
    stream.close()
    assert sclient.subscribe_stream(scalable_topic, "c7").receive(timeout=0.3) is None


def test_c7_a_half_delivered_entry_is_finished_before_its_segment_is_handed_over(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    layout = SegmentLayout.initial(2)
    key = key_in(layout, 1)
    producer = sclient.create_producer(scalable_topic, batching_max_delay=0.05)
    first = sclient.subscribe_stream(
        scalable_topic, "handover", consumer_name="c1", initial_position="earliest"
    )
    producer.send_many([b"%d" % i for i in range(10)], keys=[key] * 10)  # one entry
    head = receive(first, 3)
    first.acknowledge_cumulative(head[-1])
    second = braid.Client(scalable_broker.service_url, operation_timeout=15)
    try:
        # c2 joins: segment 1 moves to it. c1 drains it: the rest of the entry still comes to
        # c1 (the broker could only hand the entry over whole), and c2 gets it once c1 acked.
        other = second.subscribe_stream(scalable_topic, "handover", consumer_name="c2")
        rest = receive(first, 7)
        assert [m.value for m in head + rest] == [b"%d" % i for i in range(10)]
        first.acknowledge_cumulative(rest[-1])
        producer.send_many([b"%d" % i for i in range(10, 15)], keys=[key] * 5)
        later = receive(other, 5)
        assert [m.value for m in later] == [b"%d" % i for i in range(10, 15)]  # no redelivery
        assert first.receive(timeout=0.2) is None
    finally:
        second.close()


def test_c7_consumers_share_segments_reconnect_within_grace_and_leave_cleanly(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 4)

    def members() -> dict[str, Any]:
        sub = stats(scalable_broker, scalable_topic)["subscriptions"]["team"]
        return sub["coordinator"]["consumers"]  # type: ignore[no-any-return]

    other = braid.Client(scalable_broker.service_url, operation_timeout=15)
    try:
        a = sclient.subscribe_stream(scalable_topic, "team", consumer_name="a")
        b = other.subscribe_stream(scalable_topic, "team", consumer_name="b")
        wait_for(lambda: len(members()) == 2)
        before = {name: m["assignedSegments"] for name, m in members().items()}
        assert sorted(before["a"] + before["b"]) == [0, 1, 2, 3]
        attached_b = set(b._consumer._segments)
        for conn in other.async_client._ctx.pool.connections():  # type: ignore[union-attr]
            other._run(_close(conn))
        wait_for(lambda: members()["b"]["connected"], message="b back within its grace period")
        assert {n: m["assignedSegments"] for n, m in members().items()} == before
        wait_for(lambda: all(s.ready for s in b._consumer._segments.values()))
        assert set(b._consumer._segments) == attached_b
        b.close()  # clean leave: the controller rebalances at once, not after the grace period
        wait_for(lambda: list(members()) == ["a"], message="b unregistered")
        wait_for(lambda: len(a._consumer._segments) == 4, message="a owns every segment")
    finally:
        other.close()


async def _close(conn: Any) -> None:
    conn.close()


# -- C8 Queue -------------------------------------------------------------------------------------


def test_c8_queue_reads_sealed_and_active_segments_with_individual_and_negative_acks(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    queue = sclient.subscribe_queue(
        scalable_topic, "workers", initial_position="earliest", negative_ack_delay=0.05
    )
    producer = sclient.create_producer(scalable_topic)
    producer.send_many([b"old-%d" % i for i in range(20)], keys=[f"k{i}" for i in range(20)])
    split(scalable_broker, scalable_topic, 0)  # segment 0 sealed with its backlog
    producer.send_many([b"new-%d" % i for i in range(20)], keys=[f"k{i}" for i in range(20)])
    got = receive(queue, 40)
    expected = {b"%s-%d" % (w, i) for w in (b"old", b"new") for i in range(20)}
    assert {m.value for m in got} == expected
    assert {segment_of(m) for m in got} >= {0, 1}
    retry = got[0]
    for message in got[1:]:
        queue.acknowledge(message)
    queue.negative_acknowledge(retry)
    again = receive(queue, 1)[0]
    assert again.value == retry.value and again.redelivery_count == 1
    queue.acknowledge(again)
    assert queue.receive(timeout=0.3) is None


def test_c8_a_segment_created_after_subscribing_is_read_from_its_start(
    held_split: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    broker = held_split
    create(broker, scalable_topic, 1)
    broker.gate.arm("children-created")  # the children exist, without this subscription
    done = broker.submit(broker.scalable.split(TopicName.parse(scalable_topic), 0))
    assert broker.gate.reached.wait(10)
    queue = sclient.subscribe_queue(scalable_topic, "late")  # "latest", on segment 0 only
    # Hold the consumer's client until the children have data, so its attach to them comes
    # after messages were written there: "latest" would lose those.
    unblock = threading.Event()
    sclient.async_client._ctx.loop.call_soon_threadsafe(unblock.wait, 30)  # type: ignore[union-attr]
    other = braid.Client(broker.service_url, operation_timeout=15)
    try:
        producer = other.create_producer(scalable_topic, batching=False)
        broker.gate.release()
        done.result(10)
        futures = [producer.send_async(b"%d" % i, key=f"k{i}") for i in range(100)]
        for future in futures:
            assert segment_of(future.result(10)) in (1, 2)
    finally:
        unblock.set()
        other.close()
    assert {int(m.value) for m in receive(queue, 100)} == set(range(100))


# -- C9 Checkpoint --------------------------------------------------------------------------------


def test_c9_a_checkpoint_restores_exactly_after_a_split_and_a_merge(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    producer = sclient.create_producer(scalable_topic)
    keys = [f"k{i}" for i in range(30)]
    producer.send_many([b"%d" % i for i in range(60)], keys=keys * 2)
    reader = sclient.create_checkpoint_consumer(scalable_topic, start=braid.Checkpoint.earliest())
    seen = receive(reader, 25)
    saved = reader.checkpoint().to_bytes()
    reader.close()
    split(scalable_broker, scalable_topic, 0)
    merge(scalable_broker, scalable_topic, [3, 1])
    producer.send_many([b"%d" % i for i in range(60, 120)], keys=keys * 2)
    restored = sclient.create_checkpoint_consumer(
        scalable_topic, start=braid.Checkpoint.from_bytes(saved)
    )
    rest = receive(restored, 95)
    assert restored.receive(timeout=0.3) is None
    values = [int(m.value) for m in seen + rest]
    assert sorted(values) == list(range(120))  # exactly once, nothing before the checkpoint
    for key in keys:
        per_key = [int(m.value) for m in seen + rest if m.key == key]
        assert per_key == sorted(per_key), key  # parents before children


def test_c9_pip460_grouped_members_keep_per_key_order_across_a_split(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    """PIP-460: a CheckpointConsumer "requires a group identifier to coordinate parallel
    instances". The members share the segments, and a split's children are handed out only once
    the member holding the parent has delivered it whole (ADR 0057): per key, every parent
    message is received before any child message, across the group."""
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic)
    keys = [f"k{i}" for i in range(20)]
    producer.send_many([b"%d" % i for i in range(40)], keys=keys * 2)
    split(scalable_broker, scalable_topic, 0)
    producer.send_many([b"%d" % i for i in range(40, 80)], keys=keys * 2)
    start = braid.Checkpoint.earliest()
    solo = sclient.create_checkpoint_consumer(scalable_topic, start=start, group="solo")
    got = receive(solo, 80)  # one member: parent 0 and both children, parent first per key
    for key in keys:
        per_key = [int(m.value) for m in got if m.key == key]
        assert per_key == sorted(per_key), key
    other = braid.Client(scalable_broker.service_url, operation_timeout=15)
    try:
        g1 = sclient.create_checkpoint_consumer(scalable_topic, start=start, group="pair")
        g2 = other.create_checkpoint_consumer(scalable_topic, start=start, group="pair")
        members = (g1, g2)
        wait_for(
            lambda: sum(len(g._consumer._assigned or ()) for g in members) == 1,
            message="only the parent dealt: its children wait for it",
        )
        order: list[braid.Message] = []  # in the order the application received them
        wait_for(
            lambda: (
                order.extend(g1.receive_many(7, 0.02) + g2.receive_many(7, 0.02))
                or len(order) >= 80
            ),
            within=30,
            message=lambda: f"80 messages across the group (got {len(order)})",
        )
        assert sorted(int(m.value) for m in order) == list(range(80))
        for key in keys:
            per_key = [int(m.value) for m in order if m.key == key]
            assert per_key == sorted(per_key), key  # parent before child, across members
        # Both children were dealt, one to each member (counts within one).
        assert sorted(len(g._consumer._assigned or ()) for g in members) == [1, 1]
    finally:
        other.close()


# -- C10 ids, C11 schema, C12 not found, C13 errors, C14 lifetime, C15 gating ----------------------


def test_c10_a_keys_ids_compare_in_publish_order_across_a_split(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic)
    before = producer.send_many([b"a", b"b"], keys=["k", "k"])
    split(scalable_broker, scalable_topic, 0)
    after = producer.send_many([b"c", b"d"], keys=["k", "k"])
    ids = before + after
    assert segment_of(ids[0]) == 0 and segment_of(ids[-1]) in (1, 2)
    assert ids == sorted(ids)
    assert [braid.MessageId.from_bytes(i.to_bytes()) for i in ids] == ids


def test_c11_one_topic_level_schema_survives_a_split(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    schema = braid.Schema.avro(READING)
    stream = sclient.subscribe_stream(
        scalable_topic, "readers", initial_position="earliest", schema=schema
    )
    producer = sclient.create_producer(scalable_topic, schema=schema)
    keys = [f"sensor-{i}" for i in range(8)]
    producer.send_many([{"sensor": k, "value": 0} for k in keys], keys=keys)
    split(scalable_broker, scalable_topic, 0)
    wait_for(lambda: layout_seen_by(producer).active_ids != (0,))
    # The children's per-segment producers register the same schema: the same version.
    producer.send_many([{"sensor": k, "value": 1} for k in keys], keys=keys)
    got = receive(stream, 16, ack=True)
    assert sorted((m.value["sensor"], m.value["value"]) for m in got) == sorted(
        (k, v) for k in keys for v in (0, 1)
    )
    assert {m.schema_version for m in got} == {0}
    assert {segment_of(m) for m in got} - {0}, "nothing was read from the split's children"
    assert all(m.data == schema.encode(m.value) for m in got)
    registry = scalable_broker.service.schemas.registry
    versions = scalable_broker.call(registry.get_all(scalable_topic.removeprefix("topic://")))
    assert [v.version for v in versions] == [0]


def test_c11_incompatible_schema_is_a_typed_error(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    sclient.create_producer(scalable_topic, schema=braid.Schema.avro(READING)).send(
        {"sensor": "s", "value": 1}
    )
    clashing = braid.Schema.avro(
        {
            **READING,
            "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "string"}],
        }
    )
    for schema in (clashing, braid.Schema.STRING, braid.Schema.json(READING)):
        with pytest.raises(braid.IncompatibleSchemaError) as refused:
            sclient.create_producer(scalable_topic, schema=schema)
        assert not refused.value.retriable
        with pytest.raises(braid.IncompatibleSchemaError):
            sclient.subscribe_stream(scalable_topic, "s", schema=schema)
        with pytest.raises(braid.IncompatibleSchemaError):
            sclient.subscribe_queue(scalable_topic, "q", schema=schema)
    # The topic is unharmed: a compatible producer and a bytes consumer still work.
    sclient.create_producer(scalable_topic, schema=braid.Schema.avro(READING)).send(
        {"sensor": "s", "value": 2}
    )


def test_c12_a_missing_scalable_topic_is_not_found_or_auto_created_as_the_policy_says(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    policies = NamespacePolicies(auto_topic_creation=AutoTopicCreationOverride(False))
    scalable_broker.call(
        scalable_broker.stack.resources.create_namespace("public", "sclosed", policies)
    )
    with pytest.raises(braid.NotFoundError):
        sclient.create_producer("topic://public/sclosed/absent")
    with pytest.raises(braid.NotFoundError):
        sclient.subscribe_stream("topic://public/sclosed/absent", "s")
    sclient.create_producer(scalable_topic).send(b"auto-created")
    assert layout_seen_by(sclient.create_producer(scalable_topic)).active_ids == (0,)


def test_c13_async_sends_never_raise_and_bad_names_are_typed(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    producer = sclient.create_producer(scalable_topic)
    future = producer.send_async(None)  # type: ignore[arg-type]
    assert isinstance(future.exception(timeout=5), braid.BraidError)
    with pytest.raises(braid.InvalidTopicNameError):
        sclient.create_producer("segment://public/default/x/0000-ffff-0")


def test_c14_producers_and_consumers_stay_valid_across_layout_changes_and_close_twice(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    producer = sclient.create_producer(scalable_topic)
    stream = sclient.subscribe_stream(scalable_topic, "c14", initial_position="earliest")
    for round_ in range(3):
        active = layout_seen_by(producer).active_ids
        split(scalable_broker, scalable_topic, active[0])
        producer.send_many([b"%d" % round_] * 5, keys=[f"k{i}" for i in range(5)])
    assert len(receive(stream, 15, ack=True)) == 15
    producer.close()
    producer.close()
    stream.close()
    stream.close()


def test_c15_a_scalable_broker_is_driven_through_scalable_commands_only_once_advertised(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    sclient.create_producer(scalable_topic).send(b"x")
    conns = sclient.async_client._ctx.pool.connections()  # type: ignore[union-attr]
    assert conns and all(c.supports_scalable_topics for c in conns)
    # The other half (a broker without the flag never sees such a command) is
    # test_conformance_legacy.py::test_c15_no_scalable_command_reaches_a_broker_without_support.
