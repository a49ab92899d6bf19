"""Topic compaction: the latest message of every key in a side ledger (Pulsar's compacted topic).

**State, as Pulsar keeps it.** A topic that was compacted has a ``__compaction`` cursor whose
mark-delete position is the *compaction horizon* (the last entry the compacted ledger covers) and
whose properties name the compacted ledger: ``CompactedTopicLedger`` = its ledger id (Pulsar's
key). Braid also records the storage cluster holding it (PIP-470 read routing) as a property
*key*, ``CompactedTopicLedgerCluster.<name>`` = 1, because cursor properties are integers. Both are
written by one cursor ``mark_delete``, so the horizon and the ledger always change together; the
cursor also keeps the topic's entries after the horizon from being trimmed before they are
compacted.

**The compacted ledger** holds, in position order, one entry per topic entry that still carries a
latest value, laid out like Pulsar's ``RawMessage``: ``[u32 idSize][MessageIdData][u32 size]
[stored entry]``. The stored entry is the original, unchanged (a compressed batch stays
compressed); for a batch of which only some messages are latest, the ``MessageIdData.ack_set``
names the kept ones, and readers are sent exactly that ack set, so the official clients skip the
others - no batch is rebuilt or recompressed.

**Compacting** (two phases over the previous compacted ledger followed by the topic's entries after
the previous horizon, up to the last entry when the run starts - the new horizon): phase one finds,
per key (a message's partition key), the position and batch index of its latest message, removing
the key when that message is a tombstone (``null_value`` or an empty payload); messages without a
key are dropped, as Pulsar does by default. Phase two writes the entries holding a latest message to
a new ledger, which is closed, then recorded on the cursor; the old ledger is deleted last. A crash
in between leaves the old state (and at worst an orphan ledger).

**Triggers**: the admin API (``PUT .../compaction``, answered 409 while a run is in progress) and
the broker's monitor, which compacts a topic once its bytes after the horizon exceed the namespace
``compaction_threshold`` or else ``brokerServiceCompactionThresholdInBytes`` (0: never).

Readers with ``read_compacted`` go through :meth:`TopicCompaction.read_from` up to the horizon and
read the topic itself after it (see ``SingleActiveDispatcher``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass

from braid.broker.dispatcher import EntryFilter, EntryVerdict
from braid.clock import Clock
from braid.core import ack_set
from braid.core.errors import BraidError, IllegalStateError
from braid.ledger.api import (
    EARLIEST,
    Entry,
    LedgerInfo,
    ManagedCursor,
    ManagedLedger,
    Position,
)
from braid.ledger.storage_ops import delete_quietly
from braid.protocol.batch import read_entry
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.storage.api import ReadHandle, StorageError

log = logging.getLogger(__name__)

#: The cursor whose mark-delete is the compaction horizon (Pulsar's
#: ``Compactor.COMPACTION_SUBSCRIPTION``).
COMPACTION_CURSOR = "__compaction"
#: Pulsar's property naming the compacted ledger.
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"
#: Braid's property key prefix naming the compacted ledger's storage cluster.
COMPACTED_CLUSTER_PREFIX = "CompactedTopicLedgerCluster."

_U32 = struct.Struct(">I")
_READ_CHUNK = 100


class CompactionInProgress(IllegalStateError):
    """A compaction was asked for while one is running (HTTP 409, as Pulsar)."""


class CompactionFailed(BraidError):
    """An entry that cannot be read for compaction (corrupt, or a codec that is not installed)."""


class CompactionStatus(enum.Enum):
    """Pulsar's ``LongRunningProcessStatus.Status``."""

    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


# -- the compacted ledger's entries ------------------------------------------------------------


def encode_compacted_entry(position: Position, kept: ack_set.AckSet, data: bytes) -> bytes:
    """One compacted-ledger entry: Pulsar's ``RawMessage`` layout, ``kept`` as the id's ack set."""
    mid = pb.MessageIdData(ledgerId=position.ledger_id, entryId=position.entry_id)
    mid.ack_set.extend(kept)
    head = mid.SerializeToString()
    return b"".join((_U32.pack(len(head)), head, _U32.pack(len(data)), data))


def decode_compacted_entry(raw: bytes) -> tuple[Entry, ack_set.AckSet]:
    """The original entry and the ack set of the messages compaction kept (empty: all).

    Raises:
        CompactionFailed: the bytes are not a compacted entry.
    """
    try:
        (id_size,) = _U32.unpack_from(raw, 0)
        mid = pb.MessageIdData.FromString(raw[4 : 4 + id_size])
        (size,) = _U32.unpack_from(raw, 4 + id_size)
        data = raw[8 + id_size : 8 + id_size + size]
    except Exception as exc:  # struct.error, DecodeError: not ours to leak
        raise CompactionFailed(f"compacted entry does not parse: {exc}") from exc
    if len(data) != size:
        raise CompactionFailed("compacted entry is truncated")
    return Entry(Position(mid.ledgerId, mid.entryId), data), tuple(mid.ack_set)


