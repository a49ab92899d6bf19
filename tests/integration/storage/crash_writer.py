"""A bookie writer for the crash test: appends forever and prints each acknowledged entry.

Run as ``python crash_writer.py DATA_DIR``. It opens the bookie (replaying its journal), then 6
concurrent tasks append to 3 ledgers, continuing each ledger after its last stored entry. After each
add is acknowledged it prints ``ledger entry digest`` and flushes, so the parent knows exactly which
entries were acknowledged before it sends SIGKILL.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

from braid.storage.bookie import Bookie

LEDGERS = (1, 2, 3)


def expected_payload(ledger_id: int, entry_id: int) -> bytes:
    """The deterministic content of an entry (10 B .. ~6 KiB, so torn writes would show)."""
    seed = hashlib.sha256(f"{ledger_id}/{entry_id}".encode()).digest()
    size = 10 + int.from_bytes(seed[:2], "big") % 6000
    return (seed * (size // len(seed) + 1))[:size]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


async def main(data_dir: Path) -> None:
    print("opening", flush=True)
    bookie = await Bookie.open(data_dir)
    next_id = {lid: bookie.last_entry_id(lid) + 1 for lid in LEDGERS}
    print("ready", flush=True)

    async def writer(ledger_id: int) -> None:
        while True:
            entry_id = next_id[ledger_id]
            next_id[ledger_id] += 1
            data = expected_payload(ledger_id, entry_id)
            await bookie.add_entry(ledger_id, entry_id, data, last_add_confirmed=entry_id - 1)
            sys.stdout.write(f"{ledger_id} {entry_id} {digest(data)}\n")
            sys.stdout.flush()

    await asyncio.gather(*(writer(lid) for lid in LEDGERS for _ in range(2)))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
