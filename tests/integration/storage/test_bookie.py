"""The bookie storage engine on a real data directory: durability, restart, fence, delete."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from braid.filelock import DataDirInUse
from braid.storage.api import (
    EntryTooLarge,
    InvalidEntryId,
    InvalidLedgerId,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    StorageClosed,
    StorageIOError,
)
from braid.storage.bookie import Bookie
from braid.storage.bookie.journal import journal_path, journal_seqs
from braid.storage.bookie.records import SLOT_SIZE, JournalRecord, RecordKind, encode_record


def payload(ledger_id: int, entry_id: int, size: int = 100) -> bytes:
    seed = f"{ledger_id}:{entry_id}:".encode()
    return (seed * (size // len(seed) + 1))[:size]


async def fill(bookie: Bookie, ledger_id: int, count: int, size: int = 100) -> None:
    await asyncio.gather(
        *(
            bookie.add_entry(ledger_id, e, payload(ledger_id, e, size), last_add_confirmed=e - 1)
            for e in range(count)
        )
    )


async def test_added_entries_read_back_from_cache_and_after_flush(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    try:
        await fill(bookie, 3, 50)
        assert (await bookie.read_entry(3, 7)).data == payload(3, 7)
        await bookie.checkpoint()  # entries now come from the entry files
        entries = await bookie.read_entries(3, 0, 49)
        assert [e.data for e in entries] == [payload(3, e) for e in range(50)]
        assert bookie.last_entry_id(3) == 49
        assert (await bookie.read_lac(3)).last_entry_id == 49
        assert bookie.ledgers() == [3]
    finally:
        await bookie.close()


async def test_every_acknowledged_entry_survives_a_restart(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    await fill(bookie, 1, 30)
    await bookie.checkpoint()
    await fill(bookie, 2, 30)  # only in the journal (no checkpoint after these)
    await bookie.close()
    reopened = await Bookie.open(tmp_path / "b")
    try:
        for ledger_id in (1, 2):
            entries = await reopened.read_entries(ledger_id, 0, 29)
            assert [e.data for e in entries] == [payload(ledger_id, e) for e in range(30)]
        lac = await reopened.read_lac(2)
        assert (lac.last_add_confirmed, lac.last_entry_id) == (28, 29)
    finally:
        await reopened.close()


async def test_journal_is_replayed_when_the_entry_files_were_never_written(
    tmp_path: Path,
) -> None:
    # A journal with records the flusher never copied, as left by a crash right after the fsync.
    data_dir = tmp_path / "b"
    (data_dir / "journal").mkdir(parents=True)
    recs = [JournalRecord(RecordKind.ADD, 9, e, e - 1, 0, payload(9, e)) for e in range(5)]
    recs.append(JournalRecord(RecordKind.FENCE, 9))
    journal_path(data_dir / "journal", 0).write_bytes(
        b"BRDJRNL1" + b"".join(encode_record(r) for r in recs)
    )
    bookie = await Bookie.open(data_dir)
    try:
        assert bookie.replayed_records == 6
        assert [e.data for e in await bookie.read_entries(9, 0, 4)] == [
            payload(9, e) for e in range(5)
        ]
        assert bookie.is_fenced(9)
    finally:
        await bookie.close()


async def test_torn_journal_tail_is_dropped_and_the_complete_records_kept(tmp_path: Path) -> None:
    data_dir = tmp_path / "b"
    (data_dir / "journal").mkdir(parents=True)
    good = [JournalRecord(RecordKind.ADD, 4, e, e - 1, 0, payload(4, e)) for e in range(3)]
    torn = encode_record(JournalRecord(RecordKind.ADD, 4, 3, 2, 0, payload(4, 3)))
    path = journal_path(data_dir / "journal", 0)
    path.write_bytes(b"BRDJRNL1" + b"".join(encode_record(r) for r in good) + torn[:-7])
    bookie = await Bookie.open(data_dir)
    try:
        assert bookie.last_entry_id(4) == 2
        with pytest.raises(NoSuchEntry):
            await bookie.read_entry(4, 3)
        # The writer can carry on at entry 3 and nothing of the torn record leaks into it.
        await bookie.add_entry(4, 3, b"fresh", last_add_confirmed=2)
        assert (await bookie.read_entry(4, 3)).data == b"fresh"
    finally:
        await bookie.close()
    reopened = await Bookie.open(data_dir)
    try:
        assert (await reopened.read_entry(4, 3)).data == b"fresh"
    finally:
        await reopened.close()


async def test_fence_rejects_later_adds_and_survives_restart(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    await fill(bookie, 5, 3)
    info = await bookie.fence(5)
    assert info.last_entry_id == 2
    with pytest.raises(LedgerFenced):
        await bookie.add_entry(5, 3, b"late")
    # A recovering client re-replicating an entry passes the fence.
    await bookie.add_entry(5, 2, payload(5, 2), last_add_confirmed=1, recovery=True)
    await bookie.close()
    reopened = await Bookie.open(tmp_path / "b")
    try:
        assert reopened.is_fenced(5)
        with pytest.raises(LedgerFenced):
            await reopened.add_entry(5, 3, b"late")
    finally:
        await reopened.close()


async def test_fence_of_an_empty_ledger_survives_restart_after_checkpoint(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    await bookie.fence(11)
    await bookie.checkpoint()
    await bookie.close()
    reopened = await Bookie.open(tmp_path / "b")
    try:
        assert reopened.is_fenced(11)
        assert reopened.ledgers() == [11]
    finally:
        await reopened.close()


async def test_adds_queued_before_a_fence_are_included_in_its_answer(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    try:
        adds = [asyncio.ensure_future(bookie.add_entry(6, e, b"x")) for e in range(10)]
        # Tasks start in creation order, so the fence reaches the bookie after the ten adds.
        fence = asyncio.ensure_future(bookie.fence(6))
        await asyncio.gather(*adds)
        info = await fence
        assert info.last_entry_id == 9
    finally:
        await bookie.close()


async def test_deleting_a_ledger_reclaims_its_disk_space(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    try:
        await fill(bookie, 1, 200, size=4096)
        await fill(bookie, 2, 10, size=100)
        await bookie.checkpoint()
        before = bookie.disk_usage()
        assert before > 200 * 4096
        await bookie.delete_ledger(1)
        await bookie.checkpoint()
        after = bookie.disk_usage()
        assert after < before - 200 * 4096 * 0.9
        assert not (tmp_path / "b" / "ledgers" / "1.data").exists()
        assert bookie.ledgers() == [2]
        with pytest.raises(NoSuchLedger):
            await bookie.read_entry(1, 0)
        assert (await bookie.read_entry(2, 9)).data == payload(2, 9)
    finally:
        await bookie.close()


async def test_delete_survives_restart_without_checkpoint(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    await fill(bookie, 1, 5)
    await bookie.delete_ledger(1)
    await bookie.delete_ledger(77)  # unknown: not an error
    await bookie.close()
    reopened = await Bookie.open(tmp_path / "b")
    try:
        assert reopened.ledgers() == []
    finally:
        await reopened.close()


async def test_journal_rolls_and_old_files_are_deleted_after_checkpoint(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b", journal_max_bytes=64 * 1024)
    try:
        for start in range(0, 400, 50):
            await asyncio.gather(
                *(bookie.add_entry(1, e, payload(1, e, 1000)) for e in range(start, start + 50))
            )
        await bookie.checkpoint()
        seqs = journal_seqs(tmp_path / "b" / "journal")
        assert len(seqs) == 1  # everything older was checkpointed and removed
        assert seqs[0] > 3
    finally:
        await bookie.close()
    reopened = await Bookie.open(tmp_path / "b")
    try:
        entries = await reopened.read_entries(1, 0, 399)
        assert [e.data for e in entries] == [payload(1, e, 1000) for e in range(400)]
    finally:
        await reopened.close()


async def test_concurrent_adds_share_fsyncs(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    try:
        await fill(bookie, 1, 300)
        # 300 adds issued together need far fewer than 300 group commits.
        assert bookie.journal_fsyncs < 150
    finally:
        await bookie.close()


async def test_corrupted_entry_file_is_reported_not_returned(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    await fill(bookie, 1, 3)
    await bookie.close()
    data_file = tmp_path / "b" / "ledgers" / "1.data"
    raw = bytearray(data_file.read_bytes())
    raw[150] ^= 0xFF  # inside entry 1
    data_file.write_bytes(bytes(raw))
    reopened = await Bookie.open(tmp_path / "b")
    try:
        assert (await reopened.read_entry(1, 0)).data == payload(1, 0)
        with pytest.raises(StorageIOError):
            await reopened.read_entry(1, 1)
    finally:
        await reopened.close()


async def test_holes_in_a_striped_ledger_are_missing_entries(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    try:
        for e in (0, 2, 4):
            await bookie.add_entry(1, e, payload(1, e))
        await bookie.checkpoint()
        assert (await bookie.read_entry(1, 4)).data == payload(1, 4)
        with pytest.raises(NoSuchEntry):
            await bookie.read_entry(1, 3)
        assert (tmp_path / "b" / "ledgers" / "1.idx").stat().st_size == 5 * SLOT_SIZE
    finally:
        await bookie.close()


async def test_bad_input_gets_typed_errors(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b", max_entry_size=1000)
    try:
        with pytest.raises(InvalidLedgerId):
            await bookie.add_entry(-1, 0, b"x")
        with pytest.raises(InvalidEntryId):
            await bookie.add_entry(1, -5, b"x")
        with pytest.raises(EntryTooLarge):
            await bookie.add_entry(1, 0, bytes(1001))
        with pytest.raises(NoSuchLedger):
            await bookie.read_entry(1, 0)
        await bookie.add_entry(1, 0, b"x")
        with pytest.raises(NoSuchEntry):
            await bookie.read_entry(1, 1)
        with pytest.raises(NoSuchEntry):
            await bookie.read_entries(1, 1, 0)
    finally:
        await bookie.close()
    with pytest.raises(StorageClosed):
        await bookie.add_entry(1, 1, b"x")
    await bookie.close()  # idempotent


async def test_a_data_directory_cannot_be_opened_twice(tmp_path: Path) -> None:
    bookie = await Bookie.open(tmp_path / "b")
    try:
        with pytest.raises(DataDirInUse):
            await Bookie.open(tmp_path / "b")
    finally:
        await bookie.close()
    again = await Bookie.open(tmp_path / "b")
    await again.close()
