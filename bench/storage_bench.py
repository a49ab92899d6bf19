"""Storage benchmark: ledger add throughput and latency against the raw fsync limit of the disk.

For 100 B, 1 KiB and 64 KiB entries with 1 and 8 concurrent writers (each writer appends to its own
ledger and awaits each add before the next), it measures

* **raw**: a plain loop appending ``writers`` journal-framed entries with one ``write`` and then
  one ``fdatasync`` - the group size group commit reaches with that many writers - on the same disk;
* **bookie**: :class:`braid.storage.bookie.Bookie` directly (journal + group commit + flusher);
* **ledger**: the full ledger API (``open_local_cluster`` with one bookie, in-memory metadata).

The disk is shared and its speed drifts, so the three are measured in interleaved slices (raw,
bookie, ledger, raw, ...) and each row sums its slices. One table: entries/s, MiB/s, p50/p99 add
latency, and the ratio to the raw limit of the same configuration.

Run: ``.venv/bin/python bench/storage_bench.py [--rounds 8] [--slice 0.25] [--dir PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from braid.metadata import open_store
from braid.storage import open_local_cluster
from braid.storage.bookie import Bookie
from braid.storage.bookie.records import JournalRecord, RecordKind, encode_record

SIZES = (100, 1024, 64 * 1024)
WRITERS = (1, 8)


@dataclass
class Tally:
    """Adds, seconds and per-add latencies accumulated over the slices of one row."""

    entries: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def entries_per_s(self) -> float:
        return self.entries / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def raw_slice(path: Path, size: int, group: int, seconds: float, tally: Tally) -> None:
    """Append ``group`` journal-framed records per write + fdatasync for ``seconds``."""
    record = encode_record(JournalRecord(RecordKind.ADD, 1, 0, -1, 0, os.urandom(size)))
    buf = record * group
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        deadline = start + seconds
        groups = 0
        while True:
            t0 = time.perf_counter()
            os.write(fd, buf)
            os.fdatasync(fd)
            t1 = time.perf_counter()
            # Every entry of a group waits for the whole group's write + fsync.
            tally.latencies.extend([t1 - t0] * group)
            groups += 1
            if t1 >= deadline:
                break
        tally.seconds += time.perf_counter() - start
        tally.entries += groups * group
    finally:
        os.close(fd)


async def engine_slice(
    add: Callable[[int, bytes], Awaitable[object]],
    size: int,
    writers: int,
    seconds: float,
    tally: Tally,
) -> None:
    """Run ``writers`` closed-loop writers for ``seconds``, each on its own ledger."""
    payload = os.urandom(size)
    deadline = time.perf_counter() + seconds

    async def writer(w: int) -> int:
        n = 0
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            await add(w, payload)
            tally.latencies.append(time.perf_counter() - t0)
            n += 1
        return n

    start = time.perf_counter()
    counts = await asyncio.gather(*(writer(w) for w in range(writers)))
    tally.seconds += time.perf_counter() - start
    tally.entries += sum(counts)


async def measure(base: Path, size: int, writers: int, rounds: int, seconds: float) -> list[Tally]:
    """Interleaved raw / bookie / ledger slices for one configuration."""
    raw, bookie_t, ledger_t = Tally(), Tally(), Tally()
    bookie = await Bookie.open(base / "bookie")
    store = await open_store("memory://")
    cluster = await open_local_cluster(store, base / "cluster")
    try:
        handles = [await cluster.create_ledger() for _ in range(writers)]
        next_ids = [0] * writers

        async def bookie_add(w: int, data: bytes) -> None:
            entry_id = next_ids[w]
            next_ids[w] += 1
            await bookie.add_entry(w, entry_id, data, last_add_confirmed=entry_id - 1)

        async def ledger_add(w: int, data: bytes) -> None:
            await handles[w].add_entry(data)

        for _ in range(rounds):
            raw_slice(base / "raw.bin", size, writers, seconds, raw)
            await engine_slice(bookie_add, size, writers, seconds, bookie_t)
            await engine_slice(ledger_add, size, writers, seconds, ledger_t)
    finally:
        await cluster.close()
        await store.close()
        await bookie.close()
        for name in ("bookie", "cluster", "raw.bin"):
            path = base / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    return [raw, bookie_t, ledger_t]


def row(label: str, size: int, writers: int, t: Tally, raw: Tally) -> str:
    """One line of the result table."""
    ratio = t.entries_per_s() / raw.entries_per_s() if raw.entries_per_s() else 0.0
    mib = t.entries_per_s() * size / 2**20
    return (
        f"| {label:<6} | {size:>6} | {writers:>2} | {t.entries_per_s():>9.0f} | {mib:>8.2f} "
        f"| {t.percentile_ms(0.5):>7.3f} | {t.percentile_ms(0.99):>7.3f} | {ratio:>6.0%} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description="ledger storage benchmark vs raw fsync limit")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved slices per row")
    parser.add_argument("--slice", type=float, default=0.25, help="seconds per slice")
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to measure")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="braid-storage-bench-", dir=args.dir))
    print(f"disk: {base}; {args.rounds} interleaved slices of {args.slice:.2f} s per row")
    print(
        "| layer  |  bytes |  w | entries/s |    MiB/s |  p50 ms |  p99 ms | vs raw |\n"
        "|--------|-------:|---:|----------:|---------:|--------:|--------:|-------:|"
    )
    try:
        for size in SIZES:
            for writers in WRITERS:
                raw, bookie, ledger = await measure(base, size, writers, args.rounds, args.slice)
                for label, tally in (("raw", raw), ("bookie", bookie), ("ledger", ledger)):
                    print(row(label, size, writers, tally, raw), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
