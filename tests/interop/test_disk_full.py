"""``braid standalone`` on a disk that fills up while the official client produces.

The data directory is a small ext4 file system the test creates (loop-mounted; root only, as in
CI, skipped with a message elsewhere). A filler grows a ballast file while the official client
sends 10 kB messages, so the broker runs out of space in the middle of its writes. Then:

* every send either succeeds - and that message is then readable - or fails within its
  ``send_timeout`` with a typed error (``pulsar.Timeout`` after the broker refused the message
  and the producer's reconnection with a PersistenceError naming the reason); before, sends
  blocked far past their timeout while the client reconnected hundreds of times; the Braid
  client's producer fails the same way (``DeadlineExceededError``) and sends again once space
  is back;
* every acknowledged message stays readable while the disk is full (before, some read as
  "checksum mismatch on disk" until a restart);
* ``/health`` says ``degraded`` and ``/admin/v2/brokers/health`` answers 503, both with the
  reason, for as long as the broker is read-only, and ``ok`` again once space is freed - with no
  restart;
* killed (SIGKILL) while the disk is nearly full, the broker starts again on that same disk
  (before, journal replay grew the entry files and the start failed) and serves every message.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

import braid
from braid.cli.process import StandaloneProcess
from braid.client.errors import DeadlineExceededError
from tests.support.polling import wait_for
from tests.support.small_fs import Ballast, free_bytes, small_filesystem

SEND_TIMEOUT_S = 3.0
TOPIC = "persistent://public/default/disk-full"
PAYLOAD = b"x" * 10_000


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path, 48) as mount_point:
        yield mount_point


@pytest.fixture
def broker(disk: Path, tmp_path: Path) -> Iterator[StandaloneProcess]:
    env = {**os.environ, "BRAID_diskCheckInterval": "200"}
    process = StandaloneProcess.start_on_free_ports(
        disk / "data", log_path=tmp_path / "standalone.log", env=env
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _health(broker: StandaloneProcess) -> tuple[dict[str, object], int, str]:
    """``/health``'s document, and ``/admin/v2/brokers/health``'s status and body."""
    status, body = _get(f"{broker.web_url}/health")
    assert status == 200, body
    broker_status, broker_body = _get(f"{broker.web_url}/admin/v2/brokers/health")
    return json.loads(body), broker_status, broker_body


def _assert_read_only(broker: StandaloneProcess) -> None:
    health, status, body = _health(broker)
    assert health["status"] == "degraded", health
    assert "read-only" in str(health["reason"]), health
    assert status == 503, body
    reply = json.loads(body)
    assert "read-only" in reply["reason"] and reply["retriable"] is True


def _assert_healthy(broker: StandaloneProcess) -> None:
    health, status, body = _health(broker)
    assert health["status"] == "ok", health
    assert (status, body) == (200, "ok")


def _client(broker: StandaloneProcess) -> pulsar.Client:
    quiet = logging.getLogger("pulsar-client-disk-full")
    quiet.setLevel(logging.CRITICAL)
    return pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=quiet)


def _number(message: pulsar.Message) -> int:
    return int(message.data()[:8])


def _drain(
    consumer: pulsar.Consumer, expected: set[int], *, quiet: float = 3.0, within: float = 60.0
) -> set[int]:
    """Every message the consumer receives (acknowledged as received) until it holds
    ``expected`` and then stays quiet for ``quiet`` seconds, or ``within`` seconds pass - a slow
    first delivery on a loaded machine (a broker just restarted) is waited for, not taken as
    loss; the caller's ``>=`` check then names what is missing."""
    got: set[int] = set()
    deadline = time.monotonic() + within
    while True:
        wait = quiet if got >= expected else max(0.1, min(quiet, deadline - time.monotonic()))
        try:
            message = consumer.receive(timeout_millis=int(wait * 1000))
        except pulsar.Timeout:
            if got >= expected or time.monotonic() >= deadline:
                return got
            continue
        got.add(_number(message))
        consumer.acknowledge(message)


