"""Producer access modes: Shared, Exclusive, ExclusiveWithFencing, WaitForExclusive."""

from __future__ import annotations

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.raw_client import RawClient, publish, request

TOPIC = "persistent://public/default/access"


async def _create(
    raw: RawClient, producer_id: int, name: str, mode: pb.ProducerAccessMode.ValueType
) -> pb.BaseCommand:
    cmd = commands.producer(TOPIC, producer_id, 1000 + producer_id, producer_name=name)
    cmd.producer.producer_access_mode = mode
    return await request(raw, cmd, 1000 + producer_id)


async def test_shared_producers_coexist(holder: StackHolder) -> None:
    raw = await holder.raw()
    assert (await _create(raw, 1, "a", pb.Shared)).type == pb.BaseCommand.PRODUCER_SUCCESS
    assert (await _create(raw, 2, "b", pb.Shared)).type == pb.BaseCommand.PRODUCER_SUCCESS


async def test_exclusive_producer_is_refused_while_shared_ones_exist(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _create(raw, 1, "shared", pb.Shared)
    refused = await _create(raw, 2, "exclusive", pb.Exclusive)
    assert refused.type == pb.BaseCommand.ERROR
    assert refused.error.error == pb.ProducerBusy


async def test_second_producer_is_fenced_by_an_exclusive_one(holder: StackHolder) -> None:
    raw = await holder.raw()
    assert (await _create(raw, 1, "owner", pb.Exclusive)).type == pb.BaseCommand.PRODUCER_SUCCESS
    for producer_id, mode in ((2, pb.Shared), (3, pb.Exclusive)):
        refused = await _create(raw, producer_id, f"other-{producer_id}", mode)
        assert refused.type == pb.BaseCommand.ERROR
        assert refused.error.error == pb.ProducerFenced
        assert "owner" in refused.error.message


async def test_exclusive_with_fencing_closes_the_previous_producers(holder: StackHolder) -> None:
    old = await holder.raw()
    await _create(old, 1, "old", pb.Shared)
    new = await holder.raw()
    assert (
        await _create(new, 1, "new", pb.ExclusiveWithFencing)
    ).type == pb.BaseCommand.PRODUCER_SUCCESS
    closed = await old.next_command(lambda c: c.type == pb.BaseCommand.CLOSE_PRODUCER)
    assert closed.close_producer.producer_id == 1
    # The fenced producer cannot come back while the new one holds the topic.
    again = await _create(old, 2, "old", pb.Shared)
    assert again.type == pb.BaseCommand.ERROR
    assert again.error.error == pb.ProducerFenced
    stored = await publish(new, 1, "new", 0)
    assert stored.type == pb.BaseCommand.SEND_RECEIPT


async def test_wait_for_exclusive_gets_the_topic_when_the_holder_leaves(
    holder: StackHolder,
) -> None:
    holder_conn = await holder.raw()
    await _create(holder_conn, 1, "first", pb.Shared)
    waiter = await holder.raw()
    cmd = commands.producer(TOPIC, 7, 77, producer_name="waiter")
    cmd.producer.producer_access_mode = pb.WaitForExclusive
    await waiter.send(cmd)
    pending = await waiter.next_command(
        lambda c: c.type in (pb.BaseCommand.PRODUCER_SUCCESS, pb.BaseCommand.ERROR)
    )
    assert pending.type == pb.BaseCommand.PRODUCER_SUCCESS
    assert pending.producer_success.producer_ready is False
    try:
        early: pb.BaseCommand | None = await waiter.next_command(
            lambda c: c.type in (pb.BaseCommand.PRODUCER_SUCCESS, pb.BaseCommand.ERROR), within=0.3
        )
    except TimeoutError:
        early = None
    assert early is None, "the waiter got the topic while another producer held it"
    closed = await request(
        holder_conn, commands.wrap(pb.CommandCloseProducer(producer_id=1, request_id=5)), 5
    )
    assert closed.type == pb.BaseCommand.SUCCESS
    ready = await waiter.next_command(
        lambda c: c.type in (pb.BaseCommand.PRODUCER_SUCCESS, pb.BaseCommand.ERROR)
    )
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS
    assert ready.producer_success.producer_ready is True
    assert (await publish(waiter, 7, "waiter", 0)).type == pb.BaseCommand.SEND_RECEIPT


async def test_producer_name_in_use_is_refused(holder: StackHolder) -> None:
    raw = await holder.raw()
    await _create(raw, 1, "twin", pb.Shared)
    refused = await _create(raw, 2, "twin", pb.Shared)
    assert refused.type == pb.BaseCommand.ERROR
    assert refused.error.error == pb.ProducerBusy