# -- what a compaction run decides -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Message:
    index: int | None  # batch index, None for a message that is not in a batch
    key: str | None
    tombstone: bool


def messages_of(entry: Entry, kept: ack_set.AckSet = ()) -> tuple[int, list[_Message]]:
    """How many messages ``entry`` holds, and those of them compaction still keeps.

    Raises:
        CompactionFailed: the entry does not parse or decompress.
    """
    try:
        metadata, messages = read_entry(entry.data)
    except BraidError as exc:
        raise CompactionFailed(f"entry {entry.position} cannot be read: {exc}") from exc
    if not metadata.HasField("num_messages_in_batch"):
        key = metadata.partition_key if metadata.HasField("partition_key") else None
        return 1, [_Message(None, key, metadata.null_value or not messages[0].payload)]
    out: list[_Message] = []
    for m in messages:
        index = m.batch_index if m.batch_index is not None else 0
        if kept and not ack_set.is_set(kept, index):
            continue
        single = m.single
        key = (
            single.partition_key
            if single is not None and single.HasField("partition_key")
            else None
        )
        tombstone = (single is not None and single.null_value) or not m.payload
        out.append(_Message(index, key, tombstone))
    return len(messages), out


def fold_latest(
    latest: dict[str, tuple[Position, int | None]],
    entries: Iterable[tuple[Entry, ack_set.AckSet]],
) -> int:
    """Phase one, one chunk at a time: record the position (and batch index) of each key's
    latest message in ``latest``; a tombstone removes its key, messages without a key are left
    out. Returns how many messages the chunk holds."""
    total = 0
    for entry, kept in entries:
        _, messages = messages_of(entry, kept)
        total += len(messages)
        for message in messages:
            if message.key is None:
                continue
            if message.tombstone:
                latest.pop(message.key, None)
            else:
                latest[message.key] = (entry.position, message.index)
    return total


def kept_messages(
    entry: Entry, kept: ack_set.AckSet, latest: Mapping[str, tuple[Position, int | None]]
) -> tuple[ack_set.AckSet | None, int]:
    """Phase two: what of ``entry`` goes into the new compacted ledger - ``None`` (nothing),
    ``()`` (the whole entry) or the ack set of its batch messages that are latest - and how many
    messages that is."""
    count, messages = messages_of(entry, kept)
    keep = [
        m.index
        for m in messages
        if m.key is not None and latest.get(m.key) == (entry.position, m.index)
    ]
    if not keep:
        return None, 0
    if keep == [None] or len(keep) == count:
        return (), len(keep)
    return ack_set.of_indexes(i for i in keep if i is not None), len(keep)


def bytes_after(ledgers: Iterable[LedgerInfo], position: Position | None) -> int:
    """Estimated bytes stored after ``position`` (all of them for ``None``)."""
    total = 0
    for info in ledgers:
        if position is None or info.ledger_id > position.ledger_id:
            total += info.size
        elif info.ledger_id == position.ledger_id and info.entries > 0:
            after = max(0, info.entries - (position.entry_id + 1))
            total += info.size * after // info.entries
    return total


# -- the topic's compaction --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CompactedLedger:
    ledger_id: int
    cluster: str
    horizon: Position


