"""The bookie's TCP server: the wire protocol (ADR 0033) in front of a storage engine.

One :class:`BookieServer` listens on ``bookiePort``; each connection is a :class:`_Connection`
(an asyncio protocol, no task per connection) that decodes frames, dispatches each request to the
engine and writes the responses. Adds go through the engine's callback path (no future or task
per add): the response of an add is written in the loop step that learns the entry is durable, so
the adds of one ledger are answered in journal order. Reads, fences, LAC reads and deletes run as
small tasks and can be answered out of order - every response carries its request's transaction
id. Responses produced during one loop turn leave in one ``writelines``.

Adds that came in an ``ADD_ENTRIES`` batch (ADR 0037) are acknowledged in batches too: the
transaction ids of the adds that became durable during one loop turn leave in one
``AddEntriesResponse``, in the order they became durable. Any other response (an error, a read)
first closes the batch of acknowledgements gathered so far, so a connection's responses keep the
order in which the bookie produced them.

With an SSL context (``tlsCertificatePath``..., :mod:`braid.storage.bookie_tls`) every
connection is TLS from its first byte: a peer that does not complete the handshake (a plain
client, an untrusted client certificate under ``tlsClientAuthentication=true``) is closed before
any of its bytes reach the decoder.

A frame that is too large, fails its checksum or does not decode closes that connection, with one
log line naming the peer; the server and every other connection go on. A request the engine
refuses (fenced, read-only, bad id, ...) gets its status code and message and the connection stays.
When a peer reads slower than the bookie answers, the connection stops reading its requests until
the buffer drains.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from dataclasses import dataclass
from typing import Any, cast

from braid.storage.api import EntryTooLarge, StorageError
from braid.storage.bookie.engine import Bookie, StoredEntry
from braid.storage.bookie.wire import (
    DEFAULT_MAX_FRAME_SIZE,
    FENCE_ONLY,
    FRAME_HEADER_SIZE,
    BadFrame,
    FrameDecoder,
    add_entries_response,
    add_response,
    bpb,
    encode_frame,
    error_response,
    parse_request,
    response_for,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ServerStats:
    """Counters of one bookie server (exported on ``/metrics``)."""

    connections_opened: int = 0
    connections_open: int = 0
    bad_frames: int = 0
    add_requests: int = 0
    add_errors: int = 0
    read_requests: int = 0
    read_errors: int = 0
    other_requests: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0


class BookieServer:
    """Serves one :class:`~braid.storage.bookie.engine.Bookie` over TCP."""

    def __init__(
        self,
        bookie: Bookie,
        host: str,
        port: int,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._bookie = bookie
        self._ssl = ssl_context
        self._host = host
        self._port = port
        self._max_frame = max_frame_size
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self.stats = ServerStats()

    @property
    def bookie(self) -> Bookie:
        return self._bookie

    @property
    def port(self) -> int:
        """The port listened on (the real one when 0 was asked for)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def max_frame_size(self) -> int:
        return self._max_frame

    async def start(self) -> None:
        """Listen. Raises ``OSError`` when the address is taken."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self._host, self._port, reuse_address=True, ssl=self._ssl
        )
        if self._ssl is not None:
            log.info("bookie port %s:%d serves TLS only", self._host, self.port)

    async def close(self) -> None:
        """Stop listening and drop every connection (their pending requests go unanswered: the
        clients fail them). Idempotent."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.abort()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None


def _is_recovery(add: bpb.AddRequest) -> bool:
    # A proto2 enum field reads as its first value when unset: ask whether it is set.
    return add.HasField("flag") and add.flag == bpb.AddRequest.RECOVERY_ADD


def _add_header(txn_id: int) -> bpb.PacketHeader:
    """The header of an answer to one add (alone or in a batch)."""
    return bpb.PacketHeader(version=bpb.VERSION_ONE, operation=bpb.ADD_ENTRY, txn_id=txn_id)


