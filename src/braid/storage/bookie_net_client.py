"""A :class:`~braid.storage.bookie_client.BookieClient` for a bookie process, over TCP.

The aiokafka shape: one connection per bookie, an asyncio protocol whose ``data_received`` is the
only reader, and a map from transaction id to what waits for the answer - a callback for adds
(the ledger writer's hot path: no future or task per add, ADR 0014), a future for everything
else. Requests are pipelined; the frames written during one loop turn leave in one
``writelines``. The adds of one loop turn go in one ``ADD_ENTRIES`` frame (ADR 0037; a lone add
in an ``ADD_ENTRY`` frame), split so no batch carries more than :data:`MAX_BATCH_BYTES`; any
other request first sends the adds queued before it, so the bookie sees requests in the order
they were made. The bookie acknowledges batched adds in batches (``AddEntriesResponse``).

Failure model (what lets the writer make an ensemble change): a request that gets no answer
within its timeout (``addEntryTimeoutSec`` / ``readEntryTimeoutSec``) fails with
:class:`~braid.storage.api.BookieUnavailable`; a lost connection fails *every* request in flight
on it the same way, at once; closing the client fails them with
:class:`~braid.storage.api.StorageClosed`. The next request reconnects, but not before a backoff
that doubles from ``reconnect_backoff_s`` up to ``max_reconnect_backoff_s`` after each failed
attempt: until then requests fail at once rather than queue behind a dead peer. Requests sent
while the connection is being made wait for it and go out once it is up.

With an SSL context (the broker's ``bookkeeperTLS*`` keys, a bookie's own ``tls*`` keys) the
connection is TLS, the bookie's certificate checked against the context's CAs and its host name;
a handshake that fails for want of trust (wrong CA, wrong name) is logged once as an error naming
the cause - later attempts log at debug until a connection succeeds - and fails the requests as
any unreachable bookie does.

Invariants: every request's completion is called exactly once, on the event loop; a response
whose transaction id is unknown (its request already timed out) is dropped; a frame that fails
its checksum or does not decode closes the connection (one log line) and fails what was in
flight.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from braid.clock import Clock, SystemClock, TimerHandle
from braid.storage.api import (
    BookieUnavailable,
    EntryTooLarge,
    StorageClosed,
    StorageError,
    StorageReadOnly,
)
from braid.storage.bookie.engine import MAX_ENTRY_SIZE, AddCallback, LacInfo, StoredEntry
from braid.storage.bookie.wire import (
    DEFAULT_MAX_FRAME_SIZE,
    FENCE_ONLY,
    BadFrame,
    BatchedAdd,
    FrameDecoder,
    add_entries_request,
    add_request,
    bpb,
    delete_ledger_request,
    entries_of,
    error_for_status,
    lac_of_fence,
    parse_response,
    read_lac_request,
    read_request,
)
from braid.storage.validation import validate_entry_id, validate_ledger_id

log = logging.getLogger(__name__)

#: BookKeeper's ``addEntryTimeoutSec`` and ``readEntryTimeoutSec`` defaults.
DEFAULT_ADD_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
#: Entry bytes in one ``ADD_ENTRIES`` frame at most: well under the smallest frame limit a bookie
#: accepts (``nettyMaxFrameSizeBytes`` >= 1 MiB), so a batch never costs a connection.
MAX_BATCH_BYTES = 512 * 1024

# What waits for a response: (deadline, entry id, add callback) for an add, or
# (deadline, -1, future) for the other requests.
_Waiter = tuple[float, int, Any]


class NetBookieClient:
    """The client of one bookie process, reached at ``host:port``."""

    def __init__(
        self,
        bookie_id: str,
        address: tuple[str, int],
        *,
        clock: Clock | None = None,
        add_timeout_s: float = DEFAULT_ADD_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        reconnect_backoff_s: float = 0.1,
        max_reconnect_backoff_s: float = 5.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_entry_size: int = MAX_ENTRY_SIZE,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._id = bookie_id
        self._ssl = ssl_context
        self._tls_failure_logged = False
        self._address = address
        self._clock: Clock = clock or SystemClock()
        self._add_timeout = add_timeout_s
        self._read_timeout = read_timeout_s
        self._connect_timeout = connect_timeout_s
        self._backoff_min = reconnect_backoff_s
        self._backoff_max = max_reconnect_backoff_s
        self._backoff = 0.0
        self._retry_at = 0.0
        self._last_error = ""
        self._max_frame = max_frame_size
        self._max_entry = max_entry_size
        self._txn = itertools.count(1)
        self._pending: dict[int, _Waiter] = {}
        self._conn: _ClientConnection | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._backlog: list[bytes] = []  # frames written while connecting
        self._adds: list[BatchedAdd] = []  # adds of this loop turn, not yet framed
        self._adds_bytes = 0
        self._max_batch = min(max_frame_size // 4, MAX_BATCH_BYTES)
        self._timer: TimerHandle | None = None
        self._read_only_reason: str | None = None
        self._closed = False
        self.requests_sent = 0
        self.timeouts = 0
        self.connection_losses = 0

    # -- BookieClient ------------------------------------------------------------------------------
    @property
    def bookie_id(self) -> str:
        return self._id

    @property
    def address(self) -> tuple[str, int]:
        return self._address

    @property
    def connected(self) -> bool:
        return self._conn is not None

    @property
    def read_only_reason(self) -> str | None:
        return self._read_only_reason

    def set_read_only(self, reason: str | None) -> None:
        """What the bookie's registration says: read-only with ``reason``, or writable."""
        self._read_only_reason = reason

    def set_address(self, address: tuple[str, int]) -> None:
        """The bookie registered at a new address: drop the old connection (its requests fail)."""
        if address == self._address:
            return
        self._address = address
        if self._conn is not None:
            self._conn.abort()
        self._backoff = 0.0
        self._retry_at = 0.0

    def disk_status(self) -> Mapping[str, object]:
        reason = self._read_only_reason
        return {
            "bookie": self._id,
            "address": f"{self._address[0]}:{self._address[1]}",
            "state": "read-write" if reason is None else "read-only",
            "reason": reason,
        }

    def send_add(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        callback: AddCallback,
        last_add_confirmed: int,
        length: int,
        recovery: bool = False,
    ) -> None:
        validate_ledger_id(ledger_id)
        validate_entry_id(entry_id)
        if len(data) > self._max_entry:
            raise EntryTooLarge(f"entry of {len(data)} bytes exceeds {self._max_entry}")
        if self._read_only_reason is not None and not recovery:
            raise StorageReadOnly(f"bookie {self._id} is read-only: {self._read_only_reason}")
        if self._closed:
            raise StorageClosed(f"client of bookie {self._id} is closed")
        if self._conn is None:
            self._start_connecting()  # raises BookieUnavailable while backing off
        txn = next(self._txn)
        if self._adds and self._adds_bytes + len(data) > self._max_batch:
            self._send_adds()  # a full batch goes now; a larger add goes alone
        if not self._adds:
            asyncio.get_running_loop().call_soon(self._send_adds)
        self._adds.append((txn, ledger_id, entry_id, data, last_add_confirmed, length, recovery))
        self._adds_bytes += len(data)
        self._wait_for(txn, (self._clock.monotonic() + self._add_timeout, entry_id, callback))

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        *,
        last_add_confirmed: int,
        length: int,
        recovery: bool = False,
    ) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def complete(_entry_id: int, error: StorageError | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        self.send_add(ledger_id, entry_id, data, complete, last_add_confirmed, length, recovery)
        await done

    async def read_entry(self, ledger_id: int, entry_id: int) -> StoredEntry:
        return (await self.read_entries(ledger_id, entry_id, entry_id))[0]

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[StoredEntry]:
        validate_ledger_id(ledger_id)
        validate_entry_id(first)
        validate_entry_id(last)
        try:
            response = await self._call(
                lambda txn: read_request(txn, ledger_id, first, last, fence=False),
                self._read_timeout,
            )
        except EntryTooLarge:
            if first >= last:
                raise
            # The range does not fit in one frame: ask for each half.
            middle = (first + last) // 2
            return [
                *await self.read_entries(ledger_id, first, middle),
                *await self.read_entries(ledger_id, middle + 1, last),
            ]
        return entries_of(response.read_response)

    async def read_lac(self, ledger_id: int) -> LacInfo:
        validate_ledger_id(ledger_id)
        response = await self._call(
            lambda txn: read_lac_request(txn, ledger_id), self._read_timeout
        )
        body = response.read_lac_response
        return LacInfo(body.last_add_confirmed, body.last_entry_id)

    async def fence(self, ledger_id: int) -> LacInfo:
        validate_ledger_id(ledger_id)
        response = await self._call(
            lambda txn: read_request(txn, ledger_id, FENCE_ONLY, FENCE_ONLY, fence=True),
            self._read_timeout,
        )
        return lac_of_fence(response.read_response)

    async def delete_ledger(self, ledger_id: int) -> None:
        validate_ledger_id(ledger_id)
        await self._call(lambda txn: delete_ledger_request(txn, ledger_id), self._add_timeout)

    async def close(self) -> None:
        """Fail every request in flight with ``StorageClosed`` and drop the connection."""
        if self._closed:
            return
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()
        self._fail_all(StorageClosed(f"client of bookie {self._id} is closed"))

    # -- requests ----------------------------------------------------------------------------------
    async def _call(self, build: Callable[[int], bytes], timeout_s: float) -> bpb.Response:
        future: asyncio.Future[bpb.Response] = asyncio.get_running_loop().create_future()
        txn = next(self._txn)
        self._send(txn, build(txn), (self._clock.monotonic() + timeout_s, -1, future))
        return await future

    def _send(self, txn: int, frame: bytes, waiter: _Waiter) -> None:
        if self._closed:
            raise StorageClosed(f"client of bookie {self._id} is closed")
        if self._conn is None:
            self._start_connecting()  # raises BookieUnavailable while backing off
        self._send_adds()  # the adds made before this request go first
        self._write(frame)
        self._wait_for(txn, waiter)

    def _wait_for(self, txn: int, waiter: _Waiter) -> None:
        self._pending[txn] = waiter
        self.requests_sent += 1
        if self._timer is None:
            self._arm_timer(waiter[0])

    def _write(self, frame: bytes) -> None:
        conn = self._conn
        if conn is None:
            self._backlog.append(frame)  # sent once connected (or failed with the rest)
        else:
            conn.write(frame)

    def _send_adds(self) -> None:
        """Frame the adds queued in this loop turn: one ``ADD_ENTRIES`` frame (one ``ADD_ENTRY``
        for a lone add)."""
        adds, self._adds = self._adds, []
        self._adds_bytes = 0
        if not adds or self._closed:
            return
        if len(adds) == 1:
            self._write(add_request(*adds[0]))
        else:
            self._write(add_entries_request(adds))

    def _complete(self, response: bpb.Response) -> None:
        if response.header.operation == bpb.ADD_ENTRIES and response.status == bpb.EOK:
            self._complete_adds(response.add_entries_response.txn_ids)
            return
        waiter = self._pending.pop(response.header.txn_id, None)
        if waiter is None:
            return  # timed out already
        status = response.status
        error = None if status == bpb.EOK else error_for_status(status, response.error_message)
        if isinstance(error, StorageReadOnly):
            self._read_only_reason = str(error)  # until the registration says otherwise
        _, entry_id, target = waiter
        if entry_id >= 0:
            target(entry_id, error)
        elif not target.done():
            if error is None:
                target.set_result(response)
            else:
                target.set_exception(error)

    def _complete_adds(self, txn_ids: Iterable[int]) -> None:
        # A batch of acknowledgements: each add it names is durable on the bookie.
        pending = self._pending
        for txn in txn_ids:
            waiter = pending.pop(txn, None)
            if waiter is None:
                continue  # timed out already
            _, entry_id, target = waiter
            if entry_id >= 0:
                target(entry_id, None)
            else:  # a bookie acknowledging a request that was not an add: a broken peer
                _fail(entry_id, target, StorageError(f"bookie {self._id} acked a non-add"))

    def _fail_all(self, error: StorageError) -> None:
        pending, self._pending = self._pending, {}
        self._backlog.clear()
        self._adds.clear()
        self._adds_bytes = 0
        for _, entry_id, target in pending.values():
            _fail(entry_id, target, error)

    # -- timeouts ----------------------------------------------------------------------------------
    def _arm_timer(self, deadline: float) -> None:
        self._timer = self._clock.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self._clock.monotonic()
        expired = [txn for txn, w in self._pending.items() if w[0] <= now]
        for txn in expired:
            _, entry_id, target = self._pending.pop(txn)
            self.timeouts += 1
            _fail(entry_id, target, BookieUnavailable(f"bookie {self._id} did not answer in time"))
        if expired:
            log.warning(
                "bookie %s at %s:%d: %d requests timed out",
                self._id,
                *self._address,
                len(expired),
            )
        if self._pending:
            self._arm_timer(min(w[0] for w in self._pending.values()))

    # -- connection --------------------------------------------------------------------------------
    def _start_connecting(self) -> None:
        if self._connecting is not None:
            return
        now = self._clock.monotonic()
        if now < self._retry_at:
            raise BookieUnavailable(
                f"bookie {self._id} at {self._address[0]}:{self._address[1]} is unreachable "
                f"({self._last_error}); next attempt in {self._retry_at - now:.1f}s"
            )
        self._connecting = asyncio.get_running_loop().create_task(
            self._connect(), name=f"connect-{self._id}"
        )

    async def _connect(self) -> None:
        host, port = self._address
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: _ClientConnection(self, self._max_frame),
                    host,
                    port,
                    ssl=self._ssl,
                    server_hostname=host if self._ssl is not None else None,
                )
        except (OSError, TimeoutError) as exc:
            self._connecting = None
            self._backoff = min(max(self._backoff * 2, self._backoff_min), self._backoff_max)
            self._retry_at = self._clock.monotonic() + self._backoff
            self._last_error = str(exc) or type(exc).__name__
            self._log_connect_failure(host, port, exc)
            self._fail_all(BookieUnavailable(f"bookie {self._id} is unreachable: {exc}"))
            return
        self._connecting = None
        if self._closed:
            conn.abort()
            return
        self._conn = conn
        self._backoff = 0.0
        self._tls_failure_logged = False
        backlog, self._backlog = self._backlog, []
        for frame in backlog:
            conn.write(frame)

    def _log_connect_failure(self, host: str, port: int, exc: BaseException) -> None:
        if not isinstance(exc, ssl.SSLError):
            log.warning("bookie %s: cannot connect to %s:%d: %s", self._id, host, port, exc)
        elif self._tls_failure_logged:
            log.debug(
                "bookie %s: TLS handshake with %s:%d failed again: %s", self._id, host, port, exc
            )
        else:
            self._tls_failure_logged = True
            log.error(
                "bookie %s: TLS handshake with %s:%d failed: %s (is the bookie's certificate "
                "signed by a CA in bookkeeperTLSTrustCertsFilePath, for this host name? does the "
                "bookie serve TLS?); logged once until a connection succeeds",
                self._id,
                host,
                port,
                exc,
            )

    def _lost(self, conn: _ClientConnection, reason: str) -> None:
        if self._conn is not conn:
            return
        self._conn = None
        self.connection_losses += 1
        self._last_error = reason
        if self._pending:
            log.warning(
                "bookie %s: connection lost (%s); failing %d requests in flight",
                self._id,
                reason,
                len(self._pending),
            )
        self._fail_all(BookieUnavailable(f"bookie {self._id}: connection lost: {reason}"))


