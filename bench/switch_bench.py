"""Storage-cluster switch benchmark (PIP-470): what a producer feels during a switch, and how fast
BUILD copies cursor ledgers.

1. **Publish latency before, during and after a switch.** A ``braid standalone`` assembly
   (``StandaloneServer``, in this process, with a second local storage cluster configured) and one
   Braid asyncio producer on a 2-segment ``topic://`` topic sending keyed 100 B messages at
   ``--rate``; every send is timed from ``send_async`` to its confirmation. Phases: ``--phase``
   seconds before the switch; *during* = from the switch request until PROMOTE is done plus
   ``--phase`` seconds; *after* = ``--phase`` seconds after CLEANUP finished. The producer shares
   the broker's event loop (one process), so absolute figures include that contention; the
   before/during/after ratio is the point.
2. **BUILD throughput** for ``--cursors`` live cursor ledgers (one managed ledger with that many
   cursors, each with its own cursor ledger): ledgers/s and MB/s from the first BUILD step to the
   start of PROMOTE, against a peer measured in the same run on the same target cluster: creating,
   writing and closing the same number of one-entry ledgers directly (the floor of any copy).

Run: ``.venv/bin/python bench/switch_bench.py [--rate 1000] [--phase 5] [--cursors 1000]``
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

import braid
from braid.broker.config import BrokerConfig
from braid.cli.standalone import StandaloneServer
from braid.clock import SystemClock
from braid.clusters.factory import LocalClusterFactory
from braid.clusters.service import StorageClusterService
from braid.core.storage_switch import Step, StepKind
from braid.ledger.api import EARLIEST, ManagedLedgerConfig
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.metadata import open_store
from braid.storage.local import open_local_cluster
from braid.storage.router import StorageRouter

TOPIC = "topic://public/default/switch-bench"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _wait_phase(service: StorageClusterService, *phases: str) -> None:
    while True:
        got = await service.registry.state()
        if got is not None and got[0].phase.value in phases:
            return
        await asyncio.sleep(0.02)  # a benchmark polls the broker; tests use deadlines


async def latency_run(root: Path, rate: int, phase_s: float) -> dict[str, list[float]]:
    config = BrokerConfig(
        data_dir=root / "data",
        broker_service_port=0,
        web_service_port=0,
        managed_ledger_max_entries_per_ledger=5000,
        bookie_clusters=(("new", f"sqlite:///{root / 'new' / 'metadata.db'}"),),
    )
    server = StandaloneServer(config)
    await server.start()
    samples: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    current = {"phase": "before"}
    failures: list[str] = []
    try:
        service = server.storage_clusters
        assert service is not None and server.scalable is not None
        async with httpx.AsyncClient(base_url=server.web_service_url, timeout=30) as http:
            answer = await http.put(
                "/admin/v2/scalable/public/default/switch-bench", json={"numInitialSegments": 2}
            )
            answer.raise_for_status()
        async with braid.AsyncClient(server.service_url) as client:
            producer = await client.create_producer(TOPIC, batching_max_delay=0.001)
            payload = b"x" * 100
            stop = asyncio.Event()

            async def sender() -> None:
                interval = 1.0 / rate
                n = 0
                start = time.perf_counter()
                pending: set[asyncio.Future[Any]] = set()
                while not stop.is_set():
                    label = current["phase"]
                    sent_at = time.perf_counter()
                    future = asyncio.ensure_future(producer.send(payload, key=f"k{n % 500}"))

                    def done(
                        f: asyncio.Future[Any], label: str = label, t0: float = sent_at
                    ) -> None:
                        pending.discard(f)
                        if not f.cancelled() and f.exception() is None:
                            samples[label].append((time.perf_counter() - t0) * 1000)
                        else:
                            failures.append(label)

                    future.add_done_callback(done)
                    pending.add(future)
                    n += 1
                    delay = start + n * interval - time.perf_counter()
                    await asyncio.sleep(max(0.0, delay))
                await asyncio.gather(*pending, return_exceptions=True)

            task = asyncio.create_task(sender())
            await asyncio.sleep(phase_s)
            current["phase"] = "during"
            await service.advance_idgen("new", 1_000_000)
            await service.switch("new")
            await _wait_phase(service, "AWAIT_CLEANUP")
            await asyncio.sleep(phase_s)
            await service.cleanup(dry_run=False, force=True)
            await _wait_phase(service, "DONE", "DONE_WITH_FAILURES")
            current["phase"] = "after"
            await asyncio.sleep(phase_s)
            stop.set()
            await task
            await producer.close()
    finally:
        await server.close()
    samples["failed sends"] = [float(len(failures))]
    return samples


async def build_run(root: Path, cursors: int) -> tuple[float, int, float]:
    """BUILD seconds and bytes for ``cursors`` cursor ledgers, and the peer's seconds."""
    clock = SystemClock()
    url = f"sqlite:///{root / 'metadata.db'}"
    metadata = await open_store(url, clock=clock)
    home = await open_local_cluster(metadata, root, "old", clock=clock)
    router = StorageRouter([home], active="old")
    factory = LocalClusterFactory(root, metadata, url, home_cluster="old", clock=clock)
    ml_factory = DefaultManagedLedgerFactory(metadata, router, clock=clock)
    marks: dict[str, float] = {}

    def hook(step: Step) -> None:
        if step.kind is StepKind.BUILD:
            marks.setdefault("build", time.perf_counter())
        if step.kind is StepKind.PROMOTE:
            marks.setdefault("promote", time.perf_counter())

    service = StorageClusterService(
        metadata, router, home, url, factory, ml_factory, clock, step_hook=hook
    )
    try:
        await service.bootstrap()
        await service.start("http://bench")
        ml = await ml_factory.open_impl("public/default/persistent/bench", ManagedLedgerConfig())
        position = await ml.append(b"x" * 100)
        opened = [await ml.open_cursor(f"c{i}", EARLIEST) for i in range(cursors)]
        await asyncio.gather(*(c.mark_delete(position) for c in opened))
        await service.register("new", f"sqlite:///{root / 'new.db'}", "STANDBY")
        await service.advance_idgen("new", 1_000_000)
        await service.switch("new")
        await _wait_phase(service, "AWAIT_CLEANUP")
        state = await service.registry.state()
        assert state is not None
        items = state[0].items
        old = router.client_for("old")
        total = 0
        for item in items:
            total += (await old.get_ledger_metadata(item.ledger_id)).length
        build_s = marks["promote"] - marks["build"]
        # Peer: the same number of one-entry ledgers written straight to the target.
        target = router.client_for("new")
        entry = b"y" * max(1, total // max(1, len(items)))
        start = time.perf_counter()

        async def one() -> None:
            handle = await target.create_ledger()
            await handle.add_entry(entry)
            await handle.close()

        for chunk in range(0, len(items), 16):
            await asyncio.gather(*(one() for _ in range(min(16, len(items) - chunk))))
        peer_s = time.perf_counter() - start
        return build_s, total, peer_s if len(items) == cursors else float("nan")
    finally:
        await service.stop()
        await ml_factory.close()
        await service.close()
        await factory.close()
        await home.close()
        await metadata.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--phase", type=float, default=5.0)
    parser.add_argument("--cursors", type=int, default=1000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="switch-bench-"))
    try:
        samples = await latency_run(root / "latency", args.rate, args.phase)
        build_s, total, peer_s = await build_run(root / "build", args.cursors)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"switch_bench: rate {args.rate}/s, phases of {args.phase}s, {args.cursors} cursors")
    print(f"{'phase':<8} {'sends':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    failed = samples.pop("failed sends")[0]
    for label, values in samples.items():
        print(
            f"{label:<8} {len(values):>7} {_pct(values, 0.5):>8.2f} {_pct(values, 0.99):>8.2f} "
            f"{max(values, default=float('nan')):>8.2f}"
        )
    before = _pct(samples["before"], 0.99)
    during = _pct(samples["during"], 0.99)
    print(f"p99 during / before: {during / before:.2f}; failed sends: {failed:.0f}")
    rate = args.cursors / build_s
    print(
        f"BUILD: {args.cursors} cursor ledgers in {build_s:.2f}s = {rate:.0f} ledgers/s, "
        f"{total / build_s / 1e6:.3f} MB/s; peer (write {args.cursors} one-entry ledgers "
        f"directly): {peer_s:.2f}s; BUILD / peer = {build_s / peer_s:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
