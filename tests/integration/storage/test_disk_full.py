"""A bookie on a small, real file system that fills up (an ext4 image, loop-mounted; root only).

A full disk makes the bookie read-only: new entries are refused up front with ``StorageReadOnly``
(nothing half-written, the ledger intact), everything acknowledged stays readable, and freeing
space makes it writable again with no restart. A bookie killed while its disk was nearly full
starts again on that same disk: replay applies in place and whatever it has no room to copy is
served from memory until there is. The journal never puts a byte over a record it made durable,
whether its preallocation succeeds or runs out of space. The metadata store on a full disk reports
the cause, not a failed rollback; a managed ledger refuses appends while storage is read-only
without creating ledgers nobody can write to.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.ledger.api import ManagedLedgerConfig
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.metadata import open_store
from braid.metadata.api import StoreUnavailable
from braid.storage import StorageReadOnly, StorageRouter, open_local_cluster
from braid.storage.api import StorageError
from braid.storage.bookie import Bookie
from braid.storage.bookie.disk import DiskThresholds
from braid.storage.bookie.journal import JournalWriter, journal_path, replay_file
from braid.storage.bookie.records import JournalRecord, RecordKind, encode_record_head
from tests.integration.storage.crash_writer import digest, expected_payload
from tests.support.polling import eventually
from tests.support.small_fs import Ballast, free_bytes, small_filesystem

WRITER = Path(__file__).with_name("crash_writer.py")
THRESHOLDS = DiskThresholds(usage_threshold=0.95, lwm_threshold=0.90, check_interval_s=0.2)
MB = 1024 * 1024


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path, 32) as mount_point:
        yield mount_point


def _payload(entry_id: int) -> bytes:
    return entry_id.to_bytes(4, "big") * 2500  # 10 kB, distinct per entry


async def _fill_with_entries(bookie: Bookie, ledger_id: int) -> tuple[list[int], StorageError]:
    """Add entries until the bookie refuses; returns the acknowledged ids and the refusal."""
    acked: list[int] = []
    entry_id = 0
    while True:
        try:
            await bookie.add_entry(ledger_id, entry_id, _payload(entry_id))
        except StorageError as exc:
            return acked, exc
        acked.append(entry_id)
        entry_id += 1


async def test_a_full_disk_makes_the_bookie_read_only_and_space_makes_it_writable(
    disk: Path,
) -> None:
    bookie = await Bookie.open(disk / "bookie", disk_thresholds=THRESHOLDS)
    ballast = Ballast(disk)
    try:
        ballast.fill(leave_free=3 * MB)
        acked, refusal = await _fill_with_entries(bookie, 7)
        assert len(acked) > 20
        # Once read-only, every add is refused up front, naming why, and nothing is stored.
        await eventually(lambda: bookie.read_only_reason is not None)
        with pytest.raises(StorageReadOnly, match="read-only: no space left on device"):
            await bookie.add_entry(7, acked[-1] + 1, b"more")
        assert bookie.last_entry_id(7) == acked[-1]
        status = bookie.disk_status()
        assert status["state"] == "read-only"
        assert "no space left" in str(status["reason"])
        # Every acknowledged entry reads back intact while the disk is full.
        stored = await bookie.read_entries(7, 0, acked[-1])
        assert [e.data for e in stored] == [_payload(i) for i in acked]

        ballast.release()
        await bookie.check_disk()
        assert bookie.read_only_reason is None
        assert bookie.disk_status()["state"] == "read-write"
        next_id = acked[-1] + 1
        for entry_id in range(next_id, next_id + 20):
            await bookie.add_entry(7, entry_id, _payload(entry_id))
        # The flusher caught up: a checkpoint (which waits for it) goes through, and every
        # entry is in the entry files (nothing left in the write cache).
        await asyncio.wait_for(bookie.checkpoint(), 10)
        assert not bookie._cache
        stored = await bookie.read_entries(7, 0, next_id + 19)
        assert [e.data for e in stored] == [_payload(i) for i in range(next_id + 20)]
        assert isinstance(refusal, StorageError)
    finally:
        await bookie.close()


async def test_the_usage_threshold_turns_the_bookie_read_only_before_the_disk_is_full(
    disk: Path,
) -> None:
    bookie = await Bookie.open(disk / "bookie", disk_thresholds=THRESHOLDS)
    ballast = Ballast(disk)
    try:
        await bookie.add_entry(1, 0, b"before")
        ballast.fill(leave_free=int(0.03 * os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize))
        usage = await bookie.check_disk()
        assert usage is not None and usage.used_fraction >= 0.95
        assert "at or above diskUsageThreshold 95%" in str(bookie.read_only_reason)
        with pytest.raises(StorageReadOnly):
            await bookie.add_entry(1, 1, b"refused")
        # Fences and deletes still go through: a new owner must be able to fence to read.
        await bookie.fence(1)
        assert bookie.is_fenced(1)
        # Above the low-water mark it stays read-only; below it, it is writable again.
        ballast.release(int(0.03 * os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize))
        await bookie.check_disk()
        assert bookie.read_only_reason is not None
        ballast.release()
        await bookie.check_disk()
        assert bookie.read_only_reason is None
        await bookie.add_entry(2, 0, b"after")
    finally:
        await bookie.close()


async def _run_writer(data_dir: Path, acks: int) -> dict[tuple[int, int], str]:
    """Run crash_writer.py on ``data_dir`` until ``acks`` entries are acknowledged, then
    SIGKILL it; returns what it acknowledged."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(data_dir),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    acked: dict[tuple[int, int], str] = {}
    try:
        async with asyncio.timeout(60):
            while len(acked) < acks:
                line = (await proc.stdout.readline()).decode()
                assert line, "the writer died"
                parts = line.split()
                if len(parts) == 3:
                    acked[(int(parts[0]), int(parts[1]))] = parts[2]
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    return acked


