"""Key_Shared draining, batch-index ack sets on the wire, read-compacted rules and the compaction
monitor, at the protocol level against an in-process broker (exact frames, injected clocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from braid.broker.compaction import CompactionStatus
from braid.clock import ManualClock
from braid.core import ack_set
from braid.core.hashing import sticky_key_hash
from braid.protocol import commands
from braid.protocol.batch import encode_batch
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, request

TOPIC = "persistent://public/default/features"
KEY_SHARED = pb.CommandSubscribe.Key_Shared
# Under the classic auto split the first consumer serves every hash and the second takes
# [0, 32768]: a key hashing there moves when the second consumer joins.
MOVING_KEY = next(k for k in (f"k{i}" for i in range(1000)) if sticky_key_hash(k) <= 32768)


async def _producer(raw: RawClient, topic: str = TOPIC) -> None:
    answer = await request(raw, commands.producer(topic, 1, 1, producer_name="p"), 1)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer


async def _send(
    raw: RawClient, sequence_id: int, payload: bytes, *, key: str | None = None, **fields: int
) -> pb.CommandSendReceipt:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=1)
    if key is not None:
        meta.partition_key = key
    for name, value in fields.items():
        setattr(meta, name, value)
    await raw.send(commands.send(1, sequence_id), encode_message_body(meta, payload))
    answer = await raw.next_command(lambda c: c.type == pb.BaseCommand.SEND_RECEIPT)
    return answer.send_receipt


def _batch(count: int) -> bytes:
    """A real batch payload of ``count`` messages (the broker checks the count against it)."""
    return encode_batch(
        (pb.SingleMessageMetadata(payload_size=len(b"m%d" % i)), b"m%d" % i) for i in range(count)
    )


async def _subscribe(
    raw: RawClient,
    consumer_id: int,
    sub_type: pb.CommandSubscribe.SubType.ValueType,
    *,
    name: str,
    topic: str = TOPIC,
    meta: pb.KeySharedMeta | None = None,
    read_compacted: bool = False,
    subscription: str = "sub",
) -> pb.BaseCommand:
    cmd = commands.subscribe(
        topic,
        subscription,
        sub_type,
        consumer_id,
        100 + consumer_id,
        consumer_name=name,
        initial_position=pb.CommandSubscribe.Earliest,
        key_shared_meta=meta,
    )
    if read_compacted:
        cmd.subscribe.read_compacted = True
    return await request(raw, cmd, 100 + consumer_id)


async def _message(raw: RawClient, within: float = 10.0) -> pb.CommandMessage:
    cmd = await raw.next_command(lambda c: c.type == pb.BaseCommand.MESSAGE, within=within)
    return cmd.message


async def _no_message(raw: RawClient, within: float = 0.3) -> bool:
    try:
        await raw.next_command(lambda c: c.type == pb.BaseCommand.MESSAGE, within=within)
    except TimeoutError:
        return True
    return False


@pytest.fixture
async def classic_split(tmp_path: Path) -> StackHolder:
    holder = StackHolder(tmp_path / "broker", subscription_key_shared_use_consistent_hashing=False)
    await holder.start()
    yield holder  # type: ignore[misc]
    await holder.close()


async def test_a_moved_key_drains_from_its_old_consumer_before_the_new_one_gets_it(
    classic_split: StackHolder,
) -> None:
    pub, old, new = await classic_split.raw(), await classic_split.raw(), await classic_split.raw()
    await _producer(pub)
    assert (await _subscribe(old, 1, KEY_SHARED, name="c1")).type == pb.BaseCommand.SUCCESS
    await old.send(commands.flow(1, 100))
    first = await _send(pub, 0, b"first", key=MOVING_KEY)
    delivered = await _message(old)
    assert delivered.message_id.entryId == first.message_id.entryId
    # c2 joins and takes the key's hash range; c1 still holds "first" unacknowledged.
    assert (await _subscribe(new, 2, KEY_SHARED, name="c2")).type == pb.BaseCommand.SUCCESS
    await new.send(commands.flow(2, 100))
    await _send(pub, 1, b"second", key=MOVING_KEY)
    assert await _no_message(new), "the key moved before its old consumer acknowledged"
    assert await _no_message(old, within=0.1), "a moved key went to its old consumer"
    await old.send(commands.ack(1, [delivered.message_id]))
    drained = await _message(new)
    assert drained.message_id.entryId == first.message_id.entryId + 1


async def test_allow_out_of_order_delivery_does_not_wait_for_the_old_consumer(
    classic_split: StackHolder,
) -> None:
    meta = pb.KeySharedMeta(keySharedMode=pb.AUTO_SPLIT, allowOutOfOrderDelivery=True)
    pub, old, new = await classic_split.raw(), await classic_split.raw(), await classic_split.raw()
    await _producer(pub)
    await _subscribe(old, 1, KEY_SHARED, name="c1", meta=meta)
    await old.send(commands.flow(1, 100))
    await _send(pub, 0, b"first", key=MOVING_KEY)
    await _message(old)
    await _subscribe(new, 2, KEY_SHARED, name="c2", meta=meta)
    await new.send(commands.flow(2, 100))
    await _send(pub, 1, b"second", key=MOVING_KEY)
    assert (await _message(new)).message_id.entryId == 1


async def test_a_leaving_consumer_hands_its_keys_over_in_order(classic_split: StackHolder) -> None:
    pub, first, second = (
        await classic_split.raw(),
        await classic_split.raw(),
        await classic_split.raw(),
    )
    await _producer(pub)
    await _subscribe(first, 1, KEY_SHARED, name="c1")
    await _subscribe(second, 2, KEY_SHARED, name="c2")
    await first.send(commands.flow(1, 100))
    other = next(k for k in (f"o{i}" for i in range(1000)) if sticky_key_hash(k) > 32768)
    for seq in range(3):
        await _send(pub, seq, f"{seq}".encode(), key=other)  # all to c1
    got = [(await _message(first)).message_id.entryId for _ in range(3)]
    assert got == [0, 1, 2]
    await second.send(commands.flow(2, 100))
    await first.send(commands.close_consumer(1, 9))
    handed = [(await _message(second)).message_id.entryId for _ in range(3)]
    assert handed == [0, 1, 2]


async def test_reading_stops_while_the_replay_queue_holds_the_look_ahead_limit(
    tmp_path: Path,
) -> None:
    # keySharedLookAheadMsgInReplayThresholdPerSubscription: a key whose consumer does not keep
    # up may not make the broker read (and buffer) the whole backlog behind it.
    holder = StackHolder(
        tmp_path / "b",
        subscription_key_shared_use_consistent_hashing=False,
        key_shared_look_ahead_msg_in_replay_threshold_per_subscription=3,
    )
    await holder.start()
    try:
        pub, slow, fast = await holder.raw(), await holder.raw(), await holder.raw()
        await _producer(pub)
        await _subscribe(slow, 1, KEY_SHARED, name="c1")
        await _subscribe(fast, 2, KEY_SHARED, name="c2")
        await fast.send(commands.flow(2, 100))
        await slow.send(commands.flow(1, 1))
        stays = next(k for k in (f"o{i}" for i in range(1000)) if sticky_key_hash(k) > 32768)
        for seq in range(5):
            await _send(pub, seq, f"{seq}".encode(), key=stays)  # c1's: 1 delivered, 4 held
        assert (await _message(slow)).message_id.entryId == 0
        await _send(pub, 5, b"for c2", key=MOVING_KEY)
        assert await _no_message(fast), "read past a full replay queue"
        await slow.send(commands.flow(1, 100))
        assert [(await _message(slow)).message_id.entryId for _ in range(4)] == [1, 2, 3, 4]
        assert (await _message(fast)).message_id.entryId == 5
    finally:
        await holder.close()


@pytest.mark.parametrize(
    ("meta", "error"),
    [
        (pb.KeySharedMeta(keySharedMode=pb.STICKY), pb.ConsumerAssignError),
        (
            pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=9, end=3)]),
            pb.ConsumerAssignError,
        ),
        (
            pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=0, end=65536)]),
            pb.ConsumerAssignError,
        ),
    ],
)
async def test_invalid_sticky_ranges_are_refused(
    holder: StackHolder, meta: pb.KeySharedMeta, error: int
) -> None:
    raw = await holder.raw()
    answer = await _subscribe(raw, 1, KEY_SHARED, name="c", meta=meta)
    assert answer.type == pb.BaseCommand.ERROR and answer.error.error == error, answer


async def test_key_shared_can_be_disabled_by_the_broker(tmp_path: Path) -> None:
    holder = StackHolder(tmp_path / "b", subscription_key_shared_enable=False)
    await holder.start()
    try:
        raw = await holder.raw()
        answer = await _subscribe(raw, 1, KEY_SHARED, name="c")
        assert answer.type == pb.BaseCommand.ERROR
        assert answer.error.error == pb.NotAllowedError
    finally:
        await holder.close()


async def test_read_compacted_is_refused_on_shared_subscriptions(holder: StackHolder) -> None:
    raw = await holder.raw()
    answer = await _subscribe(raw, 1, pb.CommandSubscribe.Shared, name="c", read_compacted=True)
    assert answer.type == pb.BaseCommand.ERROR and answer.error.error == pb.NotAllowedError


async def test_a_redelivered_batch_carries_the_ack_set_of_its_unacked_messages(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    await _producer(raw)
    await _send(raw, 0, _batch(5), num_messages_in_batch=5)
    await _subscribe(raw, 1, pb.CommandSubscribe.Shared, name="c")
    await raw.send(commands.flow(1, 100))
    first = await _message(raw)
    assert list(first.ack_set) == []
    partial = commands.message_id(first.message_id.ledgerId, first.message_id.entryId)
    partial.ack_set.extend(ack_set.of_indexes([0, 1, 3]))  # messages 2 and 4 acknowledged
    await request(raw, commands.ack(1, [partial], request_id=7), 7)
    await raw.send(commands.redeliver_unacknowledged_messages(1, [first.message_id]))
    again = await _message(raw)
    assert tuple(again.ack_set) == ack_set.of_indexes([0, 1, 3])
    assert again.redelivery_count == 1
    # Acknowledging the rest completes the entry: nothing is left to redeliver.
    rest = commands.message_id(first.message_id.ledgerId, first.message_id.entryId)
    rest.ack_set.extend(ack_set.of_indexes([2, 4]))
    await request(raw, commands.ack(1, [rest], request_id=8), 8)
    await raw.send(commands.redeliver_unacknowledged_messages(1, [first.message_id]))
    assert await _no_message(raw)
    assert holder.stack is not None
    stats = holder.stack.service.topic_stats(TOPIC)
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0  # type: ignore[index]


async def test_batch_index_acks_are_ignored_when_the_broker_turns_them_off(
    tmp_path: Path,
) -> None:
    holder = StackHolder(tmp_path / "b", acknowledgment_at_batch_index_level_enabled=False)
    await holder.start()
    try:
        raw = await holder.raw()
        await _producer(raw)
        await _send(raw, 0, _batch(3), num_messages_in_batch=3)
        await _subscribe(raw, 1, pb.CommandSubscribe.Shared, name="c")
        await raw.send(commands.flow(1, 100))
        first = await _message(raw)
        partial = commands.message_id(first.message_id.ledgerId, first.message_id.entryId)
        partial.ack_set.extend(ack_set.of_indexes([0, 2]))
        await request(raw, commands.ack(1, [partial], request_id=7), 7)
        await raw.send(commands.redeliver_unacknowledged_messages(1, [first.message_id]))
        assert list((await _message(raw)).ack_set) == []
    finally:
        await holder.close()


async def test_the_monitor_compacts_a_topic_over_its_namespace_threshold(tmp_path: Path) -> None:
    clock = ManualClock()
    holder = StackHolder(
        tmp_path / "b",
        broker_clock=clock,
        keep_alive_interval_seconds=86_400,
        broker_service_compaction_monitor_interval_in_seconds=60,
    )
    stack = await holder.start()
    try:
        await stack.resources.set_compaction_threshold("public", "default", 200)
        raw = await holder.raw()
        await _producer(raw)
        topic = stack.service.topics[TOPIC]
        monitor = stack.service.compaction_monitor
        for seq in range(20):
            await _send(raw, seq, b"v" * 20, key=f"k{seq % 4}")
        assert topic.compaction.status is CompactionStatus.NOT_RUN
        rounds = monitor.rounds
        clock.advance(60)
        await eventually(lambda: monitor.rounds > rounds, message="a monitor round")
        await eventually(
            lambda: topic.compaction.status is CompactionStatus.SUCCESS, message="compaction"
        )
        assert (
            topic.compaction.horizon == stack.service.topics[TOPIC].ledger.last_confirmed_position
        )
        # Below the threshold again: the next round leaves the topic alone.
        assert await monitor.check_once() == []
    finally:
        await holder.close()


async def test_compacted_reads_start_at_the_compacted_ledger_after_the_topic_was_trimmed(
    tmp_path: Path,
) -> None:
    holder = StackHolder(tmp_path / "b", managed_ledger_max_entries_per_ledger=2)
    stack = await holder.start()
    try:
        raw, pub = await holder.raw(), await holder.raw()
        await _producer(pub)
        # A durable subscription that consumes everything, so consumed ledgers can be trimmed.
        await _subscribe(raw, 1, pb.CommandSubscribe.Exclusive, name="all", subscription="all")
        await raw.send(commands.flow(1, 100))
        published = [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("c", b"")]
        receipts = [await _send(pub, seq, v, key=k) for seq, (k, v) in enumerate(published)]
        ids = [(r.message_id.ledgerId, r.message_id.entryId) for r in receipts]
        topic = stack.service.topics[TOPIC]
        await topic.compaction.compact()
        for _ in range(len(published)):
            await _message(raw)
        await request(
            raw, commands.ack(1, [receipts[-1].message_id], cumulative=True, request_id=9), 9
        )
        await topic.ledger.trim()
        assert topic.ledger.ledgers[0].ledger_id == ids[-1][0], "the older ledgers were trimmed"

        reader = await holder.raw()
        cmd = commands.subscribe(
            TOPIC,
            "reader",
            pb.CommandSubscribe.Exclusive,
            5,
            55,
            durable=False,
            start_message_id=commands.message_id(-1, -1),
        )
        cmd.subscribe.read_compacted = True
        assert (await request(reader, cmd, 55)).type == pb.BaseCommand.SUCCESS
        await reader.send(commands.flow(5, 100))
        got = [await _message(reader) for _ in range(2)]
        # b1 and a2, from ledgers that are gone: the compacted ledger still has them.
        assert [(m.message_id.ledgerId, m.message_id.entryId) for m in got] == [ids[1], ids[2]]
        assert await _no_message(reader)
    finally:
        await holder.close()


async def test_a_delayed_message_is_held_again_after_a_restart_until_its_time(
    tmp_path: Path,
) -> None:
    # The tracker lives in memory: after a restart the dispatcher meets the unacknowledged
    # message again when it re-reads the cursor, holds it again, and delivers it at its time.
    clock = ManualClock()
    holder = StackHolder(tmp_path / "b", broker_clock=clock, keep_alive_interval_seconds=86_400)
    await holder.start()
    try:
        raw = await holder.raw()
        await _producer(raw)
        await _subscribe(raw, 1, pb.CommandSubscribe.Shared, name="c")
        await raw.send(commands.flow(1, 100))
        due = clock.now_ms() + 60_000
        await _send(raw, 0, b"later", deliver_at_time=due)
        now = await _send(raw, 1, b"now")
        got = await _message(raw)
        assert got.message_id.entryId == now.message_id.entryId
        await raw.send(commands.ack(1, [got.message_id]))
        assert await _no_message(raw)

        await holder.restart()
        raw = await holder.raw()
        await _subscribe(raw, 1, pb.CommandSubscribe.Shared, name="c")
        await raw.send(commands.flow(1, 100))
        assert await _no_message(raw), "a delayed message was delivered early after a restart"
        clock.advance(59)
        assert await _no_message(raw), "a delayed message was delivered early after a restart"
        clock.advance(1)
        late = await _message(raw)
        assert late.message_id.entryId == now.message_id.entryId - 1
    finally:
        await holder.close()
