"""Cluster benchmark (issue 25): aggregate publish rate on 1, 2 and 3 brokers, and the failover
gap when a topic's owner is SIGKILLed.

Each cluster is a real one, started with :func:`braid.localcluster.cluster_up` (what ``braid
cluster up`` runs): Debian's ZooKeeper, ``--bookies`` ``braid bookie`` processes (E/W/A 3/2/2)
and N ``braid broker`` processes, every one a separate process on free 127.0.0.1 ports.

* **throughput**: for N = 1, 2, 3 brokers (a fresh cluster each, in the same run) a topic with
  ``--partitions`` partitions (``--topic-kind partitioned``, the default) or a scalable topic with
  that many segments (``--topic-kind scalable``, the issue's shape); each partition (segment) is
  looked up (HTTP; a segment by binary LOOKUP, as Braid's client does) and driven by one
  *raw-protocol* worker process of ``bench/broker_bench.py`` (pre-encoded SEND frames,
  ``--window`` in flight, only SEND_RECEIPTs counted) connected to its owner. Printed: msg/s, ack
  latency p50/p99, how the partitions fell on the brokers, and every process's CPU over the
  window (``/proc/<pid>/stat``: brokers, bookies, ZooKeeper, load generator) against the cores the
  machine has. The ratio is msg/s against the 1-broker row. The topic's name is chosen so that its
  partitions spread over the brokers as evenly as rendezvous placement of unowned bundles allows
  (the load manager may differ); the real placement is printed.
  Every entry is fdatasync'ed by W=2 bookies before its receipt, and all bookies share this
  machine's one disk: the disk's own rate (one writer, ``write`` + ``fdatasync`` of a 160 B
  record, ``bench/storage_bench.py``'s ``raw_slice``) is measured in the same run and printed.
* **failover gap**: on the last cluster, a client produces without pause (``send_async``) - the
  official ``pulsar-client`` to a persistent topic, or with ``--topic-kind scalable`` Braid's
  client to a scalable topic of one segment - and the bench SIGKILLs the topic's (segment's)
  owner ``--kills`` times (restarting it with ``cluster_up``, idempotent, between kills). A kill's
  gap is the longest silence between two receipts from 1 s before the kill until receipts flowed
  again: the last receipt before the kill to the first one after. Printed p50/p99/max against
  the 5 s target (``metadataStoreSessionTimeoutMillis`` is ``--session-ms``, 4000 by default).

Run: ``.venv/bin/python bench/cluster_bench.py [--seconds 10] [--kills 10] [--brokers 1,2,3]``.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from braid.admin import AdminClient
from braid.broker.bundles import NamespaceBundles
from braid.broker.ownership import rendezvous_score
from braid.core.names import SegmentTopicName, TopicDomain, TopicName
from braid.core.ranges import HashRange
from braid.localcluster import cluster_down, cluster_status, cluster_up
from braid.localcluster.processes import ProcessId, cpu_seconds, identify
from braid.localcluster.state import ClusterState

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import Job, Report, _percentile, _raw_worker, start_workers
from storage_bench import Tally, raw_slice

TARGET_GAP_S = 5.0
FREE_PORTS = {"zookeeper": 0, "bookie": 0, "broker": 0, "web": 0}


@dataclass
class ThroughputRow:
    brokers: int
    msgs_s: float
    p50_ms: float
    p99_ms: float
    placement: dict[str, int]
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds per second, by role
    note: str = ""


def _binary_lookup(service_url: str, topic: str) -> tuple[str, int]:
    """``host, port`` of the broker serving ``topic`` (binary LOOKUP with redirects, as Braid's
    client does for a ``segment://`` topic: the HTTP lookup takes no ``/`` in a local name)."""
    import asyncio

    from braid.client.lookup import lookup_broker
    from braid.client.pool import ConnectionPool
    from braid.client.settings import ClientSettings, parse_service_url

    async def ask() -> str:
        pool = ConnectionPool(ClientSettings(parse_service_url(service_url)))
        try:
            return await lookup_broker(pool, topic)
        finally:
            await pool.close()

    host, port = asyncio.run(ask()).removeprefix("pulsar://").split(":")
    return host, int(port)


def _lookup(state: ClusterState, topic: str) -> tuple[str, int]:
    """``host, port`` of the broker serving ``topic`` (HTTP lookup, following redirects; binary
    for a segment)."""
    name = TopicName.parse(topic)
    if name.domain is TopicDomain.SEGMENT:
        return _binary_lookup(state.layout.service_url, topic)
    web_url = state.layout.web_urls[0]
    local = name.local_name
    path = f"/lookup/v2/topic/{name.domain.value}/{name.tenant}/{name.namespace}/{local}"
    with httpx.Client(base_url=web_url, follow_redirects=True, timeout=60) as http:
        response = http.get(path)
    response.raise_for_status()
    host, port = str(response.json()["brokerUrl"]).removeprefix("pulsar://").split(":")
    return host, int(port)


def _spread_name(prefix: str, partitions: int, state: ClusterState) -> str:
    """A topic name whose partitions the brokers' rendezvous placement of unowned bundles
    (ADR 0046) spreads as evenly as it can: 4 partitions on 2 brokers 2+2, on 3 brokers 2+1+1.
    The placement is checked by lookups afterwards and printed (a load manager may differ)."""
    brokers = [f"{state.layout.address}:{p}" for p in state.layout.broker_ports]
    bundles = NamespaceBundles.of("public/default", 16)
    best = max(1, -(-partitions // len(brokers)))  # ceil
    for n in range(1000):
        name = f"{prefix}-{n}"
        counts = dict.fromkeys(brokers, 0)
        for i in range(partitions):
            bundle = bundles.find(
                TopicName.parse(f"persistent://public/default/{name}-partition-{i}")
            )
            counts[max(brokers, key=lambda b: rendezvous_score(bundle, b))] += 1
        used = sum(1 for c in counts.values() if c)
        if max(counts.values()) <= best and used == min(len(brokers), partitions):
            return name
    return f"{prefix}-0"


def _targets(state: ClusterState, kind: str, name: str, partitions: int) -> list[str]:
    """The topics the workers write to: the partitions, or the segments of a scalable topic."""
    web = state.layout.web_urls[0]
    with AdminClient(web) as admin:
        if kind == "partitioned":
            topic = f"persistent://public/default/{name}"
            names = [f"{topic}-partition-{i}" for i in range(partitions)]
            # Lookups first: they give each partition's bundle to the broker placement picks.
            # Created first, the partitions' bundles would all go to the broker that served
            # the admin call (it loads every partition it can), whatever the placement says.
            for partition in names:
                _lookup(state, partition)
            admin.topics.create_partitioned(topic, partitions)
            return names
        parent = TopicName.parse(f"topic://public/default/{name}")
        admin.scalable_topics.create(parent, segments=partitions)
        segments = admin.scalable_topics.get(parent)["segments"].values()
    return [
        str(
            SegmentTopicName.of(
                parent,
                HashRange(s["hashRange"]["start"], s["hashRange"]["end"]),
                int(s["segmentId"]),
            )
        )
        for s in segments
        if s["state"] == "ACTIVE"
    ]


def _cpu_by_role(state: ClusterState, workers: list[ProcessId]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for record in state.processes:
        totals[record.role] = totals.get(record.role, 0.0) + (cpu_seconds(record.process_id) or 0)
    totals["load generator"] = sum(cpu_seconds(w) or 0.0 for w in workers)
    return totals


def _drive(jobs: list[Job], state: ClusterState) -> tuple[list[Report], dict[str, float]]:
    """Run one raw worker per job together; returns their reports and CPU s/s by role."""
    procs, pipes, go = start_workers("throughput", _raw_worker, jobs)
    workers = [w for w in (identify(p.pid or 0) for p in procs) if w is not None]
    time.sleep(max(0.0, go + jobs[0].warmup - time.perf_counter()))  # the window's start
    before = _cpu_by_role(state, workers)
    time.sleep(max(0.0, go + jobs[0].warmup + jobs[0].seconds - time.perf_counter()))
    after = _cpu_by_role(state, workers)
    reports: list[Report] = [o.recv() for _, _, o in pipes]
    for proc in procs:
        proc.join(30)
    failed = [r.error for r in reports if r.error]
    if failed:
        raise RuntimeError("; ".join(failed))
    seconds = jobs[0].seconds
    return reports, {role: (after[role] - before[role]) / seconds for role in after}


def _up(base: Path, brokers: int, args: argparse.Namespace) -> ClusterState:
    settings = {"metadataStoreSessionTimeoutMillis": str(args.session_ms)}
    result = cluster_up(
        base / f"brokers-{brokers}",
        brokers=brokers,
        bookies=args.bookies,
        ports=FREE_PORTS,
        broker_settings=settings,
        timeout_s=300,
    )
    return result.state


def throughput_row(state: ClusterState, brokers: int, args: argparse.Namespace) -> ThroughputRow:
    name = _spread_name(f"bench-{brokers}", args.partitions, state)
    topics = _targets(state, args.topic_kind, name, args.partitions)
    owners = [_lookup(state, t) for t in topics]
    placement: dict[str, int] = {}
    for host, port in owners:
        placement[f"{host}:{port}"] = placement.get(f"{host}:{port}", 0) + 1
    base = Job("pulsar", "", 0, "", args.window, False, warmup=1.0, seconds=args.seconds)
    jobs = [
        replace(base, host=h, port=p, topic=t, keyed=args.topic_kind == "scalable")
        for t, (h, p) in zip(topics, owners, strict=True)
    ]
    reports, cpu = _drive(jobs, state)
    latencies = [x for r in reports for x in r.latencies]
    return ThroughputRow(
        brokers,
        msgs_s=sum(r.messages for r in reports) / args.seconds,
        p50_ms=_percentile(latencies, 0.50),
        p99_ms=_percentile(latencies, 0.99),
        placement=placement,
        cpu=cpu,
    )


class _Receipts:
    """The official client producing without pause; the monotonic time of every receipt."""

    def __init__(self, service_url: str, topic: str) -> None:
        import pulsar

        self.times: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.client = pulsar.Client(
            service_url,
            operation_timeout_seconds=60,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        self.producer = self.client.create_producer(
            topic,
            send_timeout_millis=0,
            block_if_queue_full=True,
            max_pending_messages=200,
            batching_enabled=False,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _done(self, result: Any, _msg_id: Any) -> None:
        import pulsar

        if result == pulsar.Result.Ok:
            now = time.monotonic()
            with self._lock:
                self.times.append(now)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.send_async(b"x" * 100, self._done)

    def count(self) -> int:
        with self._lock:
            return len(self.times)

    def wait_more(self, count: int, within: float, what: str) -> None:
        seen = self.count()
        _wait(lambda: self.count() >= seen + count, within, what)

    def gap_around(self, killed_at: float) -> float:
        """The longest silence between receipts from 1 s before ``killed_at`` on."""
        with self._lock:
            times = [t for t in self.times if t >= killed_at - 1.0]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.producer.flush()
        self.client.close()


class _BraidReceipts(_Receipts):
    """Braid's client producing without pause to a scalable topic (``send_async``: it blocks
    while ``max_pending_messages`` are unconfirmed); the monotonic time of every receipt."""

    def __init__(self, service_url: str, topic: str) -> None:
        import braid

        self.times = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.braid_client = braid.Client(service_url, operation_timeout=60)
        self.braid_producer = self.braid_client.create_producer(topic, max_pending_messages=200)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _received(self, future: Any) -> None:
        if future.exception() is None:
            now = time.monotonic()
            with self._lock:
                self.times.append(now)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.braid_producer.send_async(b"x" * 100).add_done_callback(self._received)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.braid_producer.close()
        self.braid_client.close()


def _wait(condition: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within:.0f}s: {what}")
        time.sleep(0.05)  # polling the cluster, with a deadline


def failover_gaps(state: ClusterState, args: argparse.Namespace) -> list[float]:
    """The gap of each of ``--kills`` SIGKILLs of the gap topic's owner (a persistent topic and
    the official client; with ``--topic-kind scalable`` a scalable topic of one segment and
    Braid's client, the segment's owner killed)."""
    receipts: _Receipts
    if args.topic_kind == "scalable":
        parent = "topic://public/default/failover-gap"
        (topic,) = _targets(state, "scalable", "failover-gap", 1)
        receipts = _BraidReceipts(state.layout.service_url, parent)
    else:
        topic = "persistent://public/default/failover-gap"
        receipts = _Receipts(state.layout.service_url, topic)
    directory = state.layout.directory
    brokers = len(state.layout.broker_ports)
    gaps = []
    try:
        for kill in range(args.kills):
            receipts.wait_more(500, 120, "500 receipts before the kill")
            host, port = _lookup(state, topic)
            current = cluster_status(directory)
            (owner,) = [
                p.record
                for p in current.processes
                if p.record.urls.get("service") == f"pulsar://{host}:{port}"
            ]
            killed_at = time.monotonic()
            os.kill(owner.pid, signal.SIGKILL)
            receipts.wait_more(500, 120, "500 receipts after the kill")
            gaps.append(receipts.gap_around(killed_at))
            print(f"kill {kill + 1}: {owner.name}, gap {gaps[-1]:.2f}s", flush=True)
            cluster_up(directory, timeout_s=300)  # the killed broker again, on its ports
            _wait(
                lambda: len(cluster_status(directory).registered or ()) == brokers,
                60,
                "the restarted broker to register",
            )
    finally:
        receipts.close()
    return gaps


def _print_throughput(rows: list[ThroughputRow], args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    first = rows[0].msgs_s or 1.0
    kind = "partitions" if args.topic_kind == "partitioned" else "segments"
    print(
        f"\nthroughput: 1 msg/entry of 100 B, {args.partitions} {kind}, window {args.window} each"
    )
    print(
        f"  every entry fdatasync'ed on W=2 bookies (group commit), all on one disk: "
        f"{args.disk_fsyncs:.0f} fdatasync/s for one writer on it"
    )
    print(f"  this machine has {cores} cores: CPU s/s below is out of {cores}.0")
    for row in rows:
        cpu = " ".join(f"{role} {v:.2f}" for role, v in row.cpu.items())
        total = sum(row.cpu.values())
        print(
            f"  {row.brokers} broker(s): {row.msgs_s:8.0f} msg/s  x{row.msgs_s / first:.2f} vs 1 "
            f"broker  p50 {row.p50_ms:.1f} ms p99 {row.p99_ms:.1f} ms  placement "
            f"{sorted(row.placement.values(), reverse=True)}  CPU s/s: {cpu} (total "
            f"{total:.2f} of {cores})",
            flush=True,
        )


def _print_gaps(gaps: list[float]) -> None:
    if not gaps:
        return
    p50 = _percentile(gaps, 0.50) / 1e3
    p99 = _percentile(gaps, 0.99) / 1e3
    print(
        f"\nfailover gap over {len(gaps)} kills: p50 {p50:.2f}s p99 {p99:.2f}s max "
        f"{max(gaps):.2f}s; p99 / target {TARGET_GAP_S:.0f}s = {p99 / TARGET_GAP_S:.2f} "
        f"({'within' if p99 < TARGET_GAP_S else 'OVER'} the target)",
        flush=True,
    )


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="1,2,3", help="broker counts, one cluster each")
    parser.add_argument("--bookies", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4, help="partitions (or segments)")
    parser.add_argument("--topic-kind", choices=["partitioned", "scalable"], default="partitioned")
    parser.add_argument("--window", type=int, default=200, help="entries in flight per worker")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per row")
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs for the failover gap")
    parser.add_argument("--session-ms", type=int, default=4000, help="brokers' session timeout")
    parser.add_argument("--dir", type=Path, default=None, help="where the clusters' dirs go")
    args = parser.parse_args(argv)
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # each status read closes a session
    counts = [int(n) for n in args.brokers.split(",")]
    base = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir=args.dir))
    rows: list[ThroughputRow] = []
    gaps: list[float] = []
    disk = Tally()
    raw_slice(base / "disk.jnl", 160, 1, 2.0, disk)
    args.disk_fsyncs = disk.entries_per_s()
    print(f"load average before: {_loadavg()}", flush=True)
    try:
        for brokers in counts:
            state = _up(base, brokers, args)
            try:
                rows.append(throughput_row(state, brokers, args))
                _print_throughput(rows[-1:], args)
                if brokers == counts[-1] and args.kills > 0:
                    gaps = failover_gaps(state, args)
            finally:
                cluster_down(state.layout.directory, timeout_s=20)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"load average after: {_loadavg()}")
    _print_throughput(rows, args)
    _print_gaps(gaps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
