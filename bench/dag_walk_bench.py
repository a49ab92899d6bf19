"""DAG walk benchmark: a Stream consumer catching up over a long segment DAG (issue 28, ADR 0043).

It starts ``braid standalone`` as a child process (retention kept forever, so no sealed segment
is collected, and auto-scaling off, so the DAG is exactly the one built here) and, for each
``--sizes`` value N, builds a scalable topic whose DAG has N segments: a subscription first, then
splits of the widest active segment and merges of two hash-adjacent ones through the admin REST
API, keeping 2-4 segments active. Every new segment gets 100 keyed messages (keys chosen by hash
inside its range) right after the change that created it - once the producer routes by the new
layout, so the segment holds batched entries as the flat topic does, not single-message resends of
what went to the sealed parent first - in one of two shapes:

* **full**: every segment holds 100 messages;
* **sparse**: only every tenth segment does, the others are empty (a DAG that mostly reshaped
  while idle; its empty segments must be skipped, not attached one by one).

Then one Stream consumer of the subscription reads from ``earliest`` to the end, acknowledging
cumulatively after each ``receive_many``, timed from the subscribe call to the last message.
In the same run, the same number of messages on a topic that never changed (2 segments) is read
the same way: the *flat* rate, the ceiling a walk can reach on this machine at this moment.

**Hand-over** of a segment S holding messages: from the last message received from its nearest
ancestors holding messages (through empty ones) to the first message received from S. It is what
the application sees between the end of a parent and the start of its child: the cumulative ack,
the cursor write, the drain event, the coordinator's push, the attach and the first dispatch.

**Depth**: the segments holding messages on the DAG's longest parent -> child chain (empty ones
passed through). A walk makes those hand-overs one after another whatever else it overlaps, so
``ms/gen`` (walk time / depth) close to the hand-over p50 plus one segment's read says the walk is
bound by the hand-over's latency along that chain, not by the work per segment (the full
1,000-segment DAG built here is 666 deep: it keeps 2-4 segments active).

Targets (issue 28): hand-over p50 <= 5 ms; a 1,000-segment walk at >= 25 % of the flat rate.
Each row also gives the CPU the broker process and the client (this process) spent during the
walk per segment: when they add up to more than the wall time per segment, the 2 cores, not a
wait, set the pace.

**Floor**: at the end, the time from a Stream consumer's subscribe call to its first message on a
loaded 2-segment topic (a registration, an assignment push and an attach), p50 over
``--floor-rounds``: the scale of one round of controller work and one attach on this machine at
this moment, to read the hand-over figures against. Two more floors, in the same run, bound what
a hand-over can reach here: **durable write**, one compare-and-swap of a metadata node on a SQLite
store in the data directory (what persisting the cumulative ack that drains a segment costs: a
child is handed out only once that write is durable), and **FLOW -> message**, the time from a
FLOW to the first MESSAGE on a consumer already subscribed and served once (raw protocol, no
client library on the path): the last hops of every hand-over.

Run: ``.venv/bin/python bench/dag_walk_bench.py [--sizes 10,100,1000] [--per-segment 100]``
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import braid
from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess
from braid.core.hashing import hash16
from braid.core.message_id import message_position
from braid.metadata.sqlite import SqliteMetadataStore
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.raw_client import RawClient

NAMESPACE = "public/default"
SUBSCRIPTION = "walk"


class KeyPool:
    """Keys sorted by hash, so a segment's hash range can be filled with keys that route to it."""

    def __init__(self, count: int = 262_144) -> None:
        pairs = sorted((hash16(f"key-{i}"), f"key-{i}") for i in range(count))
        self._hashes = [h for h, _ in pairs]
        self._keys = [k for _, k in pairs]

    def keys_in(self, start: int, end: int, count: int) -> list[str]:
        lo = bisect.bisect_left(self._hashes, start)
        hi = bisect.bisect_right(self._hashes, end)
        if hi <= lo:
            raise ValueError(f"no key hashes into [{start:04x}, {end:04x}]")
        return [self._keys[lo + i % (hi - lo)] for i in range(count)]


@dataclass
class Topic:
    name: str
    parents: dict[int, tuple[int, ...]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)

    @property
    def messages(self) -> int:
        return sum(self.counts.values())


@dataclass
class Walk:
    seconds: float
    messages: int
    first: dict[int, float]
    last: dict[int, float]
    #: CPU seconds the broker process and this (client) process spent during the walk.
    broker_cpu: float = 0.0
    client_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def _active(layout: dict[str, Any]) -> list[tuple[int, int, int]]:
    return sorted(
        (info["hashRange"]["start"], info["hashRange"]["end"], int(sid))
        for sid, info in layout["segments"].items()
        if info["state"] == "ACTIVE"
    )


