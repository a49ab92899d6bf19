"""A ledger-API writer for the crash test: creates a ledger, appends forever, prints each ack.

Run as ``python crash_ledger_writer.py METADATA_URL DATA_DIR``. Prints ``ledger <id>`` once, then
``<entry id> <digest>`` after every acknowledged add (flushed), until it is killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from braid.metadata import open_store
from braid.storage import open_local_cluster
from tests.integration.storage.crash_writer import digest, expected_payload


async def main(metadata_url: str, data_dir: Path) -> None:
    store = await open_store(metadata_url)
    cluster = await open_local_cluster(store, data_dir)
    writer = await cluster.create_ledger()
    print(f"ledger {writer.ledger_id}", flush=True)

    next_id = 0

    async def append() -> None:
        nonlocal next_id
        while True:
            # Ids are assigned in call order, so this counter names the id the add will get.
            data = expected_payload(writer.ledger_id, next_id)
            next_id += 1
            entry_id = await writer.add_entry(data)
            sys.stdout.write(f"{entry_id} {digest(data)}\n")
            sys.stdout.flush()

    await asyncio.gather(append(), append(), append())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
