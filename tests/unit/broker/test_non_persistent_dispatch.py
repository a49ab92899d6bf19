"""Where a non-persistent topic's message goes (ADR 0062): to one consumer with permits, by the
subscription type's rule, or dropped and counted - never queued, never given to a consumer the
rule did not pick."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.dispatch_settings import DispatchSettings
from braid.broker.errors import ConsumerBusy, NotAllowedOnNonPersistent, NotSupported
from braid.broker.non_persistent import NON_PERSISTENT_POSITION, NonPersistentTopic
from braid.broker.non_persistent_subscription import DropMeter, NonPersistentSubscription
from braid.broker.producer import AccessMode, Producer
from braid.broker.sticky_keys import KeySharedPolicy, sticky_hash_of
from braid.clock import ManualClock
from braid.ledger.api import Entry, Position
from braid.protocol.generated import PulsarApi_pb2 as pb


class _Connection:
    """Records what consumers and producers send (the transport protocols of both)."""

    remote_address = "127.0.0.1:1"
    closed = False

    def __init__(self) -> None:
        self.sent: list[tuple[object, ...]] = []

    def send_messages(self, consumer_id: int, deliveries: Sequence[Delivery]) -> None:
        self.sent.append(("messages", consumer_id, [d.entry.data for d in deliveries]))

    def send_close_consumer(self, consumer_id: int, assigned: object = None) -> None:
        self.sent.append(("close_consumer", consumer_id))

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        self.sent.append(("active", consumer_id, is_active))

    def send_reached_end_of_topic(self, consumer_id: int) -> bool:
        return True

    def send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, position: Position
    ) -> None:
        self.sent.append(("receipt", sequence_id, position))

    def send_publish_error(self, producer_id: int, sequence_id: int, exc: BaseException) -> None:
        self.sent.append(("error", sequence_id))

    def send_close_producer(self, producer_id: int, assigned: object = None) -> None:
        self.sent.append(("close_producer", producer_id))


def _subscription(clock: ManualClock, partition: int = -1) -> NonPersistentSubscription:
    return NonPersistentSubscription(
        "non-persistent://t/ns/x", "sub", partition=partition, settings=DispatchSettings(),
        clock=clock,
    )  # fmt: skip


def _consumer(
    conn: _Connection,
    consumer_id: int,
    sub_type: SubType.ValueType,
    *,
    permits: int = 0,
    name: str | None = None,
    priority: int = 0,
    key_shared: KeySharedPolicy | None = None,
) -> Consumer:
    consumer = Consumer(
        consumer_id, name or f"c{consumer_id}", sub_type, priority, conn, key_shared=key_shared
    )
    consumer.add_permits(permits)
    return consumer


def _entry(data: bytes) -> Entry:
    return Entry(NON_PERSISTENT_POSITION, data)


def _keyed(key: str) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0, partition_key=key)


def _delivered(conn: _Connection) -> list[tuple[object, ...]]:
    return [s for s in conn.sent if s[0] == "messages"]


async def test_shared_spreads_round_robin_over_consumers_with_permits_only() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    a, b, c = (_consumer(conn, i, SubType.Shared, permits=p) for i, p in ((1, 5), (2, 0), (3, 5)))
    for consumer in (a, b, c):
        sub.add_consumer(consumer)
    for i in range(4):
        sub.dispatch(_entry(b"m%d" % i), 1, pb.MessageMetadata())
    assert _delivered(conn) == [
        ("messages", 1, [b"m0"]),
        ("messages", 3, [b"m1"]),
        ("messages", 1, [b"m2"]),
        ("messages", 3, [b"m3"]),
    ]
    assert (a.permits, b.permits, c.permits, sub.drops.count) == (3, 0, 3, 0)
    assert a.unacked_messages == 0  # nothing is kept to redeliver


async def test_shared_prefers_the_lowest_priority_level_with_permits() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    low = _consumer(conn, 1, SubType.Shared, permits=1, priority=5)
    high = _consumer(conn, 2, SubType.Shared, permits=1, priority=0)
    sub.add_consumer(low)
    sub.add_consumer(high)
    for i in range(3):
        sub.dispatch(_entry(b"m%d" % i), 1, pb.MessageMetadata())
    assert [s[1] for s in _delivered(conn)] == [2, 1]
    assert sub.drops.count == 1


async def test_a_batch_costs_its_messages_and_is_dropped_whole() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    consumer = _consumer(conn, 1, SubType.Exclusive, permits=1)
    sub.add_consumer(consumer)
    sub.dispatch(_entry(b"batch"), 10, pb.MessageMetadata())  # permits > 0: delivered
    sub.dispatch(_entry(b"batch2"), 10, pb.MessageMetadata())  # permits now -9: dropped
    assert consumer.permits == -9 and sub.drops.count == 10


async def test_key_shared_drops_rather_than_give_a_key_to_another_consumer() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    sticky = [(0, 32767), (32768, 65535)]
    consumers = [
        _consumer(
            conn,
            i,
            SubType.Key_Shared,
            permits=100 if i == 0 else 0,
            key_shared=KeySharedPolicy.from_meta(
                pb.KeySharedMeta(
                    keySharedMode=pb.STICKY,
                    hashRanges=[pb.IntRange(start=sticky[i][0], end=sticky[i][1])],
                )
            ),
        )
        for i in range(2)
    ]
    for consumer in consumers:
        sub.add_consumer(consumer)
    keys = [f"key-{i}" for i in range(40)]
    owner = {k: 0 if sticky_hash_of(_keyed(k)) <= sticky[0][1] else 1 for k in keys}
    for key in keys:
        sub.dispatch(_entry(key.encode()), 1, _keyed(key))
    delivered = [data for s in _delivered(conn) for data in s[2]]  # type: ignore[attr-defined]
    assert delivered == [k.encode() for k in keys if owner[k] == 0]
    assert all(s[1] == 0 for s in _delivered(conn))
    assert sub.drops.count == sum(1 for k in keys if owner[k] == 1) > 0


async def test_failover_picks_by_partition_index_and_tells_the_consumers() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock(), partition=1)
    a = _consumer(conn, 1, SubType.Failover, permits=10, name="a")
    b = _consumer(conn, 2, SubType.Failover, permits=10, name="b")
    sub.add_consumer(a)
    sub.add_consumer(b)
    await asyncio.sleep(0)  # ACTIVE_CONSUMER_CHANGE goes out on the next loop turn
    sub.dispatch(_entry(b"m"), 1, pb.MessageMetadata())
    assert _delivered(conn) == [("messages", 2, [b"m"])]  # sorted (a, b); index 1 -> b
    assert ("active", 2, True) in conn.sent and ("active", 1, False) in conn.sent
    sub.remove_consumer(b)
    sub.dispatch(_entry(b"n"), 1, pb.MessageMetadata())
    assert _delivered(conn)[-1] == ("messages", 1, [b"n"])


async def test_an_exclusive_subscription_refuses_a_second_consumer_and_another_type() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    sub.add_consumer(_consumer(conn, 1, SubType.Exclusive))
    with pytest.raises(ConsumerBusy):
        sub.add_consumer(_consumer(conn, 2, SubType.Exclusive))
    with pytest.raises(ConsumerBusy):
        sub.add_consumer(_consumer(conn, 3, SubType.Shared))


async def test_what_needs_storage_is_refused_or_ignored() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    consumer = _consumer(conn, 1, SubType.Shared)
    with pytest.raises(NotSupported, match="readCompacted"):
        reading = Consumer(2, "r", SubType.Exclusive, 0, conn, read_compacted=True)
        sub.add_consumer(reading)
    sub.add_consumer(consumer)
    with pytest.raises(NotAllowedOnNonPersistent, match="non-persistent"):
        await sub.reset_cursor(Position(0, 0))
    await sub.acknowledge(consumer, [Position(0, 0)], cumulative=True)
    sub.redeliver(consumer, None)
    assert conn.sent == []


async def test_a_subscription_without_consumers_drops_and_counts() -> None:
    conn = _Connection()
    sub = _subscription(ManualClock())
    consumer = _consumer(conn, 1, SubType.Shared, permits=10)
    sub.add_consumer(consumer)
    sub.dispatch(_entry(b"a"), 1, pb.MessageMetadata())
    sub.remove_consumer(consumer)
    sub.dispatch(_entry(b"b"), 3, pb.MessageMetadata())
    stats = sub.stats()
    assert (stats["msgOutCounter"], stats["msgDropCount"], stats["consumers"]) == (1, 3, [])


def test_the_drop_rate_spans_stats_reads_at_least_a_second_apart() -> None:
    clock = ManualClock()
    meter = DropMeter(clock)
    meter.count = 5
    clock.advance(0.5)
    assert meter.rate() == 0.0  # too soon to measure
    clock.advance(0.5)
    assert meter.rate() == pytest.approx(5.0)
    meter.count += 20
    clock.advance(0.2)
    assert meter.rate() == pytest.approx(5.0)  # the last measured rate
    clock.advance(1.8)
    assert meter.rate() == pytest.approx(10.0)
    clock.advance(1.0)
    assert meter.rate() == 0.0


async def test_a_send_is_receipted_at_once_and_reaches_every_subscription() -> None:
    conn = _Connection()
    clock = ManualClock()
    topic = NonPersistentTopic("non-persistent://t/ns/x", settings=DispatchSettings(), clock=clock)
    first = _consumer(conn, 1, SubType.Exclusive, permits=5)
    await topic.subscribe("one", first, initial_earliest=True)
    await topic.subscribe("two", _consumer(conn, 2, SubType.Exclusive), initial_earliest=True)
    producer = Producer(7, "p", AccessMode.Shared, conn, user_provided_name=True)
    await topic.add_producer(producer, lambda: None)
    data = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    topic.publish(producer.expect(0, 0, 0), b"payload", data)
    assert ("receipt", 0, Position(0, 0)) in conn.sent
    assert ("messages", 1, [b"payload"]) in conn.sent
    stats = topic.stats()
    subs = stats["subscriptions"]
    assert isinstance(subs, dict)
    assert subs["two"]["msgDropCount"] == 1 and subs["one"]["msgDropCount"] == 0
    assert (stats["msgInCounter"], stats["msgOutCounter"], stats["storageSize"]) == (1, 1, 0)


async def test_a_readers_subscription_ends_with_its_consumer() -> None:
    conn = _Connection()
    topic = NonPersistentTopic(
        "non-persistent://t/ns/x", settings=DispatchSettings(), clock=ManualClock()
    )
    reader = _consumer(conn, 1, SubType.Exclusive)
    sub = await topic.subscribe("reader-1", reader, initial_earliest=True, durable=False)
    assert "reader-1" in topic.subscriptions
    sub.remove_consumer(reader)
    assert "reader-1" not in topic.subscriptions
