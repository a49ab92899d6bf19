"""SIGKILL a process writing through the ledger API; a new owner's recovery open keeps every ack.

Each iteration a subprocess creates a ledger on the standalone cluster (SQLite metadata, one local
bookie), appends with three concurrent callers and prints every acknowledged entry; it is killed
with SIGKILL after a random number of acks. The test then opens the cluster itself and opens the
ledger with recovery, as a new owner would: the ledger is closed at or after the last acknowledged
entry, and every entry up to its end has exactly the content the writer produced.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

from braid.metadata import open_store
from braid.storage import LedgerState, open_local_cluster
from tests.integration.storage.crash_writer import digest, expected_payload

WRITER = Path(__file__).with_name("crash_ledger_writer.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
ITERATIONS = 6


async def _line(stream: asyncio.StreamReader) -> str:
    line = await asyncio.wait_for(stream.readline(), timeout=30)
    if not line:
        raise AssertionError("writer exited before it was killed")
    return line.decode().strip()


async def test_recovery_after_sigkill_keeps_every_acknowledged_entry(tmp_path: Path) -> None:
    rng = random.Random(4)
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for _ in range(ITERATIONS):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WRITER),
            url,
            str(tmp_path / "data"),
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        acked: dict[int, str] = {}
        try:
            kind, ledger_text = (await _line(proc.stdout)).split()
            assert kind == "ledger"
            ledger_id = int(ledger_text)
            for _ in range(rng.randint(1, 300)):
                entry_text, dig = (await _line(proc.stdout)).split()
                acked[int(entry_text)] = dig
        finally:
            proc.kill()
            await proc.wait()

        store = await open_store(url)
        cluster = await open_local_cluster(store, tmp_path / "data")
        try:
            reader = await cluster.open_ledger(ledger_id, recovery=True)
            assert reader.metadata.state is LedgerState.CLOSED
            assert reader.last_add_confirmed >= max(acked)
            entries = await reader.read_entries(0, reader.last_add_confirmed)
            assert [e.entry_id for e in entries] == list(range(reader.last_add_confirmed + 1))
            for entry in entries:
                assert entry.data == expected_payload(ledger_id, entry.entry_id)
                assert acked.get(entry.entry_id, digest(entry.data)) == digest(entry.data)
            assert reader.metadata.length == sum(len(e.data) for e in entries)
        finally:
            await cluster.close()
            await store.close()
