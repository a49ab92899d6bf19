"""Poison SENDs never reach the official consumer, which keeps receiving the good messages.

Before the broker checked SEND bodies, an entry whose metadata did not parse made the official C++
client (the PyPI ``pulsar-client``) reconnect in a loop without receiving anything after it, and a
batch whose ``num_messages_in_batch`` lied made it read past its buffer and crash the process.
Here a raw producer sends every kind of poison between the official producer's messages, and the
official consumer - in this very process, so a crash would fail the run - receives every good
message in order and nothing else.
"""

from __future__ import annotations

import asyncio

import pulsar

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker
from tests.support.poison import poison_bodies
from tests.support.raw_client import RawClient, message_body, request


async def _raw_producer_sends(port: int, topic: str, max_message_size: int) -> list[pb.BaseCommand]:
    raw = await RawClient.open("127.0.0.1", port)
    ready = await request(raw, commands.producer(topic, 1, 1, producer_name="raw-poison"), 1)
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS, ready
    bodies = poison_bodies("raw-poison", 0, max_message_size)
    bodies.append(message_body("raw-poison", len(bodies), b"raw-good"))
    answers = []
    for seq, body in enumerate(bodies):
        await raw.send(commands.send(1, seq), body)
        answers.append(
            await raw.next_command(
                lambda c: c.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)
            )
        )
    await raw.close()
    return answers


def test_official_consumer_keeps_receiving_good_messages_after_poison_sends(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "survivor", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=5)
    for i in range(10):
        producer.send_async(f"before-{i}".encode(), None)
    producer.flush()

    answers = asyncio.run(
        _raw_producer_sends(broker.service.port, topic, broker.stack.config.max_message_size)
    )
    assert [a.type for a in answers[:-1]] == [pb.BaseCommand.SEND_ERROR] * (len(answers) - 1)
    assert {a.send_error.error for a in answers[:-1]} == {pb.ChecksumError}
    assert answers[-1].type == pb.BaseCommand.SEND_RECEIPT

    for i in range(10):
        producer.send(f"after-{i}".encode())
    got = []
    for _ in range(21):
        message = consumer.receive(timeout_millis=10_000)
        got.append(message.data())
        consumer.acknowledge(message)
    assert got == [
        *(f"before-{i}".encode() for i in range(10)),
        b"raw-good",
        *(f"after-{i}".encode() for i in range(10)),
    ]
    try:
        extra = consumer.receive(timeout_millis=300)
    except pulsar.Timeout:
        extra = None
    assert extra is None, extra.data()
