"""Metadata store benchmark: CAS throughput and notification latency per backend, one process.

For each backend (memory, sqlite on a temp file, ZooKeeper started with the test harness) it runs

* **CAS ops/s**: one writer doing ``put(path, value, expected_version=v)`` back to back on one node
  (each awaited before the next), for ``--seconds``;
* **notification latency**: a second session listens; the writer changes a node and waits until the
  listener has seen the change before the next one; latency from just before ``put`` to the
  listener call, p50/p99 over ``--samples``.

The reference row ``raw sqlite`` is the same CAS transaction done with plain ``sqlite3`` on the same
disk with the same settings (WAL, synchronous=FULL) and no threads or asyncio, measured just
before and just after the sqlite store (the shared disk drifts): the sqlite store's
CAS rate is also printed as a ratio of it. ZooKeeper is skipped with a message if Java or its jar
is absent.

Run: ``.venv/bin/python bench/metadata_bench.py [--seconds 2] [--samples 300]``
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support.zookeeper

from braid.metadata import MemoryMetadataStore, MetadataStore, Notification
from braid.metadata.sqlite import SqliteMetadataStore
from braid.metadata.zookeeper import ZkMetadataStore
from tests.support.zookeeper import ZooKeeperServer, missing_requirement

VALUE = b"x" * 256

Opener = Callable[[], Awaitable[MetadataStore]]


async def cas_rate(store: MetadataStore, seconds: float) -> float:
    stat = await store.put("/bench/cas", VALUE)
    version, count = stat.version, 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        stat = await store.put("/bench/cas", VALUE, version)
        version = stat.version
        count += 1
    return count / (time.perf_counter() - start)


async def notification_latency(
    writer: MetadataStore, observer: MetadataStore, samples: int
) -> tuple[float, float]:
    arrived: asyncio.Queue[float] = asyncio.Queue()

    def on_change(n: Notification) -> None:
        if n.path == "/bench/notify":
            arrived.put_nowait(time.perf_counter())

    observer.register_listener(on_change)
    await writer.put("/bench/notify", VALUE)
    await asyncio.wait_for(arrived.get(), 10)
    latencies = []
    for _ in range(samples):
        sent = time.perf_counter()
        await writer.put("/bench/notify", VALUE)
        received = await asyncio.wait_for(arrived.get(), 10)
        latencies.append((received - sent) * 1000)
    quantiles = statistics.quantiles(latencies, n=100)
    return quantiles[49], quantiles[98]


def raw_sqlite_cas_rate(path: Path, seconds: float) -> float:
    """The same CAS transaction with plain sqlite3: the disk's limit for this work."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE nodes (path TEXT PRIMARY KEY, value BLOB, version INTEGER)")
    db.execute("INSERT INTO nodes VALUES ('/bench/cas', ?, 0)", (VALUE,))
    count = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        db.execute("BEGIN IMMEDIATE")
        (version,) = db.execute("SELECT version FROM nodes WHERE path = '/bench/cas'").fetchone()
        db.execute(
            "UPDATE nodes SET value = ?, version = ? WHERE path = '/bench/cas'",
            (VALUE, version + 1),
        )
        db.execute("COMMIT")
        count += 1
    rate = count / (time.perf_counter() - start)
    db.close()
    return rate


async def measure(open_session: Opener, seconds: float, samples: int) -> tuple[float, float, float]:
    writer, observer = await open_session(), await open_session()
    try:
        rate = await cas_rate(writer, seconds)
        p50, p99 = await notification_latency(writer, observer, samples)
    finally:
        await writer.close()
        await observer.close()
    return rate, p50, p99


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="CAS phase per backend")
    parser.add_argument("--samples", type=int, default=300, help="notification samples")
    args = parser.parse_args()
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # connection chatter at shutdown

    rows: list[tuple[str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="braid-meta-bench-") as tmp:
        memory_backend = MemoryMetadataStore().backend

        async def open_memory() -> MetadataStore:
            return MemoryMetadataStore(memory_backend)

        rate, p50, p99 = await measure(open_memory, args.seconds, args.samples)
        rows.append(("memory", f"{rate:,.0f}", f"{p50:.3f}", f"{p99:.3f}", "-"))

        db = str(Path(tmp) / "store.db")

        async def open_sqlite() -> MetadataStore:
            return await SqliteMetadataStore.open(db)

        # The shared disk drifts: measure the reference right before and right after.
        raw_before = raw_sqlite_cas_rate(Path(tmp) / "raw1.db", args.seconds / 2)
        rate, p50, p99 = await measure(open_sqlite, args.seconds, args.samples)
        raw_after = raw_sqlite_cas_rate(Path(tmp) / "raw2.db", args.seconds / 2)
        raw = (raw_before + raw_after) / 2
        rows.insert(0, ("raw sqlite (reference)", f"{raw:,.0f}", "-", "-", "1.00"))
        rows.append(("sqlite", f"{rate:,.0f}", f"{p50:.3f}", f"{p99:.3f}", f"{rate / raw:.2f}"))

    reason = missing_requirement()
    if reason:
        print(f"zookeeper: skipped ({reason})")
    else:
        with ZooKeeperServer() as server:

            async def open_zk() -> MetadataStore:
                return await ZkMetadataStore.open(server.hosts, "/bench")

            rate, p50, p99 = await measure(open_zk, args.seconds, args.samples)
            rows.append(("zookeeper", f"{rate:,.0f}", f"{p50:.3f}", f"{p99:.3f}", "-"))

    header = ("backend", "CAS ops/s", "notify p50 ms", "notify p99 ms", "CAS / raw sqlite")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        tail = zip(row[1:], widths[1:], strict=True)
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in tail]
        print("  ".join(cells))


if __name__ == "__main__":
    asyncio.run(main())
