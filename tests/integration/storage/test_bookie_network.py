"""The bookie server and the network client on 127.0.0.1: pipelining, bad frames, timeouts,
lost connections and close."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvloop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braid.clock import ManualClock
from braid.storage.api import BookieUnavailable, StorageClosed, StorageError, StorageReadOnly
from braid.storage.bookie import Bookie
from braid.storage.bookie.server import BookieServer
from braid.storage.bookie.wire import (
    BatchedAdd,
    FrameDecoder,
    add_entries_request,
    bpb,
    encode_frame,
    parse_response,
)
from braid.storage.bookie_net_client import NetBookieClient
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[BookieServer]:
    bookie = await Bookie.open(tmp_path / "b", bookie_id="b")
    server = BookieServer(bookie, "127.0.0.1", 0, max_frame_size=64 * 1024)
    await server.start()
    yield server
    await server.close()
    await bookie.close()


async def test_pipelined_adds_of_one_ledger_are_acknowledged_in_order(
    served: BookieServer,
) -> None:
    await _pipelined_adds(served)


def test_server_and_client_run_on_uvloop(tmp_path: Path) -> None:
    """Braid's processes run uvloop (ADR 0078), whose transports implement asyncio.Transport
    without deriving from it: both ends must take them (an isinstance check once left every
    connection of a bookie process unanswered)."""

    async def on_uvloop() -> None:
        bookie = await Bookie.open(tmp_path / "b", bookie_id="b")
        server = BookieServer(bookie, "127.0.0.1", 0, max_frame_size=64 * 1024)
        await server.start()
        try:
            await _pipelined_adds(server)
        finally:
            await server.close()
            await bookie.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
        runner.run(on_uvloop())


async def _pipelined_adds(served: BookieServer) -> None:
    client = NetBookieClient("b", ("127.0.0.1", served.port))
    order: list[int] = []
    all_done = asyncio.Event()

    def done(entry_id: int, error: StorageError | None) -> None:
        assert error is None
        order.append(entry_id)
        if len(order) == 500:
            all_done.set()

    for i in range(500):
        client.send_add(3, i, b"e" * 100, done, i - 1, (i + 1) * 100)
    await asyncio.wait_for(all_done.wait(), 20)
    assert order == list(range(500))
    await client.close()


async def _raw(server: BookieServer, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(payload)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 5)  # b"" once the bookie closes
    finally:
        writer.close()


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">II", 10 * 1024 * 1024, 0),  # over the frame limit
        encode_frame(b"\x0a\x02\x08\x01")[:-1] + b"\x00",  # checksum does not match
        encode_frame(b"\xff\xff\xff\xff\xff"),  # checksummed garbage: not a request
        encode_frame(b""),  # an empty request (required fields missing)
    ],
    ids=["oversize", "bad-crc", "garbage", "empty"],
)
async def test_a_bad_frame_closes_only_its_connection(
    served: BookieServer, payload: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    good = NetBookieClient("b", ("127.0.0.1", served.port))
    await good.add_entry(1, 0, b"before", last_add_confirmed=-1, length=6)
    assert await _raw(served, payload) == b""
    assert served.stats.bad_frames == 1
    assert sum("closing connection from" in r.getMessage() for r in caplog.records) == 1
    await good.add_entry(1, 1, b"after", last_add_confirmed=0, length=11)
    assert [e.data for e in await good.read_entries(1, 0, 1)] == [b"before", b"after"]
    await good.close()


async def test_a_read_larger_than_a_frame_is_split_by_the_client(served: BookieServer) -> None:
    client = NetBookieClient("b", ("127.0.0.1", served.port))
    for i in range(8):
        await client.add_entry(4, i, bytes([i]) * 20_000, last_add_confirmed=i - 1, length=0)
    entries = await client.read_entries(4, 0, 7)  # 160 KB > the 64 KiB frame limit
    assert [e.data[0] for e in entries] == list(range(8))
    await client.close()


async def test_a_batch_of_adds_is_acknowledged_in_batches_and_a_failed_add_answers_alone(
    served: BookieServer,
) -> None:
    # Over a raw socket: entries 0 and 1, then an invalid entry id, then entry 2 of ledger 6.
    adds: list[BatchedAdd] = [
        (11, 6, 0, b"a", -1, 1, False),
        (12, 6, 1, b"b", 0, 2, False),
        (13, 6, -5, b"x", 1, 3, False),
        (14, 6, 2, b"c", 1, 3, False),
    ]
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(add_entries_request(adds))
    await writer.drain()
    decoder = FrameDecoder()
    answers: list[tuple[str, list[int]]] = []
    acked: list[int] = []
    while len(acked) < 3:
        for body in decoder.feed(await asyncio.wait_for(reader.read(65536), 10)):
            response = parse_response(body)
            if response.header.operation == bpb.ADD_ENTRIES:
                acked += response.add_entries_response.txn_ids
                answers.append(("acks", list(response.add_entries_response.txn_ids)))
            else:
                answers.append((bpb.StatusCode.Name(response.status), [response.header.txn_id]))
    writer.close()
    # The refusal comes at once, before the acknowledgements that wait for the fsync.
    assert answers[0] == ("EINVALIDENTRYID", [13])
    assert acked == [11, 12, 14] and served.stats.add_requests == 4


async def test_a_request_made_after_adds_reaches_the_bookie_after_them(
    served: BookieServer,
) -> None:
    # The adds of a loop turn wait to be framed together; a fence made after them must not
    # overtake them (it would fence the ledger before they arrive).
    client = NetBookieClient("b", ("127.0.0.1", served.port))
    await client.add_entry(8, 0, b"first", last_add_confirmed=-1, length=5)  # connected
    results: list[StorageError | None] = []
    for i in range(1, 11):
        client.send_add(8, i, b"e", lambda _e, err: results.append(err), i - 1, 5 + i)
    fenced = await client.fence(8)
    assert results == [None] * 10 and fenced.last_entry_id == 10
    await client.close()


async def test_a_request_without_an_answer_times_out_as_bookie_unavailable() -> None:
    # A peer that accepts and never answers (a hung bookie).
    accepted: list[asyncio.StreamWriter] = []

    async def hang(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(w)

    silent = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    clock = ManualClock()
    client = NetBookieClient("hung", ("127.0.0.1", port), clock=clock, add_timeout_s=10)
    errors: list[StorageError | None] = []
    client.send_add(1, 0, b"x", lambda _e, err: errors.append(err), -1, 1)
    read = asyncio.ensure_future(client.read_lac(1))
    await eventually(lambda: client.connected)
    clock.advance(9.9)
    await asyncio.sleep(0)
    assert errors == [] and not read.done()
    clock.advance(0.2)
    await eventually(lambda: bool(errors) and read.done())
    assert isinstance(errors[0], BookieUnavailable)
    with pytest.raises(BookieUnavailable):
        await read
    await client.close()
    for w in accepted:
        w.close()
    silent.close()
    await silent.wait_closed()


async def test_a_lost_connection_fails_every_pending_request_then_reconnects_with_backoff() -> None:
    # A peer that takes the requests and drops the connection without answering (a crash).
    async def crash(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.transport.abort()

    peer = await asyncio.start_server(crash, "127.0.0.1", 0)
    port = peer.sockets[0].getsockname()[1]
    client = NetBookieClient("b", ("127.0.0.1", port), reconnect_backoff_s=30)
    errors: list[StorageError | None] = []
    for i in range(50):
        client.send_add(1, i, b"y", lambda _e, err: errors.append(err), i - 1, i + 1)
    lac = asyncio.ensure_future(client.read_lac(1))
    await eventually(lambda: len(errors) == 50 and lac.done())
    assert all(isinstance(e, BookieUnavailable) for e in errors)
    with pytest.raises(BookieUnavailable, match="connection lost"):
        await lac
    peer.close()
    await peer.wait_closed()
    # The next request tries to reconnect; the bookie is gone: it fails, and the ones after it
    # fail at once while the client backs off (nothing queues behind a dead peer).
    client.send_add(1, 50, b"y", lambda _e, err: errors.append(err), 49, 51)
    await eventually(lambda: len(errors) == 51)
    assert isinstance(errors[-1], BookieUnavailable)
    with pytest.raises(BookieUnavailable, match="next attempt in"):
        client.send_add(1, 51, b"y", lambda _e, err: errors.append(err), 50, 52)
    await client.close()
    with pytest.raises(StorageClosed):
        client.send_add(1, 52, b"y", lambda _e, err: errors.append(err), 51, 53)


async def test_close_fails_requests_in_flight_with_storage_closed() -> None:
    silent = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    client = NetBookieClient("quiet", ("127.0.0.1", port))
    errors: list[StorageError | None] = []
    client.send_add(1, 0, b"x", lambda _e, err: errors.append(err), -1, 1)
    await eventually(lambda: client.connected)
    await client.close()
    assert len(errors) == 1 and isinstance(errors[0], StorageClosed)
    silent.close()


async def test_an_eread_only_answer_marks_the_client_read_only(
    served: BookieServer, tmp_path: Path
) -> None:
    client = NetBookieClient("b", ("127.0.0.1", served.port))
    served.bookie._disk.write_failed(OSError(28, "No space left on device"))
    with pytest.raises(StorageReadOnly):
        await client.add_entry(1, 0, b"x", last_add_confirmed=-1, length=1)
    assert client.read_only_reason is not None
    with pytest.raises(StorageReadOnly):  # refused before anything is sent
        client.send_add(1, 0, b"x", lambda _e, _err: None, -1, 1)
    client.set_read_only(None)  # the registration says writable again
    assert client.read_only_reason is None
    await client.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    stream=st.one_of(
        st.binary(max_size=400),
        # Well-framed (right length and checksum) but arbitrary bodies: past the frame checks.
        st.lists(st.binary(max_size=60), max_size=4).map(
            lambda bodies: b"".join(encode_frame(b) for b in bodies)
        ),
    )
)
async def test_a_live_bookie_survives_arbitrary_bytes_and_keeps_serving(
    served: BookieServer, stream: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(stream)
    await writer.drain()
    writer.write_eof()
    with contextlib.suppress(ConnectionError):
        await asyncio.wait_for(reader.read(), 5)  # answers or closes; never hangs
    writer.close()
    client = NetBookieClient("b", ("127.0.0.1", served.port))
    lac = await client.read_lac(424242)
    assert (lac.last_add_confirmed, lac.last_entry_id) == (-1, -1)
    await client.close()
