"""Subscriptions at the protocol level: permits, acks, unsubscribe, end of topic, failover
notifications, seek, restart."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from braid.broker.errors import TopicBusy
from braid.broker.resources import AutoTopicCreationOverride
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.held_writes import HeldWrites
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, publish, request

TOPIC = "persistent://public/default/dispatch"


async def _producer(raw: RawClient, name: str = "p", topic: str = TOPIC) -> None:
    answer = await request(raw, commands.producer(topic, 1, 1, producer_name=name), 1)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer


async def _subscribe(
    raw: RawClient,
    consumer_id: int,
    subscription: str,
    sub_type: pb.CommandSubscribe.SubType.ValueType = pb.CommandSubscribe.Exclusive,
    *,
    name: str | None = None,
    topic: str = TOPIC,
) -> pb.BaseCommand:
    cmd = commands.subscribe(
        topic,
        subscription,
        sub_type,
        consumer_id,
        500 + consumer_id,
        consumer_name=name,
        initial_position=pb.CommandSubscribe.Earliest,
    )
    return await request(raw, cmd, 500 + consumer_id)


async def _message(raw: RawClient, within: float = 10.0) -> pb.CommandMessage:
    return (
        await raw.next_command(lambda c: c.type == pb.BaseCommand.MESSAGE, within=within)
    ).message


async def _no_message(raw: RawClient, within: float = 0.3) -> bool:
    try:
        await raw.next_command(lambda c: c.type == pb.BaseCommand.MESSAGE, within=within)
    except TimeoutError:
        return True
    return False


async def test_permits_are_counted_in_messages_of_a_batch(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _producer(raw)
    await publish(raw, 1, "p", 0, num_messages=5)
    await publish(raw, 1, "p", 5, num_messages=5)
    assert (await _subscribe(raw, 1, "batches")).type == pb.BaseCommand.SUCCESS
    await raw.send(commands.flow(1, 5))
    first = await _message(raw)
    assert first.message_id.entryId == 0
    assert await _no_message(raw), "a 5-message batch used up 5 permits"
    await raw.send(commands.flow(1, 5))
    assert (await _message(raw)).message_id.entryId == 1


async def test_delivered_payload_is_the_stored_body_with_a_valid_checksum(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    await _producer(raw)
    await publish(raw, 1, "p", 0, b"exact bytes")
    await _subscribe(raw, 1, "body")
    await raw.send(commands.flow(1, 10))
    event = await raw.next_event(lambda c: c.type == pb.BaseCommand.MESSAGE)
    assert event.checksum_valid is True
    assert event.body is not None and event.body.endswith(b"exact bytes")


async def test_ack_with_a_request_id_gets_an_ack_response(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _producer(raw)
    await publish(raw, 1, "p", 0)
    await _subscribe(raw, 1, "receipts")
    await raw.send(commands.flow(1, 10))
    msg = await _message(raw)
    ack = pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Individual, request_id=42)
    ack.message_id.add().CopyFrom(msg.message_id)
    await raw.send(commands.wrap(ack))
    answer = await raw.next_command(lambda c: c.type == pb.BaseCommand.ACK_RESPONSE)
    assert answer.ackResponse.request_id == 42
    assert not answer.ackResponse.HasField("error")
    assert holder.stack is not None
    sub = holder.stack.service.topics[TOPIC].subscriptions["receipts"]
    assert sub.cursor.backlog() == 0


async def test_unsubscribe_is_refused_while_other_consumers_are_attached(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    await _subscribe(raw, 1, "shared", pb.CommandSubscribe.Shared)
    await _subscribe(raw, 2, "shared", pb.CommandSubscribe.Shared)
    refused = await request(
        raw, commands.wrap(pb.CommandUnsubscribe(consumer_id=1, request_id=9)), 9
    )
    assert refused.type == pb.BaseCommand.ERROR
    assert refused.error.error == pb.ConsumerBusy
    closed = await request(
        raw, commands.wrap(pb.CommandCloseConsumer(consumer_id=2, request_id=10)), 10
    )
    assert closed.type == pb.BaseCommand.SUCCESS
    done = await request(
        raw, commands.wrap(pb.CommandUnsubscribe(consumer_id=1, request_id=11)), 11
    )
    assert done.type == pb.BaseCommand.SUCCESS
    assert holder.stack is not None
    topic = holder.stack.service.topics[TOPIC]
    assert "shared" not in topic.subscriptions
    assert "shared" not in topic.ledger.cursors


async def test_a_client_that_can_take_it_is_told_the_topic_ended(holder: StackHolder) -> None:
    raw = await holder.raw()  # not a C++ client: REACHED_END_OF_TOPIC is allowed
    await _producer(raw)
    await publish(raw, 1, "p", 0)
    await _subscribe(raw, 1, "end")
    await raw.send(commands.flow(1, 10))
    await _message(raw)
    assert holder.stack is not None
    await holder.stack.service.terminate_topic(TOPIC)
    ended = await raw.next_command(lambda c: c.type == pb.BaseCommand.REACHED_END_OF_TOPIC)
    assert ended.reachedEndOfTopic.consumer_id == 1


async def test_failover_consumers_are_told_who_is_active(holder: StackHolder) -> None:
    b = await holder.raw()
    await _subscribe(b, 1, "fo", pb.CommandSubscribe.Failover, name="b")
    change = await b.next_command(lambda c: c.type == pb.BaseCommand.ACTIVE_CONSUMER_CHANGE)
    assert change.active_consumer_change.is_active is True
    a = await holder.raw()
    await _subscribe(a, 1, "fo", pb.CommandSubscribe.Failover, name="a")
    assert (
        await a.next_command(lambda c: c.type == pb.BaseCommand.ACTIVE_CONSUMER_CHANGE)
    ).active_consumer_change.is_active
    demoted = await b.next_command(lambda c: c.type == pb.BaseCommand.ACTIVE_CONSUMER_CHANGE)
    assert demoted.active_consumer_change.is_active is False
    c = await holder.raw()
    await _subscribe(c, 1, "fo", pb.CommandSubscribe.Failover, name="c")
    standby = await c.next_command(lambda cmd: cmd.type == pb.BaseCommand.ACTIVE_CONSUMER_CHANGE)
    assert standby.active_consumer_change.is_active is False


async def test_seek_closes_the_consumer_and_resets_the_cursor(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _producer(raw)
    for seq in range(3):
        await publish(raw, 1, "p", seq)
    await _subscribe(raw, 1, "seek")
    seek = pb.CommandSeek(consumer_id=1, request_id=77)
    seek.message_id.CopyFrom(commands.message_id(0, 1))
    assert holder.stack is not None
    first_ledger = holder.stack.service.topics[TOPIC].ledger.last_confirmed_position.ledger_id
    seek.message_id.ledgerId = first_ledger
    await raw.send(commands.wrap(seek))
    closed = await raw.next_command(lambda c: c.type == pb.BaseCommand.CLOSE_CONSUMER)
    assert closed.close_consumer.consumer_id == 1
    answer = await raw.next_command(
        lambda c: c.type in (pb.BaseCommand.SUCCESS, pb.BaseCommand.ERROR)
    )
    assert answer.type == pb.BaseCommand.SUCCESS
    # The client re-subscribes and continues at the seek position.
    await _subscribe(raw, 1, "seek")
    await raw.send(commands.flow(1, 10))
    assert (await _message(raw)).message_id.entryId == 1


async def test_consumer_resumes_from_its_cursor_after_a_restart(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _producer(raw)
    for seq in range(6):
        await publish(raw, 1, "p", seq)
    await _subscribe(raw, 1, "durable")
    await raw.send(commands.flow(1, 10))
    msgs = [await _message(raw) for _ in range(6)]
    ack = pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Cumulative, request_id=3)
    ack.message_id.add().CopyFrom(msgs[3].message_id)
    await raw.send(commands.wrap(ack))
    await raw.next_command(lambda c: c.type == pb.BaseCommand.ACK_RESPONSE)

    await holder.restart()
    raw = await holder.raw()
    await _subscribe(raw, 1, "durable")
    await raw.send(commands.flow(1, 10))
    assert (await _message(raw)).message_id.entryId == msgs[4].message_id.entryId


async def test_producer_on_a_missing_topic_is_refused_when_auto_creation_is_off(
    holder: StackHolder,
) -> None:
    assert holder.stack is not None
    await holder.stack.resources.update_namespace_policies(
        "public",
        "default",
        lambda p: dataclasses.replace(
            p, auto_topic_creation=AutoTopicCreationOverride(allow_auto_topic_creation=False)
        ),
    )
    raw = await holder.raw()
    refused = await request(raw, commands.producer(TOPIC + "-absent", 1, 1), 1)
    assert refused.type == pb.BaseCommand.ERROR
    assert refused.error.error == pb.TopicNotFound
    assert "auto topic creation is disabled" in refused.error.message


async def test_a_forced_delete_of_a_topic_closes_its_producers_and_removes_its_data(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    await _producer(raw)
    await publish(raw, 1, "p", 0)
    assert holder.stack is not None
    with pytest.raises(TopicBusy, match="1 connected producer"):
        await holder.stack.service.delete_topic(TOPIC)  # in use: refused without force
    await holder.stack.service.delete_topic(TOPIC, force=True)
    closed = await raw.next_command(lambda c: c.type == pb.BaseCommand.CLOSE_PRODUCER)
    assert closed.close_producer.producer_id == 1
    assert TOPIC not in holder.stack.service.topics
    assert not await holder.stack.factory.exists("public/default/persistent/dispatch")


async def test_consumer_stats_answer_with_the_consumer_books(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _subscribe(raw, 1, "stats", name="counted")
    await raw.send(commands.flow(1, 25))
    stats = await request(
        raw, commands.wrap(pb.CommandConsumerStats(request_id=8, consumer_id=1)), 8
    )
    assert stats.consumerStatsResponse.consumerName == "counted"
    assert stats.consumerStatsResponse.availablePermits == 25


async def test_unsupported_commands_are_answered_with_not_allowed(holder: StackHolder) -> None:
    raw = await holder.raw()
    answer = await request(raw, commands.wrap(pb.CommandNewTxn(request_id=5)), 5)
    assert answer.type == pb.BaseCommand.ERROR
    assert answer.error.error == pb.NotAllowedError


async def test_reader_cursors_left_by_a_stop_are_removed_when_the_topic_loads(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    cmd = commands.subscribe(TOPIC, "reader-1", pb.CommandSubscribe.Exclusive, 1, 2)
    cmd.subscribe.durable = False
    assert (await request(raw, cmd, 2)).type == pb.BaseCommand.SUCCESS
    assert holder.stack is not None
    cursors = holder.stack.service.topics[TOPIC].ledger.cursors
    assert [name for name in cursors if "reader-1" in name] == ["braid.reader.reader-1"]

    await holder.restart()
    assert holder.stack is not None
    topic = await holder.stack.service.get_or_create_topic(TOPIC)
    assert not [name for name in topic.ledger.cursors if name.startswith("braid.reader.")]
    assert "reader-1" not in topic.subscriptions


async def test_a_consumer_taking_over_starts_where_the_acks_are_on_disk(
    holder: StackHolder,
) -> None:
    # The first consumer's ack counts in memory at once and is written a moment later. Its
    # successor must not start before the write lands: a crash would take the ack back and
    # replay the predecessor's messages to the successor after the ones it already had.
    assert holder.stack is not None
    first, second = await holder.raw(), await holder.raw()
    await _producer(first)
    for seq in range(6):
        await publish(first, 1, "p", seq)
    await _subscribe(first, 1, "takeover")
    await first.send(commands.flow(1, 10))
    msgs = [await _message(first) for _ in range(6)]
    sub = holder.stack.service.topics[TOPIC].subscriptions["takeover"]
    held = HeldWrites(sub.cursor)
    try:
        ack = pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Cumulative)
        ack.message_id.add().CopyFrom(msgs[3].message_id)
        await first.send(commands.wrap(ack))
        await eventually(lambda: held.writing, message="the ack's write under way")
        await request(first, commands.close_consumer(1, 90), 90)
        attach = asyncio.ensure_future(_subscribe(second, 2, "takeover"))
        await eventually(lambda: attach.done() or held.awaited, message="the attach")
        assert not attach.done()  # waits for the write
    finally:
        held.release()
    assert (await attach).type == pb.BaseCommand.SUCCESS
    assert sub.cursor.state_written
    await second.send(commands.flow(2, 10))
    assert (await _message(second)).message_id.entryId == msgs[4].message_id.entryId
