"""Produce/consume benchmark: the official pulsar-client against ``braid standalone``, next to the
raw fsync'd-append limit of the same disk measured in the same run.

For 100 B and 1 KiB messages, with client batching on, it starts ``braid standalone`` as a child
process (data dir on the measured disk), subscribes a consumer, and then

* **max**: publishes with ``send_async`` as fast as the client allows (up to 1000 messages in
  flight) for ``--seconds``, while a consumer in a child process receives and acknowledges;
  reports publish msg/s and MB/s, publish latency p50/p99 (send call -> receipt callback, so it
  includes client-side queueing at saturation) and consume msg/s;
* **paced**: publishes at a fixed ``--paced-rate`` for a few seconds and reports the publish latency
  p50/p99 of an unsaturated broker;
* **raw**: ``bench/storage_bench.py``'s ``raw_slice``: one ``write`` + ``fdatasync`` per entry of
  the average entry size the broker actually stored (a batch), on the same disk. The ratio is
  Braid's stored entries/s over that one-fsync-per-entry limit (the bookie's group commit can
  exceed 100%).

Run: ``.venv/bin/python bench/produce_consume_bench.py [--seconds 8] [--dir PATH]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pulsar

from braid.cli.process import StandaloneProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from storage_bench import Tally, raw_slice

SIZES = (100, 1024)
MAX_IN_FLIGHT = 1000


@dataclass(frozen=True)
class Run:
    messages: int
    publish_msg_s: float
    publish_mb_s: float
    p50_ms: float
    p99_ms: float
    consume_msg_s: float
    broker_cpu: float  # broker CPU seconds per wall second during the run
    producer_cpu: float  # this (producer) process's CPU seconds per wall second while publishing
    entries: int
    stored_bytes: int


def _cpu_seconds(pid: int | None) -> float:
    """User+system CPU seconds of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _consume_main(service_url: str, topic: str, ready: Any, expected: Any, results: Any) -> None:
    """Child process: receive and acknowledge until ``expected`` (set later, -1 = unknown) messages
    arrived; report (count, first receive time, last receive time). A separate process, so the
    consumer does not compete with the producer for one interpreter lock."""
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    consumer = client.subscribe(
        topic, "bench", receiver_queue_size=5000, consumer_type=pulsar.ConsumerType.Exclusive
    )
    ready.set()
    received, first, last = 0, 0.0, 0.0
    while expected.value < 0 or received < expected.value:
        try:
            msg = consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            continue
        last = time.perf_counter()
        if received == 0:
            first = last
        received += 1
        if received % 100 == 0 or received == expected.value:
            consumer.acknowledge_cumulative(msg)
    results.put((received, first, last))
    client.close()


def _producer(client: pulsar.Client, topic: str) -> pulsar.Producer:
    return client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=1,
        max_pending_messages=MAX_IN_FLIGHT,
        block_if_queue_full=True,
    )


def _publish(
    producer: pulsar.Producer, payload: bytes, seconds: float, rate: float | None
) -> tuple[int, float, list[float]]:
    """Publish for ``seconds`` (at ``rate`` msg/s if given); returns count, elapsed, latencies."""
    latencies: list[float] = []
    lock = threading.Lock()
    done = threading.Event()
    stop_sending = threading.Event()
    sent = 0
    completed = 0
    failures: list[object] = []

    def callback(result: pulsar.Result, started: float) -> None:
        nonlocal completed
        elapsed = time.perf_counter() - started
        with lock:
            completed += 1
            latencies.append(elapsed)
            if result != pulsar.Result.Ok:
                failures.append(result)
            if completed == sent and stop_sending.is_set():
                done.set()

    start = time.perf_counter()
    deadline = start + seconds
    while True:
        now = time.perf_counter()
        if now >= deadline:
            break
        if rate is not None:
            due = start + sent / rate
            if due > now:
                time.sleep(due - now)  # pacing the load generator, not waiting on a condition
        t0 = time.perf_counter()
        with lock:
            sent += 1
        producer.send_async(payload, lambda r, _m, t0=t0: callback(r, t0))
    with lock:
        stop_sending.set()
        if completed == sent:
            done.set()
    if not done.wait(60):
        raise RuntimeError(f"only {completed} of {sent} publishes completed")
    if failures:
        raise RuntimeError(f"{len(failures)} publishes failed, first: {failures[0]}")
    return sent, time.perf_counter() - start, latencies


def _stats(web_url: str, topic: str) -> dict[str, Any]:
    local = topic.rsplit("/", 1)[1]
    response = httpx.get(f"{web_url}/admin/v2/persistent/public/default/{local}/stats", timeout=30)
    response.raise_for_status()
    stats: dict[str, Any] = response.json()
    return stats