def _fail(entry_id: int, target: Any, error: StorageError) -> None:
    if entry_id >= 0:
        target(entry_id, error)
    elif not target.done():
        target.set_exception(error)


class _ClientConnection(asyncio.Protocol):
    """The socket of a :class:`NetBookieClient`: writes frames, reads responses."""

    def __init__(self, owner: NetBookieClient, max_frame_size: int) -> None:
        self._owner = owner
        self._decoder = FrameDecoder(max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._out: list[bytes] = []
        self._loop = asyncio.get_running_loop()
        self._dead = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: uvloop's implement asyncio.Transport without deriving from it.
        self._transport = cast(asyncio.Transport, transport)

    def write(self, frame: bytes) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(frame)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and self._transport is not None and not self._dead:
            self._transport.writelines(out)

    def data_received(self, data: bytes) -> None:
        if self._dead:
            return
        owner = self._owner
        try:
            for body in self._decoder.feed(data):
                owner._complete(parse_response(body))
        except BadFrame as exc:
            log.warning("bookie %s: closing the connection: %s", owner.bookie_id, exc)
            self.abort(str(exc))

    def abort(self, reason: str = "closed by the client") -> None:
        if self._dead:
            return
        self._dead = True
        if self._transport is not None:
            self._transport.abort()
        self._owner._lost(self, reason)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._dead:
            return
        self._dead = True
        self._owner._lost(self, str(exc) if exc else "closed by the bookie")
