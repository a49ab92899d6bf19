"""The bookie's journal: append-only files written by one thread with group commit.

Callers hand the writer already-encoded records (see :mod:`records`). The writer thread takes
every record that has arrived since its last fsync, writes them with one ``write``, makes them
durable with one ``fdatasync`` and only then reports them to ``on_durable`` - so an entry is never
acknowledged before the fsync that covers it, and one fsync is shared by everything that queued up
meanwhile.

Journal files are ``<seq>.jnl`` (zero-padded, increasing). The writer rolls to a new file when the
current one passes ``max_file_bytes`` or when asked (checkpoint); a roll is reported to ``on_roll``
with the new sequence number, after every record of the older files was reported durable. The
bookie's flusher uses that to checkpoint and delete journal files nobody needs any more.

Running out of space is not fatal: a group whose write or ``fdatasync`` fails with ``ENOSPC``
(or ``EDQUOT``) is cut off again - the file is truncated back to the end of the last durable
group, so no byte of it can be replayed - and reported failed, and the next group is tried
afresh (the bookie refuses new entries meanwhile: it is read-only). Preallocation and new files
take space only when there is some: without it a group simply extends the file, and the next
preallocation starts after that group - zeros never go over a byte of a durable record. Any other
error stops the journal for good, as before (after a failed ``fdatasync`` the file's state is
unknown).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from braid.storage.bookie.disk import is_no_space
from braid.storage.bookie.ledger_files import fsync_dir, pwrite_all, pwritev_all
from braid.storage.bookie.records import JOURNAL_MAGIC, JournalRecord, decode_records

log = logging.getLogger(__name__)

_SUFFIX = ".jnl"


def journal_path(directory: Path, seq: int) -> Path:
    """Path of journal file ``seq``."""
    return directory / f"{seq:016d}{_SUFFIX}"


def journal_seqs(directory: Path) -> list[int]:
    """Sequence numbers of the journal files in ``directory``, ascending."""
    out = []
    for path in directory.iterdir():
        if path.name.endswith(_SUFFIX) and path.name[: -len(_SUFFIX)].isdigit():
            out.append(int(path.name[: -len(_SUFFIX)]))
    return sorted(out)


def replay_file(path: Path, start: int) -> Iterator[JournalRecord]:
    """Yield the valid records of one journal file from byte ``start``; cut off a torn tail.

    The file is truncated at the end of the last valid record, so the torn bytes can never be
    mistaken for data later.
    """
    data = path.read_bytes()
    if not data.startswith(JOURNAL_MAGIC):
        # Crashed while creating the file: nothing in it was ever acknowledged.
        valid_end = 0
    else:
        valid_end = max(start, len(JOURNAL_MAGIC))
        for record, end in decode_records(data, valid_end):
            valid_end = end
            yield record
    if valid_end < len(data):
        log.warning("journal %s: dropping %d torn bytes", path.name, len(data) - valid_end)
        with path.open("r+b") as f:
            f.truncate(valid_end)
            os.fsync(f.fileno())


@dataclass(frozen=True, slots=True)
class _Write:
    payloads: list[bytes]
    tokens: list[object]


@dataclass(frozen=True, slots=True)
class _Roll:
    token: object


class _Stop:
    pass


DurableCallback = Callable[[list[object]], None]
RollCallback = Callable[[int, list[object]], None]
ErrorCallback = Callable[[list[object], OSError], None]


class JournalWriter:
    """One journal writer thread doing group commit over a directory of journal files."""

    def __init__(
        self,
        directory: Path,
        first_seq: int,
        *,
        on_durable: DurableCallback,
        on_roll: RollCallback,
        on_error: ErrorCallback,
        max_file_bytes: int = 64 * 1024 * 1024,
        prealloc_bytes: int = 1024 * 1024,
    ) -> None:
        self._dir = directory
        self._seq = first_seq
        self._max_file_bytes = max_file_bytes
        self._prealloc = max(prealloc_bytes, 0)
        self._allocated = 0
        self._on_durable = on_durable
        self._on_roll = on_roll
        self._on_error = on_error
        self._queue: queue.SimpleQueue[_Write | _Roll | _Stop] = queue.SimpleQueue()
        self._fd = self._create(first_seq)
        self._offset = len(JOURNAL_MAGIC)
        self._failed: OSError | None = None
        self.fsyncs = 0  # group commits so far (stats; read from other threads without a lock)
        self._thread = threading.Thread(target=self._run, name="bookie-journal", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> OSError | None:
        """The disk error that stopped the journal, if any."""
        return self._failed

    def submit(self, payloads: list[bytes], tokens: list[object]) -> None:
        """Queue encoded records (as buffers written back to back: a record may span several);
        their ``tokens`` come back through ``on_durable`` after the fsync that covers them (in
        the same order)."""
        self._queue.put(_Write(payloads, tokens))

    def request_roll(self, token: object) -> None:
        """Ask for a new journal file; ``token`` comes back through ``on_roll``."""
        self._queue.put(_Roll(token))

    def stop(self) -> None:
        """Write what is queued, then stop the thread and close the file (blocking)."""
        self._queue.put(_Stop())
        self._thread.join()

    def _create(self, seq: int) -> int:
        path = journal_path(self._dir, seq)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pwrite_all(fd, JOURNAL_MAGIC, 0)
            self._allocated = len(JOURNAL_MAGIC)
            self._try_preallocate(fd, len(JOURNAL_MAGIC), len(JOURNAL_MAGIC))
            os.fdatasync(fd)
            fsync_dir(self._dir)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return fd

    def _preallocate(self, fd: int, needed_end: int, data_end: int) -> None:
        # Writing into already-allocated, zero-filled blocks lets fdatasync skip the filesystem's
        # metadata journal (no size or extent change), which makes each group commit cheaper.
        # Zeros also read back as "no record", so a torn tail is still found (see records.py).
        # The zeros start at or after ``data_end``: every byte before it is a durable record.
        if needed_end <= self._allocated or not self._prealloc:
            return
        start = max(self._allocated, data_end)
        new_end = max(needed_end, start + self._prealloc)
        pwrite_all(fd, bytes(new_end - start), start)
        self._allocated = new_end

    def _try_preallocate(self, fd: int, needed_end: int, data_end: int) -> None:
        """Preallocate if there is room; without it, cut the zeros back to ``data_end`` (the
        group then extends the file itself: only its own bytes need space)."""
        try:
            self._preallocate(fd, needed_end, data_end)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            os.ftruncate(fd, data_end)
            self._allocated = data_end

    def _run(self) -> None:
        stopping = False
        while not stopping:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            writes = [i for i in items if isinstance(i, _Write)]
            rolls = [i.token for i in items if isinstance(i, _Roll)]
            stopping = any(isinstance(i, _Stop) for i in items)
            if writes:
                self._write_group(writes)
            if self._failed is None and (rolls or self._offset >= self._max_file_bytes):
                try:
                    self._roll(rolls)
                except OSError as exc:
                    if not is_no_space(exc):
                        self._fail(exc)
                    # Without room for a new file the journal goes on in this one (the roll is
                    # tried again with the next group); a checkpoint asked for fails.
                    self._on_error(rolls, exc)
            elif rolls:
                self._on_error(rolls, self._failed or OSError("journal failed"))
        os.close(self._fd)

    def _write_group(self, writes: list[_Write]) -> None:
        tokens = [t for w in writes for t in w.tokens]
        if self._failed is not None:
            self._on_error(tokens, self._failed)
            return
        payloads = [p for w in writes for p in w.payloads]
        size = sum(map(len, payloads))
        try:
            end = self._offset + size
            if size < self._prealloc // 4:
                self._try_preallocate(self._fd, end, self._offset)
            else:
                # A big group is bandwidth-bound: zero-filling ahead would double its bytes for a
                # metadata saving that no longer matters, so it simply extends the file.
                self._allocated = max(self._allocated, end)
            # No join: the buffers go to the kernel as they are (a join would copy every byte
            # once more, holding the interpreter lock the event loop needs meanwhile).
            pwritev_all(self._fd, payloads, self._offset)
            # The one fsync that every record in this group waits for.
            os.fdatasync(self._fd)
            self.fsyncs += 1
        except OSError as exc:
            if not (is_no_space(exc) and self._cut_back()):
                # After a failed fsync the file's state is unknown: refuse everything from now on.
                self._fail(exc)
            self._on_error(tokens, exc)
            return
        self._offset += size
        # A group that extended the file past the preallocated zeros (there was no room for
        # more) moved the allocated end with it: the next preallocation starts after it.
        self._allocated = max(self._allocated, self._offset)
        self._on_durable(tokens)

    def _cut_back(self) -> bool:
        """After running out of space mid-group: truncate the file to the end of the last durable
        group (dropping this group's bytes, none of which was acknowledged, and freeing whatever
        it allocated) and make that durable. ``False`` if even that failed."""
        try:
            os.ftruncate(self._fd, self._offset)
            os.fdatasync(self._fd)
        except OSError as exc:
            log.error("journal: cannot cut a failed group back: %s", exc)
            return False
        self._allocated = self._offset
        log.warning("journal: out of space, group of records refused (the journal goes on)")
        return True

    def _roll(self, tokens: list[object]) -> None:
        new_seq = self._seq + 1
        new_fd = self._create(new_seq)
        os.close(self._fd)
        self._fd = new_fd
        self._seq = new_seq
        self._offset = len(JOURNAL_MAGIC)
        self._on_roll(new_seq, tokens)

    def _fail(self, exc: OSError) -> None:
        if self._failed is None:
            log.error("journal failed, bookie stops accepting writes: %s", exc)
            self._failed = exc
