"""The official pulsar-client against a ``braid standalone`` subprocess that is restarted under it.

* a consumer resumes from its durable cursor after SIGTERM and after SIGKILL: every published
  (receipted) message is delivered, and no message whose acknowledgement the broker had persisted
  comes back;
* with deduplication on, a producer whose sends were in flight when the broker was killed resends
  them on reconnect, and the topic holds each message exactly once, in order;
* the command prints its URLs and exits 0 on SIGTERM and SIGINT.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.cli.process import StandaloneProcess, StandaloneStartError
from tests.support.polling import wait_for
from tests.support.standalone import (  # noqa: F401 - standalone_process is a pytest fixture
    metadata_barrier,
    official_client,
    standalone_process,
)

TOPIC_BASE = "persistent://public/default"


@pytest.fixture
def client(standalone_process: StandaloneProcess) -> Iterator[pulsar.Client]:  # noqa: F811
    c = official_client(standalone_process)
    try:
        yield c
    finally:
        c.close()


def _backlog(process: StandaloneProcess, topic: str, subscription: str) -> int | None:
    local = topic.rsplit("/", 1)[1]
    response = httpx.get(f"{process.web_url}/admin/v2/persistent/public/default/{local}/stats")
    if response.status_code != 200:
        return None
    sub = response.json()["subscriptions"].get(subscription)
    return None if sub is None else int(sub["msgBacklog"])


def _receive_exactly(consumer: pulsar.Consumer, expected: list[str]) -> list[str]:
    """Receive (and ack) until every expected payload arrived; returns everything received."""
    wanted = set(expected)
    received: list[str] = []
    deadline = time.monotonic() + 60
    while not wanted <= set(received):
        if time.monotonic() > deadline:
            missing = sorted(wanted - set(received))[:10]
            raise AssertionError(f"messages never delivered: {missing} ...")
        msg = consumer.receive(timeout_millis=30_000)
        received.append(msg.data().decode())
        consumer.acknowledge(msg)
    return received


def _assert_nothing_more(consumer: pulsar.Consumer) -> None:
    # Proving absence needs a bounded wait; half a second covers a dispatch round trip.
    with pytest.raises(pulsar.Timeout):
        msg = consumer.receive(timeout_millis=500)
        raise AssertionError(f"unexpected extra delivery {msg.data()!r}")


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_consumer_resumes_from_its_cursor_after_broker_restart(
    standalone_process: StandaloneProcess,  # noqa: F811
    client: pulsar.Client,
    how: str,
) -> None:
    topic = f"{TOPIC_BASE}/resume-{how}"
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    producer = client.create_producer(topic, batching_enabled=False)
    first = [f"m-{i:03d}" for i in range(200)]
    for payload in first:
        producer.send(payload.encode())  # returns only with the broker's receipt

    acked = []
    for _ in range(100):
        msg = consumer.receive(timeout_millis=10_000)
        acked.append(msg.data().decode())
        consumer.acknowledge(msg)
    assert acked == first[:100]
    # The client groups acks (100 ms): wait until the broker has applied all of them.
    wait_for(
        lambda: _backlog(standalone_process, topic, "sub") == 100,
        within=20,
        message="the broker to apply 100 acks",
    )

    if how == "sigterm":
        assert standalone_process.stop() == 0
    else:
        metadata_barrier(standalone_process, how)
        assert standalone_process.kill() == -signal.SIGKILL
    standalone_process.start()

    # The same producer and consumer objects reconnect on their own.
    second = [f"m-{i:03d}" for i in range(200, 250)]
    for payload in second:
        producer.send(payload.encode())
    expected = first[100:] + second
    received = _receive_exactly(consumer, expected)
    assert not set(received) & set(acked), "acknowledged messages were delivered again"
    # Exclusive subscription: the resumed stream is in publish order.
    assert received == expected
    _assert_nothing_more(consumer)
    assert _backlog(standalone_process, topic, "sub") == 0


def test_new_consumer_after_crash_gets_every_unacknowledged_message(
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    topic = f"{TOPIC_BASE}/crash-new-consumer"
    client = official_client(standalone_process)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50)
    payloads = [f"b-{i:04d}" for i in range(500)]
    results: list[pulsar.Result] = []
    for p in payloads:
        producer.send_async(p.encode(), lambda result, _id: results.append(result))
    producer.flush()
    wait_for(lambda: len(results) == 500, within=20, message="every receipt")
    assert set(results) == {pulsar.Result.Ok}
    client.close()  # every message was receipted; nothing consumed

    assert standalone_process.kill() == -signal.SIGKILL
    standalone_process.start()

    client = official_client(standalone_process)
    try:
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Latest)
        received = _receive_exactly(consumer, payloads)
        assert received == payloads
    finally:
        client.close()


def test_dedup_producer_resends_after_broker_kill_and_topic_holds_each_message_once(
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    dedup = f"{standalone_process.web_url}/admin/v2/namespaces/public/default/deduplication"
    assert httpx.post(dedup, json=True).status_code == 204
    topic = f"{TOPIC_BASE}/dedup-kill"
    client = official_client(standalone_process)
    try:
        # Subscribe before producing: with retention 0, messages no subscription holds are trimmed.
        reader = client.subscribe(topic, "verify", initial_position=pulsar.InitialPosition.Earliest)
        total = 3000
        producer = client.create_producer(
            topic,
            producer_name="dedup-producer",
            batching_enabled=False,
            send_timeout_millis=60_000,
            max_pending_messages=total,
            block_if_queue_full=True,
        )
        done = threading.Semaphore(0)
        errors: list[object] = []
        receipts = 0
        lock = threading.Lock()

        def on_receipt(result: pulsar.Result, _msg_id: object) -> None:
            nonlocal receipts
            if result != pulsar.Result.Ok:
                errors.append(result)
            with lock:
                receipts += 1
            done.release()

        for i in range(total):
            producer.send_async(f"d-{i:05d}".encode(), on_receipt)
            if i == 600:
                # Kill the broker with sends in flight: some are stored but not yet receipted.
                wait_for(lambda: receipts >= 100, within=20, message="the first receipts")
                assert standalone_process.kill() == -signal.SIGKILL
                standalone_process.start()
        for _ in range(total):
            assert done.acquire(timeout=90), "a send never completed"
        assert errors == []

        # A new producer with the same name learns where the topic is, and a retried publish
        # of an already-stored sequence id is dropped, not stored twice.
        producer.close()
        again = client.create_producer(topic, producer_name="dedup-producer")
        assert again.last_sequence_id() == total - 1
        again.send(b"d-00010", sequence_id=10)
        again.close()

        expected = [f"d-{i:05d}" for i in range(total)]
        received = _receive_exactly(reader, expected)
        assert received == expected, "duplicates or reordering after the resend"
        _assert_nothing_more(reader)
    finally:
        client.close()


@pytest.mark.parametrize("stop", ["stop", "interrupt"])
def test_standalone_prints_urls_and_exits_cleanly(
    standalone_process: StandaloneProcess,  # noqa: F811
    stop: str,
) -> None:
    output = standalone_process.output()
    assert standalone_process.service_url in output
    assert standalone_process.web_url in output
    code = getattr(standalone_process, stop)()
    assert code == 0
    final = standalone_process.output()
    assert "stopped cleanly" in final
    assert "Traceback" not in final
    # And it comes back on the same data dir.
    standalone_process.start()
    assert httpx.get(f"{standalone_process.web_url}/admin/v2/brokers/health").text == "ok"


def test_taken_port_and_locked_data_dir_are_clear_start_up_errors(
    standalone_process: StandaloneProcess,  # noqa: F811
    tmp_path: Path,
) -> None:
    # The broker port of the running process is taken: a second one must say so and exit 1.
    clash = StandaloneProcess(tmp_path / "other", port=standalone_process.port)
    with pytest.raises(StandaloneStartError, match=r"exited with 1[\s\S]*address already in use"):
        clash.start()
    # Same data dir on other ports: refused by the data-dir lock, and the first one keeps serving.
    second = StandaloneProcess(standalone_process.data_dir)
    with pytest.raises(StandaloneStartError, match="is in use by another process"):
        second.start()
    assert httpx.get(f"{standalone_process.web_url}/admin/v2/brokers/health").text == "ok"
