"""Slow, silent, greedy and vanished clients cost the broker little, and never other clients.

* A connection must complete CONNECT within ``handshakeTimeoutSeconds`` however many bytes it
  trickles in (time is a ``ManualClock`` here: the test advances it instead of sleeping).
* Before CONNECT a frame may not be larger than a CONNECT, so nothing big is buffered for a
  stranger.
* ``brokerMaxConnections`` / ``brokerMaxConnectionsPerIp`` refuse connections over the caps with
  ERROR NotAllowed while the connected clients keep working.
* A closed connection is freed by reference counting alone - its half-received frame included -
  not whenever the cycle collector runs.
"""

from __future__ import annotations

import asyncio
import gc
import struct
import weakref
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.protocol import FrameDecoder, commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BrokerStack, open_broker_stack
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, publish, request

TOPIC = "persistent://public/default/hardening"


@pytest.fixture
async def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def stack(tmp_path: Path, clock: ManualClock) -> AsyncIterator[BrokerStack]:
    stack = await open_broker_stack(
        tmp_path / "broker",
        broker_clock=clock,
        handshake_timeout_seconds=5,
        keep_alive_interval_seconds=30,
        broker_max_connections=6,
        broker_max_connections_per_ip=4,
    )
    try:
        yield stack
    finally:
        await stack.close()


async def _open_raw(port: int, local_ip: str = "127.0.0.1", *, handshake: bool) -> RawClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(local_ip, 0))
    raw = RawClient(reader, writer)
    if handshake:
        await raw.handshake()
    return raw


async def test_silent_and_trickling_clients_are_closed_at_the_handshake_deadline(
    stack: BrokerStack, clock: ManualClock
) -> None:
    port = stack.service.port
    good = await _open_raw(port, handshake=True)
    silent = await _open_raw(port, handshake=False)
    slow = await _open_raw(port, handshake=False)
    await eventually(lambda: len(stack.service._connections) == 3)
    trickle = b"\x00\x00\x00\x40\x00\x00\x00\x3c"  # the start of a CONNECT frame
    for i in range(4):  # one byte per "second": each byte would reset keep-alive
        await slow.send_raw(trickle[i : i + 1])
        await eventually(
            lambda n=i + 1: any(c.proto._decoder.buffered == n for c in stack.service._connections)
        )
        clock.advance(1.0)
    assert not await silent.wait_closed(within=0.05)
    clock.advance(1.0)  # 5 s after accept: the handshake deadline
    assert await silent.wait_closed(within=5)
    assert await slow.wait_closed(within=5)
    # The client that did its handshake is untouched.
    ready = await request(good, commands.producer(TOPIC, 1, 1, producer_name="good"), 1)
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS
    assert (await publish(good, 1, "good", 0)).type == pb.BaseCommand.SEND_RECEIPT
    for raw in (good, silent, slow):
        await raw.close()


async def test_a_large_frame_before_connect_is_refused_from_its_header(stack: BrokerStack) -> None:
    raw = await _open_raw(stack.service.port, handshake=False)
    await raw.send_raw(struct.pack(">II", 5 * 1024 * 1024, 100) + b"\0" * 1000)
    assert await raw.wait_closed(within=5)
    await raw.close()


async def _refused(raw: RawClient) -> pb.CommandError:
    """The ERROR a connection over a cap gets before the broker closes it (read as raw frames:
    the client's own state machine would take it for a refused handshake)."""
    data = b""
    async with asyncio.timeout(5):
        while chunk := await raw._reader.read(65536):
            data += chunk
    [frame] = FrameDecoder().feed(data)
    assert frame.command.type == pb.BaseCommand.ERROR
    return frame.command.error


async def test_connection_caps_hold_while_connected_clients_keep_working(
    stack: BrokerStack,
) -> None:
    port = stack.service.port
    limits = stack.service.connection_limits
    local = [await _open_raw(port, handshake=True) for _ in range(4)]
    # A fifth from the same address is over brokerMaxConnectionsPerIp=4.
    over_ip = await _open_raw(port, handshake=False)
    refusal = await _refused(over_ip)
    assert refusal.error == pb.NotAllowedError
    assert "from 127.0.0.1 (4)" in refusal.message
    # Another address may still connect, up to brokerMaxConnections=6 in total.
    other = [await _open_raw(port, "127.0.0.2", handshake=True) for _ in range(2)]
    over_total = await _open_raw(port, "127.0.0.3", handshake=False)
    refusal = await _refused(over_total)
    assert refusal.error == pb.NotAllowedError
    assert "maximum number of connections (6)" in refusal.message
    assert limits.refused == 2
    # Every admitted client still produces.
    for number, raw in enumerate(local + other, start=1):
        name = f"capped-{number}"
        ready = await request(raw, commands.producer(TOPIC, 1, 1, producer_name=name), 1)
        assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS
        assert (await publish(raw, 1, name, 0)).type == pb.BaseCommand.SEND_RECEIPT
    # A slot freed is a slot available again.
    await local[0].close()
    await eventually(lambda: limits.open_from("127.0.0.1") == 3)
    again = await _open_raw(port, handshake=True)
    ready = await request(again, commands.producer(TOPIC, 1, 1, producer_name="again"), 1)
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS
    for raw in [*local[1:], *other, again, over_ip, over_total]:
        await raw.close()


async def test_a_closed_connection_is_freed_without_the_cycle_collector(
    stack: BrokerStack,
) -> None:
    raw = await _open_raw(stack.service.port, handshake=True)
    ready = await request(raw, commands.producer(TOPIC, 1, 1, producer_name="vanishing"), 1)
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS
    await publish(raw, 1, "vanishing", 0)
    subscribe = commands.subscribe(TOPIC, "gone", pb.CommandSubscribe.Shared, 1, 2)
    assert (await request(raw, subscribe, 2)).type == pb.BaseCommand.SUCCESS
    await raw.send(commands.flow(1, 100))
    # Half a 4 MiB frame, then the client vanishes.
    await raw.send_raw(struct.pack(">II", 4 * 1024 * 1024, 100) + b"\0" * (2 * 1024 * 1024))
    [conn] = stack.service._connections
    decoder = conn.proto._decoder
    await eventually(lambda: decoder.buffered >= 2 * 1024 * 1024)
    freed = weakref.ref(conn)
    del conn
    gc.disable()
    try:
        await raw.close()
        await eventually(lambda: not stack.service._connections, within=10)
        await eventually(lambda: freed() is None, within=5, message="the connection to be freed")
        assert decoder.buffered == 0  # and its half-received frame with it
    finally:
        gc.enable()
