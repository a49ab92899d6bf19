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

A second table (``--network``, or ``--network-only``) puts the bookie protocol in the path: 1 KiB
entries through the ledger API, batched (a window of adds in flight, completions by callback, as
the managed ledger writes), over

* **embedded**: one in-process bookie called directly (``braid standalone``'s default);
* **remote-1**: one ``braid bookie`` process on 127.0.0.1 (E=W=A=1), reached over TCP;
* **remote-3**: three ``braid bookie`` processes, E=3, W=2, A=2 (each entry fsync'd on two);

interleaved in slices like the first table, with the CPU each process used (the benchmark's
process is the broker side: ledger client + network client) and the ratio to embedded.

Run: ``.venv/bin/python bench/storage_bench.py [--rounds 8] [--slice 0.25] [--dir PATH]
[--network | --network-only]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from braid.metadata import open_store
from braid.storage import BookKeeperClient, open_local_cluster
from braid.storage.bookie import Bookie
from braid.storage.bookie.records import JournalRecord, RecordKind, encode_record
from braid.storage.bookie_set import StaticBookieSet

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


# -- the network table ----------------------------------------------------------------------------

NET_SIZE = 1024
NET_WINDOW = 256  # adds in flight per ledger (the managed ledger's pipelining)


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class BookieProcesses:
    """``braid bookie`` children on free 127.0.0.1 ports, each registering in its own SQLite
    store (the benchmark connects to them by port)."""

    def __init__(self, base: Path, count: int) -> None:
        from braid.cli.process import free_port

        self.procs: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        for i in range(count):
            directory = base / f"bookie-proc-{i}"
            directory.mkdir(parents=True)
            port = free_port()
            conf = directory / "bookkeeper.conf"
            conf.write_text(
                f"bookieId=bench-{i}\nbookiePort={port}\nhttpServerEnabled=false\n"
                f"journalDirectories={directory}\nledgerDirectories={directory}\n"
                f"metadataServiceUri=sqlite:///{directory}/metadata.db\n"
            )
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "braid.cli.main", "bookie", "--config", str(conf)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            self.ports.append(port)

    async def wait_ready(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        for port in self.ports:
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"bookie on port {port} did not start") from None
                    await asyncio.sleep(0.1)

    def cpu(self) -> list[float]:
        return [_cpu_of(p.pid) for p in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class NetTally:
    """Entries, wall seconds and CPU seconds (this process, each bookie process) of one row."""

    entries: int = 0
    seconds: float = 0.0
    client_cpu: float = 0.0
    bookie_cpu: list[float] = field(default_factory=list)


async def batched_slice(
    client: BookKeeperClient,
    quorums: tuple[int, int, int],
    seconds: float,
    tally: NetTally,
    procs: BookieProcesses | None,
    used: list[int],
) -> None:
    """Add 1 KiB entries to a fresh ledger with ``NET_WINDOW`` in flight, for ``seconds``."""
    ensemble, write_quorum, ack_quorum = quorums
    writer = await client.create_ledger(ensemble, write_quorum, ack_quorum)
    payload = os.urandom(NET_SIZE)
    done = asyncio.Event()
    state = {"inflight": 0, "acked": 0}
    deadline = 0.0

    def complete(_entry_id: int, error: BaseException | None, _ctx: None) -> None:
        if error is not None:
            raise error
        state["acked"] += 1
        state["inflight"] -= 1
        if time.perf_counter() < deadline:
            state["inflight"] += 1
            writer.add_entry_with_callback(payload, complete, None)
        elif state["inflight"] == 0:
            done.set()

    cpu0 = _self_cpu()
    bookies0 = procs.cpu() if procs else []
    start = time.perf_counter()
    deadline = start + seconds
    for _ in range(NET_WINDOW):
        state["inflight"] += 1
        writer.add_entry_with_callback(payload, complete, None)
    await done.wait()
    tally.seconds += time.perf_counter() - start
    tally.entries += state["acked"]
    tally.client_cpu += _self_cpu() - cpu0
    if procs:
        spent = [after - before for after, before in zip(procs.cpu(), bookies0, strict=True)]
        tally.bookie_cpu = [
            a + b for a, b in zip(tally.bookie_cpu or [0.0] * len(spent), spent, strict=True)
        ]
        del used
    await writer.close()


async def network_table(base: Path, rounds: int, seconds: float) -> None:
    from braid.storage.bookie_net_client import NetBookieClient

    procs = BookieProcesses(base, 3)
    store = await open_store("memory://")
    embedded = await open_local_cluster(store, base / "embedded", "embedded")
    remote1: BookKeeperClient | None = None
    remote3: BookKeeperClient | None = None
    try:
        await procs.wait_ready()
        nets = [NetBookieClient(f"bench-{i}", ("127.0.0.1", p)) for i, p in enumerate(procs.ports)]
        remote1 = BookKeeperClient(store, "remote1", StaticBookieSet(nets[:1]))
        remote3 = BookKeeperClient(
            store,
            "remote3",
            StaticBookieSet(
                NetBookieClient(f"bench-{i}", ("127.0.0.1", p)) for i, p in enumerate(procs.ports)
            ),
        )
        rows = {
            "embedded": (embedded, (1, 1, 1), None, NetTally()),
            "remote-1": (remote1, (1, 1, 1), procs, NetTally()),
            "remote-3": (remote3, (3, 2, 2), procs, NetTally()),
        }
        for _ in range(rounds):
            for client, quorums, watched, tally in rows.values():
                await batched_slice(client, quorums, seconds, tally, watched, [])
        base_rate = rows["embedded"][3].entries / rows["embedded"][3].seconds
        print(
            f"\n1 KiB entries, batched ({NET_WINDOW} in flight), ledger API; CPU as % of one "
            "core over the row's wall time\n"
            "| setup    | E/W/A | entries/s |    MiB/s | vs embedded | client CPU "
            "| bookie CPU (each) | CPU µs/entry |\n"
            "|----------|-------|----------:|---------:|------------:|-----------:"
            "|-------------------|-------------:|"
        )
        for label, (_, quorums, watched, t) in rows.items():
            rate = t.entries / t.seconds
            bookie_cpu = (
                " / ".join(f"{c / t.seconds:.0%}" for c in t.bookie_cpu)
                if watched
                else "(in client)"
            )
            # Every process's CPU per acknowledged entry: what the machine pays for one entry.
            per_entry = (t.client_cpu + sum(t.bookie_cpu if watched else [])) / t.entries * 1e6
            print(
                f"| {label:<8} | {'/'.join(map(str, quorums)):<5} | {rate:>9.0f} "
                f"| {rate * NET_SIZE / 2**20:>8.2f} | {rate / base_rate:>11.0%} "
                f"| {t.client_cpu / t.seconds:>10.0%} | {bookie_cpu:<17} | {per_entry:>12.1f} |",
                flush=True,
            )
    finally:
        for client in (remote1, remote3):
            if client is not None:
                await client.close()
        await embedded.close()
        await store.close()
        procs.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description="ledger storage benchmark vs raw fsync limit")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved slices per row")
    parser.add_argument("--slice", type=float, default=0.25, help="seconds per slice")
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to measure")
    parser.add_argument("--network", action="store_true", help="add the bookie-process table")
    parser.add_argument("--network-only", action="store_true", help="only that table")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="braid-storage-bench-", dir=args.dir))
    if args.network_only:
        try:
            await network_table(base, args.rounds, args.slice * 4)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return
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
        if args.network:
            await network_table(base, args.rounds, args.slice * 4)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