async def _fill(
    producer: braid.AsyncProducer, pool: KeyPool, start: int, end: int, count: int
) -> None:
    keys = pool.keys_in(start, end, count)
    for chunk in range(0, count, 10_000):  # within the producer's pending-message limit
        futures = [
            producer.send_async(f"{key}|{chunk + i}".encode(), key=key)
            for i, key in enumerate(keys[chunk : chunk + 10_000])
        ]
        await asyncio.gather(*futures)


async def _knows(producer: braid.AsyncProducer, epoch: int, within: float = 30.0) -> None:
    """Wait until ``producer`` routes by layout ``epoch``: a message sent earlier goes to the
    sealed parent, is refused and is sent again alone in its entry (ADR 0055), so the segment
    would hold single-message entries where the flat topic holds batches - a different read
    cost from the hand-over this bench measures."""
    deadline = time.monotonic() + within
    while producer._router.layout.epoch < epoch:  # the bench reads the router's layout
        if time.monotonic() > deadline:
            raise RuntimeError(f"the producer did not learn layout epoch {epoch} in {within} s")
        await asyncio.sleep(0.001)


async def _build(
    admin: AdminClient,
    client: braid.AsyncClient,
    pool: KeyPool,
    name: str,
    segments: int,
    per_segment: int,
    every: int,
) -> Topic:
    """A topic whose DAG has ``segments`` segments; every ``every``-th new segment gets
    ``per_segment`` messages (1: all of them)."""
    admin.scalable_topics.create(name, segments=2)
    admin.scalable_topics.create_subscription(name, SUBSCRIPTION, initial_position="Earliest")
    topic = Topic(name)
    producer = await client.create_producer(name, batching_max_delay=0.001)
    layout = admin.scalable_topics.get(name)
    for start, end, sid in _active(layout):
        topic.parents[sid] = ()
        topic.counts[sid] = per_segment if sid % every == 0 else 0
        if topic.counts[sid]:
            await _fill(producer, pool, start, end, per_segment)
    step = 0
    while len(layout["segments"]) < segments:
        active = _active(layout)
        if len(active) <= 2 or (len(active) < 4 and step % 2 == 0):
            start, end, sid = max(active, key=lambda s: s[1] - s[0])
            layout = admin.scalable_topics.split(name, sid)
        else:
            j = step % (len(active) - 1)
            layout = admin.scalable_topics.merge(name, [active[j][2], active[j + 1][2]])
        step += 1
        await _knows(producer, layout["epoch"])
        for start, end, sid in _active(layout):
            if sid in topic.parents:
                continue
            info = layout["segments"][str(sid)]
            topic.parents[sid] = tuple(int(p) for p in info.get("parentIds", ()))
            topic.counts[sid] = per_segment if sid % every == 0 else 0
            if topic.counts[sid]:
                await _fill(producer, pool, start, end, topic.counts[sid])
    await producer.close()
    return topic


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _walk(client: braid.AsyncClient, topic: Topic, broker_pid: int | None) -> Walk:
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    total = topic.messages
    got = 0
    broker_began = _cpu_seconds(broker_pid)
    client_began = time.process_time()
    began = time.perf_counter()
    consumer = await client.subscribe_stream(
        topic.name, SUBSCRIPTION, initial_position="earliest", receiver_queue_size=1000
    )
    while got < total:
        messages = await consumer.receive_many(1000, timeout=30)
        if not messages:
            raise RuntimeError(f"{topic.name}: stalled at {got} of {total} messages")
        now = time.perf_counter()
        for message in messages:
            position = message_position(message.message_id)
            sid = position.segment_id if position is not None else -1
            first.setdefault(sid, now)
            last[sid] = now
        got += len(messages)
        consumer.acknowledge_cumulative(messages[-1])
    seconds = time.perf_counter() - began
    broker_cpu = _cpu_seconds(broker_pid) - broker_began
    client_cpu = time.process_time() - client_began
    await consumer.close()
    return Walk(seconds, got, first, last, broker_cpu, client_cpu)


