"""Crash recovery: a writer process is killed with SIGKILL while appending; after reopening,
every acknowledged entry is there, in order, with its content, and the cursor kept every
acknowledged mark-delete."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path

from braid.ledger import EARLIEST, Position
from tests.integration.ledger.conftest import LedgerEnv

TOPIC = "public/default/persistent/crashy"
WRITER = Path(__file__).with_name("crash_writer.py")
ITERATIONS = 6


async def _run_writer_until_killed(
    data_dir: Path, tag: str, kill_after: int
) -> tuple[list[tuple[Position, bytes]], Position | None]:
    """Start the writer, read ``kill_after`` acknowledgements, SIGKILL it; return what it acked."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(data_dir),
        TOPIC,
        tag,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    acked: list[tuple[Position, bytes]] = []
    marked: Position | None = None
    try:
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
        assert ready == b"READY\n", ready + (await proc.stderr.read() if proc.stderr else b"")
        while len(acked) < kill_after:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            assert line, "writer exited early"
            kind, ledger, entry, *rest = line.decode().split()
            if kind == "E":
                acked.append((Position(int(ledger), int(entry)), rest[0].encode()))
            else:
                marked = Position(int(ledger), int(entry))
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
    # Lines already written before the kill are acknowledgements too.
    assert proc.stdout is not None
    for text in (await proc.stdout.read()).decode().splitlines():
        parts = text.split()
        if len(parts) == 4 and parts[0] == "E":
            acked.append((Position(int(parts[1]), int(parts[2])), parts[3].encode()))
        elif len(parts) == 3 and parts[0] == "M":
            marked = Position(int(parts[1]), int(parts[2]))
    return acked, marked


async def test_sigkilled_writer_loses_no_acknowledged_entry(env: LedgerEnv) -> None:
    await env.stop()  # the child process owns the files while it runs
    rng = random.Random(470)
    all_acked: list[tuple[Position, bytes]] = []
    for iteration in range(ITERATIONS):
        acked, marked = await _run_writer_until_killed(
            env.root, f"run{iteration}", rng.randint(5, 60)
        )
        all_acked.extend(acked)
        factory = await env.start()
        ml = await factory.open(TOPIC)
        stored = [(e.position, e.data) for e in await ml.read(EARLIEST, 100_000)]
        stored_set = set(stored)
        missing = [a for a in all_acked if a not in stored_set]
        assert not missing, f"iteration {iteration}: acknowledged entries lost: {missing[:5]}"
        positions = [p for p, _ in stored]
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        # Anything stored beyond the acknowledged entries is a whole payload the writer sent.
        for _, data in stored:
            tag, number = data.decode().rsplit("-", 1)
            assert tag.startswith("run") and number.isdigit()
        if marked is not None:
            assert ml.cursors["sub"].mark_delete_position >= marked
        await env.stop()
