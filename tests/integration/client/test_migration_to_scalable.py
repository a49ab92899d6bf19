"""A partitioned topic migrated to a scalable topic mid-backlog (issue 33, ADR 0063).

The official client produces keyed messages to a 4-partition topic with a Failover and a Shared
subscription, each consumed part-way. The migration terminates the partitions (the official
producer gets ``TopicTerminated``) and publishes a scalable topic whose roots are the partitions.
Braid's client then produces to the *old* name (it follows the migration) and reads the new one:
the Stream subscription (was Failover) gets every unacknowledged old message and every new one
exactly once, each key's old messages before its new ones, in order; the Queue subscription (was
Shared) gets the same set exactly once.

The second scenario migrates *while producing*: keyed loads of the official client run through the
whole migration; each switches to Braid's client on the new name at its first ``TopicTerminated``
(the lookup answers "retry" until the layout is published, never auto-creating the target), so a
key's last messages acknowledged by a partition just before its termination must be read before
that key's first messages in the segments.
"""

from __future__ import annotations

import datetime
import threading
import time

import pulsar
import pytest

import braid
from braid.clock import SystemClock
from braid.core.migration import MigrationPhase
from braid.core.names import TopicName
from braid.scalable.migration import (
    LocalClassicTopics,
    MigrationExecutor,
    MigrationInProgress,
    MigrationTargetReserved,
)
from tests.integration.client.conftest import ScalableBroker
from tests.support.keyed_order import assert_each_key_in_order, drain_braid, payload, take_official
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)

KEYS = [f"key-{i}" for i in range(8)]
OLD_PER_KEY = 10
NEW_PER_KEY = 5


def with_two_subscriptions(
    broker: ScalableBroker, official: pulsar.Client, prefix: str
) -> tuple[str, str, pulsar.Consumer, pulsar.Consumer]:
    """A new 4-partition topic with a Failover (``ordered``) and a Shared (``shared``)
    subscription of the official client at earliest: the source, the target and both consumers."""
    name = f"{prefix}-{time.monotonic_ns()}"
    source = f"persistent://public/default/{name}"
    broker.call(broker.service.create_partitioned_topic(source, 4))
    earliest = pulsar.InitialPosition.Earliest
    ordered = official.subscribe(
        source, "ordered", consumer_type=pulsar.ConsumerType.Failover, initial_position=earliest
    )
    shared = official.subscribe(
        source, "shared", consumer_type=pulsar.ConsumerType.Shared, initial_position=earliest
    )
    return source, f"topic://public/default/{name}", ordered, shared


