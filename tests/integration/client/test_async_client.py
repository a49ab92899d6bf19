"""The asyncio client: the blocking semantics, awaitable, never raising synchronously."""

from __future__ import annotations

import asyncio

import pytest

import braid


async def test_async_round_trip_with_context_managers(
    aclient: braid.AsyncClient, topic: str
) -> None:
    async with (
        await aclient.create_producer(topic) as producer,
        await aclient.subscribe_stream(topic, "s", initial_position="earliest") as stream,
    ):
        ids = [await producer.send(b"v%d" % i, key="k") for i in range(3)]
        got = []
        async for message in stream:
            got.append(message)
            if len(got) == 3:
                break
        stream.acknowledge_cumulative(got[-1])
    assert [m.message_id for m in got] == ids
    assert producer.closed


async def test_send_async_enqueues_at_call_time_in_call_order(
    aclient: braid.AsyncClient, topic: str
) -> None:
    producer = await aclient.create_producer(topic)
    queue = await aclient.subscribe_queue(topic, "q", initial_position="earliest")
    futures = [producer.send_async(b"%d" % i) for i in range(500)]  # no await in between
    ids = await asyncio.gather(*futures)
    assert list(ids) == sorted(ids)
    got: list[braid.Message] = []
    while len(got) < 500:
        got += await queue.receive_many(500, timeout=10)
    assert [m.value for m in got] == [b"%d" % i for i in range(500)]


async def test_async_entry_points_never_raise_synchronously(
    aclient: braid.AsyncClient, topic: str
) -> None:
    producer = await aclient.create_producer(topic)
    bad = producer.send_async(12345)  # type: ignore[arg-type]
    with pytest.raises(braid.BraidError):
        await bad
    await producer.close()
    closed = producer.send_async(b"x")
    with pytest.raises(braid.AlreadyClosedError):
        await closed
    coroutine = aclient.create_producer("persistent://public/missing-ns/t")  # no raise yet
    with pytest.raises(braid.NotFoundError):
        await coroutine


async def test_queue_full_fails_send_async_and_send_waits(
    aclient: braid.AsyncClient, topic: str
) -> None:
    producer = await aclient.create_producer(topic, max_pending_messages=5, batching_max_delay=0.2)
    futures = [producer.send_async(b"x") for _ in range(5)]
    overflow = producer.send_async(b"overflow")
    with pytest.raises(braid.ProducerQueueFullError):
        await overflow
    assert await producer.send(b"waits for room")  # returns once earlier sends completed
    await asyncio.gather(*futures)


async def test_receive_timeout_returns_none(aclient: braid.AsyncClient, topic: str) -> None:
    consumer = await aclient.subscribe_queue(topic, "idle")
    assert await consumer.receive(timeout=0.05) is None
    assert await consumer.receive_many(3, timeout=0) == []
    with pytest.raises(braid.InvalidConfigurationError):
        await consumer.receive(timeout=-1)


async def test_checkpoint_bytes_and_message_ids_survive_serialization(
    aclient: braid.AsyncClient, topic: str
) -> None:
    producer = await aclient.create_producer(topic, batching=False)
    sent = await producer.send_many([b"%d" % i for i in range(6)])
    reader = await aclient.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    first = await reader.receive_many(3, timeout=10)
    while len(first) < 3:
        first += await reader.receive_many(3 - len(first), timeout=10)
    assert [m.message_id for m in first] == sent[:3]
    assert braid.MessageId.from_bytes(sent[2].to_bytes()) == sent[2]
    cp = braid.Checkpoint.from_bytes(reader.checkpoint().to_bytes())
    again = await aclient.create_checkpoint_consumer(topic, start=cp)
    rest = await again.receive_many(10, timeout=10)
    while len(rest) < 3:
        rest += await again.receive_many(10, timeout=10)
    assert [m.message_id for m in rest] == sent[3:]


async def test_acknowledging_by_message_id(aclient: braid.AsyncClient, topic: str) -> None:
    producer = await aclient.create_producer(topic, batching=False)
    queue = await aclient.subscribe_queue(topic, "by-id", initial_position="earliest")
    stream = await aclient.subscribe_stream(topic, "by-id-s", initial_position="earliest")
    await producer.send_many([b"a", b"b"])
    got = await queue.receive_many(2, timeout=10)
    while len(got) < 2:
        got += await queue.receive_many(2, timeout=10)
    for message in got:
        queue.acknowledge(message.message_id)
    ordered = await stream.receive_many(2, timeout=10)
    while len(ordered) < 2:
        ordered += await stream.receive_many(2, timeout=10)
    stream.acknowledge_cumulative(ordered[-1].message_id)
    with pytest.raises(braid.InvalidConfigurationError):
        queue.acknowledge(braid.MessageId.latest())


async def test_closing_the_client_closes_what_it_created(broker_url: str, topic: str) -> None:
    client = braid.AsyncClient(broker_url)
    producer = await client.create_producer(topic)
    consumer = await client.subscribe_queue(topic, "c")
    await client.close()
    await client.close()
    assert producer.closed and consumer.closed
    with pytest.raises(braid.AlreadyClosedError):
        await client.create_producer(topic)


async def test_a_message_is_acknowledged_only_by_its_own_consumer(
    aclient: braid.AsyncClient, topic: str
) -> None:
    producer = await aclient.create_producer(topic)
    first = await aclient.subscribe_stream(topic, "one", initial_position="earliest")
    second = await aclient.subscribe_stream(topic, "two", initial_position="earliest")
    queue = await aclient.subscribe_queue(topic, "three", initial_position="earliest")
    await producer.send(b"x")
    message = await first.receive(timeout=10)
    assert message is not None
    with pytest.raises(braid.InvalidConfigurationError):
        second.acknowledge_cumulative(message)
    with pytest.raises(braid.InvalidConfigurationError):
        queue.acknowledge(message)
    first.acknowledge_cumulative(message)
