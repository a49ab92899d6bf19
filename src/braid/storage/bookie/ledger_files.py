"""Entry storage of one bookie: a data file and an offset index per ledger (blocking, thread-safe).

Layout under ``<data dir>/ledgers``: ``<id>.data`` holds payloads back to back, ``<id>.idx``
holds one fixed-size slot per entry id (see :mod:`records`), so a read is two ``pread`` calls and
never a scan. ``<id>.fenced`` is an empty marker: the ledger was fenced. Deleting a ledger unlinks
its files, which returns the space at once (the reason for per-ledger files; see ADR 0011); the
fence of a fenced ledger outlives it (as a BookKeeper bookie's does until its garbage collector
runs): ``<id>.fenced`` stays beside an empty ``<id>.deleted`` *tombstone*, so a stale writer that
never learnt of the deletion cannot have adds acknowledged into it (ADR 0046). A ledger deleted
unfenced leaves nothing (an interrupted copy is deleted and made again under the same id).

These files are written only by the bookie's flusher thread, in journal order, and are fsync'd only
at a checkpoint; until then the journal is what makes an entry durable. Every method takes one
lock, so readers (executor threads) never see a file descriptor that a concurrent delete has closed.

Applying records is idempotent *in place*: an add whose slot already points at the same bytes is
skipped, so replaying a journal after a crash, or retrying a flush that ran out of space, does not
append the same payloads again (a restart used to need space for a second copy of everything the
journal still held). A write that fails - typically ``ENOSPC`` after writing what fit - is undone:
the data file is cut back to where it ended, so no slot is left pointing at half a payload, and
the caller retries later.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from braid.storage.api import StorageIOError
from braid.storage.bookie.records import (
    SLOT_SIZE,
    IndexSlot,
    JournalRecord,
    checksum,
    decode_slot,
    pack_slot,
)


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """What a bookie knows about one ledger at startup."""

    last_entry_id: int
    last_add_confirmed: int
    fenced: bool
    #: The ledger was deleted: only its tombstone is left (it stays fenced).
    deleted: bool = False


@dataclass(slots=True)
class _OpenLedger:
    data_fd: int
    idx_fd: int
    data_end: int
    idx_end: int  # bytes of index written: slots below it may already point at an entry


def pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    """``pwrite`` all of ``data`` at ``offset``, resuming after short writes (a file system that
    runs out of space writes what fits, then fails with ``ENOSPC`` on the next call)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.ENOSPC, "pwrite wrote nothing")
        offset += written
        view = view[written:]


#: Buffers per ``pwritev`` call (the kernel's ``IOV_MAX`` is 1024 on Linux).
IOV_MAX = 1024


def pwritev_all(fd: int, buffers: list[bytes], offset: int) -> None:
    """Write ``buffers`` back to back at ``offset`` in as few ``pwritev`` calls as ``IOV_MAX``
    allows, resuming after short writes (like :func:`pwrite_all`: nothing written is ``ENOSPC``)."""
    pending: list[bytes | memoryview] = list(buffers)
    while pending:
        chunk = pending[:IOV_MAX]
        written = os.pwritev(fd, chunk, offset)
        if written <= 0:
            raise OSError(errno.ENOSPC, "pwritev wrote nothing")
        offset += written
        done = 0
        for buf in chunk:
            if written < len(buf):
                break
            written -= len(buf)
            done += 1
        del pending[:done]
        if written:
            pending[0] = memoryview(pending[0])[written:]