class TopicCompaction:
    """One topic's compacted ledger: reading it, and the runs that replace it."""

    def __init__(self, topic_name: str, ledger: ManagedLedger, clock: Clock) -> None:
        self._topic = topic_name
        self._ml = ledger
        self._clock = clock
        self._current: _CompactedLedger | None = None
        self._handle: ReadHandle | None = None
        self._handle_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.status = CompactionStatus.NOT_RUN
        self.last_error = ""
        self.last_succeeded_ms = 0
        self.last_failed_ms = 0
        self.last_removed_messages = 0
        #: Called after a run replaced the compacted ledger (the topic wakes its dispatchers).
        self.listeners: list[Callable[[], None]] = []
        #: The topic's transactions (set when it has a transaction buffer): compaction stops at
        #: the max read position and leaves markers and aborted messages out, as Pulsar's does.
        self.entry_filter: EntryFilter | None = None

    @classmethod
    def load(cls, topic_name: str, ledger: ManagedLedger, clock: Clock) -> TopicCompaction:
        """The compaction state the ``__compaction`` cursor records (none: never compacted)."""
        compaction = cls(topic_name, ledger, clock)
        cursor = ledger.cursors.get(COMPACTION_CURSOR)
        if cursor is not None:
            compaction._current = _recorded(cursor)
        return compaction

    @property
    def horizon(self) -> Position | None:
        return self._current.horizon if self._current is not None else None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def backlog_bytes(self) -> int:
        """Bytes stored after the horizon: what the next run would fold in."""
        return bytes_after(self._ml.ledgers, self.horizon)

    # -- reading ---------------------------------------------------------------------------------

    async def _read_handle(self) -> tuple[ReadHandle, _CompactedLedger] | None:
        async with self._handle_lock:
            current = self._current
            if current is None:
                return None
            if self._handle is None or self._handle.ledger_id != current.ledger_id:
                if self._handle is not None:
                    await _close_quietly(self._handle)
                client = self._ml.storage.client_for(current.cluster)
                self._handle = await client.open_ledger(current.ledger_id, recovery=False)
            return self._handle, current

    async def _entry_at(self, handle: ReadHandle, index: int) -> tuple[Entry, ack_set.AckSet]:
        (raw,) = await handle.read_entries(index, index)
        return decode_compacted_entry(raw.data)

    async def read_from(
        self, start: Position, max_entries: int
    ) -> list[tuple[Entry, ack_set.AckSet]]:
        """Compacted entries at or after ``start`` (at most ``max_entries``), with the ack set of
        the batch messages each keeps."""
        for _ in range(2):
            opened = await self._read_handle()
            if opened is None:
                return []
            handle, current = opened
            try:
                return await self._read(handle, start, max_entries)
            except StorageError:
                if self._current is current:
                    raise
                # A run replaced (and deleted) the ledger while we read: read the new one.
        return []

    async def _read(
        self, handle: ReadHandle, start: Position, max_entries: int
    ) -> list[tuple[Entry, ack_set.AckSet]]:
        count = handle.last_add_confirmed + 1
        lo, hi = 0, count
        while lo < hi:  # the first entry whose position is >= start
            mid = (lo + hi) // 2
            entry, _ = await self._entry_at(handle, mid)
            if entry.position < start:
                lo = mid + 1
            else:
                hi = mid
        if lo >= count:
            return []
        last = min(count - 1, lo + max(1, max_entries) - 1)
        return [decode_compacted_entry(e.data) for e in await handle.read_entries(lo, last)]

    async def last_compacted(self) -> tuple[Position, int] | None:
        """The compacted ledger's last message: its position and batch index (-1: not a batch);
        ``None`` when the ledger is empty or there is none."""
        opened = await self._read_handle()
        if opened is None:
            return None
        handle, _ = opened
        if handle.last_add_confirmed < 0:
            return None
        entry, kept = await self._entry_at(handle, handle.last_add_confirmed)
        metadata, _ = read_entry(entry.data)
        if not metadata.HasField("num_messages_in_batch"):
            return entry.position, -1
        count = metadata.num_messages_in_batch
        indexes = ack_set.indexes(kept, count) if kept else list(range(count))
        return entry.position, (indexes[-1] if count > 1 else -1)

    # -- compacting ------------------------------------------------------------------------------

    def trigger(self) -> asyncio.Task[None]:
        """Start a run in the background; raises :class:`CompactionInProgress` if one runs."""
        if self.running:
            raise CompactionInProgress(f"compaction of {self._topic} is already in progress")
        if self._closed:
            raise CompactionInProgress(f"topic {self._topic} is closing")
        self.status = CompactionStatus.RUNNING
        self._task = asyncio.ensure_future(self._run())
        return self._task

    async def compact(self) -> None:
        """Run a compaction and wait for it (raises what the run raised)."""
        task = self.trigger()
        await asyncio.shield(task)
        if self.status is CompactionStatus.ERROR:
            raise CompactionFailed(self.last_error)

    async def _run(self) -> None:
        try:
            await self._compact_once()
        except asyncio.CancelledError:
            self.status = CompactionStatus.ERROR
            self.last_error = "cancelled: the topic was closed"
            raise
        except Exception as exc:
            log.warning("compaction of %s failed: %r", self._topic, exc)
            self.status = CompactionStatus.ERROR
            self.last_error = str(exc) or type(exc).__name__
            self.last_failed_ms = self._clock.now_ms()
            return
        self.status = CompactionStatus.SUCCESS
        self.last_error = ""
        self.last_succeeded_ms = self._clock.now_ms()

    async def _compact_once(self) -> None:
        horizon = self._ml.last_confirmed_position
        limit = self.entry_filter.read_limit() if self.entry_filter is not None else None
        if limit is not None and limit < horizon:
            horizon = limit
        previous = self._current
        if horizon.entry_id < 0 or (previous is not None and horizon <= previous.horizon):
            return  # nothing new since the last run
        cursor = self._ml.cursors.get(COMPACTION_CURSOR)
        if cursor is None:
            cursor = await self._ml.open_cursor(COMPACTION_CURSOR, EARLIEST)
        latest: dict[str, tuple[Position, int | None]] = {}
        total = 0
        async for chunk in self._source(cursor, horizon):
            total += fold_latest(latest, chunk)
        storage = self._ml.storage.active
        config = self._ml.config
        writer = await storage.create_ledger(
            ensemble=config.ensemble,
            write_quorum=config.write_quorum,
            ack_quorum=config.ack_quorum,
            custom_metadata={
                "component": b"compacted-topic",
                "managed-ledger": self._ml.name.encode(),
                "compaction-horizon": str(horizon).encode(),
            },
        )
        kept_count = 0
        try:
            async for chunk in self._source(cursor, horizon):
                for entry, kept in chunk:
                    keep, count = kept_messages(entry, kept, latest)
                    if keep is None:
                        continue
                    kept_count += count
                    await writer.add_entry(encode_compacted_entry(entry.position, keep, entry.data))
            await writer.close()
            properties = {
                COMPACTED_LEDGER_PROPERTY: writer.ledger_id,
                COMPACTED_CLUSTER_PREFIX + writer.cluster_name: 1,
            }
            await cursor.mark_delete(horizon, properties)
        except BaseException:
            await delete_quietly(storage, writer.ledger_id)
            raise
        self._current = _CompactedLedger(writer.ledger_id, writer.cluster_name, horizon)
        self.last_removed_messages = total - kept_count
        for listener in self.listeners:
            listener()
        if previous is not None:
            await delete_quietly(self._ml.storage.client_for(previous.cluster), previous.ledger_id)
        log.info(
            "compacted %s up to %s into ledger %s (%d of %d messages kept)",
            self._topic,
            horizon,
            writer.ledger_id,
            kept_count,
            total,
        )

    async def _source(
        self, cursor: ManagedCursor, horizon: Position
    ) -> AsyncIterator[list[tuple[Entry, ack_set.AckSet]]]:
        """The previous compacted ledger's entries, then the topic's up to ``horizon``."""
        opened = await self._read_handle()
        if opened is not None:
            handle, _ = opened
            count = handle.last_add_confirmed + 1
            for first in range(0, count, _READ_CHUNK):
                last = min(count, first + _READ_CHUNK) - 1
                yield [
                    decode_compacted_entry(e.data) for e in await handle.read_entries(first, last)
                ]
        await cursor.seek(EARLIEST)  # the first entry after the previous horizon
        while True:
            entries = [e for e in await cursor.read_entries(_READ_CHUNK) if e.position <= horizon]
            if not entries:
                return
            entry_filter = self.entry_filter
            yield [
                (e, ())
                for e in entries
                if entry_filter is None or entry_filter.verdict(e) is EntryVerdict.DELIVER
            ]
            if entries[-1].position >= horizon:
                return

    # -- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop a run in progress and release the read handle (the topic is closing)."""
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        async with self._handle_lock:
            if self._handle is not None:
                await _close_quietly(self._handle)
                self._handle = None

    async def delete(self) -> None:
        """Delete the compacted ledger (the topic is being deleted)."""
        await self.close()
        if self._current is not None:
            current, self._current = self._current, None
            await delete_quietly(self._ml.storage.client_for(current.cluster), current.ledger_id)

    def stats(self) -> dict[str, object]:
        """Pulsar's ``CompactionStats`` plus the horizon."""
        return {
            "lastCompactionRemovedEventCount": self.last_removed_messages,
            "lastCompactionSucceedTimestamp": self.last_succeeded_ms,
            "lastCompactionFailedTimestamp": self.last_failed_ms,
            "compactionHorizon": str(self.horizon) if self.horizon is not None else None,
            "status": self.status.value,
        }


def _recorded(cursor: ManagedCursor) -> _CompactedLedger | None:
    properties = cursor.properties
    ledger_id = properties.get(COMPACTED_LEDGER_PROPERTY)
    if ledger_id is None:
        return None
    clusters = [
        k[len(COMPACTED_CLUSTER_PREFIX) :]
        for k in properties
        if k.startswith(COMPACTED_CLUSTER_PREFIX)
    ]
    if len(clusters) != 1:
        log.warning("compaction cursor names %d storage clusters; ignoring it", len(clusters))
        return None
    return _CompactedLedger(ledger_id, clusters[0], cursor.mark_delete_position)


async def _close_quietly(handle: ReadHandle) -> None:
    try:
        await handle.close()
    except BraidError as exc:
        log.debug("closing compacted ledger %s: %r", handle.ledger_id, exc)
