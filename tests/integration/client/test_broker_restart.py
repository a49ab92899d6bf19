"""The Braid client across a ``braid standalone`` crash (SIGKILL) and restart.

Producers and consumers are never recreated by the application: they reconnect on their own.
Every message whose send was confirmed is delivered afterwards (at least once), and every key's
messages arrive in publish order (first deliveries; a redelivery after the crash may repeat a
suffix, which at-least-once allows).

The broker runs with unlimited retention: a checkpoint consumer holds no broker cursor, so
without retention the data it has not read yet may be trimmed once the durable subscriptions
have acknowledged it (Pulsar's reader semantics too).
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import braid
from braid.cli.process import StandaloneProcess

KEYS = 20


@pytest.fixture
def standalone_process(tmp_path: Path) -> Iterator[StandaloneProcess]:
    """``braid standalone`` with unlimited retention (see the module docstring)."""
    env = dict(
        os.environ, BRAID_defaultRetentionTimeInMinutes="-1", BRAID_defaultRetentionSizeInMB="-1"
    )
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log", env=env
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


def _receive_until(
    consumer: braid.StreamConsumer | braid.QueueConsumer | braid.CheckpointConsumer,
    got: list[braid.Message],
    stop: threading.Event,
) -> None:
    while not stop.is_set():
        for message in consumer.receive_many(500, timeout=0.2):
            got.append(message)
            if isinstance(consumer, braid.StreamConsumer):
                consumer.acknowledge_cumulative(message)
            elif isinstance(consumer, braid.QueueConsumer):
                consumer.acknowledge(message)


def _first_deliveries_in_key_order(got: list[braid.Message]) -> dict[str, list[int]]:
    per_key: dict[str, list[int]] = defaultdict(list)
    seen: set[bytes] = set()
    for message in got:
        if message.value in seen:
            continue
        seen.add(message.value)
        assert message.key is not None
        per_key[message.key].append(int(message.value.split(b":")[1]))
    return per_key


def test_producers_and_consumers_recover_from_sigkill_without_losing_confirmed_messages(
    standalone_process: StandaloneProcess,
) -> None:
    topic = "persistent://public/default/crash"
    client = braid.Client(standalone_process.service_url, operation_timeout=30)
    try:
        producer = client.create_producer(topic, send_timeout=120, batching_max_delay=0.005)
        stream = client.subscribe_stream(topic, "stream", initial_position="earliest")
        queue = client.subscribe_queue(topic, "queue", initial_position="earliest")
        reader = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
        confirmed: set[bytes] = set()
        lock = threading.Lock()
        got: dict[str, list[braid.Message]] = {"stream": [], "queue": [], "checkpoint": []}
        stop = threading.Event()
        threads = [
            threading.Thread(target=_receive_until, args=(consumer, got[name], stop))
            for name, consumer in (("stream", stream), ("queue", queue), ("checkpoint", reader))
        ]
        for thread in threads:
            thread.start()

        def on_done(value: bytes, future: object) -> None:
            if future.exception() is None:  # type: ignore[attr-defined]
                with lock:
                    confirmed.add(value)

        sent = 0

        def produce(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                key = f"k{sent % KEYS}"
                value = b"%s:%d" % (key.encode(), sent)
                producer.send_async(value, key=key).add_done_callback(
                    lambda f, v=value: on_done(v, f)
                )
                sent += 1

        produce(2000)
        deadline = time.monotonic() + 30
        while len(got["checkpoint"]) < 500 and time.monotonic() < deadline:
            time.sleep(0.001)  # polling: crash once the readers are mid-stream
        standalone_process.kill()  # crash mid-stream: sends in flight, nothing flushed or closed
        produce(1000)  # sent while the broker is down: they wait and go out after the restart
        standalone_process.restart()
        produce(2000)
        producer.flush()
        assert len(confirmed) == sent == 5000

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(confirmed <= {m.value for m in list(g)} for g in got.values()):
                break
            time.sleep(0.05)  # polling a condition with a deadline
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        for name, messages in got.items():
            missing = confirmed - {m.value for m in messages}
            assert not missing, f"{name}: {len(missing)} confirmed messages never delivered"
        for name in ("stream", "checkpoint"):
            for key, seqs in _first_deliveries_in_key_order(got[name]).items():
                assert seqs == sorted(seqs), f"{name}: {key} out of order"
    finally:
        client.close()
