"""The bookie's open-file cache: a read that must close a handle closes one with nothing to sync
when there is one, so reads over more ledgers than ``max_open`` never wait for an ``fdatasync``
of a ledger written since the last checkpoint; what was written is read back either way."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.storage.bookie.ledger_files import LedgerFiles
from braid.storage.bookie.records import JournalRecord, RecordKind


def _add(files: LedgerFiles, ledger_id: int, payload: bytes) -> None:
    files.apply_adds(ledger_id, [JournalRecord(RecordKind.ADD, ledger_id, 0, 0, 1, payload)])


def _synced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors ``fdatasync`` is called on from now (still synced for real)."""
    calls: list[int] = []
    real = os.fdatasync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", counted)
    return calls


def test_reads_past_max_open_close_clean_handles_and_leave_written_ones_to_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = LedgerFiles(tmp_path, max_open=2)
    _add(files, 1, b"written")  # dirty: not synced until a checkpoint
    files.sync()
    for ledger_id in (2, 3, 4):
        _add(files, ledger_id, b"older %d" % ledger_id)
    files.sync()  # 2, 3, 4 on disk and clean; the cache now holds 3 and 4
    _add(files, 5, b"fresh")  # dirty again, evicting clean 3
    synced = _synced(monkeypatch)
    for ledger_id in (2, 3, 4, 1, 2):  # each read opens a ledger and must close one
        found = files.read(ledger_id, 0)
        assert found is not None
    assert synced == [], "a read waited for the sync of a written ledger"
    assert files.read(5, 0) is not None and files.read(5, 0)[1] == b"fresh"  # type: ignore[index]
    files.sync()
    assert len(synced) == 2, "the checkpoint syncs the written ledger's two files"


def test_when_every_open_handle_is_dirty_the_oldest_is_synced_before_it_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = LedgerFiles(tmp_path, max_open=2)
    _add(files, 1, b"one")
    _add(files, 2, b"two")
    synced = _synced(monkeypatch)
    _add(files, 3, b"three")  # both open handles are dirty: 1 goes, synced first
    assert len(synced) == 2
    files.sync()
    reopened = LedgerFiles(tmp_path, max_open=2)
    assert [reopened.read(i, 0)[1] for i in (1, 2, 3)] == [b"one", b"two", b"three"]  # type: ignore[index]


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "read", "sync", "delete"]), st.integers(1, 6)),
        max_size=40,
    )
)
def test_the_clean_list_is_the_open_ledgers_not_written_since_the_sync_in_use_order(
    ops: list[tuple[str, int]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        files = LedgerFiles(Path(tmp), max_open=3)
        stored: dict[int, list[bytes]] = {}
        for op, ledger_id in ops:
            if op == "add":
                entries = stored.setdefault(ledger_id, [])
                payload = b"%d-%d" % (ledger_id, len(entries))
                files.apply_adds(
                    ledger_id,
                    [JournalRecord(RecordKind.ADD, ledger_id, len(entries), 0, 1, payload)],
                )
                entries.append(payload)
            elif op == "read" and ledger_id in stored:
                assert files.read(ledger_id, 0) == (ANY, stored[ledger_id][0])
            elif op == "sync":
                files.sync()
            elif op == "delete":
                files.apply_delete(ledger_id)
                stored.pop(ledger_id, None)
            assert len(files._open) <= 3
            assert list(files._clean) == [i for i in files._open if i not in files._dirty]
        files.close()
        reopened = LedgerFiles(Path(tmp))
        for ledger_id, entries in stored.items():
            for entry_id, payload in enumerate(entries):
                assert reopened.read(ledger_id, entry_id) == (ANY, payload)
