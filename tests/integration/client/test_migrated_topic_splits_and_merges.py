"""A migrated topic splits and merges like any other, before and after its legacy roots are
collected (issue 33, ADR 0063).

A 4-partition topic with a keyed backlog from the official client is migrated to two segments.
Braid's client then writes keyed messages without pause while one of the new segments is split
and its children merged back, a Stream consumer reading all along. Once the consumer drained the
partitions, the sealed-segment GC collects them (retention 0 here) with the sealed segments after
them: the layout keeps no legacy root, the partition topics are gone, and the partitioned-topic
metadata stays, so the old name cannot become a new topic that nobody reads - the official client
gets ``TopicTerminated`` naming the scalable topic, Braid's client given the old name still
follows the migration. The topic then splits and merges again. Every message is read exactly
once, each key in order across all of it.
"""

from __future__ import annotations

import threading
import time

import pulsar
import pytest

import braid
from braid.core.layout import SegmentLayout
from braid.core.migration import MigrationPhase
from braid.core.names import TopicName
from tests.integration.client.conftest import ScalableBroker
from tests.support.keyed_order import assert_each_key_in_order, payload
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(240)

KEYS = [f"key-{i}" for i in range(8)]
OLD_PER_KEY = 10


class KeyedWriter(threading.Thread):
    """Braid's producer sending ``key:seq`` for every key round-robin, each send waited for."""

    def __init__(self, producer: braid.Producer, first_seq: int) -> None:
        super().__init__(daemon=True)
        self._producer = producer
        self._seq = first_seq
        self.acked: list[bytes] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for key in KEYS:
                    message = payload(key, self._seq)
                    self._producer.send(message, key=key)
                    self.acked.append(message)
                self._seq += 1
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def finish(self) -> int:
        """Stop after the round in progress; the next sequence number."""
        self.stop.set()
        self.join(timeout=60)
        assert self.error is None, repr(self.error)
        return self._seq


class StreamReader(threading.Thread):
    """Receives (acknowledging cumulatively) until told to stop."""

    def __init__(self, consumer: braid.StreamConsumer) -> None:
        super().__init__(daemon=True)
        self._consumer = consumer
        self.got: list[bytes] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                message = self._consumer.receive(timeout=0.2)
                if message is not None:
                    self.got.append(bytes(message.value))
                    self._consumer.acknowledge_cumulative(message)
        except BaseException as exc:  # surfaced by the test (a test failing first closes it)
            self.error = exc


def split_and_merge_back(broker: ScalableBroker, topic: TopicName, segment_id: int) -> None:
    """Split ``segment_id``, then merge its two children back into one segment."""
    layout: SegmentLayout = broker.call(broker.scalable.split(topic, segment_id))
    children = sorted(layout.segments[segment_id].child_ids)
    assert len(children) == 2 and all(layout.segments[c].is_active for c in children)
    merged: SegmentLayout = broker.call(broker.scalable.merge(topic, children))
    assert not any(merged.segments[c].is_active for c in children)


def test_a_migrated_topic_splits_and_merges_before_and_after_its_partitions_are_collected(
    scalable_broker: ScalableBroker, official: pulsar.Client
) -> None:
    name = f"migrated-elastic-{time.monotonic_ns()}"
    source = f"persistent://public/default/{name}"
    target = TopicName.parse(f"topic://public/default/{name}")
    broker = scalable_broker
    broker.call(broker.service.create_partitioned_topic(source, 4))
    official.subscribe(
        source,
        "ordered",
        consumer_type=pulsar.ConsumerType.Failover,
        initial_position=pulsar.InitialPosition.Earliest,
    ).close()
    old_producer = official.create_producer(source, batching_enabled=False)
    for seq in range(OLD_PER_KEY):
        for key in KEYS:
            old_producer.send(payload(key, seq), partition_key=key)
    old_producer.close()
    executor = broker.scalable.migrations
    assert executor is not None
    broker.call(executor.request(source, segments=2))
    assert broker.call(executor.run(source)).phase is MigrationPhase.DONE
    layout = broker.call(broker.scalable.get_layout(target))
    first_new = min(s.segment_id for s in layout.active_segments)

    with braid.Client(broker.service_url, operation_timeout=30) as client:
        reader = StreamReader(client.subscribe_stream(str(target), "ordered"))
        reader.start()
        writer = KeyedWriter(client.create_producer(str(target)), OLD_PER_KEY)
        writer.start()
        try:
            wait_for(lambda: len(writer.acked) >= 40, within=60, message="keyed load")
            split_and_merge_back(broker, target, first_new)  # roots not collected yet

            old = {payload(k, s) for k in KEYS for s in range(OLD_PER_KEY)}
            wait_for(lambda: old <= set(reader.got), within=90, message="the partitions drained")
            controller = broker.scalable.local_controller(target)
            assert controller is not None
            pruned: list[int] = []

            def collected() -> bool:
                pruned.extend(broker.call(controller.collect_garbage()))
                return {0, 1, 2, 3} <= set(pruned)

            wait_for(collected, within=60, message=lambda: f"the roots collected: {pruned}")
            after_gc = broker.call(broker.scalable.get_layout(target))
            assert after_gc.legacy_segments == []
            for partition in range(4):
                topic = f"{source}-partition-{partition}"
                assert not broker.call(broker.service.topic_exists(topic))
            # The partitioned-topic metadata stays: the old name is not a free name again.
            assert broker.call(broker.service.partitioned.partitions(TopicName.parse(source))) == 4
            with pytest.raises(pulsar.TopicTerminated):
                official.create_producer(source)
            for partition in range(4):  # and no partition was re-created by the attempt
                topic = f"{source}-partition-{partition}"
                assert not broker.call(broker.service.topic_exists(topic))

            active = sorted(s.segment_id for s in after_gc.active_segments)
            split_and_merge_back(broker, target, active[-1])  # after the roots are gone
            wait_for(lambda: len(writer.acked) >= 200, within=60, message="more keyed load")
        finally:
            writer.stop.set()
        next_seq = writer.finish()
        # Braid's client given the old name still follows the migration to the segments.
        follower = client.create_producer(source)
        for key in KEYS:
            follower.send(payload(key, next_seq), key=key)
        expected = old | set(writer.acked) | {payload(k, next_seq) for k in KEYS}
        try:
            wait_for(
                lambda: set(reader.got) >= expected,
                within=90,
                message=lambda: f"{len(expected - set(reader.got))} messages not read yet",
            )
        finally:
            reader.stop.set()
            reader.join(timeout=30)
    assert reader.error is None, repr(reader.error)
    assert len(reader.got) == len(set(reader.got)), "a message was delivered twice"
    assert set(reader.got) == expected
    assert_each_key_in_order(reader.got)