class LedgerFiles:
    """Per-ledger data + index files in one directory."""

    def __init__(self, directory: Path, *, max_open: int = 256) -> None:
        self._dir = directory
        self._dir.mkdir(parents=True, exist_ok=True)
        self._max_open = max_open
        self._open: OrderedDict[int, _OpenLedger] = OrderedDict()
        self._dirty: set[int] = set()
        # The open ledgers not in _dirty, least recently used first (what eviction closes first).
        self._clean: OrderedDict[int, None] = OrderedDict()
        self._dir_dirty = False
        self._lock = threading.Lock()

    # -- paths -------------------------------------------------------------------------------
    def _data_path(self, ledger_id: int) -> Path:
        return self._dir / f"{ledger_id}.data"

    def _idx_path(self, ledger_id: int) -> Path:
        return self._dir / f"{ledger_id}.idx"

    def _fence_path(self, ledger_id: int) -> Path:
        return self._dir / f"{ledger_id}.fenced"

    def _tombstone_path(self, ledger_id: int) -> Path:
        return self._dir / f"{ledger_id}.deleted"

    # -- file handles ------------------------------------------------------------------------
    def _get(self, ledger_id: int, *, create: bool) -> _OpenLedger | None:
        handle = self._open.get(ledger_id)
        if handle is not None:
            self._open.move_to_end(ledger_id)
            if ledger_id in self._clean:
                self._clean.move_to_end(ledger_id)
            return handle
        data_path = self._data_path(ledger_id)
        if not create and not data_path.exists():
            return None
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        if create and not data_path.exists():
            self._dir_dirty = True
        data_fd = os.open(data_path, flags, 0o644)
        try:
            idx_fd = os.open(self._idx_path(ledger_id), flags | os.O_CREAT, 0o644)
        except BaseException:
            os.close(data_fd)
            raise
        handle = _OpenLedger(data_fd, idx_fd, os.fstat(data_fd).st_size, os.fstat(idx_fd).st_size)
        self._open[ledger_id] = handle
        self._clean[ledger_id] = None
        while len(self._open) > self._max_open:
            victim = self._eviction_victim(ledger_id)
            self._close_handle(victim, self._open.pop(victim))
        return handle

    def _eviction_victim(self, keep: int) -> int:
        """The handle to close: the least recently used one with nothing to sync, else the least
        recently used one. Closing a dirty handle costs two ``fdatasync`` under the lock that every
        read waits for; a clean one costs nothing, and the dirty ones are synced by the next
        checkpoint anyway. (A reader catching up over more ledgers than ``max_open`` - a Stream
        consumer walking a long segment DAG - would otherwise sync one written ledger per read.)"""
        for ledger_id in self._clean:  # the first, or the second when the first is ``keep``
            if ledger_id != keep:
                return ledger_id
        return next(iter(self._open))

    def _close_handle(self, ledger_id: int, handle: _OpenLedger) -> None:
        # A dirty ledger is synced before its descriptors go, so a checkpoint only has to sync the
        # ledgers that are still open.
        if ledger_id in self._dirty:
            os.fdatasync(handle.data_fd)
            os.fdatasync(handle.idx_fd)
            self._dirty.discard(ledger_id)
        self._clean.pop(ledger_id, None)
        os.close(handle.data_fd)
        os.close(handle.idx_fd)

    # -- writes (flusher thread) -------------------------------------------------------------
    def apply_adds(self, ledger_id: int, records: list[JournalRecord]) -> None:
        """Store entries of one ledger: append their payloads with one write, then point their
        index slots at them (one write per run of consecutive entry ids). Records already stored
        exactly so are skipped; a failed write leaves the files as they were (data cut back).

        Raises:
            OSError: a write failed (``ENOSPC``...); nothing of this call is visible.
        """
        with self._lock:
            handle = self._get(ledger_id, create=True)
            assert handle is not None
            if min(r.entry_id for r in records) * SLOT_SIZE < handle.idx_end:
                # Some may be there already (a replay, or a retried flush): only the others.
                records = [r for r in records if not self._stored(handle, r)]
                if not records:
                    return
            start = handle.data_end
            offset = start
            runs: list[tuple[int, list[bytes]]] = []
            run_first = -2
            run_slots: list[bytes] = []
            for rec in records:
                size = len(rec.data)
                # Packed directly (no IndexSlot objects): this loop holds the GIL, and the journal
                # thread and event loop wait for it.
                slot = pack_slot(
                    offset, size, checksum(rec.data), rec.last_add_confirmed, rec.length
                )
                offset += size
                if rec.entry_id == run_first + len(run_slots):
                    run_slots.append(slot)
                else:
                    run_first, run_slots = rec.entry_id, [slot]
                    runs.append((run_first, run_slots))
            self._dirty.add(ledger_id)
            self._clean.pop(ledger_id, None)
            try:
                if offset > start:
                    # The records' own buffers, one system call: no joined copy of the data.
                    pwritev_all(handle.data_fd, [rec.data for rec in records], start)
                for first, slots in runs:
                    pwrite_all(handle.idx_fd, b"".join(slots), first * SLOT_SIZE)
            except OSError:
                # Slots written so far point past the cut: such an entry reads as damaged until
                # the retry (or a replay) rewrites its slot - and until then it is served from
                # the bookie's write cache, which keeps whatever is not flushed.
                with contextlib.suppress(OSError):
                    os.ftruncate(handle.data_fd, start)
                raise
            handle.data_end = offset
            last_slot_end = (runs[-1][0] + len(runs[-1][1])) * SLOT_SIZE
            handle.idx_end = max(handle.idx_end, last_slot_end)

    @staticmethod
    def _stored(handle: _OpenLedger, rec: JournalRecord) -> bool:
        """Whether ``rec`` is already stored exactly: its slot and the bytes it points at."""
        if rec.entry_id * SLOT_SIZE >= handle.idx_end:
            return False
        slot = decode_slot(os.pread(handle.idx_fd, SLOT_SIZE, rec.entry_id * SLOT_SIZE))
        if (
            slot is None
            or slot.size != len(rec.data)
            or slot.last_add_confirmed != rec.last_add_confirmed
            or slot.length != rec.length
            or slot.offset + slot.size > handle.data_end
        ):
            return False
        return os.pread(handle.data_fd, slot.size, slot.offset) == rec.data

    def apply_fence(self, ledger_id: int) -> None:
        """Persist the fence flag as a marker file."""
        with self._lock:
            path = self._fence_path(ledger_id)
            if not path.exists():
                path.touch()
                self._dir_dirty = True

    def apply_delete(self, ledger_id: int) -> None:
        """Forget a ledger and unlink its files (space is returned immediately); a fenced one
        leaves its tombstone (it stays fenced)."""
        with self._lock:
            handle = self._open.pop(ledger_id, None)
            if handle is not None:
                os.close(handle.data_fd)
                os.close(handle.idx_fd)
            self._dirty.discard(ledger_id)
            self._clean.pop(ledger_id, None)
            for path in (self._data_path(ledger_id), self._idx_path(ledger_id)):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    self._dir_dirty = True
            tombstone = self._tombstone_path(ledger_id)
            if self._fence_path(ledger_id).exists() and not tombstone.exists():
                tombstone.touch()
                self._dir_dirty = True

    def sync(self) -> None:
        """Make every write so far durable (a checkpoint relies on this)."""
        with self._lock:
            for ledger_id in list(self._dirty):
                handle = self._open.get(ledger_id)
                if handle is not None:
                    os.fdatasync(handle.data_fd)
                    os.fdatasync(handle.idx_fd)
            self._dirty.clear()
            self._clean = OrderedDict.fromkeys(self._open)  # synced: all clean, in LRU order
            if self._dir_dirty:
                _fsync_dir(self._dir)
                self._dir_dirty = False

    # -- reads (executor threads) ------------------------------------------------------------
    def read(self, ledger_id: int, entry_id: int) -> tuple[IndexSlot, bytes] | None:
        """Return the slot and payload of an entry, or ``None`` if this bookie does not hold it.

        Raises:
            StorageIOError: the stored payload does not match its checksum.
        """
        with self._lock:
            handle = self._get(ledger_id, create=False)
            if handle is None:
                return None
            slot = decode_slot(os.pread(handle.idx_fd, SLOT_SIZE, entry_id * SLOT_SIZE))
            if slot is None:
                return None
            data = os.pread(handle.data_fd, slot.size, slot.offset) if slot.size else b""
        if len(data) != slot.size or checksum(data) != slot.crc:
            raise StorageIOError(f"ledger {ledger_id} entry {entry_id}: checksum mismatch on disk")
        return slot, data

    # -- startup -----------------------------------------------------------------------------
    def scan(self) -> dict[int, LedgerSummary]:
        """Summarise every ledger on disk: highest stored entry, highest piggybacked LAC, fence."""
        with self._lock:
            ids: set[int] = set()
            fenced: set[int] = set()
            deleted: set[int] = set()
            for path in self._dir.iterdir():
                stem, _, ext = path.name.partition(".")
                if not stem.isdigit():
                    continue
                if ext in ("data", "idx"):
                    ids.add(int(stem))
                elif ext == "fenced":
                    fenced.add(int(stem))
                elif ext == "deleted":
                    deleted.add(int(stem))
            out: dict[int, LedgerSummary] = {}
            for ledger_id in ids | fenced:
                last, lac = self._last_slot(ledger_id)
                out[ledger_id] = LedgerSummary(last, lac, ledger_id in fenced)
            for ledger_id in deleted:
                # No entries after the tombstone: every add to it is refused.
                out[ledger_id] = LedgerSummary(-1, -1, fenced=True, deleted=True)
            return out

    def _last_slot(self, ledger_id: int) -> tuple[int, int]:
        path = self._idx_path(ledger_id)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return -1, -1
        with path.open("rb") as f:
            entry_id = size // SLOT_SIZE - 1
            # Trailing holes cannot normally exist (a slot write is what extends the file); the
            # backwards walk is for robustness only.
            while entry_id >= 0:
                f.seek(entry_id * SLOT_SIZE)
                slot = decode_slot(f.read(SLOT_SIZE))
                if slot is not None:
                    return entry_id, slot.last_add_confirmed
                entry_id -= 1
        return -1, -1

    def close(self) -> None:
        """Sync and close every open file."""
        self.sync()
        with self._lock:
            while self._open:
                ledger_id, handle = self._open.popitem()
                self._close_handle(ledger_id, handle)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """fsync a directory so file creations, renames and unlinks in it are durable."""
    _fsync_dir(path)
