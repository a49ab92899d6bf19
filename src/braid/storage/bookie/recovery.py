"""Restart recovery of a bookie: bring the entry files up to date with the journal.

On open, a bookie locks its data directory, reads the *checkpoint* (the journal position the
entry files are known to cover), replays every later journal record into the entry files (in
place: records already there are skipped; a torn tail is cut off by checksum), fsyncs, writes a
fresh checkpoint and deletes the journal files it covers. Out of space, the rest of the journal
is left for later (no checkpoint covers it) and handed back as ``unapplied``: the bookie serves it
from its write cache until its flusher can copy it.

The checkpoint is a small JSON document written to a temporary file and renamed over the old one
(rewritten in place when the disk is too full for the temporary file); an unreadable checkpoint
means "replay every journal file still present", which is always safe.

Everything here blocks: it runs in an executor (or the flusher thread), never on the event loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from braid.filelock import FileLock
from braid.storage.bookie.disk import is_no_space
from braid.storage.bookie.journal import journal_path, journal_seqs, replay_file
from braid.storage.bookie.ledger_files import LedgerFiles, fsync_dir
from braid.storage.bookie.records import JournalRecord, RecordKind

log = logging.getLogger(__name__)

_CHECKPOINT = "checkpoint"


@dataclass(slots=True)
class LedgerState:
    last_entry_id: int = -1
    last_add_confirmed: int = -1
    fenced: bool = False
    #: Deleted: a tombstone that stays fenced (:mod:`braid.storage.bookie.ledger_files`).
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Recovered:
    lock: FileLock
    journal_dir: Path
    files: LedgerFiles
    ledgers: dict[int, LedgerState]
    next_seq: int
    replayed: int
    #: Journal records replay had no room to copy into the entry files (journal order): the bookie
    #: starts read-only, serves them from its write cache and lets the flusher copy them later.
    unapplied: list[JournalRecord] = field(default_factory=list)
    space_error: OSError | None = None


def read_checkpoint(data_dir: Path) -> int | None:
    """The journal sequence the entry files are known to cover, or ``None`` (replay everything)."""
    try:
        doc = json.loads((data_dir / _CHECKPOINT).read_text())
        seq = doc["journalSeq"]
        return seq if isinstance(seq, int) else None
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        # Replaying every journal file still present is always safe, just slower.
        log.warning("bookie %s: unreadable checkpoint, replaying the whole journal", data_dir)
        return None


#: The checkpoint document is padded to this size, so it can be rewritten in place.
_CHECKPOINT_SIZE = 64


def write_checkpoint(data_dir: Path, journal_seq: int) -> None:
    """Record durably that the entry files cover every journal file before ``journal_seq``.

    Written to a temporary file and renamed over the old one; on a file system too full for the
    temporary file, the existing checkpoint is overwritten in place (its one block is already
    allocated). A torn in-place write is harmless: an unreadable checkpoint means "replay every
    journal file still present", and journal files are deleted only after a checkpoint naming
    them is durable.
    """
    text = json.dumps({"journalSeq": journal_seq}).ljust(_CHECKPOINT_SIZE).encode()
    path = data_dir / _CHECKPOINT
    tmp = data_dir / (_CHECKPOINT + ".tmp")
    try:
        with tmp.open("wb") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if not (is_no_space(exc) and path.exists()):
            raise
        with path.open("r+b") as f:
            f.write(text)
            f.truncate(len(text))
            f.flush()
            os.fsync(f.fileno())
        return
    os.replace(tmp, path)
    fsync_dir(data_dir)


def delete_journals_before(journal_dir: Path, seq: int) -> None:
    for old in journal_seqs(journal_dir):
        if old < seq:
            with contextlib.suppress(FileNotFoundError):
                journal_path(journal_dir, old).unlink()


def apply_records(files: LedgerFiles, records: list[JournalRecord]) -> None:
    """Apply records in journal order, coalescing each ledger's adds into one write per file."""
    adds: dict[int, list[JournalRecord]] = {}
    for record in records:
        if record.kind is RecordKind.ADD:
            adds.setdefault(record.ledger_id, []).append(record)
            continue
        # A fence or delete must see the ledger's earlier adds applied first.
        earlier = adds.pop(record.ledger_id, None)
        if earlier:
            files.apply_adds(record.ledger_id, earlier)
        if record.kind is RecordKind.FENCE:
            files.apply_fence(record.ledger_id)
        else:
            files.apply_delete(record.ledger_id)
    for ledger_id, pending in adds.items():
        files.apply_adds(ledger_id, pending)


def lock_data_dir(data_dir: Path) -> FileLock:
    # Two engines on one directory would interleave journals and corrupt each other.
    lock = FileLock(data_dir / "LOCK")
    lock.acquire(f"bookie data directory {data_dir} is in use")
    return lock


def recover(data_dir: Path, journal_dir: Path) -> Recovered:
    """Bring the entry files up to date with the journal (blocking; runs in an executor)."""
    lock = lock_data_dir(data_dir)
    try:
        return replay(data_dir, lock, journal_dir)
    except BaseException:
        lock.release()
        raise


def replay(data_dir: Path, lock: FileLock, journal_dir: Path) -> Recovered:
    """Copy every journal record after the checkpoint into the entry files (in place: records
    already there are skipped). Out of space, the rest is left in the journal - no checkpoint
    covers it - and handed back as ``unapplied``: the bookie then holds it in its write cache
    until the flusher can copy it, exactly as before the restart."""
    journal_dir.mkdir(parents=True, exist_ok=True)
    files = LedgerFiles(data_dir / "ledgers")
    checkpoint = read_checkpoint(data_dir)
    seqs = journal_seqs(journal_dir)
    replayed = 0
    unapplied: list[JournalRecord] = []
    space_error: OSError | None = None

    def apply(chunk: list[JournalRecord]) -> None:
        nonlocal replayed, space_error
        if space_error is None:
            try:
                apply_records(files, chunk)
                replayed += len(chunk)
                return
            except OSError as exc:
                if not is_no_space(exc):
                    raise
                space_error = exc
        unapplied.extend(chunk)  # this chunk may be partly applied: applying again is harmless

    for seq in seqs:
        if checkpoint is not None and seq < checkpoint:
            continue
        chunk: list[JournalRecord] = []
        for record in replay_file(journal_path(journal_dir, seq), 0):
            chunk.append(record)
            if len(chunk) >= 4096:
                apply(chunk)
                chunk = []
        apply(chunk)
    next_seq = max([*seqs, (checkpoint or 0) - 1, -1]) + 1
    if space_error is None:
        files.sync()
        write_checkpoint(data_dir, next_seq)
        delete_journals_before(journal_dir, next_seq)
    else:
        log.warning(
            "bookie %s: no space to copy %d journal records into the entry files (%s); they are "
            "served from memory and copied once there is space",
            data_dir,
            len(unapplied),
            space_error,
        )
    ledgers = {
        lid: LedgerState(s.last_entry_id, s.last_add_confirmed, s.fenced, s.deleted)
        for lid, s in files.scan().items()
    }
    return Recovered(lock, journal_dir, files, ledgers, next_seq, replayed, unapplied, space_error)
