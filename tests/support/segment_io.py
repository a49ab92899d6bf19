"""Produce to and drain segment topics over the wire, for controller and coordinator tests.

A thin layer over :class:`~tests.support.raw_client.RawClient`: :func:`produce` publishes keyed
messages to one segment topic, :func:`drain` subscribes (Exclusive, earliest), reads everything
up to the topic's end and acknowledges it cumulatively — what a stream consumer does to a sealed
segment before the controller hands it the children.
"""

from __future__ import annotations

import itertools

from braid.protocol import commands
from braid.protocol.frames import decode_message_body, encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.raw_client import RawClient, request

_ids = itertools.count(1000)


async def produce(
    raw: RawClient,
    topic: str,
    payloads: list[bytes],
    *,
    key: str = "k",
    keys: list[str] | None = None,
    publish_time_ms: int = 1_700_000_000_000,
    producer_name: str | None = None,
) -> None:
    """Publish ``payloads`` to ``topic`` (each one entry) and wait for every receipt; message
    ``i`` carries ``keys[i]`` when given, else ``key``; sequence ids count from 0."""
    producer_id, request_id = next(_ids), next(_ids)
    name = producer_name or f"p{producer_id}"
    answer = await request(
        raw,
        commands.producer(topic, producer_id, request_id, producer_name=name),
        request_id,
    )
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer
    for sequence_id, payload in enumerate(payloads):
        meta = pb.MessageMetadata(
            producer_name=name,
            sequence_id=sequence_id,
            publish_time=publish_time_ms,
            partition_key=key if keys is None else keys[sequence_id],
        )
        await raw.send(commands.send(producer_id, sequence_id), encode_message_body(meta, payload))
        receipt = await raw.next_command(
            lambda c: c.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)
        )
        assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
    closing = next(_ids)
    await request(raw, commands.close_producer(producer_id, closing), closing)


async def last_sequence_id(raw: RawClient, topic: str, producer_name: str) -> int:
    """What PRODUCER_SUCCESS tells ``producer_name`` to continue from on ``topic``."""
    producer_id, request_id = next(_ids), next(_ids)
    answer = await request(
        raw,
        commands.producer(topic, producer_id, request_id, producer_name=producer_name),
        request_id,
    )
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer
    closing = next(_ids)
    await request(raw, commands.close_producer(producer_id, closing), closing)
    return answer.producer_success.last_sequence_id


async def drain(raw: RawClient, topic: str, subscription: str, expected: int) -> list[bytes]:
    """Read ``expected`` messages of ``topic`` on ``subscription`` and ack them cumulatively."""
    consumer_id, request_id = next(_ids), next(_ids)
    answer = await request(
        raw,
        commands.subscribe(
            topic,
            subscription,
            pb.CommandSubscribe.Exclusive,
            consumer_id,
            request_id,
            initial_position=pb.CommandSubscribe.Earliest,
        ),
        request_id,
    )
    assert answer.type == pb.BaseCommand.SUCCESS, answer
    received: list[bytes] = []
    last: pb.MessageIdData | None = None
    if expected:
        await raw.send(commands.flow(consumer_id, expected))
        while len(received) < expected:
            event = await raw.next_event(lambda c: c.type == pb.BaseCommand.MESSAGE)
            assert event.body is not None
            _, payload = decode_message_body(event.body)
            received.append(payload)
            last = event.command.message.message_id
        assert last is not None
        ack = pb.CommandAck(consumer_id=consumer_id, ack_type=pb.CommandAck.Cumulative)
        ack.message_id.add().CopyFrom(last)
        await raw.send(commands.wrap(ack))
    closing = next(_ids)
    await request(raw, commands.close_consumer(consumer_id, closing), closing)
    return received
