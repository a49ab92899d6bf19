"""The storage engine of one bookie on a local data directory.

Write path: ``add_entry`` encodes a journal record on the loop and puts it in an outbox that goes to
the journal thread once per loop turn; the thread group-commits (one fsync per batch) and then
hands the batch back to the loop (``call_soon_threadsafe``): the loop puts the entries in a write
cache, updates the per-ledger state and calls the waiting callbacks (or resolves futures) in
journal order - the acknowledgement. The same batch goes to the flusher thread,
which copies it into per-ledger entry files (:mod:`ledger_files`) and then evicts it from the write
cache. When the journal rolls to a new file, the flusher *checkpoints*: fsyncs the entry files,
records the journal position they cover in ``checkpoint`` (write-temp, fsync, rename) and deletes
the older journal files.

Restart replays the journal from the checkpoint into the entry files (a torn tail is cut off by
checksum), fsyncs, writes a fresh checkpoint and starts a new journal file
(:mod:`braid.storage.bookie.recovery`). Fence flags and
deletions are journal records too, so they survive a crash like entries do. The fence of a
deleted ledger outlives it (a tombstone): every later add to it is refused, so a writer that
missed both the fence and the deletion (a broker that lost ownership) never has an add
acknowledged into a ledger nobody lists (ADR 0046).

No blocking call runs on the event loop: journal, flush and checkpoint run in their two threads,
file reads in a small executor, and open/close in the executor.

A full disk makes the bookie *read-only* (:mod:`braid.storage.bookie.disk`): new entries are
refused up front with ``StorageReadOnly``, everything acknowledged stays readable (entries the
flusher could not copy stay in the write cache; the flusher retries them, in order, as space comes
back), fences and deletes still go through. A periodic check of the disk usage, every
``diskCheckInterval``, turns it read-only above ``diskUsageThreshold`` and read-write again below
``diskUsageLwmThreshold``; a write failing with ``ENOSPC`` turns it read-only at once. Replay
applies in place and the checkpoint can be rewritten in place, so a restart needs no more space
than the bookie held before it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from braid.clock import Clock, SystemClock
from braid.storage.api import (
    EntryTooLarge,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    StorageClosed,
    StorageError,
    StorageIOError,
    StorageReadOnly,
)
from braid.storage.bookie.disk import (
    DiskState,
    DiskThresholds,
    DiskUsage,
    is_no_space,
    read_disk_usage,
)
from braid.storage.bookie.journal import JournalWriter
from braid.storage.bookie.records import (
    JournalRecord,
    RecordKind,
    encode_record_head,
)
from braid.storage.bookie.recovery import (
    LedgerState,
    Recovered,
    apply_records,
    delete_journals_before,
    recover,
    write_checkpoint,
)
from braid.storage.validation import validate_entry_id, validate_ledger_id

log = logging.getLogger(__name__)

#: Largest entry a bookie stores (Pulsar's default maxMessageSize is 5 MiB; room for batch headers).
MAX_ENTRY_SIZE = 5 * 1024 * 1024 + 64 * 1024
#: The journal thread hands durable entries to the flusher in chunks of about this size.
FLUSH_BYTES = 1024 * 1024
FLUSH_COUNT = 256


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """An entry as a bookie returns it, with the writer's piggybacked LAC and running length."""

    entry_id: int
    data: bytes
    last_add_confirmed: int
    length: int


@dataclass(frozen=True, slots=True)
class LacInfo:
    """A bookie's view of a ledger: the highest LAC piggybacked on any stored entry, and the highest
    entry id it stores (-1 when it stores none)."""

    last_add_confirmed: int
    last_entry_id: int


#: Called once, on the event loop, with the entry id and ``None`` when an add is durable, or with
#: the error that lost it. The id lets one callable serve every add of a ledger (no closure each).
AddCallback = Callable[[int, StorageError | None], None]


class _Pending(NamedTuple):
    """A queued journal record and who waits for it (a future or a callback). Once durable, an
    add's item is also its write-cache entry: the flusher evicts exactly that item (by
    identity), never a newer write of the same entry. A NamedTuple for the same hot-path reason
    as ``JournalRecord``."""

    record: JournalRecord
    future: asyncio.Future[None] | None
    callback: AddCallback | None