def _hand_overs(topic: Topic, walk: Walk) -> list[float]:
    """Milliseconds from the last message of a segment's nearest ancestors holding messages
    to its first message, for every segment holding messages that has such ancestors."""

    def holders(sid: int) -> set[int]:
        found: set[int] = set()
        stack = list(topic.parents.get(sid, ()))
        seen: set[int] = set()
        while stack:
            parent = stack.pop()
            if parent in seen:
                continue
            seen.add(parent)
            if topic.counts.get(parent):
                found.add(parent)
            else:
                stack.extend(topic.parents.get(parent, ()))
        return found

    gaps = []
    for sid, count in topic.counts.items():
        if not count or sid not in walk.first:
            continue
        ancestors = holders(sid)
        if not ancestors or not all(a in walk.last for a in ancestors):
            continue
        gaps.append((walk.first[sid] - max(walk.last[a] for a in ancestors)) * 1000)
    return gaps


def _depth(topic: Topic) -> int:
    """Segments holding messages on the longest parent -> child chain of the DAG (empty ones
    passed through): the hand-overs a walk must make one after another, whatever the rest."""
    depth: dict[int, int] = {}
    for sid in sorted(topic.parents):  # a child's id is above its parents'
        above = max((depth[p] for p in topic.parents[sid]), default=0)
        depth[sid] = above + (1 if topic.counts.get(sid) else 0)
    return max(depth.values(), default=0)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _floor(client: braid.AsyncClient, name: str, rounds: int) -> list[float]:
    """Milliseconds from a Stream consumer's subscribe call to its first message on a loaded
    2-segment topic holding one message per subscription: a registration, an assignment and an
    attach per call. A hand-over needs a subset of that (a drain event, a push, a FLOW); it is
    the scale of one round of controller work plus an attach on this machine right now."""
    producer = await client.create_producer(name, batching_max_delay=0.001)
    await producer.send_async(b"floor", key="floor")
    await producer.close()
    times = []
    for i in range(rounds):
        began = time.perf_counter()
        consumer = await client.subscribe_stream(
            name, f"floor-{i}", initial_position="earliest", receiver_queue_size=10
        )
        messages = await consumer.receive_many(1, timeout=30)
        times.append((time.perf_counter() - began) * 1000)
        if not messages:
            raise RuntimeError(f"{name}: no message for the floor measurement")
        await consumer.close()
    return times


async def _durable_writes(directory: Path, rounds: int) -> list[float]:
    """Milliseconds per compare-and-swap of one metadata node on a SQLite store in
    ``directory`` (``synchronous=FULL``, as the standalone's store)."""
    store = await SqliteMetadataStore.open(str(directory / "floor.db"))
    try:
        stat = await store.put("/floor", b"0" * 64)
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            stat = await store.put("/floor", os.urandom(64), stat.version)
            times.append((time.perf_counter() - began) * 1000)
        return times
    finally:
        await store.close()


def _is_message(command: pb.BaseCommand) -> bool:
    return command.type == pb.BaseCommand.MESSAGE


async def _flow_floor(client: braid.AsyncClient, url: str, rounds: int) -> list[float]:
    """Milliseconds from a FLOW to the first MESSAGE, on a consumer subscribed and served once
    (the first FLOW of each round is not timed)."""
    topic = "persistent://public/default/dag-walk-flow-floor"
    producer = await client.create_producer(topic, batching=False)
    await asyncio.gather(*[producer.send_async(b"m") for _ in range(2 * rounds)])
    await producer.close()
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    raw = await RawClient.open(host, int(port))
    try:
        await raw.send(
            commands.subscribe(
                topic,
                "floor",
                pb.CommandSubscribe.Exclusive,
                1,
                1,
                initial_position=pb.CommandSubscribe.Earliest,
            )
        )
        await raw.next_command(lambda c: c.type == pb.BaseCommand.SUCCESS, within=30)

        times = []
        for _ in range(rounds):
            await raw.send(commands.flow(1, 1))
            await raw.next_command(_is_message, within=30)
            began = time.perf_counter()
            await raw.send(commands.flow(1, 1))
            await raw.next_command(_is_message, within=30)
            times.append((time.perf_counter() - began) * 1000)
        return times
    finally:
        await raw.close()


