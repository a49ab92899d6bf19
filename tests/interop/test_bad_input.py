"""Bad input gets a clear, typed refusal and only ever costs the offending connection.

Raw sockets send garbage, oversize frames, corrupt checksums and bad names, while the official
client keeps producing and consuming on its own connection.
"""

from __future__ import annotations

import asyncio
import random

import pulsar
import pytest

from braid.protocol import commands
from braid.protocol.frames import encode_message_body, encode_payload_command
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker
from tests.support.raw_client import RawClient


def _garbage_samples() -> list[tuple[bool, bytes]]:
    """(handshake first?, bytes) pairs: random noise, a lying size, a bad command, junk.

    Each sample holds at least one frame header, so the broker can tell it is not a frame (a lone
    partial header is indistinguishable from a slow client; the keep-alive timeout handles that).
    """
    rng = random.Random(5)
    samples = [(False, bytes(rng.getrandbits(8) for _ in range(n))) for n in (8, 64, 4096)]
    samples += [(True, bytes(rng.getrandbits(8) for _ in range(n))) for n in (9, 512)]
    samples.append((False, b"GET / HTTP/1.1\r\nHost: braid\r\n\r\n"))
    samples.append((True, (12).to_bytes(4, "big") + (8).to_bytes(4, "big") + b"\xff" * 8))
    return samples


async def _send_garbage(port: int) -> list[bool]:
    closed = []
    for handshake, data in _garbage_samples():
        raw = await RawClient.open("127.0.0.1", port, handshake=handshake)
        await raw.send_raw(data)
        closed.append(await raw.wait_closed(within=10))
        await raw.close()
    return closed


def test_garbage_closes_only_that_connection_while_a_client_keeps_producing(
    broker: BackgroundBroker, client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "survivor")
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(50):
        producer.send(f"before-{i}".encode())
    closed = asyncio.run(_send_garbage(broker.service.port))
    assert all(closed), closed
    for i in range(50):
        producer.send(f"after-{i}".encode())
    got = [consumer.receive(timeout_millis=10_000).data() for _ in range(100)]
    assert got == [f"before-{i}".encode() for i in range(50)] + [
        f"after-{i}".encode() for i in range(50)
    ]


async def _oversize(port: int) -> tuple[int | None, bool]:
    raw = await RawClient.open("127.0.0.1", port)
    assert raw.connected is not None
    advertised = raw.connected.max_message_size
    # A frame announcing 64 MiB is refused from its header, before any of it is buffered.
    await raw.send_raw((64 << 20).to_bytes(4, "big") + (4).to_bytes(4, "big"))
    closed = await raw.wait_closed()
    await raw.close()
    return advertised, closed


def test_oversize_frame_is_refused_by_closing_the_connection(broker: BackgroundBroker) -> None:
    advertised, closed = asyncio.run(_oversize(broker.service.port))
    assert advertised == broker.stack.config.max_message_size
    assert closed


def test_unknown_namespace_is_topic_not_found_for_the_official_client(
    client: pulsar.Client,
) -> None:
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://public/nope/orders")
    with pytest.raises(pulsar.TopicNotFound):
        client.subscribe("persistent://nobody/default/orders", "s")


async def _lookup(port: int, topic: str) -> pb.CommandLookupTopicResponse:
    raw = await RawClient.open("127.0.0.1", port)
    await raw.send(commands.lookup(topic, 1))
    cmd = await raw.next_command(lambda c: c.type == pb.BaseCommand.LOOKUP_RESPONSE)
    await raw.close()
    return cmd.lookupTopicResponse


def test_unknown_namespace_lookup_names_the_namespace(broker: BackgroundBroker) -> None:
    response = asyncio.run(_lookup(broker.service.port, "persistent://public/nope/orders"))
    assert response.response == pb.CommandLookupTopicResponse.Failed
    assert response.error == pb.TopicNotFound
    assert response.message == "namespace public/nope does not exist"


@pytest.mark.parametrize(
    "name",
    ["topic://public/default/scalable", "persistent://public/default/a/b", "nonsense://x/y/z"],
)
def test_unservable_topic_names_are_refused_as_invalid(broker: BackgroundBroker, name: str) -> None:
    response = asyncio.run(_lookup(broker.service.port, name))
    assert response.response == pb.CommandLookupTopicResponse.Failed
    assert response.error == pb.InvalidTopicName
    assert response.message


async def _corrupt_send(port: int, topic: str) -> tuple[pb.BaseCommand, pb.BaseCommand]:
    raw = await RawClient.open("127.0.0.1", port)
    await raw.send(commands.producer(topic, 1, 1, producer_name="raw-producer"))
    ready = await raw.next_command(
        lambda c: c.type in (pb.BaseCommand.PRODUCER_SUCCESS, pb.BaseCommand.ERROR)
    )
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS, ready
    meta = pb.MessageMetadata(producer_name="raw-producer", sequence_id=0, publish_time=1)
    body = encode_message_body(meta, b"payload")
    frame = bytearray(encode_payload_command(commands.send(1, 0), body))
    frame[-1] ^= 0xFF  # corrupt the payload after the checksum was computed
    await raw.send_raw(bytes(frame))
    refused = await raw.next_command(
        lambda c: c.type in (pb.BaseCommand.SEND_ERROR, pb.BaseCommand.SEND_RECEIPT)
    )
    # The connection stays usable: the same message, intact, is stored.
    await raw.send(commands.send(1, 0), body)
    stored = await raw.next_command(
        lambda c: c.type in (pb.BaseCommand.SEND_ERROR, pb.BaseCommand.SEND_RECEIPT)
    )
    await raw.close()
    return refused, stored


def test_checksum_mismatch_gets_checksum_error_and_the_connection_stays_open(
    broker: BackgroundBroker, topic: str
) -> None:
    refused, stored = asyncio.run(_corrupt_send(broker.service.port, topic))
    assert refused.type == pb.BaseCommand.SEND_ERROR
    assert refused.send_error.error == pb.ChecksumError
    assert stored.type == pb.BaseCommand.SEND_RECEIPT
    assert stored.send_receipt.sequence_id == 0
