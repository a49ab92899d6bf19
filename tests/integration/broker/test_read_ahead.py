"""Read ahead of the first FLOW: an Exclusive/Failover consumer attached without permits (a Stream
consumer's segment opened ahead, ADR 0043) has its first entries read before it asks for them, so
its first FLOW is answered from memory; nothing is sent before that FLOW, and what was read ahead
is delivered once, in order, whatever happens meanwhile (a partial FLOW, new entries, a seek, a
new consumer, an expiry)."""

from __future__ import annotations

from braid.broker.subscription import Subscription
from braid.ledger.api import Entry, Position
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, publish, request

TOPIC = "persistent://public/default/read-ahead"


async def _producer(raw: RawClient) -> None:
    answer = await request(raw, commands.producer(TOPIC, 1, 1, producer_name="p"), 1)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer


async def _subscribe(raw: RawClient, consumer_id: int, subscription: str) -> None:
    cmd = commands.subscribe(
        TOPIC,
        subscription,
        pb.CommandSubscribe.Exclusive,
        consumer_id,
        500 + consumer_id,
        initial_position=pb.CommandSubscribe.Earliest,
    )
    answer = await request(raw, cmd, 500 + consumer_id)
    assert answer.type == pb.BaseCommand.SUCCESS, answer


async def _entries(raw: RawClient, count: int) -> list[int]:
    found = []
    for _ in range(count):
        command = await raw.next_command(lambda c: c.type == pb.BaseCommand.MESSAGE, within=10)
        found.append(command.message.message_id.entryId)
    return found


async def _nothing_more(raw: RawClient) -> bool:
    try:
        await raw.next_command(lambda c: c.type == pb.BaseCommand.MESSAGE, within=0.3)
    except TimeoutError:
        return True
    return False


def _subscription(holder: StackHolder, name: str) -> Subscription:
    assert holder.stack is not None
    return holder.stack.service.topics[TOPIC].subscriptions[name]


async def _read_ahead(holder: StackHolder, name: str, past_entry: int) -> Subscription:
    """Wait until the subscription's dispatcher has read past ``past_entry`` (no permits)."""
    sub = _subscription(holder, name)
    await eventually(
        lambda: sub.cursor.read_position.entry_id > past_entry,
        message=lambda: f"a read ahead past entry {past_entry} ({sub.cursor.read_position})",
    )
    return sub


async def _published(raw: RawClient, count: int, first: int = 0) -> None:
    for seq in range(first, first + count):
        receipt = await publish(raw, 1, "p", seq)
        assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt


async def _consumer_read_ahead(
    holder: StackHolder, subscription: str, published: int
) -> tuple[RawClient, Subscription]:
    """``published`` entries, then consumer 1 subscribed to ``subscription`` without permits;
    returns once its dispatcher has read all of them ahead."""
    raw = await holder.raw()
    await _producer(raw)
    await _published(raw, published)
    await _subscribe(raw, 1, subscription)
    return raw, await _read_ahead(holder, subscription, past_entry=published - 1)


async def test_a_consumer_without_permits_has_its_first_entries_read_but_not_sent(
    holder: StackHolder,
) -> None:
    raw, _ = await _consumer_read_ahead(holder, "ahead", published=3)
    assert await _nothing_more(raw), "an entry was sent before the consumer's FLOW"
    await raw.send(commands.flow(1, 10))
    assert await _entries(raw, 3) == [0, 1, 2]
    assert await _nothing_more(raw)


async def test_what_a_first_small_flow_leaves_of_the_read_ahead_goes_on_the_next_flow(
    holder: StackHolder,
) -> None:
    raw, _ = await _consumer_read_ahead(holder, "partial", published=5)
    await raw.send(commands.flow(1, 2))
    assert await _entries(raw, 2) == [0, 1]
    assert await _nothing_more(raw), "more entries than permits"
    await raw.send(commands.flow(1, 10))
    assert await _entries(raw, 3) == [2, 3, 4]
    await _published(raw, 1, first=5)
    assert await _entries(raw, 1) == [5]
    assert await _nothing_more(raw), "an entry read ahead was sent twice"


async def test_a_seek_back_after_a_read_ahead_delivers_from_the_seek_position(
    holder: StackHolder,
) -> None:
    raw, sub = await _consumer_read_ahead(holder, "seek", published=3)
    await raw.send(commands.flow(1, 1))
    assert await _entries(raw, 1) == [0]
    ack = pb.CommandAck(consumer_id=1, ack_type=pb.CommandAck.Cumulative, request_id=3)
    ack.message_id.add().CopyFrom(commands.message_id(sub.cursor.read_position.ledger_id, 0))
    assert (await request(raw, commands.wrap(ack), 3)).type == pb.BaseCommand.ACK_RESPONSE
    await sub.reset_cursor(Position(sub.cursor.read_position.ledger_id, 0))
    await raw.next_command(lambda c: c.type == pb.BaseCommand.CLOSE_CONSUMER)
    await _subscribe(raw, 2, "seek")
    await raw.send(commands.flow(2, 10))
    assert await _entries(raw, 3) == [0, 1, 2]
    assert await _nothing_more(raw)


async def test_the_next_consumer_gets_what_was_read_ahead_for_one_that_left(
    holder: StackHolder,
) -> None:
    raw, _ = await _consumer_read_ahead(holder, "handover", published=3)
    closed = await request(
        raw, commands.wrap(pb.CommandCloseConsumer(consumer_id=1, request_id=9)), 9
    )
    assert closed.type == pb.BaseCommand.SUCCESS
    await _subscribe(raw, 2, "handover")
    await raw.send(commands.flow(2, 10))
    assert await _entries(raw, 3) == [0, 1, 2]
    assert await _nothing_more(raw)


async def test_entries_read_ahead_and_expired_before_the_flow_are_not_delivered(
    holder: StackHolder,
) -> None:
    raw, sub = await _consumer_read_ahead(holder, "expiry", published=3)
    assert await sub.expire_up_to(Position(sub.cursor.read_position.ledger_id, 1))
    await raw.send(commands.flow(1, 10))
    assert await _entries(raw, 1) == [2]
    assert await _nothing_more(raw)


async def test_a_sealed_topic_ends_with_its_last_entries_without_one_more_read(
    holder: StackHolder,
) -> None:
    """The end-of-topic notice leaves in the round that sends the last entries: a draining
    Stream consumer's acknowledgment waits for it (ADR 0068), so one more (empty) read before
    it is a hop on every hand-over."""
    raw = await holder.raw()
    await _producer(raw)
    await _published(raw, 3)
    assert holder.stack is not None
    await holder.stack.service.terminate_topic(TOPIC)
    await _subscribe(raw, 1, "sealed")
    sub = await _read_ahead(holder, "sealed", past_entry=2)
    reads: list[int] = []
    read_entries = sub.cursor.read_entries

    async def counted(max_entries: int) -> list[Entry]:
        reads.append(max_entries)
        return await read_entries(max_entries)

    sub.cursor.read_entries = counted  # type: ignore[method-assign]
    await raw.send(commands.flow(1, 10))
    wanted = (pb.BaseCommand.MESSAGE, pb.BaseCommand.REACHED_END_OF_TOPIC)
    got = [(await raw.next_command(lambda c: c.type in wanted, within=10)) for _ in range(4)]
    assert [c.type for c in got] == [pb.BaseCommand.MESSAGE] * 3 + [
        pb.BaseCommand.REACHED_END_OF_TOPIC
    ]
    assert reads == [], f"the notice waited for {len(reads)} more read(s)"
