"""``braid demo``: a scripted tour a newcomer can watch, on a throw-away standalone broker.

It starts the real ``braid standalone`` command as a child process (temporary data dir, free
127.0.0.1 ports) and, printing a few lines per step: creates a tenant and namespace through the
admin REST API; tells the scalable-topic story with the Braid client
(:mod:`braid.cli.demo_scalable`: a topic split and merged while keyed orders are produced and
billed by a Stream consumer, a broker crash and restart, then a per-customer order and loss
check and the segment DAG); shows the official ``pulsar-client`` reading a classic topic the
Braid client wrote; and finally runs the auto-scaler over a simulated day
(:mod:`braid.cli.demo_autoscale`). It ends by printing the console URL of the scalable topic it
built; with ``--keep`` the broker stays up until Ctrl+C so a newcomer can look at it there. It
stops the broker with SIGTERM and removes the data dir.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from braid.cli.demo_scalable import TOPIC as SCALABLE_TOPIC
from braid.cli.demo_scalable import run_scalable_story
from braid.cli.process import StandaloneProcess
from braid.client import Client

Emit = Callable[[str], None]

TENANT = "demo"
NAMESPACE = "demo/orders"
CLASSIC_TOPIC = "persistent://demo/orders/classic"
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


def _admin_part(web: httpx.Client, emit: Emit) -> None:
    response = web.put(f"/admin/v2/tenants/{TENANT}", json={"allowedClusters": ["standalone"]})
    emit(f"      PUT /admin/v2/tenants/{TENANT} -> {response.status_code}")
    response.raise_for_status()
    response = web.put(f"/admin/v2/namespaces/{NAMESPACE}")
    emit(f"      PUT /admin/v2/namespaces/{NAMESPACE} -> {response.status_code}")
    response.raise_for_status()
    tenants = web.get("/admin/v2/tenants").json()
    emit(f"      GET /admin/v2/tenants -> {tenants}")


def _classic_part(broker: StandaloneProcess, web: httpx.Client, emit: Emit) -> None:
    import pulsar

    # The C++ client logs every connection at INFO; only its errors belong in the demo.
    logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    official = pulsar.Client(broker.service_url, logger=logger, operation_timeout_seconds=15)
    try:
        # Subscribe first so the subscription's cursor starts before the first message.
        consumer = official.subscribe(
            CLASSIC_TOPIC, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared
        )
        with Client(broker.service_url, operation_timeout=15) as client:
            producer = client.create_producer(CLASSIC_TOPIC, producer_name="demo-shop")
            for key, order in _ORDERS:
                producer.send(order.encode(), key=key, properties={"shop": "demo"})
        emit(f"      the Braid client sent {len(_ORDERS)} keyed orders to {CLASSIC_TOPIC}")
        for _ in _ORDERS:
            msg = consumer.receive(timeout_millis=_RECEIVE_TIMEOUT_MS)
            consumer.acknowledge(msg)
            emit(
                f"      pulsar-client received key={msg.partition_key():<6} "
                f"{msg.data().decode()!r:<18} properties={msg.properties()}"
            )
        consumer.close()
    finally:
        official.close()
    response = web.get(f"/admin/v2/persistent/{NAMESPACE}/classic/stats")
    response.raise_for_status()
    sub = response.json().get("subscriptions", {}).get(SUBSCRIPTION, {})
    backlog = sub.get("msgBacklog")
    emit(f"      GET .../classic/stats -> subscription '{SUBSCRIPTION}' backlog {backlog}")


def _autoscale_part(emit: Emit) -> None:
    try:
        from braid.cli.demo_autoscale import run_autoscale_demo
    except ImportError as exc:
        emit(f"      (auto-scale part unavailable: {exc})")
        return
    run_autoscale_demo(lambda line: emit(f"      {line}"))


def _print_now(line: str) -> None:
    # Flushed per line so the scenario can be watched even when stdout is a pipe (`| tee`).
    print(line, flush=True)


def console_url(web_url: str) -> str:
    """The console page of the scalable topic the demo builds."""
    tenant, namespace, topic = SCALABLE_TOPIC.removeprefix("topic://").split("/")
    return f"{web_url}/console/topic/{tenant}/{namespace}/{topic}"


@contextmanager
def stop_signals() -> Iterator[Callable[[], None]]:
    """While the block runs, Ctrl+C (SIGINT) and SIGTERM are caught; the function it yields
    blocks until one of them has arrived - also one that arrived before it was called.

    ``--keep`` enters this before it prints its "press Ctrl+C" line, so a signal sent the moment
    that line appears is neither lost nor raised as a KeyboardInterrupt outside the wait (which
    ended the demo with exit status -2). The wait reads the signal wake-up pipe, which the
    interpreter's C-level handler writes to in whichever thread the kernel delivers the signal:
    a signal delivered to another thread (the clients' threads) still ends the wait, where a
    main thread blocked in a lock or a read would never run the Python-level handler.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    stops = (signal.SIGINT, signal.SIGTERM)

    def on_signal(signum: int, frame: object) -> None:
        """Nothing to do: the wake-up byte is already in the pipe."""

    previous = {sig: signal.signal(sig, on_signal) for sig in stops}
    previous_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def wait() -> None:
        while os.read(read_fd, 1)[0] not in stops:
            pass  # another signal with a Python handler (SIGALRM, ...): keep waiting

    try:
        yield wait
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(read_fd)
        os.close(write_fd)


def run_demo(
    emit: Emit = _print_now,
    *,
    keep: bool = False,
) -> int:
    """Run the whole demo; returns the exit code (0 on success).

    Args:
        keep: after the last step, print the console URL and keep the broker running until
            Ctrl+C (SIGINT) or SIGTERM.
    """
    total = 10
    numbers = iter(range(1, total + 1))

    def step(title: str) -> None:
        _step(emit, next(numbers), total, title)

    emit("Braid demo: a standalone broker, scalable topics with the Braid client, the auto-scaler")
    try:
        import pulsar  # noqa: F401 - only checking it is installed
    except ImportError:
        pulsar_ok = False
    else:
        pulsar_ok = True
    ok = False
    with tempfile.TemporaryDirectory(prefix="braid-demo-") as tmp:
        step("start `braid standalone` on free ports with a temporary data dir")
        started = time.monotonic()
        broker = StandaloneProcess.start_on_free_ports(Path(tmp) / "data")
        try:
            emit(f"      ready in {time.monotonic() - started:.1f}s (pid {broker.pid})")
            emit(f"      broker service URL {broker.service_url}")
            emit(f"      admin/web URL      {broker.web_url}")
            with httpx.Client(base_url=broker.web_url, timeout=15.0) as web:
                step("admin REST API: create a tenant and a namespace")
                _admin_part(web, emit)
                ok = run_scalable_story(broker, emit, step)
                step("the official pulsar-client reads a classic topic the Braid client wrote")
                if pulsar_ok:
                    _classic_part(broker, web, emit)
                else:
                    emit("      skipped: install it with `.venv/bin/pip install pulsar-client`")
            step("scalable topics: the auto-scaler over a simulated day")
            _autoscale_part(emit)
            emit("")
            emit(f"the console shows {SCALABLE_TOPIC} live: {console_url(broker.web_url)}")
            if keep:
                with stop_signals() as wait_for_stop:
                    emit("the broker keeps running (--keep): open that URL; press Ctrl+C to stop")
                    wait_for_stop()
            else:
                emit("(run `braid demo --keep` to keep the broker up and look at it there)")
        finally:
            code = broker.stop()
        emit(f"broker stopped (exit code {code}); temporary data dir removed. Done.")
        return 0 if code == 0 and ok else 1
