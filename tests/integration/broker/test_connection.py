"""The connection adapter: handshake, lookup answers, keep-alive on the injected clock, and
violations that cost only the offending connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.protocol import commands
from braid.protocol.frames import encode_command
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, publish, request

TOPIC = "persistent://public/default/conn"


@pytest.fixture
async def manual_clock_holder(tmp_path: Path) -> AsyncIterator[tuple[StackHolder, ManualClock]]:
    clock = ManualClock()
    h = StackHolder(tmp_path / "broker", broker_clock=clock, keep_alive_interval_seconds=30)
    await h.start()
    try:
        yield h, clock
    finally:
        await h.close()


async def test_handshake_announces_server_version_and_max_message_size(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    assert raw.connected is not None
    assert raw.connected.server_version.startswith("Braid")
    assert holder.stack is not None
    assert raw.connected.max_message_size == holder.stack.config.max_message_size


async def test_lookup_answers_with_this_broker_and_no_partitions(holder: StackHolder) -> None:
    raw = await holder.raw()
    lookup = await request(raw, commands.lookup(TOPIC, 1), 1)
    assert lookup.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect
    assert holder.stack is not None
    assert lookup.lookupTopicResponse.brokerServiceUrl == holder.stack.service.service_url
    assert lookup.lookupTopicResponse.authoritative
    meta = await request(raw, commands.partitioned_metadata(TOPIC, 2), 2)
    assert (
        meta.partitionMetadataResponse.response
        == pb.CommandPartitionedTopicMetadataResponse.Success
    )
    assert meta.partitionMetadataResponse.partitions == 0


async def test_segment_topics_are_served_like_persistent_ones_once_created(
    holder: StackHolder,
) -> None:
    raw = await holder.raw()
    segment = "segment://public/default/orders/0000-7fff-1"
    # A client never creates a segment: only the controller does, with its subscriptions'
    # cursors (ADR 0020), so the first producer is refused.
    refused = await request(raw, commands.producer(segment, 1, 1, producer_name="seg"), 1)
    assert refused.type == pb.BaseCommand.ERROR
    assert refused.error.error == pb.TopicNotFound
    assert holder.stack is not None
    await holder.stack.service.get_or_create_topic(segment, create=True)
    answer = await request(raw, commands.producer(segment, 1, 2, producer_name="seg"), 2)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS
    assert (await publish(raw, 1, "seg", 0)).type == pb.BaseCommand.SEND_RECEIPT
    assert holder.stack is not None
    assert await holder.stack.factory.exists("public/default/segment/orders/0000-7fff-1")


async def test_a_command_before_connect_closes_the_connection(holder: StackHolder) -> None:
    assert holder.stack is not None
    raw = await RawClient.open("127.0.0.1", holder.stack.service.port, handshake=False)
    await raw.send_raw(encode_command(commands.lookup(TOPIC, 1)))
    assert await raw.wait_closed(within=10)
    await raw.close()


async def test_garbage_on_one_connection_leaves_the_others_serving(holder: StackHolder) -> None:
    good = await holder.raw()
    await request(good, commands.producer(TOPIC, 1, 1, producer_name="good"), 1)
    assert holder.stack is not None
    bad = await RawClient.open("127.0.0.1", holder.stack.service.port)
    await bad.send_raw(b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4)
    assert await bad.wait_closed(within=10)
    await bad.close()
    assert (await publish(good, 1, "good", 0)).type == pb.BaseCommand.SEND_RECEIPT


async def test_a_silent_client_is_dropped_after_two_keepalive_intervals(
    manual_clock_holder: tuple[StackHolder, ManualClock],
) -> None:
    holder, clock = manual_clock_holder
    raw = await holder.raw()
    await eventually(lambda: clock.pending_timers > 0, message="the keep-alive timer")
    clock.advance(31)  # the broker pings; this client does not read, so never answers
    await eventually(lambda: clock.pending_timers > 0, message="the keep-alive timer again")
    clock.advance(30)
    assert await raw.wait_closed(within=10)


async def test_a_client_answering_pings_stays_connected(
    manual_clock_holder: tuple[StackHolder, ManualClock],
) -> None:
    holder, clock = manual_clock_holder
    raw = await holder.raw()
    for _ in range(3):
        await eventually(lambda: clock.pending_timers > 0, message="the keep-alive timer")
        clock.advance(31)
        # Reading lets the client's state machine answer the broker's PING with a PONG.
        with pytest.raises(TimeoutError):
            await raw.next_command(within=0.2)
    answer = await request(raw, commands.lookup(TOPIC, 3), 3)
    assert answer.type == pb.BaseCommand.LOOKUP_RESPONSE


async def test_broker_close_disconnects_clients(holder: StackHolder) -> None:
    raw = await holder.raw()
    assert holder.stack is not None
    await holder.stack.service.close()
    assert await asyncio.wait_for(raw.wait_closed(within=10), 15)
