"""A partitioned topic migrated to a scalable topic mid-backlog (issue 33, ADR 0063).

The official client produces keyed messages to a 4-partition topic with a Failover and a Shared
subscription, each consumed part-way. The migration terminates the partitions (the official
producer gets ``TopicTerminated``) and publishes a scalable topic whose roots are the partitions.
Braid's client then produces to the *old* name (it follows the migration) and reads the new one:
the Stream subscription (was Failover) gets every unacknowledged old message and every new one
exactly once, each key's old messages before its new ones, in order; the Queue subscription (was
Shared) gets the same set exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pulsar
import pytest

import braid
from braid.clock import SystemClock
from braid.core.migration import MigrationPhase
from braid.scalable.migration import LocalClassicTopics, MigrationExecutor
from tests.integration.client.conftest import ScalableBroker
from tests.support.keyed_order import assert_each_key_in_order, drain_braid, payload, take_official

pytestmark = pytest.mark.timeout(180)

KEYS = [f"key-{i}" for i in range(8)]
OLD_PER_KEY = 10
NEW_PER_KEY = 5


@pytest.fixture
def official(scalable_broker: ScalableBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(scalable_broker.service_url, operation_timeout_seconds=10)
    try:
        yield c
    finally:
        try:
            c.close()
        except pulsar.AlreadyClosed:
            pass


def test_a_partitioned_topic_migrates_mid_backlog_keeping_every_key_in_order(
    scalable_broker: ScalableBroker, official: pulsar.Client, sclient: braid.Client
) -> None:
    name = f"migrated-orders-{time.monotonic_ns()}"
    source = f"persistent://public/default/{name}"
    target = f"topic://public/default/{name}"
    scalable_broker.call(scalable_broker.service.create_partitioned_topic(source, 4))

    earliest = pulsar.InitialPosition.Earliest
    ordered = official.subscribe(
        source, "ordered", consumer_type=pulsar.ConsumerType.Failover, initial_position=earliest
    )
    shared = official.subscribe(
        source, "shared", consumer_type=pulsar.ConsumerType.Shared, initial_position=earliest
    )
    producer = official.create_producer(source, batching_enabled=False)
    for seq in range(OLD_PER_KEY):
        for key in KEYS:
            producer.send(payload(key, seq), partition_key=key)
    read_ordered = set(take_official(ordered, 30))
    read_shared = set(take_official(shared, 25))

    stack = scalable_broker.stack
    executor = MigrationExecutor(
        stack.metadata,
        scalable_broker.scalable.resources,
        scalable_broker.scalable.segments,
        LocalClassicTopics(scalable_broker.service),
        SystemClock(),
        legacy_roots_servable=True,
    )
    # The official consumers are connected: their types decide the modes.
    state = scalable_broker.call(executor.request(source, segments=2))
    assert {k: v.value for k, v in state.subscriptions.items()} == {
        "ordered": "STREAM",
        "shared": "QUEUE",
    }
    ordered.close()
    shared.close()
    done = scalable_broker.call(executor.run(source))
    assert done.phase is MigrationPhase.DONE

    with pytest.raises(pulsar.TopicTerminated):
        producer.send(payload("late", 0), partition_key=KEYS[0])

    # Braid's client given the old name follows the migration to the segments.
    new_producer = sclient.create_producer(source)
    for seq in range(OLD_PER_KEY, OLD_PER_KEY + NEW_PER_KEY):
        for key in KEYS:
            new_producer.send(payload(key, seq), key=key)

    everything = {payload(k, s) for k in KEYS for s in range(OLD_PER_KEY + NEW_PER_KEY)}
    stream = sclient.subscribe_stream(target, "ordered")
    got = drain_braid(stream, len(everything - read_ordered))
    assert len(got) == len(set(got)) and set(got) == everything - read_ordered
    assert_each_key_in_order(got)

    queue = sclient.subscribe_queue(target, "shared")
    got_queue = drain_braid(queue, len(everything - read_shared))
    assert len(got_queue) == len(set(got_queue)) and set(got_queue) == everything - read_shared
