"""Client benchmark: the Braid Python client against the official ``pulsar-client``, same broker,
same run.

It starts ``braid standalone`` as a child process and, for 100 B and 1 KiB messages with client
batching on, measures in this one process, one client at a time:

* **produce** msg/s for ``--seconds``: the official client's ``send_async`` with a Python callback
  per message (its asynchronous API; the C++ core batches), Braid's ``send_async`` (one
  ``concurrent.futures.Future`` per message) and Braid's ``send_many`` (chunks of 1000, one future
  per chunk). Each run ends when every send is confirmed; msg/s = messages / (first send -> last
  confirmation);
* **consume** msg/s: each client reads the same pre-produced backlog (``--consume`` messages)
  from its own subscription, acknowledging every message: the official ``receive()`` +
  ``acknowledge()`` and its Python-callback API (``message_listener`` + ``acknowledge()``),
  Braid's ``receive()`` + ``acknowledge_cumulative()`` (Stream) and Braid's
  ``receive_many(1000)`` + ``acknowledge_cumulative()``;
* the same two Braid bulk paths on a ``topic://`` topic of 4 segments (keyless messages, so
  round-robin over the segments; the Stream consumer gets all 4 from the controller).

Both clients use the same batching limits (1000 messages, 128 KiB, 10 ms) and receiver queue
(1000). ``x callback`` is each row over the official client's Python-callback API of the same
direction (``send_async`` + callback, ``message_listener``): the issue's target is >= 2x on
produce. ``x receive`` compares consumers with the official blocking ``receive()`` (whose loop
runs in C++). ``broker CPU`` is the broker process's CPU seconds per wall second during each run.

Run: ``.venv/bin/python bench/client_bench.py [--seconds 5] [--consume 100000]``
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pulsar

import braid
from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess

SIZES = (100, 1024)
SCALABLE = "topic://public/default/bench"
SEGMENTS = "(topic://, 4 segm.)"
_CALLBACK = ("produce official send_async+callback", "consume official listener+ack")
CHUNK = 1000
IN_FLIGHT = 5000


def _official_produce(url: str, topic: str, payload: bytes, seconds: float) -> tuple[int, float]:
    client = pulsar.Client(url, logger=_quiet())
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=1000,
        batching_max_allowed_size_in_bytes=128 * 1024,
        batching_max_publish_delay_ms=10,
        max_pending_messages=IN_FLIGHT,
        block_if_queue_full=True,
    )
    done = threading.Event()
    lock = threading.Lock()
    state = {"confirmed": 0, "sent": 0, "failed": 0, "last": 0.0, "closed": False}

    def callback(result: pulsar.Result, _mid: pulsar.MessageId) -> None:
        with lock:
            state["confirmed"] += 1
            if result != pulsar.Result.Ok:
                state["failed"] += 1
            if state["closed"] and state["confirmed"] == state["sent"]:
                state["last"] = time.perf_counter()
                done.set()

    start = time.perf_counter()
    end = start + seconds
    send = producer.send_async
    sent = 0
    while time.perf_counter() < end:
        for _ in range(100):
            send(payload, callback)
        sent += 100
    with lock:
        state["sent"] = sent
        state["closed"] = True
        if state["confirmed"] == sent:
            state["last"] = time.perf_counter()
            done.set()
    producer.flush()
    done.wait(120)
    elapsed = state["last"] - start
    assert not state["failed"], f"{state['failed']} official sends failed"
    client.close()
    return sent, elapsed


def _braid_produce(
    url: str, topic: str, payload: bytes, seconds: float, *, bulk: bool
) -> tuple[int, float]:
    with braid.Client(url) as client:
        producer = client.create_producer(topic, max_pending_messages=IN_FLIGHT)
        start = time.perf_counter()
        end = start + seconds
        sent = 0
        futures = []
        if bulk:
            chunk = [payload] * CHUNK
            while time.perf_counter() < end:
                futures.append(producer.send_many_async(chunk))
                sent += CHUNK
                if len(futures) >= IN_FLIGHT // CHUNK:
                    futures.pop(0).result()
        else:
            send = producer.send_async
            while time.perf_counter() < end:
                for _ in range(100):
                    futures.append(send(payload))
                sent += 100
                if len(futures) > 20 * IN_FLIGHT:
                    for f in futures[:IN_FLIGHT]:
                        f.result()
                    del futures[:IN_FLIGHT]
        for f in futures:
            f.result()
        elapsed = time.perf_counter() - start
        producer.close()
    return sent, elapsed


def _fill(url: str, topic: str, payload: bytes, count: int) -> None:
    with braid.Client(url) as client:
        producer = client.create_producer(topic, max_pending_messages=IN_FLIGHT)
        chunk = [payload] * CHUNK
        futures = [producer.send_many_async(chunk) for _ in range(count // CHUNK)]
        for f in futures:
            f.result()


def _official_consume(url: str, topic: str, count: int) -> float:
    client = pulsar.Client(url, logger=_quiet())
    consumer = client.subscribe(
        topic,
        "official",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=1000,
    )
    start = time.perf_counter()
    for _ in range(count):
        consumer.acknowledge(consumer.receive(timeout_millis=30_000))
    elapsed = time.perf_counter() - start
    client.close()
    return elapsed


def _official_listener_consume(url: str, topic: str, count: int) -> float:
    """The official client's Python-callback consume API: a ``message_listener`` per message."""
    client = pulsar.Client(url, logger=_quiet())
    done = threading.Event()
    state = {"got": 0, "start": 0.0, "end": 0.0}

    def listener(consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        consumer.acknowledge(message)
        state["got"] += 1
        if state["got"] == count:
            state["end"] = time.perf_counter()
            done.set()

    state["start"] = time.perf_counter()
    client.subscribe(
        topic,
        "official-listener",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=1000,
        message_listener=listener,
    )
    done.wait(120)
    elapsed = state["end"] - state["start"]
    client.close()
    return elapsed


def _braid_consume(url: str, topic: str, count: int, subscription: str, bulk: bool) -> float:
    with braid.Client(url) as client:
        stream = client.subscribe_stream(
            topic, subscription, initial_position="earliest", receiver_queue_size=1000
        )
        start = time.perf_counter()
        got = 0
        if bulk:
            while got < count:
                messages = stream.receive_many(CHUNK, timeout=30)
                assert messages, f"consume stalled after {got} messages"
                stream.acknowledge_cumulative(messages[-1])
                got += len(messages)
        else:
            receive, ack = stream.receive, stream.acknowledge_cumulative
            for _ in range(count):
                message = receive(timeout=30)
                assert message is not None, "consume stalled"
                ack(message)
        return time.perf_counter() - start


def _cpu_seconds(pid: int | None) -> float:
    """User+system CPU seconds of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quiet() -> logging.Logger:
    log = logging.getLogger("pulsar-bench")
    log.setLevel(logging.ERROR)
    return log


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="produce phase per client")
    parser.add_argument("--consume", type=int, default=100_000, help="backlog read per client")
    parser.add_argument("--dir", type=Path, default=None, help="data directory parent")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="client-bench-", dir=args.dir))
    process = StandaloneProcess.start_on_free_ports(base / "data", log_path=base / "broker.log")
    url = process.service_url
    rows: list[tuple[str, int, float, float]] = []

    def measured(run: Callable[[], float]) -> tuple[float, float]:
        """Run, returning (its result, broker CPU seconds per wall second meanwhile)."""
        cpu0, wall0 = _cpu_seconds(process.pid), time.perf_counter()
        result = run()
        wall = time.perf_counter() - wall0
        return result, (_cpu_seconds(process.pid) - cpu0) / wall if wall > 0 else 0.0

    try:
        for size in SIZES:
            payload = b"x" * size
            produces = [
                ("produce official send_async+callback", partial(_official_produce, url)),
                ("produce braid send_async", partial(_braid_produce, url, bulk=False)),
                ("produce braid send_many", partial(_braid_produce, url, bulk=True)),
            ]
            for i, (name, produce) in enumerate(produces):
                (count, seconds), cpu = measured(
                    partial(produce, f"produce-{size}-{i}", payload, args.seconds)
                )
                rows.append((name, size, _rate(count, seconds), cpu))
            topic = f"persistent://public/default/consume-{size}"
            _fill(url, topic, payload, args.consume)
            n = (args.consume // CHUNK) * CHUNK
            consumes = [
                ("consume official receive+ack", partial(_official_consume, url, topic, n)),
                (
                    "consume official listener+ack",
                    partial(_official_listener_consume, url, topic, n),
                ),
                ("consume braid receive+ack", partial(_braid_consume, url, topic, n, "b1", False)),
                (
                    "consume braid receive_many+ack",
                    partial(_braid_consume, url, topic, n, "b2", True),
                ),
            ]
            for name, consume in consumes:
                seconds, cpu = measured(consume)
                rows.append((name, size, _rate(n, seconds), cpu))
            # The same bulk paths on a scalable topic of 4 segments (keyless: round-robin).
            with AdminClient(process.web_url) as admin:
                for kind in ("produce", "consume"):
                    admin.scalable_topics.create(f"{SCALABLE}-{kind}-{size}", segments=4)
            (count, seconds), cpu = measured(
                partial(
                    _braid_produce,
                    url,
                    f"{SCALABLE}-produce-{size}",
                    payload,
                    args.seconds,
                    bulk=True,
                )
            )
            rows.append((f"produce braid send_many {SEGMENTS}", size, _rate(count, seconds), cpu))
            scalable = f"{SCALABLE}-consume-{size}"
            _fill(url, scalable, payload, args.consume)
            seconds, cpu = measured(partial(_braid_consume, url, scalable, n, "b3", True))
            rows.append(
                (f"consume braid receive_many+ack {SEGMENTS}", size, _rate(n, seconds), cpu)
            )
    finally:
        process.stop()
        shutil.rmtree(base, ignore_errors=True)
    # Ratios: against the official client's Python-callback API of the same direction
    # (send_async + callback; message_listener), and against its blocking receive().
    callback = {(n.split()[0], size): r for n, size, r, _ in rows if n in _CALLBACK}
    blocking = {size: r for n, size, r, _ in rows if n == "consume official receive+ack"}
    print(
        f"{'operation':<52} {'bytes':>6} {'msg/s':>10} {'x callback':>10} {'x receive':>10}"
        f" {'broker CPU':>10}"
    )
    for name, size, rate, cpu in rows:
        ratio = rate / callback[(name.split()[0], size)]
        vs_receive = f"{rate / blocking[size]:>9.2f}x" if name.startswith("consume") else ""
        print(f"{name:<52} {size:>6} {rate:>10.0f} {ratio:>9.2f}x {vs_receive:>10} {cpu:>9.0%}")


if __name__ == "__main__":
    main()
