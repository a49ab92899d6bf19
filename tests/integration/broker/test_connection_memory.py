"""Memory held for connections that die half-way through a frame comes back at once.

Against the real ``braid standalone`` command (its RSS read from ``/proc``): 50 connections each
send most of a 5 MB frame and vanish. Before, RSS rose by ~250 MB per round and came back only
when the cycle collector ran (a reference cycle held each connection and its buffer), and glibc
kept freed buffers in the heap from the second round on. Now it returns to within 50 MB of the
baseline within a few seconds, round after round, with no ``gc.collect()`` anywhere. A stranger
that has not sent CONNECT cannot make the broker buffer a large frame at all.
"""

from __future__ import annotations

import asyncio
import struct

from braid.protocol.connection import ClientConnection
from tests.support.polling import eventually, wait_for
from tests.support.standalone import (
    StandaloneProcess,
    standalone_process,  # noqa: F401 - pytest fixture
)

CONNECTIONS = 50
FRAME = 5 * 1024 * 1024
SENT = FRAME - 200 * 1024  # most of the frame: never complete
MB = 1024 * 1024


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MB, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


async def _open(port: int, *, handshake: bool) -> asyncio.StreamWriter:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if handshake:
        client = ClientConnection("memory-test", created_at=0.0)
        writer.write(client.data_to_send())
        await writer.drain()
        assert await reader.read(65536), "no CONNECTED"
    return writer


async def _partial_frames(port: int, *, handshake: bool) -> list[asyncio.StreamWriter]:
    writers = []
    partial = struct.pack(">II", FRAME - 4, 64) + bytes(SENT)
    for _ in range(CONNECTIONS):
        writer = await _open(port, handshake=handshake)
        writer.write(partial)
        try:
            await writer.drain()
        except ConnectionError:
            pass  # refused from the frame's header, as it should be before CONNECT
        writers.append(writer)
    return writers


async def _close(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.close()
    for writer in writers:
        try:
            await writer.wait_closed()
        except ConnectionError:
            pass


def test_partial_frames_of_closed_connections_are_released_within_seconds(
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    standalone = standalone_process
    pid = standalone.pid
    assert pid is not None
    baseline = rss_mb(pid)

    # Before CONNECT: refused from the header, nothing buffered.
    writers = asyncio.run(_partial_frames(standalone.port, handshake=False))
    assert rss_mb(pid) < baseline + 50
    asyncio.run(_close(writers))

    for round_number in range(3):

        async def one_round() -> None:
            writers = await _partial_frames(standalone.port, handshake=True)
            # The broker really holds the buffers (else this test would prove nothing).
            await eventually(
                lambda: rss_mb(pid) > baseline + 0.6 * CONNECTIONS * SENT / MB,
                within=30,
                message=lambda: f"the broker to buffer the frames (RSS {rss_mb(pid):.0f} MB)",
            )
            await _close(writers)

        asyncio.run(one_round())
        wait_for(
            lambda: rss_mb(pid) < baseline + 50,
            within=5,
            message=lambda n=round_number: (
                f"RSS back within 50 MB of {baseline:.0f} MB after round {n} "
                f"(now {rss_mb(pid):.0f} MB)"
            ),
        )
    assert standalone.running
