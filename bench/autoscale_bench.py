"""Auto split/merge benchmark (PIP-483): how fast a topic reacts, and what it costs the store.

It starts ``braid standalone`` as a child process with the auto-scale intervals given on the
command line (``BRAID_scalableTopic*`` variables) and measures, as a client sees it:

* **load step -> split visible**: a topic of one segment idles, then a producer (the Braid client,
  ``send_many``, paced) publishes at ``--load`` x the split threshold; the time from the first
  message to the first DAG-watch update (``CommandScalableTopicUpdate``, a raw protocol session
  opened before the step) with more than one active segment. The 60 s rolling rate has to climb
  over the threshold first (load / threshold of the window) and then the next auto-scale tick
  acts, so the figure is bounded by ``window x threshold / load + report interval + tick``;
* **consumer joins -> split visible**: a topic of one segment with one stream consumer; a second
  stream consumer subscribes and the controller splits at once (event-driven); the time from the
  subscribe call to the DAG-watch update with two active segments;
* **metadata writes at steady load**: a topic of ``--segments`` segments under a steady paced load
  for ``--steady`` seconds; the load records' versions (the metadata store counts every write)
  before and after give the writes during the steady period, per segment-hour, against the bound
  of one write per report interval (what a reporter without the material-change rule would do).

Each row states its ratio to that row's limit. Run:
``.venv/bin/python bench/autoscale_bench.py`` (short intervals: 1 s reports, 2 s ticks) or
``... --report-interval 10s --tick 60s --load 4`` (PIP-483's defaults; takes a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import braid
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.core.units import parse_duration_ms
from braid.metadata import open_store
from braid.protocol import commands
from braid.protocol.connection import ClientConnection
from braid.protocol.events import CommandReceived, ServerConnected
from braid.protocol.generated import PulsarApi_pb2 as pb

SPLIT_THRESHOLD = 2_000.0  # msg/s: low enough for one Python producer to exceed several times
MERGE_THRESHOLD = 200.0


@dataclass
class Row:
    name: str
    value: float
    unit: str
    limit: float
    note: str = ""


class DagWatch(threading.Thread):
    """A raw DAG-watch session: records when each layout epoch arrived and its active count."""

    def __init__(self, host: str, port: int, topic: str) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection((host, port))
        self.proto = ClientConnection("braid-autoscale-bench", created_at=0.0)
        self.topic = topic
        self.updates: list[tuple[float, int, int]] = []  # (monotonic time, epoch, active)
        self.stop_event = threading.Event()
        self.changed = threading.Condition()

    def run(self) -> None:
        self.sock.sendall(self.proto.data_to_send())
        self.sock.settimeout(0.2)
        looked_up = False
        while not self.stop_event.is_set():
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                continue
            if not data:
                return
            now = time.monotonic()
            for event in self.proto.receive_data(data, now):
                if isinstance(event, ServerConnected) and not looked_up:
                    self.proto.send(commands.scalable_topic_lookup(1, self.topic))
                    looked_up = True
                if not isinstance(event, CommandReceived):
                    continue
                cmd = event.command
                if cmd.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE and cmd.HasField(
                    "scalableTopicUpdate"
                ):
                    dag = cmd.scalableTopicUpdate.dag
                    active = sum(1 for s in dag.segments if s.state == pb.ACTIVE)
                    with self.changed:
                        self.updates.append((now, dag.epoch, active))
                        self.changed.notify_all()
            pending = self.proto.data_to_send()
            if pending:
                self.sock.sendall(pending)

    def wait(self, predicate: object, timeout: float) -> tuple[float, int, int] | None:
        """The first update matching ``predicate(epoch, active)`` (waiting up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for update in self.updates:
                    if predicate(update[1], update[2]):  # type: ignore[operator]
                        return update
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)

    def close(self) -> None:
        self.stop_event.set()
        self.join(5)
        self.sock.close()


