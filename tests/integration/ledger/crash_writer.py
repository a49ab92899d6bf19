"""Child process of the crash test: appends to a managed ledger and reports every acknowledgement.

Usage: ``python crash_writer.py DATA_DIR TOPIC TAG``. Each acknowledged append prints
``E <ledger> <entry> <payload>``; each completed cursor mark-delete prints ``M <ledger> <entry>``.
Output is flushed line by line so the parent knows exactly what was acknowledged before it sends
SIGKILL. The process never exits on its own.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from braid.ledger import EARLIEST, DefaultManagedLedgerFactory, ManagedLedgerConfig
from braid.metadata import open_store
from braid.storage import StorageRouter, open_local_cluster

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=7, retention_time_s=-1, retention_size_bytes=-1)
IN_FLIGHT = 8


async def main(data_dir: Path, topic: str, tag: str) -> None:
    metadata = await open_store(f"sqlite:///{data_dir}/metadata.db")
    storage = await open_local_cluster(metadata, data_dir / "data")
    factory = DefaultManagedLedgerFactory(metadata, StorageRouter([storage]))
    ml = await factory.open(topic, CONFIG)
    cursor = await ml.open_cursor("sub", EARLIEST)
    print("READY", flush=True)
    n = 0
    while True:
        payloads = [f"{tag}-{n + i}" for i in range(IN_FLIGHT)]
        n += IN_FLIGHT
        tasks = [asyncio.ensure_future(ml.append(p.encode())) for p in payloads]
        for payload, task in zip(payloads, tasks, strict=True):
            position = await task
            sys.stdout.write(f"E {position.ledger_id} {position.entry_id} {payload}\n")
            sys.stdout.flush()
        half = tasks[IN_FLIGHT // 2].result()
        await cursor.mark_delete(half)
        sys.stdout.write(f"M {half.ledger_id} {half.entry_id}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
