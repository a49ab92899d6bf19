"""The official client keeps producing and consuming while other sockets misbehave.

Silent sockets and sockets trickling a CONNECT a byte at a time are closed at the handshake
deadline (before, every byte reset keep-alive and they stayed forever); connections over
``brokerMaxConnections`` are refused at once; and through all of it the official client's own
connection is served as usual.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from braid.protocol import FrameDecoder
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker

HANDSHAKE_S = 2
MAX_CONNECTIONS = 30


@pytest.fixture
def strict_broker(tmp_path: Path) -> Iterator[BackgroundBroker]:
    broker = BackgroundBroker(
        tmp_path / "strict",
        handshake_timeout_seconds=HANDSHAKE_S,
        broker_max_connections=MAX_CONNECTIONS,
    ).start()
    try:
        yield broker
    finally:
        broker.stop()


async def _trickle(writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
    """Send the start of a CONNECT one byte every 100 ms (a slowloris client)."""
    frame_start = b"\x00\x00\x01\x00\x00\x00\x00\xfc" + b"\x08" * 200
    for byte in frame_start:
        if stop.is_set() or writer.is_closing():
            return
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except ConnectionError:
            return
        await asyncio.sleep(0.1)  # the client's pace, not a wait for the broker


async def _closed_by_broker(reader: asyncio.StreamReader, within: float) -> tuple[bool, bytes]:
    data = b""
    try:
        async with asyncio.timeout(within):
            while True:
                try:
                    chunk = await reader.read(65536)
                except ConnectionError:
                    return True, data
                if not chunk:
                    return True, data
                data += chunk
    except TimeoutError:
        return False, data


async def _misbehave(port: int) -> dict[str, object]:
    stop = asyncio.Event()
    opened = time.monotonic()
    silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(10)]
    slow = [await asyncio.open_connection("127.0.0.1", port) for _ in range(10)]
    tricklers = [asyncio.ensure_future(_trickle(w, stop)) for _, w in slow]
    # Over the cap: 1 official + 20 here; 15 more leave 9 admitted and 6 refused.
    extra = [await asyncio.open_connection("127.0.0.1", port) for _ in range(15)]
    refused = 0
    for reader, _ in extra:
        closed, data = await _closed_by_broker(reader, within=0.5)
        if closed and data:
            [frame] = FrameDecoder().feed(data)
            assert frame.command.type == pb.BaseCommand.ERROR
            assert frame.command.error.error == pb.NotAllowedError
            refused += 1
    results = await asyncio.gather(
        *(_closed_by_broker(r, within=HANDSHAKE_S + 5) for r, _ in silent + slow + extra)
    )
    closed_after = time.monotonic() - opened
    stop.set()
    await asyncio.gather(*tricklers)
    for _, writer in silent + slow + extra:
        writer.close()
    return {
        "refused": refused,
        "all_closed": all(closed for closed, _ in results),
        "closed_after": closed_after,
    }


def test_official_client_is_served_while_silent_slow_and_excess_sockets_are_shut_out(
    strict_broker: BackgroundBroker,
) -> None:
    client = pulsar.Client(strict_broker.service_url, operation_timeout_seconds=10)
    try:
        topic = "persistent://public/default/hostile-neighbours"
        consumer = client.subscribe(topic, "steady")
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"before")
        outcome = asyncio.run(_misbehave(strict_broker.service.port))
        assert outcome["refused"] == 6, outcome
        assert outcome["all_closed"], outcome
        assert HANDSHAKE_S <= outcome["closed_after"] < HANDSHAKE_S + 5  # type: ignore[operator]
        producer.send(b"after")
        got = [consumer.receive(timeout_millis=10_000).data() for _ in range(2)]
        assert got == [b"before", b"after"]
        assert (
            strict_broker.run(lambda: strict_broker.service.connection_limits.open_connections) == 1
        )
    finally:
        client.close()
