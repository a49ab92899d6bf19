"""Topic compaction with the official client: the admin trigger and status, read-compacted readers
seeing the latest value per key (tombstones remove keys), batches compacted in part, messages after
the horizon, and table views."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pulsar
import pytest

from braid.admin.app import create_app
from braid.admin.server import AdminServer
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for


@pytest.fixture(scope="module")
def admin_url(broker: BackgroundBroker) -> Iterator[str]:
    """The admin API of the interop broker, served on its loop."""
    stack = broker.stack
    server = AdminServer(create_app(stack.config, stack.resources, stack.service), "127.0.0.1", 0)
    broker.call(server.start())
    try:
        yield server.url
    finally:
        broker.call(server.stop())


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def _compact(admin_url: str, topic: str) -> None:
    assert httpx.put(admin_url + _path(topic) + "/compaction").status_code == 204

    def status() -> str:
        return str(httpx.get(admin_url + _path(topic) + "/compaction").json()["status"])

    wait_for(lambda: status() in ("SUCCESS", "ERROR"), message="the compaction to finish")
    assert status() == "SUCCESS", httpx.get(admin_url + _path(topic) + "/compaction").json()


def _read_all(client: pulsar.Client, topic: str, *, compacted: bool) -> list[tuple[str, bytes]]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=compacted)
    out = []
    while reader.has_message_available():
        msg = reader.read_next(timeout_millis=10_000)
        out.append((msg.partition_key(), msg.data()))
    reader.close()
    return out


def _publish(producer: pulsar.Producer, items: list[tuple[str, bytes]]) -> None:
    for key, value in items:
        producer.send_async(value, None, partition_key=key)
    producer.flush()


def test_a_compacted_read_returns_the_latest_value_per_key_and_drops_tombstones(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(
        producer,
        [("a", b"a1"), ("b", b"b1"), ("c", b"c1"), ("a", b"a2"), ("b", b""), ("c", b"c2")],
    )
    assert httpx.get(admin_url + _path(topic) + "/compaction").json() == {
        "status": "NOT_RUN",
        "lastError": "",
    }
    _compact(admin_url, topic)
    assert _read_all(client, topic, compacted=True) == [("a", b"a2"), ("c", b"c2")]
    # The topic itself is untouched: a plain reader still sees every message.
    assert len(_read_all(client, topic, compacted=False)) == 6
    # Messages after the horizon follow the compacted ones, uncompacted.
    _publish(producer, [("a", b"a3"), ("a", b"a4")])
    assert _read_all(client, topic, compacted=True) == [
        ("a", b"a2"),
        ("c", b"c2"),
        ("a", b"a3"),
        ("a", b"a4"),
    ]
    # A second run folds them in and forgets a key tombstoned since.
    _publish(producer, [("c", b"")])
    _compact(admin_url, topic)
    assert _read_all(client, topic, compacted=True) == [("a", b"a4")]


def test_batches_are_compacted_message_by_message(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=60_000
    )
    # One batch: x1 is superseded inside it, y1 by the next batch, z1 survives.
    _publish(producer, [("x", b"x1"), ("y", b"y1"), ("x", b"x2"), ("z", b"z1")])
    _publish(producer, [("y", b"y2"), ("w", b"w1"), ("w", b""), ("v", b"v1")])
    _compact(admin_url, topic)
    assert _read_all(client, topic, compacted=True) == [
        ("x", b"x2"),
        ("z", b"z1"),
        ("y", b"y2"),
        ("v", b"v1"),
    ]


def test_a_table_view_over_a_compacted_topic(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("k1", b"old"), ("k2", b"gone"), ("k1", b"new"), ("k2", b"")])
    _compact(admin_url, topic)
    _publish(producer, [("k3", b"after")])
    view = client.create_table_view(topic)
    wait_for(lambda: view.get("k3") == b"after", message="the table view to catch up")
    assert view.get("k1") == b"new"
    assert view.get("k2") is None
    entries: dict[str, bytes] = {}
    view.for_each(lambda k, v: entries.__setitem__(k, v))
    assert entries == {"k1": b"new", "k3": b"after"}
    view.close()


def test_a_compacted_topic_whose_last_message_was_a_tombstone_is_read_to_its_end(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    # The topic ends with a message compaction removed: has_message_available must not promise
    # more than the compacted ledger holds.
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("k", b"v"), ("gone", b"x"), ("gone", b"")])
    _compact(admin_url, topic)
    assert _read_all(client, topic, compacted=True) == [("k", b"v")]


def test_compaction_of_a_missing_topic_is_404(admin_url: str, topic: str) -> None:
    assert httpx.put(admin_url + _path(topic) + "/compaction").status_code == 404


def test_a_durable_read_compacted_subscription_resumes_after_its_cumulative_ack(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    _publish(producer, [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1")])
    _compact(admin_url, topic)
    consumer = client.subscribe(
        topic,
        "durable",
        initial_position=pulsar.InitialPosition.Earliest,
        is_read_compacted=True,
    )
    first = consumer.receive(timeout_millis=10_000)
    assert (first.partition_key(), first.data()) == ("b", b"b1")
    consumer.acknowledge_cumulative(first)
    consumer.close()
    again = client.subscribe(topic, "durable", is_read_compacted=True)
    got = [again.receive(timeout_millis=10_000).data() for _ in range(2)]
    assert got == [b"a2", b"c1"]
    with pytest.raises(pulsar.Timeout):
        again.receive(timeout_millis=300)


def test_compacting_a_partitioned_topic_compacts_its_partitions_and_a_table_view_reads_them(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    assert httpx.put(admin_url + _path(topic) + "/partitions", json=2).status_code == 204
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"key-{i}" for i in range(8)]
    _publish(producer, [(k, b"old") for k in keys])
    _publish(producer, [(k, b"new") for k in keys[:6]] + [(k, b"") for k in keys[6:]])
    assert httpx.put(admin_url + _path(topic) + "/compaction").status_code == 204
    partitions = [f"{topic}-partition-{i}" for i in range(2)]

    def done(part: str) -> bool:
        return httpx.get(admin_url + _path(part) + "/compaction").json()["status"] == "SUCCESS"

    wait_for(lambda: all(done(p) for p in partitions), message="every partition compacted")
    compacted = [kv for p in partitions for kv in _read_all(client, p, compacted=True)]
    assert sorted(compacted) == [(k, b"new") for k in keys[:6]]
    view = client.create_table_view(topic)
    entries: dict[str, bytes] = {}
    wait_for(lambda: len(view) == 6, message="the table view to load both partitions")
    view.for_each(lambda k, v: entries.__setitem__(k, v))
    assert entries == {k: b"new" for k in keys[:6]}
    view.close()