def test_a_partitioned_topic_migrates_mid_backlog_keeping_every_key_in_order(
    scalable_broker: ScalableBroker, official: pulsar.Client, sclient: braid.Client
) -> None:
    source, target, ordered, shared = with_two_subscriptions(
        scalable_broker, official, "migrated-orders"
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


class SwitchingLoad(threading.Thread):
    """Sends ``key:seq`` for its keys round-robin, each send waited for: through the official
    client until a partition answers ``TopicTerminated``, then through Braid's client on the
    scalable topic (the refused message is sent again there: it was never stored)."""

    def __init__(
        self,
        official: pulsar.Client,
        braid_client: braid.Client,
        source: str,
        target: str,
        keys: list[str],
    ) -> None:
        super().__init__(daemon=True)
        self._official = official.create_producer(source, batching_enabled=False)
        self._braid = braid_client
        self._target = target
        self._keys = keys
        self.acked: list[bytes] = []
        self.official_acked = 0
        self.braid_acked = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        producer: braid.Producer | None = None
        seq = 0
        try:
            while not self.stop.is_set():
                for key in self._keys:
                    message = payload(key, seq)
                    if producer is None:
                        try:
                            self._official.send(message, partition_key=key)
                            self.official_acked += 1
                            self.acked.append(message)
                            continue
                        except pulsar.TopicTerminated:
                            producer = self._braid.create_producer(self._target)
                    producer.send(message, key=key)
                    self.braid_acked += 1
                    self.acked.append(message)
                seq += 1
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def test_a_partitioned_topic_migrates_while_official_producers_write_and_switch_to_braid(
    scalable_broker: ScalableBroker, official: pulsar.Client
) -> None:
    source, target, ordered, shared = with_two_subscriptions(
        scalable_broker, official, "migrated-live"
    )
    executor = scalable_broker.scalable.migrations
    assert executor is not None
    with braid.Client(scalable_broker.service_url, operation_timeout=60) as braid_client:
        loads = [
            SwitchingLoad(official, braid_client, source, target, KEYS[:4]),
            SwitchingLoad(official, braid_client, source, target, KEYS[4:]),
        ]
        for load in loads:
            load.start()
        try:
            wait_for(
                lambda: all(load.official_acked >= 40 for load in loads),
                within=60,
                message="a backlog from the official producers",
            )
            read_ordered = set(take_official(ordered, 30))
            read_shared = set(take_official(shared, 25))
            state = scalable_broker.call(executor.request(source, segments=2))
            assert {k: v.value for k, v in state.subscriptions.items()} == {
                "ordered": "STREAM",
                "shared": "QUEUE",
            }
            ordered.close()
            shared.close()
            before = [load.official_acked for load in loads]
            done = scalable_broker.call(executor.run(source))  # the loads keep writing meanwhile
            assert done.phase is MigrationPhase.DONE
            wait_for(
                lambda: all(load.braid_acked >= 40 or load.error for load in loads),
                within=90,
                message=lambda: (
                    "every load switched to Braid: "
                    + repr([(x.official_acked, x.braid_acked, x.error) for x in loads])
                ),
            )
        finally:
            for load in loads:
                load.stop.set()
            for load in loads:
                load.join(timeout=60)
        for load, official_before in zip(loads, before, strict=True):
            assert load.error is None, repr(load.error)
            assert load.official_acked > official_before  # it wrote while the migration ran

        everything = [m for load in loads for m in load.acked]
        assert len(everything) == len(set(everything))
        stream = braid_client.subscribe_stream(target, "ordered")
        got = drain_braid(stream, len(set(everything) - read_ordered))
        assert len(got) == len(set(got)) and set(got) == set(everything) - read_ordered
        assert_each_key_in_order(got)
        queue = braid_client.subscribe_queue(target, "shared")
        got_queue = drain_braid(queue, len(set(everything) - read_shared))
        assert len(got_queue) == len(set(got_queue))
        assert set(got_queue) == set(everything) - read_shared


def test_the_target_of_an_unpublished_migration_is_not_auto_created(
    scalable_broker: ScalableBroker,
) -> None:
    name = f"reserved-{time.monotonic_ns()}"
    source = f"persistent://public/default/{name}"
    target = TopicName.parse(f"topic://public/default/{name}")
    scalable_broker.call(scalable_broker.service.create_partitioned_topic(source, 2))
    executor = scalable_broker.scalable.migrations
    assert executor is not None
    scalable_broker.call(executor.request(source))
    # A Braid client looking the name up now would have auto-created a one-segment topic there,
    # and the migration, its partitions terminated, could not publish: it is told to retry.
    with pytest.raises(MigrationInProgress, match=f"migration of {source}"):
        scalable_broker.call(scalable_broker.scalable.watched_controller(target))  # a lookup
    # An operator creating it conflicts with the migration (a retry cannot help while the
    # migration waits for its operator): 409, naming the migration and how to free the name.
    with pytest.raises(MigrationTargetReserved, match=f"migration of {source}.*--rollback"):
        scalable_broker.call(scalable_broker.scalable.create_topic(target))  # the admin API
    assert scalable_broker.call(executor.rollback(source)).phase is MigrationPhase.ROLLED_BACK
    scalable_broker.call(scalable_broker.scalable.create_topic(target))  # free again


def test_a_delayed_message_held_in_a_partition_reaches_the_queue_subscription_when_due(
    scalable_broker: ScalableBroker, official: pulsar.Client, sclient: braid.Client
) -> None:
    name = f"migrated-delayed-{time.monotonic_ns()}"
    source = f"persistent://public/default/{name}"
    scalable_broker.call(scalable_broker.service.create_partitioned_topic(source, 2))
    shared = official.subscribe(source, "queue", consumer_type=pulsar.ConsumerType.Shared)
    producer = official.create_producer(source, batching_enabled=False)
    delay = 4.0
    sent_at = time.monotonic()
    producer.send(b"later", partition_key="k", deliver_after=datetime.timedelta(seconds=delay))
    producer.send(b"now", partition_key="k")
    executor = scalable_broker.scalable.migrations
    assert executor is not None
    state = scalable_broker.call(executor.request(source))
    assert state.subscriptions["queue"].value == "QUEUE"
    shared.close()
    assert scalable_broker.call(executor.run(source)).phase is MigrationPhase.DONE

    queue = sclient.subscribe_queue(f"topic://public/default/{name}", "queue")
    first = queue.receive(timeout=30)
    assert first is not None and first.value == b"now"
    queue.acknowledge(first)
    later = queue.receive(timeout=60)
    assert later is not None and later.value == b"later"
    assert time.monotonic() - sent_at >= delay - 0.5  # held on the root until due
    queue.acknowledge(later)
