"""``braid demo``: a scripted tour a newcomer can watch, on a throw-away standalone broker.

It starts the real ``braid standalone`` command as a child process (temporary data dir, free
127.0.0.1 ports), then, printing a few lines per step: creates a tenant and namespace through the
admin REST API, produces keyed messages with the official ``pulsar-client``, consumes and
acknowledges some, restarts the broker to show that messages and the subscription's cursor survive,
shows topic stats, and finally runs the scalable-topic auto-scaler over a simulated day
(:mod:`braid.cli.demo_autoscale`). It stops the broker with SIGTERM and removes the data dir.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from braid.cli.process import StandaloneProcess

Emit = Callable[[str], None]

TENANT = "demo"
NAMESPACE = "demo/orders"
TOPIC = "persistent://demo/orders/events"
SUBSCRIPTION = "billing"
_RECEIVE_TIMEOUT_MS = 15_000

_ORDERS = (
    ("alice", "coffee beans x2"),
    ("bob", "teapot"),
    ("alice", "grinder"),
    ("carol", "mugs x4"),
    ("bob", "kettle"),
    ("carol", "filters"),
)


def _step(emit: Emit, number: int, total: int, title: str) -> None:
    emit("")
    emit(f"[{number}/{total}] {title}")


def _message_id(msg_id: Any) -> str:
    return f"{msg_id.ledger_id()}:{msg_id.entry_id()}:{msg_id.batch_index()}"


def _receive(consumer: Any, count: int, emit: Emit, *, ack: Callable[[int], bool]) -> list[str]:
    got: list[str] = []
    for i in range(count):
        msg = consumer.receive(timeout_millis=_RECEIVE_TIMEOUT_MS)
        value = msg.data().decode()
        got.append(value)
        acked = ack(i)
        if acked:
            consumer.acknowledge(msg)
        emit(
            f"      received key={msg.partition_key():<6} {value!r:<20} "
            f"id={_message_id(msg.message_id())}  {'acked' if acked else 'NOT acked'}"
        )
    return got


def _pulsar_part(broker: StandaloneProcess, emit: Emit, total: int) -> None:
    import pulsar

    # The C++ client logs every connection at INFO; only its errors belong in the demo.
    logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)

    _step(emit, 3, total, f"produce {len(_ORDERS)} keyed orders to {TOPIC}")
    client = pulsar.Client(broker.service_url, logger=logger, operation_timeout_seconds=15)
    try:
        # Subscribe first so the subscription's cursor starts before the first message.
        consumer = client.subscribe(TOPIC, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(
            TOPIC, producer_name="demo-shop", compression_type=pulsar.CompressionType.LZ4
        )
        for key, order in _ORDERS:
            msg_id = producer.send(order.encode(), partition_key=key, properties={"shop": "demo"})
            emit(f"      sent     key={key:<6} {order!r:<20} id={_message_id(msg_id)} (durable)")
        producer.close()

        _step(emit, 4, total, f"consume with subscription '{SUBSCRIPTION}', ack only the first 3")
        _receive(consumer, len(_ORDERS), emit, ack=lambda i: i < 3)
        consumer.close()
    finally:
        client.close()

    _step(emit, 5, total, "restart the broker (SIGTERM, then start on the same data dir)")
    started = time.monotonic()
    code = broker.stop()
    emit(f"      broker exited with code {code}; starting it again ...")
    broker.start()
    emit(f"      back up in {time.monotonic() - started:.1f}s")
    client = pulsar.Client(broker.service_url, logger=logger, operation_timeout_seconds=15)
    try:
        consumer = client.subscribe(TOPIC, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared)
        emit("      the subscription's cursor survived: the 3 unacknowledged orders come back")
        _receive(consumer, len(_ORDERS) - 3, emit, ack=lambda _: True)
        consumer.close()
    finally:
        client.close()


def _admin_part(web: httpx.Client, emit: Emit, number: int, total: int) -> None:
    _step(emit, number, total, "admin REST API: create a tenant and a namespace")
    response = web.put(f"/admin/v2/tenants/{TENANT}", json={"allowedClusters": ["standalone"]})
    emit(f"      PUT /admin/v2/tenants/{TENANT} -> {response.status_code}")
    response.raise_for_status()
    response = web.put(f"/admin/v2/namespaces/{NAMESPACE}")
    emit(f"      PUT /admin/v2/namespaces/{NAMESPACE} -> {response.status_code}")
    response.raise_for_status()
    tenants = web.get("/admin/v2/tenants").json()
    emit(f"      GET /admin/v2/tenants -> {tenants}")


def _stats_part(web: httpx.Client, emit: Emit, number: int, total: int) -> None:
    _step(emit, number, total, "topic stats from the admin API")
    response = web.get(f"/admin/v2/persistent/{NAMESPACE}/events/stats")
    response.raise_for_status()
    stats = response.json()
    emit(
        f"      GET .../events/stats -> {stats.get('numberOfEntries')} entries, "
        f"{stats.get('storageSize')} bytes stored, last entry {stats.get('lastConfirmedEntry')}"
    )
    for name, sub in sorted(stats.get("subscriptions", {}).items()):
        emit(
            f"      subscription {name!r}: backlog {sub.get('msgBacklog')}, "
            f"acknowledged up to {sub.get('markDeletePosition')}"
        )


def _autoscale_part(emit: Emit, number: int, total: int) -> None:
    _step(emit, number, total, "scalable topics: the auto-scaler over a simulated day")
    try:
        from braid.cli.demo_autoscale import run_autoscale_demo
    except ImportError as exc:
        emit(f"      (auto-scale part unavailable: {exc})")
        return
    run_autoscale_demo(lambda line: emit(f"      {line}"))


def _print_now(line: str) -> None:
    # Flushed per line so the scenario can be watched even when stdout is a pipe (`| tee`).
    print(line, flush=True)


def run_demo(emit: Emit = _print_now) -> int:
    """Run the whole demo; returns the exit code (0 on success)."""
    total = 7
    emit("Braid demo: a standalone broker, the official pulsar-client, and the auto-scaler")
    try:
        import pulsar  # noqa: F401 - only checking it is installed
    except ImportError:
        pulsar_ok = False
    else:
        pulsar_ok = True
    with tempfile.TemporaryDirectory(prefix="braid-demo-") as tmp:
        _step(emit, 1, total, "start `braid standalone` on free ports with a temporary data dir")
        started = time.monotonic()
        broker = StandaloneProcess.start_on_free_ports(Path(tmp) / "data")
        try:
            emit(f"      ready in {time.monotonic() - started:.1f}s (pid {broker.pid})")
            emit(f"      broker service URL {broker.service_url}")
            emit(f"      admin/web URL      {broker.web_url}")
            with httpx.Client(base_url=broker.web_url, timeout=15.0) as web:
                _admin_part(web, emit, 2, total)
                if pulsar_ok:
                    _pulsar_part(broker, emit, total)
                    _stats_part(web, emit, 6, total)
                else:
                    emit("")
                    emit("[3-6/7] skipped: the official client is not installed")
                    emit("      install it with `.venv/bin/pip install pulsar-client`")
        finally:
            code = broker.stop()
        _autoscale_part(emit, 7, total)
        emit("")
        emit(f"broker stopped (exit code {code}); temporary data dir removed. Done.")
        return 0 if code == 0 else 1