def _produce_until_full(
    producer: pulsar.Producer, ballast: Ballast, *, seconds: float
) -> tuple[list[int], list[tuple[int, str, float]]]:
    """Send numbered messages while a filler takes the disk's space; returns the acknowledged
    numbers and every failure (number, exception type, seconds it took)."""
    filling = threading.Thread(target=ballast.fill, daemon=True)
    acked: list[int] = []
    failed: list[tuple[int, str, float]] = []
    number = 0
    started = time.monotonic()
    filling.start()
    while time.monotonic() - started < seconds:
        sent_at = time.monotonic()
        try:
            producer.send(b"%08d" % number + PAYLOAD)
            acked.append(number)
        except pulsar.PulsarException as exc:
            failed.append((number, type(exc).__name__, time.monotonic() - sent_at))
        number += 1
    filling.join(timeout=30)
    return acked, failed


def test_a_full_disk_costs_writes_only_and_the_broker_recovers_without_a_restart(
    broker: StandaloneProcess, disk: Path
) -> None:
    ballast = Ballast(disk)
    client = _client(broker)
    braid_client = braid.Client(broker.service_url, operation_timeout=10)
    try:
        # "audit" never acknowledges: it holds every message, to read them all at the end.
        audit = client.subscribe(TOPIC, "audit", initial_position=pulsar.InitialPosition.Earliest)
        consumer = client.subscribe(TOPIC, "live")
        producer = client.create_producer(
            TOPIC, batching_enabled=False, send_timeout_millis=int(SEND_TIMEOUT_S * 1000)
        )
        braid_producer = braid_client.create_producer(
            TOPIC, batching=False, send_timeout=SEND_TIMEOUT_S
        )
        _assert_healthy(broker)
        ballast.fill(leave_free=6 * 1024 * 1024)
        acked, failed = _produce_until_full(producer, ballast, seconds=12)

        # Every send either succeeded or failed within its timeout, with a typed error.
        assert acked and failed, (len(acked), failed[:5])
        assert {kind for _, kind, _ in failed} <= {"Timeout", "BrokerPersistenceError"}
        assert max(took for _, _, took in failed) < SEND_TIMEOUT_S + 1.5, failed
        # Read-only, and every acknowledged message is readable while the disk is full.
        wait_for(lambda: _health(broker)[0]["status"] == "degraded", within=5)
        _assert_read_only(broker)
        assert _drain(consumer, set(acked)) >= set(acked)
        # The Braid client's producer gets its typed error within its send_timeout too.
        sent_at = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            braid_producer.send(b"%08d" % 90_000 + PAYLOAD)
        assert time.monotonic() - sent_at < SEND_TIMEOUT_S + 1.5
        _assert_read_only(broker)

        # Space back: read-write again without a restart, and writes go through.
        ballast.release()
        wait_for(lambda: _health(broker)[0]["status"] == "ok", within=10)
        _assert_healthy(broker)
        fresh = client.create_producer(TOPIC, batching_enabled=False)
        for number in range(100_000, 100_020):
            fresh.send(b"%08d" % number + PAYLOAD)
        # The Braid producer comes back by itself, after its reconnection back-off (meanwhile
        # its sends keep failing at their timeout).
        deadline = time.monotonic() + 60
        while True:
            try:
                braid_producer.send(b"%08d" % 100_020 + PAYLOAD)
                break
            except DeadlineExceededError:
                assert time.monotonic() < deadline, "the Braid producer never came back"
        assert _drain(consumer, set(range(100_000, 100_021))) >= set(range(100_000, 100_021))
        acked += list(range(100_000, 100_021))
    finally:
        braid_client.close()
        client.close()

    # Killed on a nearly full disk, it starts again on that same disk, read-only.
    broker.kill()
    ballast.fill(leave_free=256 * 1024)
    assert free_bytes(disk) < 512 * 1024
    broker.start()
    # Starting gave back what the journal no longer needs; take that too: still read-only.
    ballast.fill(leave_free=256 * 1024)
    wait_for(lambda: _health(broker)[0]["status"] == "degraded", within=5)
    _assert_read_only(broker)
    client = _client(broker)
    try:
        audit = client.subscribe(TOPIC, "audit")
        assert _drain(audit, set(acked)) >= set(acked)
        # And freeing space brings it back once more.
        ballast.release()
        wait_for(lambda: _health(broker)[0]["status"] == "ok", within=10)
        producer = client.create_producer(TOPIC, batching_enabled=False)
        producer.send(b"%08d" % 200_000 + PAYLOAD)
        assert 200_000 in _drain(audit, {200_000})
    finally:
        client.close()