class PacedProducer(threading.Thread):
    """Publishes ``rate`` msg/s (uniform keys) in chunks of 100 until stopped."""

    def __init__(self, client: braid.Client, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = client.create_producer(topic)
        self.rate = rate
        self.sent = 0
        self.started_at = 0.0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        chunk = 100
        values = [b"v" * 100] * chunk
        try:
            self.started_at = time.monotonic()
            while not self.stop_event.is_set():
                keys = [f"key-{(self.sent + i) % 10_007}" for i in range(chunk)]
                self.producer.send_many(values, keys=keys)
                self.sent += chunk
                ahead = self.sent / self.rate - (time.monotonic() - self.started_at)
                if ahead > 0:
                    self.stop_event.wait(ahead)  # pacing the load generator
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        if self.error is not None:
            raise RuntimeError(f"the producer failed: {self.error}") from self.error


def start_broker(
    args: argparse.Namespace, data_dir: Path, max_segments: int = 2
) -> StandaloneProcess:
    env = {
        **os.environ,
        "BRAID_scalableTopicLoadReportInterval": args.report_interval,
        "BRAID_scalableTopicAutoScaleInterval": args.tick,
        "BRAID_scalableTopicSplitCooldown": args.tick,
        "BRAID_scalableTopicSplitMsgRateInThreshold": str(SPLIT_THRESHOLD),
        "BRAID_scalableTopicMergeMsgRateInThreshold": str(MERGE_THRESHOLD),
        "BRAID_scalableTopicMaxSegments": str(max_segments),
    }
    return StandaloneProcess.start_on_free_ports(
        data_dir, env=env, log_path=data_dir.parent / f"{data_dir.name}.log"
    )


def load_step(args: argparse.Namespace, base: Path, factor: float) -> Row:
    broker = start_broker(args, base / f"step-{factor:g}")
    topic = "topic://public/default/step"
    report_s = parse_duration_ms(args.report_interval) / 1000
    tick_s = parse_duration_ms(args.tick) / 1000
    window = 6 * report_s
    limit = window / factor + report_s + tick_s
    try:
        with AdminClient(broker.web_url) as admin, braid.Client(broker.service_url) as client:
            admin.scalable_topics.create(topic, segments=1)
            watch = DagWatch(broker.host, broker.port, topic)
            watch.start()
            watch.wait(lambda epoch, active: True, 30)
            time.sleep(window)  # a full window of idle samples first
            producer = PacedProducer(client, topic, factor * SPLIT_THRESHOLD)
            producer.start()
            seen = watch.wait(lambda epoch, active: active > 1, 6 * limit + 60)
            achieved = producer.sent / max(1e-9, time.monotonic() - producer.started_at)
            producer.stop()
            watch.close()
            if seen is None:
                return Row(f"load step {factor:g}x threshold -> split", float("nan"), "s", limit)
            return Row(
                f"load step {factor:g}x threshold -> split visible",
                seen[0] - producer.started_at,
                "s",
                limit,
                f"producer achieved {achieved:.0f} msg/s",
            )
    finally:
        broker.stop()


def consumer_joins(args: argparse.Namespace, base: Path) -> Row:
    broker = start_broker(args, base / "join")
    topic = "topic://public/default/join"
    try:
        with AdminClient(broker.web_url) as admin, braid.Client(broker.service_url) as client:
            admin.scalable_topics.create(topic, segments=1)
            watch = DagWatch(broker.host, broker.port, topic)
            watch.start()
            watch.wait(lambda epoch, active: True, 30)
            first = client.subscribe_stream(topic, "s", consumer_name="c1")
            started = time.monotonic()
            second = client.subscribe_stream(topic, "s", consumer_name="c2")
            seen = watch.wait(lambda epoch, active: active > 1, 60)
            first.close()
            second.close()
            watch.close()
            value = float("nan") if seen is None else seen[0] - started
            tick_s = parse_duration_ms(args.tick) / 1000
            return Row(
                "stream consumer joins -> split visible",
                value,
                "s",
                tick_s,
                "event-driven; limit = one tick (what waiting for the periodic tick would cost)",
            )
    finally:
        broker.stop()


def steady_writes(args: argparse.Namespace, base: Path) -> Row:
    broker = start_broker(args, base / "steady", max_segments=args.segments)
    topic = "topic://public/default/steady"
    report_s = parse_duration_ms(args.report_interval) / 1000
    segments = args.segments
    # Below the split threshold and above the merge threshold on every segment: no change.
    rate = segments * (SPLIT_THRESHOLD + MERGE_THRESHOLD) / 2 * 0.5
    try:
        with AdminClient(broker.web_url) as admin, braid.Client(broker.service_url) as client:
            admin.scalable_topics.create(topic, segments=segments)
            producer = PacedProducer(client, topic, rate)
            producer.start()
            time.sleep(7 * report_s)  # the window fills, the records settle
            before = asyncio.run(_versions(broker, segments))
            steady_started = time.monotonic()
            time.sleep(args.steady)
            after = asyncio.run(_versions(broker, segments))
            elapsed = time.monotonic() - steady_started
            producer.stop()
        writes = sum(a - b for a, b in zip(after, before, strict=True))
        per_hour = writes / segments / (elapsed / 3600)
        bound = 3600 / report_s
        return Row(
            f"metadata writes per segment-hour at steady load ({segments} segments)",
            per_hour,
            "/h",
            bound,
            f"{writes} writes in {elapsed:.0f} s; ramp-up wrote {sum(before) + segments}; "
            f"bound = one per report interval",
        )
    finally:
        broker.stop()


async def _versions(broker: StandaloneProcess, segments: int) -> list[int]:
    """The version of each load record (a node's version grows by one per write)."""
    store = await open_store(f"sqlite:///{broker.data_dir / 'metadata' / 'metadata.db'}")
    try:
        versions = []
        for segment_id in range(segments):
            found = await store.get(f"/topics/public/default/steady/segments/{segment_id}/load")
            versions.append(-1 if found is None else found[1].version)
        return versions
    finally:
        await store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report-interval", default="1s", help="scalableTopicLoadReportInterval")
    parser.add_argument(
        "--tick", default="2s", help="scalableTopicAutoScaleInterval (and cooldown)"
    )
    parser.add_argument(
        "--load", type=float, action="append", help="load step as a multiple of the threshold"
    )
    parser.add_argument("--segments", type=int, default=4, help="segments of the steady topic")
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of steady load")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    factors = args.load or [2.0, 6.0]
    base = Path(tempfile.mkdtemp(prefix="autoscale-bench-", dir=args.dir))
    print(
        f"report interval {args.report_interval}, tick {args.tick}, split threshold "
        f"{SPLIT_THRESHOLD:.0f} msg/s, load average {os.getloadavg()[0]:.2f} "
        f"({os.cpu_count()} cores)",
        flush=True,
    )
    rows: list[Row] = []
    try:
        for factor in factors:
            rows.append(load_step(args, base, factor))
            print(f"  {rows[-1]}", flush=True)
        rows.append(consumer_joins(args, base))
        print(f"  {rows[-1]}", flush=True)
        rows.append(steady_writes(args, base))
        print(f"  {rows[-1]}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print("| row | value | limit | vs limit | note |")
    print("|---|---:|---:|---:|---|")
    for row in rows:
        ratio = row.value / row.limit if row.limit else float("nan")
        print(
            f"| {row.name} | {row.value:.2f} {row.unit} | {row.limit:.1f} {row.unit} "
            f"| {ratio:.2f} | {row.note} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