def _tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_the_journal_keeps_durable_records_when_preallocation_runs_out_of_space(
    disk: Path,
) -> None:
    """Groups committed while the journal cannot preallocate (the disk is nearly full) extend the
    file themselves; a later preallocation - failing, or succeeding once space is back - must
    start after them. Before, it started at the end of the last *successful* preallocation and
    wrote its zeros over those durable, acknowledged records (a failing one kept the zeros it
    managed to write over existing blocks), so a restart replayed none of them."""
    directory = disk / "journal"
    directory.mkdir()
    reports: queue.SimpleQueue[tuple[list[object], OSError | None]] = queue.SimpleQueue()
    writer = JournalWriter(
        directory,
        0,
        on_durable=lambda tokens: reports.put((tokens, None)),
        on_roll=lambda seq, tokens: None,
        on_error=lambda tokens, exc: reports.put((tokens, exc)),
    )
    ballast = Ballast(disk)
    records = [JournalRecord(RecordKind.ADD, 3, i, i - 1, 0, _payload(i)) for i in range(12)]

    def commit(record: JournalRecord) -> None:
        writer.submit([encode_record_head(record), record.data], [record.entry_id])
        tokens, error = reports.get(timeout=10)
        assert (tokens, error) == ([record.entry_id], None)

    try:
        # Room for the records, not for a 1 MB preallocation: each group extends the file.
        ballast.fill(leave_free=256 * 1024)
        assert free_bytes(disk) < 512 * 1024
        for record in records[:8]:
            commit(record)
        # Space back: the next preallocation succeeds.
        ballast.release()
        for record in records[8:]:
            commit(record)
    finally:
        writer.stop()
        ballast.release()
    assert list(replay_file(journal_path(directory, 0), 0)) == records


async def test_a_bookie_killed_on_a_nearly_full_disk_starts_again_on_it(disk: Path) -> None:
    data_dir = disk / "bookie"
    acked = await _run_writer(data_dir, 2000)
    ledgers_before = _tree_size(data_dir / "ledgers")
    journal_before = _tree_size(data_dir / "journal")
    # Nearly full: far less room than the journal holds, or than one journal preallocation.
    ballast = Ballast(disk)
    ballast.fill(leave_free=96 * 1024)
    bookie = await Bookie.open(data_dir, disk_thresholds=THRESHOLDS)
    try:
        assert bookie.replayed_records + len(bookie._cache) > 0
        assert bookie.read_only_reason is not None  # above the threshold: read-only
        # Replay wrote in place: the entry files grew by what the flusher had not copied yet at
        # the kill, not by a second copy of the journal (before, every record was appended again
        # and the bookie could not start on this disk).
        assert _tree_size(data_dir / "ledgers") - ledgers_before < journal_before / 2
        for (ledger_id, entry_id), expected in acked.items():
            entry = await bookie.read_entry(ledger_id, entry_id)
            assert digest(entry.data) == expected
            assert entry.data == expected_payload(ledger_id, entry_id)
        # Space back: writable, and whatever replay held in memory reaches the entry files.
        ballast.release()
        await bookie.check_disk()
        assert bookie.read_only_reason is None
        await asyncio.wait_for(bookie.checkpoint(), 10)
        assert not bookie._cache
    finally:
        await bookie.close()
    reopened = await Bookie.open(data_dir, disk_thresholds=THRESHOLDS)
    try:
        for (ledger_id, entry_id), expected in acked.items():
            assert digest((await reopened.read_entry(ledger_id, entry_id)).data) == expected
    finally:
        await reopened.close()


async def test_the_metadata_store_names_a_full_disk_not_a_failed_rollback(disk: Path) -> None:
    store = await open_store(f"sqlite:///{disk / 'metadata.db'}")
    try:
        await store.put("/before", b"x" * 1000, -1)
        Ballast(disk).fill()
        with pytest.raises(StoreUnavailable) as failure:
            for i in range(2000):  # until the WAL needs a block it cannot have
                await store.put(f"/full/{i}", os.urandom(4096), -1)
        message = str(failure.value)
        assert "full" in message
        assert "no transaction is active" not in message
        assert (await store.get("/before")) is not None
    finally:
        Ballast(disk).release()
        await store.close()


async def test_appends_while_storage_is_read_only_are_refused_without_new_ledgers(
    disk: Path,
) -> None:
    store = await open_store("memory://")
    storage = await open_local_cluster(store, disk / "storage", disk_thresholds=THRESHOLDS)
    factory = DefaultManagedLedgerFactory(store, StorageRouter([storage]))
    ballast = Ballast(disk)
    try:
        ledger = await factory.open("t/ns/persistent/full", ManagedLedgerConfig())
        ballast.fill(leave_free=3 * MB)
        acked = []
        while True:
            try:
                acked.append(await ledger.append(os.urandom(10_000)))
            except StorageError:
                break
        ledgers_when_full = list(await storage.list_ledgers())
        for _ in range(50):
            with pytest.raises(StorageError):
                await ledger.append(b"refused")
        assert list(await storage.list_ledgers()) == ledgers_when_full
        entries = await ledger.read(acked[0], len(acked))
        assert [e.position for e in entries] == acked
        ballast.release()
        await storage.bookie("bookie-0").bookie.check_disk()  # type: ignore[attr-defined]
        position = await ledger.append(b"after")
        assert position > acked[-1]
        await ledger.close()
    finally:
        await factory.close()
        await storage.close()
        await store.close()
        assert free_bytes(disk) > 0
