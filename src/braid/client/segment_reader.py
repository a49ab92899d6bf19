"""The segment reader: one segment of a topic, from a position, as column chunks (ADR 0031).

``AsyncClient.create_segment_reader(topic, segment_id, start)`` reads the messages of one
segment - a ``topic://`` topic's segment or a ``persistent://`` topic's single legacy segment -
in segment order, starting just after ``start`` (a :class:`~braid.core.checkpoint.SegmentCursor`
or a :class:`~braid.core.message_id.MessageId`; ``None`` = the segment's beginning). It is for
applications that hold positions themselves and want columns, not messages: a Spark executor
reading a planned range of a segment. No broker cursor, no acknowledgments, no drain gating
across segments: the caller decides which segments to read and when.

How it reads: one non-durable :class:`~braid.client.segment_consumer.SegmentSubscriber` (attach,
reconnect, flow control and the start filter are its), whose entries are decoded on
the event loop by an :class:`~braid.client.columns.EntryColumnDecoder` straight into one
:class:`~braid.client.columns.MessageColumns` buffer - no ``Message`` per row.
:meth:`AsyncSegmentReader.read_columns` (or the blocking facade's ``read_columns``) takes up to
``max_messages`` rows off the front of it; taking grants the flow permits back, exactly as a
consumer's ``receive_many`` does.

Invariants: rows come out once each, in segment order. On a reconnect the buffered rows are
dropped and the segment is re-read from just after the last row *taken* (the start filter
removes what the broker sends again), so nothing is skipped or repeated. :attr:`drained` becomes
true only when the broker reported the segment's end (sealed, or a terminated classic topic)
and every row was taken.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from braid.client.columns import EntryColumnDecoder, MessageColumns
from braid.client.consumer_base import check_receive_args
from braid.client.context import ClientContext
from braid.client.errors import (
    AlreadyClosedError,
    InvalidConfigurationError,
    NotFoundError,
)
from braid.client.layout_source import LayoutSource, LayoutSources
from braid.client.packed_columns import PackedColumns, decode_packed
from braid.client.segment_consumer import ReaderStart, SegmentSubscriber, SubscriptionSpec
from braid.core.checkpoint import CursorKind, SegmentCursor
from braid.core.errors import BraidError
from braid.core.message_id import MessageId, message_position
from braid.core.topic_layout import SegmentRoute, TopicLayout
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: How long to wait for a layout naming a segment id above every id the client knows yet.
NEWER_LAYOUT_WAIT = 5.0

#: The chunks a reader hands out: lists (:class:`MessageColumns`) or Arrow-layout buffers
#: (:class:`~braid.client.packed_columns.PackedColumns`, ``create_segment_reader(packed=True)``).
Chunk = TypeVar("Chunk", MessageColumns, PackedColumns)


class ChunkFormat(Generic[Chunk]):
    """How a reader decodes an entry (``decode(decoder, body, ledger_id, entry_id)``) and makes
    an empty chunk (``empty(topic, segment_id)``)."""

    __slots__ = ("decode", "empty")

    decode: Callable[[EntryColumnDecoder, bytes, int, int], tuple[Chunk, int]]
    empty: Callable[[str, int], Chunk]

    def __init__(
        self,
        decode: Callable[[EntryColumnDecoder, bytes, int, int], tuple[Chunk, int]],
        empty: Callable[[str, int], Chunk],
    ) -> None:
        self.decode = decode
        self.empty = empty


LISTS = ChunkFormat(EntryColumnDecoder.decode, MessageColumns)
PACKED = ChunkFormat(decode_packed, PackedColumns)


def start_cursor(start: SegmentCursor | MessageId | None, segment_id: int) -> SegmentCursor | None:
    """``start`` as the cursor a reader resumes after (``None``: from the beginning).

    Raises:
        InvalidConfigurationError: not a position cursor, a sentinel id, or another segment's id.
    """
    if start is None:
        return None
    if isinstance(start, MessageId):
        position = message_position(start)
        if position is None:
            raise InvalidConfigurationError("start cannot be the earliest/latest sentinel")
        if position.segment_id != segment_id:
            raise InvalidConfigurationError(
                f"start is a message of segment {position.segment_id}, not of {segment_id}"
            )
        return SegmentCursor.after(position.ledger_id, position.entry_id, position.batch_index)
    if isinstance(start, SegmentCursor) and start.kind is CursorKind.AFTER:
        return start
    raise InvalidConfigurationError(
        f"start must be None, a MessageId or SegmentCursor.after(...), got {start!r}"
    )


class _SegmentFeed(SegmentSubscriber):
    """The per-segment consumer of a :class:`AsyncSegmentReader`: entries become columns."""

    def __init__(
        self, reader: AsyncSegmentReader[Any], route: SegmentRoute, spec: SubscriptionSpec
    ) -> None:
        super().__init__(_FeedParent(reader), reader._ctx, route, spec)
        self.reader = reader

    def on_message(self, message: pb.CommandMessage, body: bytes) -> None:
        mid = message.message_id
        reader = self.reader
        try:
            cols, dispatched = reader._format.decode(
                reader._decoder, body, mid.ledgerId, mid.entryId
            )
        except BraidError as exc:
            self._discard_undecodable(mid, exc)
            return
        if self.spec.receiver_queue_bytes is not None:
            self.sized(len(body), dispatched)
        skip = self._skip
        if skip is not None and len(cols):
            # Positions grow within an entry: what the start filter drops is a prefix.
            first = 0
            while first < len(cols) and not skip.is_after(*cols.position(first)):
                first += 1
            if first:
                cols = cols.slice(first)
            if len(cols):
                self._skip = None
        if len(cols) < dispatched:
            self._permits_back(dispatched - len(cols))
        if len(cols):
            reader._enqueue(self, cols)


class AsyncSegmentReader(Generic[Chunk]):
    """Reads one segment as :class:`~braid.client.columns.MessageColumns` (create with
    ``AsyncClient.create_segment_reader``; see the module docstring)."""

    kind = "segment reader"

    def __init__(
        self,
        ctx: ClientContext,
        sources: LayoutSources,
        source: LayoutSource,
        segment_id: int,
        start: SegmentCursor | None,
        receiver_queue_size: int,
        chunk_format: ChunkFormat[Chunk],
        receiver_queue_bytes: int | None = None,
    ) -> None:
        self._ctx = ctx
        self._sources = sources
        self._source = source
        self.segment_id = segment_id
        self.start = start
        self._decoder = EntryColumnDecoder(source.topic, segment_id)
        self._format: ChunkFormat[Chunk] = chunk_format
        self._buffer: Chunk = chunk_format.empty(source.topic, segment_id)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._loop_thread = threading.get_ident()
        self._last: tuple[int, int, int] | None = None
        self._seg: _SegmentFeed | None = None
        self._spec = SubscriptionSpec(
            f"braid-reader-{uuid.uuid4().hex[:12]}",
            pb.CommandSubscribe.Exclusive,
            f"braid-{uuid.uuid4().hex[:10]}",
            durable=False,
            receiver_queue_size=receiver_queue_size,
            receiver_queue_bytes=receiver_queue_bytes,
        )
        self._closed = False
        self._close_task: asyncio.Future[None] | None = None

    @property
    def topic(self) -> str:
        """The canonical topic name."""
        return self._source.topic

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def drained(self) -> bool:
        """Whether the broker reported the segment's end and every row was taken."""
        seg = self._seg
        return seg is not None and seg.ended and not len(self._buffer)

    @property
    def last_position(self) -> tuple[int, int, int] | None:
        """``(ledger_id, entry_id, batch_index)`` of the last row taken, else ``None``."""
        return self._last

    async def _start(self) -> None:
        layout = await self._layout_with_segment()
        self._source.add_listener(self._on_layout)
        feed = _SegmentFeed(self, layout.route(self.segment_id), self._spec)
        self._seg = feed
        await feed.start()

    async def _layout_with_segment(self) -> TopicLayout:
        layout = self._source.current
        sid = self.segment_id
        deadline = time.monotonic() + NEWER_LAYOUT_WAIT
        while sid not in layout.routes:
            # Segment ids only grow: an id at or below the newest one known is gone for good;
            # a higher one may be a split this client has not been told about yet.
            remaining = deadline - time.monotonic()
            if (layout.routes and sid <= max(layout.routes)) or remaining <= 0:
                raise NotFoundError(
                    f"segment {sid} of {self.topic} is not in its layout (epoch {layout.epoch}): "
                    "it never existed or was deleted"
                )
            newer = await self._source.wait_newer(layout.epoch, remaining)
            if newer is not None:
                layout = newer
        return layout

    def _on_layout(self, layout: TopicLayout) -> None:
        seg = self._seg
        route = layout.routes.get(self.segment_id)
        if seg is not None and route is not None and route.topic == seg.route.topic:
            seg.route = route  # the segment moved to another broker: reconnect there

    # -- what its feed asks (through _FeedParent) ----------------------------------------------

    def _on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _reader_start(self) -> ReaderStart:
        with self._lock:
            last = self._last
        if last is not None:
            return ReaderStart("after", SegmentCursor.after(*last))
        if self.start is not None:
            return ReaderStart("after", self.start)
        return ReaderStart("beginning")

    def _enqueue(self, seg: SegmentSubscriber, cols: Chunk) -> None:
        with self._lock:
            if self._closed or seg is not self._seg:
                return
            self._buffer.extend(cols)
            seg.queued += len(cols)
            self._cond.notify_all()
        self._wake_async()

    def _purge(self, seg: SegmentSubscriber) -> None:
        with self._lock:
            removed = len(self._buffer)
            self._buffer = self._empty()
            seg.queued -= removed

    def _segment_ended(self) -> None:
        with self._lock:
            self._cond.notify_all()
        self._wake_async()

    def _wake_async(self) -> None:
        if not self._waiters:
            return
        if not self._on_loop_thread():
            self._ctx.loop.call_soon_threadsafe(self._wake_async)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -- reading ------------------------------------------------------------------------------

    def _take(self, max_messages: int) -> tuple[Chunk | None, bool]:
        """Up to ``max_messages`` rows off the buffer (call with the lock held), or ``None``;
        and whether flow permits are due (then call :meth:`_grant` once the lock is released:
        granting takes the same lock)."""
        if not len(self._buffer):
            return None, False
        taken = self._buffer.take_front(max_messages)
        self._last = taken.position(len(taken) - 1)
        seg = self._seg
        assert seg is not None
        seg.queued -= len(taken)
        return taken, seg.count_delivered(len(taken))

    def _grant(self) -> None:
        seg = self._seg
        if seg is not None:
            self._call_in_loop(seg.send_flow)

    def _call_in_loop(self, fn: Any) -> None:
        if self._on_loop_thread():
            fn()
        else:
            self._ctx.loop.call_soon_threadsafe(fn)

    def _empty(self) -> Chunk:
        return self._format.empty(self.topic, self.segment_id)

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"{self.kind} on segment {self.segment_id} of {self.topic}")

    async def read_columns(
        self,
        max_messages: int,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Chunk:
        """Up to ``max_messages`` next rows: those buffered now, else the first to arrive within
        ``timeout`` seconds (``None`` = wait). Empty when none came or the segment is drained.

        Raises:
            AlreadyClosedError: the reader is closed.
        """
        check_receive_args(max_messages, timeout)
        loop = self._ctx.loop
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            self._check_open()
            with self._lock:
                taken, grant = self._take(max_messages)
            if grant:
                self._grant()
            if taken is not None:
                return taken
            if self.drained:
                return self._empty()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return self._empty()
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(remaining):
                    await waiter
            except TimeoutError:
                pass
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    def read_columns_blocking(self, max_messages: int, timeout: float | None) -> Chunk:
        """:meth:`read_columns` for the blocking facade, on the caller's thread."""
        check_receive_args(max_messages, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self._check_open()
                taken, grant = self._take(max_messages)
                if taken is not None or self.drained:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
        if grant:
            self._grant()
        return self._empty() if taken is None else taken

    # -- closing ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop reading and release the topic; idempotent."""
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        with self._lock:
            self._closed = True
            self._buffer = self._empty()
            self._cond.notify_all()
        self._wake_async()
        self._source.remove_listener(self._on_layout)
        seg, self._seg = self._seg, None
        if seg is not None:
            await seg.close()
        await self._sources.release(self._source)

    async def __aenter__(self) -> AsyncSegmentReader[Chunk]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _FeedParent:
    """What an :class:`AsyncSegmentReader` lets its feed ask of it (it implements
    :class:`~braid.client.segment_consumer.SegmentParent`): a reader subscribes without a schema
    and hands out payload bytes (``MessageColumns.values``), so there is nothing to decode."""

    __slots__ = ("_reader", "delivery_lock")

    wire_schema = None

    def __init__(self, reader: AsyncSegmentReader[Any]) -> None:
        self._reader = reader
        self.delivery_lock = reader._lock

    def on_loop_thread(self) -> bool:
        return self._reader._on_loop_thread()

    def reader_start(self, seg: SegmentSubscriber) -> ReaderStart:
        return self._reader._reader_start()

    def latest_resolved(self, seg: SegmentSubscriber, cursor: SegmentCursor | None) -> None:
        """Not used: a segment reader never starts at "latest"."""

    def purge(self, seg: SegmentSubscriber) -> None:
        self._reader._purge(seg)

    def segment_ended(self, seg: SegmentSubscriber) -> None:
        self._reader._segment_ended()


__all__ = [
    "LISTS",
    "NEWER_LAYOUT_WAIT",
    "PACKED",
    "AsyncSegmentReader",
    "Chunk",
    "ChunkFormat",
    "start_cursor",
]
