"""Run Braid standalone for tests: as a subprocess (the real ``braid standalone`` command) or
configured for in-process use.

The subprocess side is :class:`braid.cli.process.StandaloneProcess` (also used by ``braid demo``
and the benchmarks): free 127.0.0.1 ports chosen once and kept across restarts, readiness polled
with a deadline (admin ``/health`` and the broker port), stop by process id (SIGTERM, then SIGKILL
after a deadline), ``kill()`` for a crash, ``restart()`` on the same data dir.

Fixtures (import them explicitly into a test module)::

    from tests.support.standalone import standalone_process  # noqa: F401 - pytest fixture

``standalone_process`` yields a started process on ``tmp_path / "data"``; whatever state the test
leaves it in, the fixture stops it (and fails loudly if it cannot). :func:`official_client` connects
the official ``pulsar-client`` to such a process (:func:`produce` and :func:`read_all` use it for
a whole topic), and :func:`metadata_barrier` makes the cursor state the broker has applied durable
before a test kills it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.broker.config import BrokerConfig
from braid.cli.process import StandaloneProcess, StandaloneStartError
from braid.localcluster.ports import free_port
from tests.support.polling import wait_for

__all__ = [
    "StandaloneProcess",
    "StandaloneStartError",
    "free_port",
    "metadata_barrier",
    "official_client",
    "produce",
    "read_all",
    "run_standalone_to_exit",
    "standalone_config",
    "standalone_process",
]


def standalone_config(data_dir: Path, **overrides: object) -> BrokerConfig:
    """An in-process configuration: ephemeral 127.0.0.1 ports, ``data_dir``, defaults otherwise."""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "broker_service_port": 0,
        "web_service_port": 0,
        **overrides,
    }
    return BrokerConfig(**values)  # type: ignore[arg-type]


def official_client(process: StandaloneProcess) -> pulsar.Client:
    """The official client on ``process``, patient enough to ride out a restart of it."""
    return pulsar.Client(
        process.service_url,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def receive_texts(consumer: pulsar.Consumer, want: int) -> list[str]:
    """Receive and acknowledge until ``want`` messages came (30 s bound); their texts in order."""
    got: list[str] = []

    def more() -> bool:
        try:
            message = consumer.receive(timeout_millis=200)
        except pulsar.Timeout:
            return len(got) >= want
        got.append(message.data().decode())
        consumer.acknowledge(message)
        return len(got) >= want

    wait_for(more, within=30, message=lambda: f"{want} messages, got {got}")
    return got


def nothing_more(consumer: pulsar.Consumer) -> bool:
    """Whether no further message arrives within 0.7 s."""
    try:
        consumer.receive(timeout_millis=700)
    except pulsar.Timeout:
        return True
    return False


def produce(process: StandaloneProcess, topic: str, payloads: list[str]) -> None:
    """Send ``payloads`` to ``topic`` with the official client, each receipted before the next."""
    client = official_client(process)
    try:
        producer = client.create_producer(topic)
        for payload in payloads:
            producer.send(payload.encode())
    finally:
        client.close()


def read_all(process: StandaloneProcess, topic: str) -> list[str]:
    """Every message of ``topic`` from its start, read with the official client's reader."""
    client = official_client(process)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        received = []
        while reader.has_message_available():
            received.append(reader.read_next(timeout_millis=30_000).data().decode())
        return received
    finally:
        client.close()


def metadata_barrier(process: StandaloneProcess, tag: str) -> None:
    """Make the broker's acknowledged cursor state durable before a crash, without sleeping.

    The metadata store applies writes one at a time, in order. A cursor coalesces its writes: at
    most one in flight plus one queued behind it, submitted when the first completes. A tenant
    created through the admin API is a write queued behind the in-flight one; by the time its
    response arrives the queued cursor write has been submitted too, so a second admin write
    queues behind that. Once both return, every ack the broker had applied is on disk.
    """
    for i in range(2):
        response = httpx.put(f"{process.web_url}/admin/v2/tenants/barrier-{tag}-{i}")
        assert response.status_code == 204, response.text


def run_standalone_to_exit(
    data_dir: Path, env: Mapping[str, str], extra_args: Sequence[str] = (), timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``braid standalone`` on free ports for a start-up expected to fail; its exit code and
    output (bounded by ``timeout``)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "braid.cli.main",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--port",
            str(free_port()),
            "--web-port",
            str(free_port()),
            *extra_args,
        ],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def standalone_process(tmp_path: Path) -> Iterator[StandaloneProcess]:
    """A running ``braid standalone`` subprocess on ``tmp_path / "data"``."""
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()