async def _run(args: argparse.Namespace, process: StandaloneProcess) -> None:
    pool = KeyPool()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with AdminClient(process.web_url) as admin:
        async with braid.AsyncClient(process.service_url, operation_timeout=60) as client:
            for size in sizes:
                for shape, every in (("full", 1), ("sparse", 10)):
                    name = f"topic://{NAMESPACE}/walk-{shape}-{size}"
                    built = time.perf_counter()
                    dag = await _build(admin, client, pool, name, size, args.per_segment, every)
                    built = time.perf_counter() - built
                    flat_name = f"topic://{NAMESPACE}/flat-{shape}-{size}"
                    admin.scalable_topics.create(flat_name, segments=2)
                    admin.scalable_topics.create_subscription(
                        flat_name, SUBSCRIPTION, initial_position="Earliest"
                    )
                    flat = Topic(flat_name, {0: (), 1: ()}, {})
                    producer = await client.create_producer(flat_name, batching_max_delay=0.001)
                    await _fill(producer, pool, 0, 0xFFFF, dag.messages)
                    await producer.close()
                    flat.counts = {0: dag.messages}
                    flat_walk = await _walk(client, flat, process.pid)
                    walk = await _walk(client, dag, process.pid)
                    gaps = _hand_overs(dag, walk)
                    rows.append((size, shape, len(dag.counts), dag, walk, flat_walk, gaps, built))
                    print(
                        f"built {shape} DAG of {len(dag.counts)} segments in {built:.1f} s",
                        flush=True,
                    )
            floor_name = f"topic://{NAMESPACE}/floor"
            admin.scalable_topics.create(floor_name, segments=2)
            floor = await _floor(client, floor_name, args.floor_rounds)
            flow_floor = await _flow_floor(client, process.service_url, args.floor_rounds)
    durable = await _durable_writes(args.root, args.floor_rounds)
    print()
    print(
        f"{'segments':>8} {'shape':<7} {'msgs':>7} {'walk s':>7} {'walk/s':>8} {'flat/s':>8} "
        f"{'ratio':>6} {'ms/seg':>7} {'depth':>5} {'ms/gen':>6} {'hand-over p50':>13} "
        f"{'p99':>7} {'n':>5} {'CPU ms/seg broker':>17} {'client':>6}"
    )
    for _size, shape, count, dag, walk, flat_walk, gaps, _ in rows:
        depth = _depth(dag)
        print(
            f"{count:>8} {shape:<7} {dag.messages:>7} {walk.seconds:>7.2f} {walk.rate:>8.0f} "
            f"{flat_walk.rate:>8.0f} {walk.rate / flat_walk.rate:>6.2f} "
            f"{walk.seconds / count * 1000:>7.2f} {depth:>5} "
            f"{walk.seconds / max(depth, 1) * 1000:>6.2f} {_pct(gaps, 0.5):>13.2f} "
            f"{_pct(gaps, 0.99):>7.2f} {len(gaps):>5} "
            f"{walk.broker_cpu / count * 1000:>17.2f} {walk.client_cpu / count * 1000:>6.2f}"
        )
    print()
    all_gaps = [g for row in rows for g in row[6]]
    p50 = statistics.median(all_gaps) if all_gaps else float("nan")
    print(
        f"hand-over p50 {p50:.2f} ms over {len(all_gaps)} hand-overs = "
        f"{p50 / 5:.2f} x the 5 ms target"
    )
    print(
        f"floor: subscribe to first message on a loaded 2-segment topic p50 "
        f"{_pct(floor, 0.5):.2f} ms, p99 {_pct(floor, 0.99):.2f} ms over {len(floor)} rounds"
    )
    print(
        f"floor: one durable metadata write (the drain's cursor write) p50 "
        f"{_pct(durable, 0.5):.2f} ms, p99 {_pct(durable, 0.99):.2f} ms; FLOW -> first message "
        f"on a subscribed consumer p50 {_pct(flow_floor, 0.5):.2f} ms, p99 "
        f"{_pct(flow_floor, 0.99):.2f} ms ({len(flow_floor)} rounds)"
    )
    print("load average: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for size, shape, count, _dag, walk, flat_walk, _, _ in rows:
        if size == max(sizes):
            ratio = walk.rate / flat_walk.rate
            print(
                f"{count}-segment {shape} walk at {ratio:.0%} of the flat topic's rate "
                f"(target >= 25 %: {ratio / 0.25:.2f} x)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="DAG sizes, comma-separated")
    parser.add_argument("--per-segment", type=int, default=100, help="messages per segment")
    parser.add_argument(
        "--floor-rounds", type=int, default=30, help="subscribe round trips for the floor"
    )
    parser.add_argument("--dir", type=Path, default=None, help="data directory parent")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="braid-dag-walk-bench-", dir=args.dir))
    env = {
        "BRAID_defaultRetentionTimeInMinutes": "-1",
        "BRAID_defaultRetentionSizeInMB": "-1",
        "BRAID_scalableTopicAutoScaleEnabled": "false",
    }
    process = StandaloneProcess.start_on_free_ports(
        root / "data", log_path=root / "sa.log", env={**os.environ, **env}
    )
    args.root = root
    try:
        asyncio.run(_run(args, process))
    finally:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
