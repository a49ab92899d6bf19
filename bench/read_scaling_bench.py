"""Read scaling inside a segment: how much faster N Stream consumers sharing one segment by entry
bucket (PIP-486, ADR 0055) drain it than one consumer does, in the same run.

It starts ``braid standalone`` as a child process with ``scalableTopicEntryBuckets`` = ``--buckets``
(environment ``BRAID_scalableTopicEntryBuckets``), creates a one-segment scalable topic, publishes
``--messages`` keyed messages over ``--keys`` keys (Braid's producer, batching by bucket), then
drains them from the earliest position on fresh Stream subscriptions: once without work (a
warm-up), once with one consumer, once with ``--consumers`` consumers of one subscription (each
taking at most 20 messages ahead). Each consumer thread spends
``--work-ms`` per message (a stand-in for the application's per-message I/O, e.g. a database
write; it releases the GIL as real I/O does) and acknowledges cumulatively per batch. Printed:
both drain times and their ratio, next to the ideal (``min(consumers, buckets)``), whether per-key
order held, how the messages spread over the consumers, and whether the topic was split (it must
not be: the auto-scaler prefers sharing).

Run: ``.venv/bin/python bench/read_scaling_bench.py [--messages 4000] [--consumers 4]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import braid
from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess

TOPIC = "topic://public/default/read-scaling-bench"


def drain(
    client: braid.Client, subscription: str, consumers: int, total: int, work_s: float
) -> tuple[float, dict[str, int], bool]:
    """Seconds to receive ``total`` messages with ``consumers`` consumers; per-consumer counts;
    whether every key's messages arrived in order."""
    lock = threading.Lock()
    seen: dict[str, int] = {}
    counts: dict[str, int] = {}
    in_order = True
    done = threading.Event()
    stop = threading.Event()
    members = [
        client.subscribe_stream(
            TOPIC,
            subscription,
            consumer_name=f"c{i}",
            initial_position="earliest",
            receiver_queue_size=20,  # what a consumer takes ahead of its work
        )
        for i in range(consumers)
    ]

    def run(name: str, consumer: braid.StreamConsumer) -> None:
        nonlocal in_order
        while not stop.is_set():
            batch = consumer.receive_many(100, timeout=0.05)
            if not batch:
                continue
            for message in batch:
                time.sleep(work_s)  # the application's per-message I/O
                key, _, number = message.value.decode().partition(":")
                with lock:
                    if int(number) != seen.get(key, -1) + 1:
                        in_order = False
                    seen[key] = int(number)
                    counts[name] = counts.get(name, 0) + 1
                    if sum(counts.values()) >= total:
                        done.set()
            consumer.acknowledge_cumulative(batch[-1])

    started = time.monotonic()
    threads = [
        threading.Thread(target=run, args=(f"c{i}", c), daemon=True) for i, c in enumerate(members)
    ]
    for thread in threads:
        thread.start()
    finished = done.wait(600)
    elapsed = time.monotonic() - started
    stop.set()
    for thread in threads:
        thread.join(10)
    for consumer in members:
        consumer.close()
    if not finished:
        raise SystemExit(f"{subscription}: only {sum(counts.values())} of {total} in 600 s")
    return elapsed, counts, in_order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--work-ms", type=float, default=1.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="braid-read-scaling-"))
    env = dict(os.environ, BRAID_scalableTopicEntryBuckets=str(args.buckets))
    process = StandaloneProcess.start_on_free_ports(
        root / "data", log_path=root / "sa.log", env=env
    )
    try:
        admin = AdminClient(process.web_url)
        admin.scalable_topics.create(TOPIC, 1)
        with braid.Client(process.service_url, operation_timeout=30) as client:
            producer = client.create_producer(TOPIC)
            numbers: dict[str, int] = {}
            values, keys = [], []
            for i in range(args.messages):
                key = f"key-{i % args.keys}"
                values.append(f"{key}:{numbers.get(key, 0)}".encode())
                numbers[key] = numbers.get(key, 0) + 1
                keys.append(key)
            producer.send_many(values, keys=keys)
            producer.close()
            work_s = args.work_ms / 1000
            drain(client, "warm-up", 1, args.messages, 0.0)  # storage caches warm for both
            one, _, one_ordered = drain(client, "one", 1, args.messages, work_s)
            many, spread, many_ordered = drain(
                client, "many", args.consumers, args.messages, work_s
            )
        layout = admin.scalable_topics.get(TOPIC)
        active = [s for s in layout["segments"].values() if s["state"] == "ACTIVE"]
        ideal = min(args.consumers, args.buckets)
        print(
            f"{args.messages} messages, {args.keys} keys, 1 segment x {args.buckets} buckets, "
            f"{args.work_ms:g} ms of work per message"
        )
        print(f"  1 consumer:              {one:7.2f} s  (per-key order held: {one_ordered})")
        print(
            f"  {args.consumers} consumers sharing it:  {many:7.2f} s  "
            f"(per-key order held: {many_ordered})  spread {dict(sorted(spread.items()))}"
        )
        print(
            f"  speed-up {one / many:.2f}x (ideal {ideal}x); segments at the end: {len(active)}, "
            f"epoch {layout['epoch']}"
        )
    finally:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