# The add path builds its two tuples per entry with ``tuple.__new__`` (in C) rather than through
# the NamedTuples' generated ``__new__`` or ``_make`` (Python frames): same objects, every field
# given, in order.
_tuple_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class _FlushBatch:
    items: list[_Pending]


@dataclass(frozen=True, slots=True)
class _CheckpointAt:
    journal_seq: int
    tokens: list[object]


class _StopFlusher:
    pass


def _validate_ids(ledger_id: int, entry_id: int | None = None) -> None:
    validate_ledger_id(ledger_id)
    if entry_id is not None:
        validate_entry_id(entry_id)


class Bookie:
    """One bookie's storage engine. Create with :meth:`open`; all methods run on the event loop."""

    def __init__(
        self,
        data_dir: Path,
        bookie_id: str,
        recovered: Recovered,
        *,
        disk_thresholds: DiskThresholds | None = None,
        clock: Clock | None = None,
        **opts: int,
    ) -> None:
        """Use :meth:`open`."""
        self._dir = data_dir
        self._journal_dir = recovered.journal_dir
        self._id = bookie_id
        self._loop = asyncio.get_running_loop()
        self._files = recovered.files
        self._lock = recovered.lock
        self._ledgers = recovered.ledgers
        self._cache: dict[int, dict[int, _Pending]] = {}
        self._outbox_payloads: list[bytes] = []
        self._outbox_tokens: list[_Pending] = []
        self._unflushed: list[_Pending] = []
        self._unflushed_bytes = 0
        self._closed = False
        self._error: OSError | None = None
        self._disk = DiskState(disk_thresholds or DiskThresholds())
        self._clock: Clock = clock or SystemClock()
        self._disk_watch: asyncio.Task[None] | None = None
        # The flusher waits on this after running out of space; set when space may be back (and
        # to make it give up when the bookie closes).
        self._flush_retry = threading.Event()
        self._flush_stopping = False
        self._max_entry_size = opts.get("max_entry_size", MAX_ENTRY_SIZE)
        self._reader = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{bookie_id}-read")
        self._flush_queue: queue.SimpleQueue[_FlushBatch | _CheckpointAt | _StopFlusher] = (
            queue.SimpleQueue()
        )
        self._flusher = threading.Thread(
            target=self._flush_loop, name=f"{bookie_id}-flusher", daemon=True
        )
        self._flusher.start()
        self._journal_max_bytes = opts.get("journal_max_bytes", 64 * 1024 * 1024)
        self._next_seq = recovered.next_seq
        self._journal: JournalWriter  # set by open(): creating it fsyncs, so not on the loop
        self.replayed_records = recovered.replayed
        if recovered.unapplied:
            self._hold_unapplied(recovered.unapplied)
        if recovered.space_error is not None:
            self._disk.write_failed(recovered.space_error)

    def _hold_unapplied(self, records: list[JournalRecord]) -> None:
        """Serve records replay could not copy from the write cache, and give them to the
        flusher (first in its queue: journal order), as if they had just been journaled."""
        items = []
        for record in records:
            items.append(_Pending(record, None, None))
        self._on_durable(items)
        self._flush_queue.put(_FlushBatch(items))

    def _start_journal(self) -> None:
        self._journal = JournalWriter(
            self._journal_dir,
            self._next_seq,
            on_durable=self._journal_durable,
            on_roll=self._journal_rolled,
            on_error=self._journal_failed,
            max_file_bytes=self._journal_max_bytes,
        )

    @classmethod
    async def open(
        cls,
        data_dir: Path,
        *,
        bookie_id: str | None = None,
        journal_max_bytes: int = 64 * 1024 * 1024,
        max_entry_size: int = MAX_ENTRY_SIZE,
        disk_thresholds: DiskThresholds | None = None,
        clock: Clock | None = None,
        journal_dir: Path | None = None,
    ) -> Bookie:
        """Open (or create) the bookie in ``data_dir``, replaying its journal after a crash.

        Args:
            disk_thresholds: when the bookie turns read-only and back (BookKeeper's defaults).
            journal_dir: where the journal files go (BookKeeper's ``journalDirectories``;
                default ``data_dir/journal``): a separate disk keeps fsyncs off entry-file I/O.
            clock: paces the disk checks.

        Raises:
            StorageIOError: the data directory cannot be read or written.
        """
        loop = asyncio.get_running_loop()
        data_dir = Path(data_dir)
        try:
            recovered = await loop.run_in_executor(
                None, recover, data_dir, Path(journal_dir) if journal_dir else data_dir / "journal"
            )
        except OSError as exc:
            raise StorageIOError(f"bookie {data_dir}: cannot open: {exc}") from exc
        bookie = cls(
            data_dir,
            bookie_id or data_dir.name,
            recovered,
            disk_thresholds=disk_thresholds,
            clock=clock,
            journal_max_bytes=journal_max_bytes,
            max_entry_size=max_entry_size,
        )
        try:
            await loop.run_in_executor(None, bookie._start_journal)
        except OSError as exc:
            bookie._flush_queue.put(_StopFlusher())
            await loop.run_in_executor(None, bookie._flusher.join)
            await loop.run_in_executor(None, recovered.files.close)
            recovered.lock.release()
            raise StorageIOError(f"bookie {data_dir}: cannot start the journal: {exc}") from exc
        await bookie.check_disk()
        bookie._disk_watch = asyncio.create_task(bookie._watch_disk(), name=f"{bookie._id}-disk")
        return bookie

    @property
    def bookie_id(self) -> str:
        return self._id

    @property
    def data_dir(self) -> Path:
        return self._dir

    @property
    def read_only_reason(self) -> str | None:
        """Why the bookie refuses new entries (its disk is full), or ``None`` while writable."""
        return self._disk.reason if self._disk.read_only else None

    def disk_status(self) -> dict[str, object]:
        """The bookie's disk state for health checks: ``state`` (``read-write``/``read-only``),
        ``reason``, usage and thresholds."""
        return {"bookie": self._id, **self._disk.status()}

    async def check_disk(self) -> DiskUsage | None:
        """Read the disk usage now and update the state (what the periodic check does)."""
        try:
            usage = await self._loop.run_in_executor(self._reader, read_disk_usage, self._dir)
        except (OSError, RuntimeError) as exc:  # RuntimeError: the executor is shut down
            log.warning("bookie %s: cannot read the disk usage: %s", self._id, exc)
            return None
        was_read_only = self._disk.read_only
        if self._disk.observe(usage):
            self._log_disk_state(was_read_only)
        if not self._disk.read_only:
            self._flush_retry.set()  # a flusher waiting for space may try again
        return usage

    async def _watch_disk(self) -> None:
        interval = self._disk.thresholds.check_interval_s
        while not self._closed:
            await self._clock.sleep(interval)
            if not self._closed:
                await self.check_disk()

    def _disk_full(self, exc: OSError) -> None:
        """A journal or entry-file write ran out of space (called on the loop)."""
        was_read_only = self._disk.read_only
        if self._disk.write_failed(exc):
            self._log_disk_state(was_read_only)

    def _log_disk_state(self, was_read_only: bool) -> None:
        if self._disk.read_only and not was_read_only:
            log.warning(
                "bookie %s is read-only, new entries are refused: %s",
                self._id,
                self._disk.reason,
            )
        elif was_read_only and not self._disk.read_only:
            usage = self._disk.last_usage
            log.warning(
                "bookie %s is writable again (disk usage %s)",
                self._id,
                "unknown" if usage is None else f"{usage.used_fraction:.1%}",
            )

    @property
    def journal_fsyncs(self) -> int:
        """How many group commits (journal fsyncs) this bookie has done since it opened."""
        return self._journal.fsyncs

    # -- write path ----------------------------------------------------------------------------
    def _submit(self, record: JournalRecord) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self._loop.create_future()
        self._enqueue(record, fut, None)
        return fut

    def _enqueue(
        self, record: JournalRecord, fut: asyncio.Future[None] | None, callback: AddCallback | None
    ) -> None:
        if self._closed:
            raise StorageClosed(f"bookie {self._id} is closed")
        if self._error is not None:
            raise StorageIOError(f"bookie {self._id}: disk failed: {self._error}")
        if not self._outbox_payloads:
            # Everything submitted during this loop turn goes to the journal thread together at
            # the end of the turn: one queue put and one wake-up of that thread per turn, and the
            # writers woken by one group commit share the next one.
            self._loop.call_soon(self._drain_outbox)
        self._outbox_payloads.append(encode_record_head(record))
        if record.data:
            self._outbox_payloads.append(record.data)
        self._outbox_tokens.append(_tuple_new(_Pending, (record, fut, callback)))

    def _drain_outbox(self) -> None:
        if self._outbox_payloads:
            self._journal.submit(self._outbox_payloads, self._outbox_tokens)  # type: ignore[arg-type]
            self._outbox_payloads = []
            self._outbox_tokens = []

    async def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        *,
        last_add_confirmed: int = -1,
        length: int = 0,
        recovery: bool = False,
    ) -> None:
        """Store an entry; returns once it is durable (journal fsync'd).

        ``last_add_confirmed`` and ``length`` are the writer's state, piggybacked so recovery can
        find them. ``recovery=True`` is the recovering client re-replicating entries: it passes the
        fence that stops the old writer.

        Raises:
            LedgerFenced: the ledger was fenced and this is not a recovery add.
            EntryTooLarge, InvalidLedgerId, InvalidEntryId: bad input.
            StorageIOError: the disk failed; the entry is not acknowledged.
        """
        await self.submit_add(
            ledger_id,
            entry_id,
            data,
            last_add_confirmed=last_add_confirmed,
            length=length,
            recovery=recovery,
        )

    def submit_add(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        *,
        last_add_confirmed: int = -1,
        length: int = 0,
        recovery: bool = False,
    ) -> asyncio.Future[None]:
        """Queue an add and return the future that resolves once it is durable.

        The same as :meth:`add_entry` without a coroutine per call (the ledger writer's hot path).
        Bad input and a fenced ledger raise at once; disk failure comes through the future.
        Cancelling the future does not withdraw the entry.
        """
        return self._submit(
            self._add_record(ledger_id, entry_id, data, last_add_confirmed, length, recovery)
        )

    def submit_add_callback(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        callback: AddCallback,
        last_add_confirmed: int = -1,
        length: int = 0,
        recovery: bool = False,
    ) -> None:
        """Queue an add; ``callback(entry_id, None)`` is called on the loop, in the same step that
        learns the entry is durable, or ``callback(entry_id, error)`` once it is lost. No future
        or task per add: the ledger writer's hot path. Bad input and a fenced ledger raise at
        once."""
        self._enqueue(
            self._add_record(ledger_id, entry_id, data, last_add_confirmed, length, recovery),
            None,
            callback,
        )

    def _add_record(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        last_add_confirmed: int,
        length: int,
        recovery: bool,
    ) -> JournalRecord:
        validate_ledger_id(ledger_id)
        validate_entry_id(entry_id)
        if len(data) > self._max_entry_size:
            raise EntryTooLarge(f"entry of {len(data)} bytes exceeds {self._max_entry_size}")
        if self._disk.read_only:
            raise StorageReadOnly(f"bookie {self._id} is read-only: {self._disk.reason}")
        state = self._ledgers.get(ledger_id)
        if state is not None and state.fenced and (state.deleted or not recovery):
            what = "was deleted" if state.deleted else "is fenced"
            raise LedgerFenced(f"ledger {ledger_id} {what} on bookie {self._id}")
        return _tuple_new(
            JournalRecord,
            (RecordKind.ADD, ledger_id, entry_id, last_add_confirmed, length, bytes(data)),
        )

    async def fence(self, ledger_id: int) -> LacInfo:
        """Fence a ledger (durably): later non-recovery adds fail with :class:`LedgerFenced`.

        Returns the ledger's state once the fence is durable; every add queued before the fence is
        included in it.
        """
        _validate_ids(ledger_id)
        state = self._ledgers.setdefault(ledger_id, LedgerState())
        # Effective at once for adds arriving from now on; durable when the future resolves.
        state.fenced = True
        await self._submit(JournalRecord(RecordKind.FENCE, ledger_id))
        return self._lac_info(ledger_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete a ledger's entries; its files are unlinked by the flusher. A fenced ledger's
        fence outlives it (a tombstone: every later add is refused, recovery adds too); an
        unfenced one is forgotten (its id may be made again, as an interrupted copy is).

        Deleting a ledger this bookie does not hold is not an error (deletion is retried).
        """
        _validate_ids(ledger_id)
        state = self._ledgers.get(ledger_id)
        if state is not None and state.fenced:
            state.deleted = True  # effective at once; durable when the future resolves
        await self._submit(JournalRecord(RecordKind.DELETE, ledger_id))

    async def checkpoint(self) -> None:
        """Roll the journal, flush and fsync entry files, and delete journal files they cover."""
        if self._closed:
            raise StorageClosed(f"bookie {self._id} is closed")
        fut: asyncio.Future[None] = self._loop.create_future()
        self._drain_outbox()
        self._journal.request_roll(fut)
        await fut

    # -- callbacks from the journal / flusher threads ------------------------------------------
    def _call_on_loop(self, fn: object, *args: object) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)  # type: ignore[arg-type]
        except RuntimeError:
            pass  # the loop is gone (process shutting down): nobody is waiting any more

    def _journal_durable(self, tokens: list[object]) -> None:
        # Runs in the journal thread. Loop first, flusher second: the write cache must hold an
        # entry before the flusher can evict it.
        self._call_on_loop(self._on_durable, tokens)
        items: list[_Pending] = tokens  # type: ignore[assignment]
        self._unflushed.extend(items)
        urgent = False
        for item in items:
            self._unflushed_bytes += len(item.record.data)
            urgent = urgent or item.record.kind is not RecordKind.ADD
        # The flusher works in large chunks: fewer wake-ups competing with the write path, and
        # one write per ledger file per chunk. Deletes go at once so space comes back promptly.
        if urgent or self._unflushed_bytes >= FLUSH_BYTES or len(self._unflushed) >= FLUSH_COUNT:
            self._hand_to_flusher()

    def _hand_to_flusher(self) -> None:
        if self._unflushed:
            self._flush_queue.put(_FlushBatch(self._unflushed))
            self._unflushed = []
            self._unflushed_bytes = 0

    def _journal_rolled(self, new_seq: int, tokens: list[object]) -> None:
        self._hand_to_flusher()
        self._flush_queue.put(_CheckpointAt(new_seq, tokens))

    def _journal_failed(self, tokens: list[object], exc: OSError) -> None:
        self._call_on_loop(self._on_failed, tokens, exc)

    def _on_durable(self, items: list[_Pending]) -> None:
        # The group commit's completion: state, write cache, then every waiter of the group in
        # journal order (the ledger writers' callbacks answer their callers right here).
        cache = self._cache
        ledgers = self._ledgers
        # A group holds runs of one ledger's adds: its cache and state are looked up per run.
        run_ledger = -1
        cached: dict[int, _Pending] = {}
        state = LedgerState()
        for item in items:
            record = item.record
            if record.kind is RecordKind.ADD:
                ledger_id = record.ledger_id
                entry_id = record.entry_id
                if ledger_id != run_ledger:
                    run_ledger = ledger_id
                    cached = cache.setdefault(ledger_id, {})
                    state = ledgers.setdefault(ledger_id, LedgerState())
                cached[entry_id] = item
                if entry_id > state.last_entry_id:
                    state.last_entry_id = entry_id
                if record.last_add_confirmed > state.last_add_confirmed:
                    state.last_add_confirmed = record.last_add_confirmed
            elif record.kind is RecordKind.FENCE:
                self._ledgers.setdefault(record.ledger_id, LedgerState()).fenced = True
            else:
                gone = self._ledgers.pop(record.ledger_id, None)
                if gone is not None and gone.fenced:
                    self._ledgers[record.ledger_id] = LedgerState(fenced=True, deleted=True)
                self._cache.pop(record.ledger_id, None)
                run_ledger = -1  # a later add of that ledger starts from nothing again
            if item.callback is not None:
                try:  # inlined _notify: this loop runs once per entry
                    item.callback(record.entry_id, None)
                except Exception:  # a broken callback must not stop the others in this group
                    log.exception("bookie %s: add callback failed", self._id)
            elif item.future is not None and not item.future.done():
                item.future.set_result(None)

    def _notify(self, callback: AddCallback, entry_id: int, error: StorageError | None) -> None:
        try:
            callback(entry_id, error)
        except Exception:  # a broken callback must not stop the others in this group
            log.exception("bookie %s: add callback failed", self._id)

    def _on_failed(self, tokens: list[object], exc: OSError) -> None:
        if is_no_space(exc):
            self._disk_full(exc)  # the journal goes on once there is space again
        else:
            self._error = self._error or exc
        for token in tokens:
            error = StorageIOError(f"bookie {self._id}: disk failed: {exc}")
            if isinstance(token, _Pending) and token.callback is not None:
                self._notify(token.callback, token.record.entry_id, error)
                continue
            fut = token.future if isinstance(token, _Pending) else token
            if isinstance(fut, asyncio.Future) and not fut.done():
                fut.set_exception(error)

    def _evict(self, items: list[_Pending]) -> None:
        """Drop flushed adds from the write cache (the entry files have them now)."""
        cache = self._cache
        for item in items:
            record = item.record
            entries = cache.get(record.ledger_id)
            # Only this very write: a newer one of the same entry (a recovery re-add) stays
            # until its own flush. (Fences and deletes were never cached.)
            if entries is not None and entries.get(record.entry_id) is item:
                del entries[record.entry_id]
                if not entries:
                    del cache[record.ledger_id]

    def _resolve(self, tokens: list[object]) -> None:
        for token in tokens:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(None)

    def _flush_loop(self) -> None:
        failed = False
        while True:
            item = self._flush_queue.get()
            if isinstance(item, _StopFlusher):
                return
            while True:  # until this item is applied, or given up
                try:
                    self._flush_item(item, failed)
                    break
                except OSError as exc:
                    if failed or not is_no_space(exc):
                        log.error("bookie %s: flusher failed: %s", self._id, exc)
                        failed = True
                        tokens = item.tokens if isinstance(item, _CheckpointAt) else []
                        self._call_on_loop(self._on_failed, tokens, exc)
                        break
                    # Out of space: the bookie turns read-only, the entries stay in the write
                    # cache (nothing was evicted), and this item - the oldest not applied - is
                    # retried when space may be back, so the files stay in journal order.
                    self._call_on_loop(self._disk_full, exc)
                    if self._flush_stopping:
                        self._give_up_flushing(item)
                        return
                    self._flush_retry.wait(self._disk.thresholds.check_interval_s)
                    self._flush_retry.clear()

    def _flush_item(self, item: _FlushBatch | _CheckpointAt, failed: bool) -> None:
        if isinstance(item, _FlushBatch):
            apply_records(self._files, [p.record for p in item.items])
            self._call_on_loop(self._evict, item.items)
        elif failed:
            # A record may be missing from the entry files: never let a checkpoint claim
            # otherwise (the journal keeps it; restart replays it).
            self._call_on_loop(self._on_failed, item.tokens, OSError("flusher failed earlier"))
        else:
            # Every record of journal files < journal_seq is applied: make that durable, then
            # those journal files are no longer needed.
            self._files.sync()
            write_checkpoint(self._dir, item.journal_seq)
            delete_journals_before(self._journal_dir, item.journal_seq)
            self._call_on_loop(self._resolve, item.tokens)

    def _give_up_flushing(self, item: _FlushBatch | _CheckpointAt) -> None:
        """The bookie is closing and the disk is still full: leave the rest to the journal (no
        checkpoint covers it, so the next start replays it) and fail the checkpoints waiting."""
        log.warning(
            "bookie %s: closing with entries not yet copied to the entry files; the next start "
            "replays them from the journal",
            self._id,
        )
        error = OSError(errno.ENOSPC, "no space left to flush before closing")
        pending: list[object] = [item]
        while True:
            try:
                pending.append(self._flush_queue.get_nowait())
            except queue.Empty:
                break
        for waiting in pending:
            if isinstance(waiting, _CheckpointAt):
                self._call_on_loop(self._on_failed, waiting.tokens, error)

    # -- read path -----------------------------------------------------------------------------
    def _lac_info(self, ledger_id: int) -> LacInfo:
        state = self._ledgers.get(ledger_id)
        if state is None:
            return LacInfo(-1, -1)
        return LacInfo(state.last_add_confirmed, state.last_entry_id)

    async def read_lac(self, ledger_id: int) -> LacInfo:
        """Highest piggybacked LAC and highest stored entry id of a ledger ((-1, -1) if none)."""
        _validate_ids(ledger_id)
        self._check_open()
        return self._lac_info(ledger_id)

    def last_entry_id(self, ledger_id: int) -> int:
        """Highest entry id stored for the ledger, -1 if none."""
        return self._lac_info(ledger_id).last_entry_id

    def is_fenced(self, ledger_id: int) -> bool:
        """Whether the ledger is fenced on this bookie."""
        state = self._ledgers.get(ledger_id)
        return state is not None and state.fenced

    def ledgers(self) -> list[int]:
        """Ids of the ledgers this bookie holds entries or a fence flag for (not tombstones)."""
        return sorted(lid for lid, state in self._ledgers.items() if not state.deleted)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageClosed(f"bookie {self._id} is closed")

    def _cached(self, ledger_id: int, entry_id: int) -> StoredEntry | None:
        cached = self._cache.get(ledger_id, {}).get(entry_id)
        if cached is None:
            return None
        rec = cached.record
        return StoredEntry(entry_id, rec.data, rec.last_add_confirmed, rec.length)

    def _read_files(self, ledger_id: int, first: int, last: int) -> list[StoredEntry | None]:
        out: list[StoredEntry | None] = []
        for entry_id in range(first, last + 1):
            found = self._files.read(ledger_id, entry_id)
            if found is None:
                out.append(None)
            else:
                slot, data = found
                out.append(StoredEntry(entry_id, data, slot.last_add_confirmed, slot.length))
        return out

    async def read_entry(self, ledger_id: int, entry_id: int) -> StoredEntry:
        """Read one entry.

        Raises:
            NoSuchLedger: this bookie holds nothing for the ledger.
            NoSuchEntry: the entry is not stored here.
            StorageIOError: the stored bytes fail their checksum.
        """
        entries = await self.read_entries(ledger_id, entry_id, entry_id)
        return entries[0]

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[StoredEntry]:
        """Read entries ``first..last``; all must be stored here (else :class:`NoSuchEntry`)."""
        _validate_ids(ledger_id, first)
        _validate_ids(ledger_id, last)
        self._check_open()
        state = self._ledgers.get(ledger_id)
        if state is None or state.deleted:
            raise NoSuchLedger(f"bookie {self._id} holds no ledger {ledger_id}")
        if first > last or last > state.last_entry_id:
            raise NoSuchEntry(
                f"ledger {ledger_id}: entries {first}..{last} not stored "
                f"(last is {state.last_entry_id})"
            )
        result = [self._cached(ledger_id, e) for e in range(first, last + 1)]
        missing = [i for i, r in enumerate(result) if r is None]
        if missing:
            lo, hi = first + missing[0], first + missing[-1]
            try:
                from_disk = await self._loop.run_in_executor(
                    self._reader, self._read_files, ledger_id, lo, hi
                )
            except OSError as exc:
                raise StorageIOError(f"bookie {self._id}: read failed: {exc}") from exc
            for i in missing:
                result[i] = self._cached(ledger_id, first + i) or from_disk[first + i - lo]
        out: list[StoredEntry] = []
        for i, entry in enumerate(result):
            if entry is None:
                raise NoSuchEntry(f"ledger {ledger_id}: entry {first + i} not stored here")
            out.append(entry)
        return out

    def disk_usage(self) -> int:
        """Bytes in the journal and entry files (blocking; for tests and stats)."""
        total = 0
        for sub in (self._journal_dir, self._dir / "ledgers"):
            for path in sub.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    total += path.stat().st_size
        return total

    async def close(self) -> None:
        """Finish queued writes, checkpoint, stop the threads and close files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._disk_watch is not None:
            self._disk_watch.cancel()
        fut: asyncio.Future[None] = self._loop.create_future()
        self._drain_outbox()
        self._journal.request_roll(fut)
        await self._loop.run_in_executor(None, self._journal.stop)
        # A flusher waiting for space tries once more, then leaves the rest to the journal.
        self._flush_stopping = True
        self._flush_retry.set()
        with contextlib.suppress(StorageIOError):
            await fut
        self._flush_queue.put(_StopFlusher())
        await self._loop.run_in_executor(None, self._flusher.join)
        await self._loop.run_in_executor(None, self._files.close)
        self._lock.release()
        await self._loop.run_in_executor(None, self._reader.shutdown)