def _is_fencing(read: bpb.ReadRequest) -> bool:
    return read.HasField("flag") and read.flag == bpb.ReadRequest.FENCE_LEDGER


class _Connection(asyncio.Protocol):
    """One client connection: frames in, engine calls, frames out."""

    def __init__(self, server: BookieServer) -> None:
        self._server = server
        self._bookie = server.bookie
        self._stats = server.stats
        self._decoder = FrameDecoder(server.max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._out: list[bytes] = []
        self._acks: list[int] = []  # txn ids of batched adds made durable this loop turn
        self._flushing = False
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: uvloop's implement asyncio.Transport without deriving from it.
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._server._connections.add(self)
        self._stats.connections_opened += 1
        self._stats.connections_open += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._out.clear()
        self._acks.clear()
        if self in self._server._connections:
            self._server._connections.discard(self)
            self._stats.connections_open -= 1
        for task in list(self._tasks):
            task.cancel()

    def pause_writing(self) -> None:
        # The peer reads slower than we answer: stop taking its requests until it catches up.
        if self._transport is not None and not self._closed:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._closed:
            self._transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        self._stats.bytes_received += len(data)
        try:
            for body in self._decoder.feed(data):
                self._dispatch(parse_request(body))
                if self._closed:
                    return
        except BadFrame as exc:
            self._stats.bad_frames += 1
            log.warning(
                "bookie %s: closing connection from %s: %s", self._bookie.bookie_id, self._peer, exc
            )
            self.abort()

    def abort(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.abort()

    # -- responses -------------------------------------------------------------------------------
    def _schedule_flush(self) -> None:
        if not self._flushing:
            self._flushing = True
            self._loop.call_soon(self._flush)

    def _send(self, frame: bytes) -> None:
        if self._closed:
            return
        if self._acks:
            self._close_ack_batch()
        self._out.append(frame)
        self._schedule_flush()

    def _ack(self, txn_id: int) -> None:
        if self._closed:
            return
        self._acks.append(txn_id)
        self._schedule_flush()

    def _close_ack_batch(self) -> None:
        acks, self._acks = self._acks, []
        self._out.append(add_entries_response(acks))

    def _flush(self) -> None:
        self._flushing = False
        if self._acks:
            self._close_ack_batch()
        out = self._out
        if not out or self._closed or self._transport is None:
            return
        self._out = []
        self._stats.bytes_sent += sum(map(len, out))
        self._transport.writelines(out)

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- requests --------------------------------------------------------------------------------
    def _dispatch(self, request: bpb.Request) -> None:
        operation = request.header.operation
        if operation == bpb.ADD_ENTRY and request.HasField("add_request"):
            self._add(request)
        elif operation == bpb.ADD_ENTRIES and request.HasField("add_entries_request"):
            self._add_entries(request.add_entries_request)
        elif operation == bpb.READ_ENTRY and request.HasField("read_request"):
            self._stats.read_requests += 1
            self._spawn(self._read(request))
        elif operation == bpb.READ_LAC and request.HasField("read_lac_request"):
            self._stats.other_requests += 1
            self._spawn(self._read_lac(request))
        elif operation == bpb.DELETE_LEDGER and request.HasField("delete_ledger_request"):
            self._stats.other_requests += 1
            self._spawn(self._delete(request))
        else:
            # Well-framed but meaningless: answer it (the connection stays usable).
            self._send(
                error_response(
                    request.header,
                    StorageError(f"operation {operation} without its request body"),
                )
            )

    def _add(self, request: bpb.Request) -> None:
        self._stats.add_requests += 1
        add = request.add_request
        try:
            self._bookie.submit_add_callback(
                add.ledger_id,
                add.entry_id,
                add.body,
                functools.partial(self._added, request.header.txn_id, add.ledger_id),
                add.last_add_confirmed,
                add.length,
                _is_recovery(add),
            )
        except StorageError as exc:
            self._stats.add_errors += 1
            self._send(error_response(request.header, exc))

    def _add_entries(self, batch: bpb.AddEntriesRequest) -> None:
        # One frame of adds, each as if it came alone; acknowledged in batches (_batch_added).
        bookie, stats = self._bookie, self._stats
        for add in batch.adds:
            stats.add_requests += 1
            txn_id = add.txn_id
            try:
                bookie.submit_add_callback(
                    add.ledger_id,
                    add.entry_id,
                    add.body,
                    functools.partial(self._batch_added, txn_id),
                    add.last_add_confirmed,
                    add.length,
                    _is_recovery(add),
                )
            except StorageError as exc:
                stats.add_errors += 1
                self._send(error_response(_add_header(txn_id), exc))

    def _batch_added(self, txn_id: int, entry_id: int, error: StorageError | None) -> None:
        del entry_id  # the client knows it by txn id
        if error is None:
            self._ack(txn_id)
            return
        self._stats.add_errors += 1
        self._send(error_response(_add_header(txn_id), error))

    def _added(
        self, txn_id: int, ledger_id: int, entry_id: int, error: StorageError | None
    ) -> None:
        if error is None:
            self._send(add_response(txn_id, ledger_id, entry_id))
            return
        self._stats.add_errors += 1
        self._send(error_response(_add_header(txn_id), error))

    async def _read(self, request: bpb.Request) -> None:
        read = request.read_request
        response = response_for(request)
        body = response.read_response
        body.ledger_id = read.ledger_id
        fence = _is_fencing(read)
        try:
            if fence:
                lac = await self._bookie.fence(read.ledger_id)
                body.last_add_confirmed = lac.last_add_confirmed
                body.last_entry_id = lac.last_entry_id
            if not (fence and read.first_entry_id == FENCE_ONLY):
                last = read.last_entry_id if read.HasField("last_entry_id") else read.first_entry_id
                entries = await self._bookie.read_entries(read.ledger_id, read.first_entry_id, last)
                self._fill_entries(body, entries)
        except StorageError as exc:
            self._stats.read_errors += 1
            self._send(error_response(request.header, exc))
            return
        self._send(encode_frame(response.SerializeToString()))

    def _fill_entries(self, body: bpb.ReadResponse, entries: list[StoredEntry]) -> None:
        room = self._server.max_frame_size - FRAME_HEADER_SIZE - 64
        size = 0
        for stored in entries:
            size += len(stored.data) + 48
            if size > room:
                # The client asks for fewer entries at a time (it splits the range).
                raise EntryTooLarge(
                    f"entries {entries[0].entry_id}..{entries[-1].entry_id} do not fit in one "
                    f"frame of {self._server.max_frame_size} bytes"
                )
            body.entries.add(
                entry_id=stored.entry_id,
                body=stored.data,
                last_add_confirmed=stored.last_add_confirmed,
                length=stored.length,
            )

    async def _read_lac(self, request: bpb.Request) -> None:
        ledger_id = request.read_lac_request.ledger_id
        try:
            lac = await self._bookie.read_lac(ledger_id)
        except StorageError as exc:
            self._send(error_response(request.header, exc))
            return
        response = response_for(request)
        body = response.read_lac_response
        body.ledger_id = ledger_id
        body.last_add_confirmed = lac.last_add_confirmed
        body.last_entry_id = lac.last_entry_id
        self._send(encode_frame(response.SerializeToString()))

    async def _delete(self, request: bpb.Request) -> None:
        ledger_id = request.delete_ledger_request.ledger_id
        try:
            await self._bookie.delete_ledger(ledger_id)
        except StorageError as exc:
            self._send(error_response(request.header, exc))
            return
        response = response_for(request)
        response.delete_ledger_response.ledger_id = ledger_id
        self._send(encode_frame(response.SerializeToString()))
