"""sqlite backend: acknowledged writes survive SIGKILL, dead sessions' ephemerals are reaped,
other processes' writes are seen, and a bad file is a clear error."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.metadata import Notification, NotificationType, StoreUnavailable, open_store
from braid.metadata.sqlite import SqliteMetadataStore
from tests.integration.metadata.sqlite_child import check_crash_value, crash_value
from tests.support.polling import eventually

CHILD = Path(__file__).with_name("sqlite_child.py")
REPO = Path(__file__).resolve().parents[3]


def spawn(mode: str, db: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        assert proc.stderr is not None
        raise AssertionError(f"child exited: {proc.stderr.read()}")
    return line.strip()


async def test_every_acknowledged_write_survives_sigkill_and_no_value_is_torn(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(460)
    acked = -1
    for _ in range(3):
        proc = spawn("writer", db)
        children.append(proc)
        kill_after = rng.randint(5, 40)
        for _ in range(kill_after):
            line = read_line(proc)
            assert line.startswith("ack ")
            acked = int(line.split()[1])
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: more writes are in flight
        proc.wait(timeout=10)

        store = await SqliteMetadataStore.open(str(db))
        try:
            for i in range(acked + 1):
                found = await store.get(f"/crash/items/{i}")
                assert found is not None, f"acknowledged write {i} lost"
                assert found[0] == crash_value(i)
            counter = await store.get("/crash/counter")
            assert counter is not None
            assert check_crash_value(counter[0]) >= acked
            # Any item past the last ack is whole too (written but not yet acknowledged).
            for name in await store.children("/crash/items"):
                item = await store.get(f"/crash/items/{name}")
                assert item is not None and check_crash_value(item[0]) == int(name)
            # The dead writer's ephemeral node was reaped when this store opened.
            assert await store.get("/crash/ephemeral") is None
        finally:
            await store.close()


async def test_acknowledged_writes_of_concurrent_writers_survive_sigkill(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    """Eight concurrent writers (their writes share transactions, ADR 0077), killed mid-stream:
    every acknowledged write is there and whole, and nothing is there twice or torn."""
    db = tmp_path / "group.db"
    proc = spawn("writers", db)
    children.append(proc)
    acked: dict[int, int] = {}
    for _ in range(300):
        _, writer, item = read_line(proc).split()
        acked[int(writer)] = int(item)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    store = await SqliteMetadataStore.open(str(db))
    try:
        assert len(acked) == 8
        for writer, last in acked.items():
            names = sorted(int(n) for n in await store.children(f"/group/{writer}"))
            assert names[: last + 1] == list(range(last + 1)), f"writer {writer} lost an ack"
            assert names == list(range(len(names)))  # beyond the last ack: in order, or nothing
            for i in names:
                found = await store.get(f"/group/{writer}/{i}")
                assert found is not None and check_crash_value(found[0]) == i
    finally:
        await store.close()


async def test_a_live_process_keeps_its_ephemeral_node_and_a_dead_one_loses_it(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "shared.db"
    clock = ManualClock()
    holder = spawn("holder", db)
    children.append(holder)
    assert read_line(holder) == "ready"
    store = await SqliteMetadataStore.open(str(db), clock=clock, reap_interval=1.0)
    try:
        seen: list[Notification] = []
        store.register_listener(seen.append)
        assert await store.get("/proc/eph") is not None  # its owner is alive: kept

        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert read_line(holder) == "done"
        # A write from another process reaches this process's listeners (by polling).
        await eventually(lambda: Notification(NotificationType.CREATED, "/proc/after") in seen)

        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        clock.advance(1.0)  # the reaper's next round finds the dead session
        await eventually(lambda: Notification(NotificationType.DELETED, "/proc/eph") in seen)
        assert await store.get("/proc/eph") is None
    finally:
        await store.close()


async def test_data_survives_a_clean_restart_but_ephemeral_nodes_do_not(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/restart.db"
    store = await open_store(url)
    await store.put("/keep", b"persistent")
    await store.put("/gone", b"ephemeral", ephemeral=True)
    await store.close()
    reopened = await open_store(url)
    found = await reopened.get("/keep")
    assert found is not None and found[0] == b"persistent" and found[1].version == 0
    assert await reopened.get("/gone") is None
    await reopened.close()


async def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "not-a-db.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailable, match=r"not-a-db\.db"):
        await open_store(f"sqlite://{bogus}")
    with pytest.raises(StoreUnavailable):
        await open_store(f"sqlite://{tmp_path}")  # a directory