def bench_size(broker: StandaloneProcess, client: pulsar.Client, size: int, seconds: float) -> Run:
    """The max-throughput run for one message size (consumer in a child process)."""
    topic = f"persistent://public/default/bench-{size}-{os.getpid()}"
    context = multiprocessing.get_context("spawn")
    ready, expected, results = context.Event(), context.Value("q", -1), context.Queue()
    reader = context.Process(
        target=_consume_main, args=(broker.service_url, topic, ready, expected, results)
    )
    reader.start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the consumer process did not subscribe")
        producer = _producer(client, topic)
        cpu0, wall0, own0 = _cpu_seconds(broker.pid), time.perf_counter(), time.process_time()
        sent, elapsed, latencies = _publish(producer, os.urandom(size), seconds, None)
        producer_cpu = (time.process_time() - own0) / elapsed
        expected.value = sent
        received, first, last = results.get(timeout=120)
        broker_cpu = (_cpu_seconds(broker.pid) - cpu0) / (time.perf_counter() - wall0)
        producer.close()
    finally:
        reader.join(timeout=30)
        if reader.is_alive():
            reader.kill()
    stats = _stats(broker.web_url, topic)
    return Run(
        messages=sent,
        publish_msg_s=sent / elapsed,
        publish_mb_s=sent * size / elapsed / 1e6,
        p50_ms=_percentile(latencies, 0.5) * 1e3,
        p99_ms=_percentile(latencies, 0.99) * 1e3,
        consume_msg_s=received / max(last - first, 1e-9),
        broker_cpu=broker_cpu,
        producer_cpu=producer_cpu,
        entries=int(stats["numberOfEntries"]),
        stored_bytes=int(stats["storageSize"]),
    )


def bench_paced(
    client: pulsar.Client, size: int, rate: float, seconds: float
) -> tuple[float, float]:
    """Publish latency p50/p99 (ms) at a fixed rate."""
    topic = f"persistent://public/default/paced-{size}-{os.getpid()}"
    producer = _producer(client, topic)
    _, _, latencies = _publish(producer, os.urandom(size), seconds, rate)
    producer.close()
    return _percentile(latencies, 0.5) * 1e3, _percentile(latencies, 0.99) * 1e3


def _raw_limit(base: Path, entry_size: int, seconds: float = 1.5) -> float:
    """Entries/s of one journal-framed write + fdatasync per entry on ``base``'s disk."""
    tally = Tally()
    path = base / "raw.bin"
    try:
        raw_slice(path, entry_size, 1, seconds, tally)
    finally:
        path.unlink(missing_ok=True)
    return tally.entries_per_s()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each max run")
    parser.add_argument("--paced-seconds", type=float, default=3.0, help="duration of paced runs")
    parser.add_argument("--paced-rate", type=float, default=1000.0, help="paced msg/s")
    parser.add_argument("--dir", type=Path, default=None, help="directory on the disk to measure")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="braid-pc-bench-", dir=args.dir))
    print(f"disk: {base}; braid standalone as a child process; official pulsar-client, batching on")
    broker = StandaloneProcess.start_on_free_ports(
        base / "data", extra_args=["--log-level", "WARNING"]
    )
    rows: list[str] = []
    try:
        client = pulsar.Client(
            broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        try:
            for size in SIZES:
                run = bench_size(broker, client, size, args.seconds)
                paced = bench_paced(client, size, args.paced_rate, args.paced_seconds)
                entry_size = max(1, run.stored_bytes // max(1, run.entries))
                raw = _raw_limit(base, entry_size)
                entries_s = run.entries / (run.messages / run.publish_msg_s)
                ratio = entries_s / raw if raw else 0.0
                rows.append(
                    f"| {size:>5} | {run.publish_msg_s:>9.0f} | {run.publish_mb_s:>6.2f} "
                    f"| {run.p50_ms:>7.1f} | {run.p99_ms:>7.1f} | {paced[0]:>6.1f} "
                    f"| {paced[1]:>6.1f} | {run.consume_msg_s:>9.0f} | {entry_size:>7} "
                    f"| {entries_s:>7.0f} | {raw:>7.0f} | {raw * entry_size / 2**20:>9.1f} "
                    f"| {ratio:>6.0%} | {run.broker_cpu:>10.0%} | {run.producer_cpu:>8.0%} |"
                )
        finally:
            client.close()
    finally:
        code = broker.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"\nmax = send_async, <= {MAX_IN_FLIGHT} in flight, {args.seconds:.0f} s; paced = "
        f"{args.paced_rate:.0f} msg/s for {args.paced_seconds:.0f} s; raw = 1 write+fdatasync "
        "per entry of the stored average entry size; ratio = Braid stored entries/s / raw"
    )
    print(
        "| bytes | pub msg/s |   MB/s |  p50 ms |  p99 ms | pc p50 | pc p99 | sub msg/s "
        "| entry B | entry/s | raw e/s | raw MiB/s |  ratio | broker CPU | prod CPU |\n"
        "|------:|----------:|-------:|--------:|--------:|-------:|-------:|----------:"
        "|--------:|--------:|--------:|----------:|-------:|-----------:|---------:|"
    )
    for row in rows:
        print(row)
    if code != 0:
        print(f"warning: braid standalone exited with {code}")


if __name__ == "__main__":
    main()
