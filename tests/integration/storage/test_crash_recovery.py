"""SIGKILL a writing bookie at random points: every acknowledged entry survives, in order, intact.

Each iteration starts ``crash_writer.py`` in a subprocess, reads its acknowledgements up to a random
count (sometimes killing it while it is still replaying the journal), and kills it with SIGKILL.
Then the data directory is reopened and checked: every acknowledged entry is present with its
content; every stored entry of a ledger forms a gap-free prefix with exactly the content the writer
would have written, so no unacknowledged entry is half-visible. Some iterations skip the check so
the next writer has to replay a journal the previous one left behind.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

from braid.storage.bookie import Bookie
from tests.integration.storage.crash_writer import LEDGERS, digest, expected_payload

WRITER = Path(__file__).with_name("crash_writer.py")
TIME_BUDGET_S = 25.0
MAX_ITERATIONS = 40
MIN_ITERATIONS = 10


async def _read_line(stream: asyncio.StreamReader) -> str:
    line = await asyncio.wait_for(stream.readline(), timeout=30)
    if not line:
        raise AssertionError("writer exited before it was killed")
    return line.decode().strip()


async def _run_writer_until_killed(
    data_dir: Path, acks_before_kill: int, kill_while_opening: bool
) -> list[tuple[int, int, str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(data_dir),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    acked: list[tuple[int, int, str]] = []
    try:
        assert await _read_line(proc.stdout) == "opening"
        if not kill_while_opening:
            assert await _read_line(proc.stdout) == "ready"
            while len(acked) < acks_before_kill:
                ledger, entry, dig = (await _read_line(proc.stdout)).split()
                acked.append((int(ledger), int(entry), dig))
    finally:
        proc.kill()  # SIGKILL, by process id
        await proc.wait()
    return acked


async def _check(data_dir: Path, acked: dict[tuple[int, int], str]) -> None:
    bookie = await Bookie.open(data_dir)
    try:
        for ledger_id in LEDGERS:
            last = bookie.last_entry_id(ledger_id)
            acked_here = [e for (lid, e) in acked if lid == ledger_id]
            assert last >= max(acked_here, default=-1), "an acknowledged entry was lost"
            if last < 0:
                continue
            entries = await bookie.read_entries(ledger_id, 0, last)
            for entry in entries:
                assert entry.data == expected_payload(ledger_id, entry.entry_id)
                want = acked.get((ledger_id, entry.entry_id))
                assert want is None or want == digest(entry.data)
    finally:
        await bookie.close()


async def test_sigkilled_writer_loses_no_acknowledged_entry(tmp_path: Path) -> None:
    rng = random.Random(20261125)
    data_dir = tmp_path / "bookie"
    acked: dict[tuple[int, int], str] = {}
    started = time.monotonic()
    iterations = 0
    while iterations < MAX_ITERATIONS and (
        iterations < MIN_ITERATIONS or time.monotonic() - started < TIME_BUDGET_S
    ):
        iterations += 1
        kill_while_opening = iterations > 1 and rng.random() < 0.15
        acks = rng.choice([0, 1, rng.randint(2, 50), rng.randint(50, 600)])
        for ledger_id, entry_id, dig in await _run_writer_until_killed(
            data_dir, acks, kill_while_opening
        ):
            acked[(ledger_id, entry_id)] = dig
        if rng.random() < 0.7:
            await _check(data_dir, acked)
    await _check(data_dir, acked)
    assert len(acked) > 500
