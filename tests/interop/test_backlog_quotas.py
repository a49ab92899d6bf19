"""Backlog quotas, message TTL and retention with the official client (issue 27, finding 3).

Finding 3 first, as filed: with no quota a subscription that never acknowledges lets every message
in. Then each policy: ``producer_exception`` and ``producer_request_hold`` disconnect the producers
and refuse new ones with ``ProducerBlockedQuotaExceededException`` / ``...Error`` (the client's own
exceptions), ``consumer_backlog_eviction`` moves the slow subscription forward, an age quota
evicts old messages, and message TTL plus retention give the disk space back (bytes of the
bookie's ledger files before and after).

The broker's own clock is a ``ManualClock`` (started at the wall clock, so the client's publish
times are "now"): the periodic checks never run on their own; each test runs them once, after
moving time where it matters.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.clock import ManualClock
from tests.support.admin_server import serve_admin
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(120)

_PAYLOAD = b"x" * 200


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock(start_ms=int(time.time() * 1000))


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, clock: ManualClock
) -> Iterator[BackgroundBroker]:
    """A broker of its own: small ledgers (so consumed ones can be deleted) and a manual clock."""
    data_dir: Path = tmp_path_factory.mktemp("braid-quotas")
    background = BackgroundBroker(
        data_dir, broker_clock=clock, managed_ledger_max_entries_per_ledger=50
    ).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.fixture(scope="module")
def admin_url(broker: BackgroundBroker) -> Iterator[str]:
    with serve_admin(broker) as url:
        yield url


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def _set_topic_quota(admin_url: str, topic: str, quota: dict[str, object], kind: str) -> None:
    url = f"{admin_url}{_path(topic)}/backlogQuota?backlogQuotaType={kind}"
    assert httpx.post(url, json=quota).status_code == 204
    got = httpx.get(f"{admin_url}{_path(topic)}/backlogQuotaMap").json()
    assert got[kind]["policy"] == quota["policy"]


def _backlog(admin_url: str, topic: str, subscription: str) -> int:
    stats = httpx.get(f"{admin_url}{_path(topic)}/stats").json()
    return int(stats["subscriptions"][subscription]["msgBacklog"])


def _fill(client: pulsar.Client, topic: str, count: int) -> pulsar.Producer:
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=3000)
    for _ in range(count):
        producer.send(_PAYLOAD)
    return producer


def test_finding_3_without_a_quota_a_subscription_that_never_acks_lets_everything_in(
    admin_url: str, client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "never-acks")
    producer = _fill(client, topic, 2_000)  # every send is accepted: no limit stops them
    assert _backlog(admin_url, topic, "never-acks") == 2_000
    producer.close()
    consumer.close()


def test_producer_exception_disconnects_producers_and_refuses_new_ones_until_consumers_catch_up(
    broker: BackgroundBroker, admin_url: str, client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "slow")
    producer = _fill(client, topic, 100)  # 100 x 200 B, over the 5 kB quota once it is set
    _set_topic_quota(
        admin_url,
        topic,
        {"limitSize": 5_000, "limitTime": -1, "policy": "producer_exception"},
        "destination_storage",
    )
    acted = broker.call(broker.service.backlog_quotas.check_once())
    assert topic in acted
    # The producer was closed by the broker; reconnecting meets the quota: its sends fail.
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        producer.send(_PAYLOAD)
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(topic)
    # The consumer catches up: producers are welcome again.
    for _ in range(100):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    wait_for(lambda: _backlog(admin_url, topic, "slow") == 0, message="the acks to land")
    again = client.create_producer(topic)
    again.send(b"after")
    assert consumer.receive(timeout_millis=10_000).data() == b"after"


def test_producer_request_hold_refuses_new_producers_with_the_retriable_error(
    broker: BackgroundBroker, admin_url: str, client: pulsar.Client, topic: str
) -> None:
    consumer = client.subscribe(topic, "slow")
    producer = _fill(client, topic, 100)
    _set_topic_quota(
        admin_url,
        topic,
        {"limitSize": 5_000, "limitTime": -1, "policy": "producer_request_hold"},
        "destination_storage",
    )
    broker.call(broker.service.backlog_quotas.check_once())
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededError):
        client.create_producer(topic)
    # The disconnected producer holds its sends (it keeps retrying) until they time out.
    with pytest.raises((pulsar.Timeout, pulsar.ProducerBlockedQuotaExceededError)):
        producer.send(_PAYLOAD)
    assert _backlog(admin_url, topic, "slow") == 100  # nothing more was stored
    consumer.acknowledge_cumulative(_last_of(consumer, 100))
    wait_for(lambda: _backlog(admin_url, topic, "slow") == 0, message="the ack to land")
    client.create_producer(topic).send(b"after")


def _last_of(consumer: pulsar.Consumer, count: int) -> pulsar.Message:
    message = None
    for _ in range(count):
        message = consumer.receive(timeout_millis=10_000)
    assert message is not None
    return message


def test_consumer_backlog_eviction_moves_the_slow_subscription_forward(
    broker: BackgroundBroker, admin_url: str, client: pulsar.Client, topic: str
) -> None:
    slow = client.subscribe(topic, "slow", receiver_queue_size=1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(200):  # 200 x 200 B = 40 kB
        producer.send(b"%05d" % i + _PAYLOAD[5:])
    _set_topic_quota(
        admin_url,
        topic,
        {"limitSize": 10_000, "limitTime": -1, "policy": "consumer_backlog_eviction"},
        "destination_storage",
    )
    broker.call(broker.service.backlog_quotas.check_once())
    left = _backlog(admin_url, topic, "slow")
    assert 0 < left <= 50, left  # 10 kB of ~236 B entries: the newest ~42 remain
    stats = httpx.get(f"{admin_url}{_path(topic)}/stats").json()
    assert 0 < stats["backlogSize"] == stats["subscriptions"]["slow"]["backlogSize"] <= 10_000
    # The consumer goes on from the newest messages (after what it had already prefetched).
    received = [int(slow.receive(timeout_millis=10_000).data()[:5]) for _ in range(3)]
    assert received[-1] >= 200 - left, (received, left)
    # Producers are untouched by eviction.
    producer.send(b"still-accepted")


def test_an_age_quota_with_eviction_drops_messages_older_than_its_limit(
    broker: BackgroundBroker,
    clock: ManualClock,
    admin_url: str,
    client: pulsar.Client,
    topic: str,
) -> None:
    client.subscribe(topic, "slow").close()
    _fill(client, topic, 20)
    _set_topic_quota(
        admin_url,
        topic,
        {"limitSize": -1, "limitTime": 60, "policy": "consumer_backlog_eviction"},
        "message_age",
    )
    broker.call(broker.service.backlog_quotas.check_once())
    assert _backlog(admin_url, topic, "slow") == 20  # not old enough yet
    broker.run(clock.advance, 120)
    broker.call(broker.service.backlog_quotas.check_once())
    assert _backlog(admin_url, topic, "slow") == 0


def _ledger_bytes(data_dir: Path, ledger_ids: set[int]) -> int:
    """Bytes on disk of the bookie's files of these ledgers (``<id>.data`` and ``<id>.idx``)."""
    return sum(
        f.stat().st_size
        for f in (data_dir / "storage").rglob("*")
        if f.suffix in (".data", ".idx") and f.stem.isdigit() and int(f.stem) in ledger_ids
    )


def test_message_ttl_and_retention_return_the_disk_space_of_expired_messages(
    broker: BackgroundBroker, clock: ManualClock, admin_url: str, client: pulsar.Client
) -> None:
    ns = f"{admin_url}/admin/v2/namespaces/public/ttl"
    assert httpx.put(ns, json={}).status_code == 204
    assert httpx.post(ns + "/messageTTL", json=300).status_code == 204
    assert httpx.get(ns + "/messageTTL").json() == 300
    retention = {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
    assert httpx.post(ns + "/retention", json=retention).status_code == 204
    topic = "persistent://public/ttl/expiring"
    client.subscribe(topic, "never-acks").close()
    producer = _fill(client, topic, 1_000)  # 20 ledgers of 50 entries
    producer.close()
    ids = broker.run(lambda: {i.ledger_id for i in broker.service.topics[topic].ledger.ledgers})
    assert len(ids) >= 20
    # The bookie's flusher moves entries from its journal into the per-ledger files.
    readings: list[int] = []

    def settled() -> bool:
        readings.append(_ledger_bytes(broker.data_dir, ids))
        return readings[-1] >= 1_000 * len(_PAYLOAD) and readings[-3:] == [readings[-1]] * 3

    wait_for(settled, interval=0.1, message=lambda: f"the ledger files to settle: {readings}")
    before = readings[-1]
    monitor = broker.service.limits_monitor
    assert broker.call(monitor.expire_messages()) == []  # younger than the TTL: kept
    assert _backlog(admin_url, topic, "never-acks") == 1_000
    # Ten minutes later the broker's periodic checks (TTL every 5 min, retention every 2 min)
    # have acknowledged the expired messages and deleted the ledgers nobody needs any more.
    broker.run(clock.advance, 600)
    wait_for(lambda: _backlog(admin_url, topic, "never-acks") == 0, message="the TTL check")
    broker.call(monitor.trim_consumed_ledgers())
    ledgers = broker.run(lambda: len(broker.service.topics[topic].ledger.ledgers))
    assert ledgers <= 2, ledgers  # the current ledger (and the last one written) at most
    # Deleted ledgers' files are unlinked by the bookie's flusher, in journal order.
    wait_for(
        lambda: _ledger_bytes(broker.data_dir, ids) < before * 0.15,
        message=lambda: f"space back: {before} B, now {_ledger_bytes(broker.data_dir, ids)} B",
    )
    after = _ledger_bytes(broker.data_dir, ids)
    print(f"ledger files: {before} B before, {after} B after; {ledgers} ledgers left")


def test_a_partitioned_topics_quota_applies_to_each_of_its_partitions_alone(
    broker: BackgroundBroker, admin_url: str, client: pulsar.Client, topic: str
) -> None:
    assert httpx.put(f"{admin_url}{_path(topic)}/partitions", json=2).status_code == 204
    consumer = client.subscribe(topic, "slow")
    producer = client.create_producer(
        topic,
        batching_enabled=False,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
    )
    for _ in range(100):
        producer.send(_PAYLOAD)
    _set_topic_quota(
        admin_url,
        topic,
        {"limitSize": 5_000, "limitTime": -1, "policy": "producer_exception"},
        "destination_storage",
    )
    acted = broker.call(broker.service.backlog_quotas.check_once())
    assert {f"{topic}-partition-0", f"{topic}-partition-1"} <= set(acted)
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(topic)
    consumer.close()


def test_expiry_releases_key_shared_hashes_a_silent_consumer_was_holding(
    broker: BackgroundBroker, clock: ManualClock, admin_url: str, client: pulsar.Client
) -> None:
    """A hash moving to a new Key_Shared consumer waits until the old one acknowledges its
    messages (PIP-379); when those expire instead, the hash must move on."""
    ns = f"{admin_url}/admin/v2/namespaces/public/ttl-key-shared"
    assert httpx.put(ns, json={}).status_code == 204
    assert httpx.post(ns + "/messageTTL", json=60).status_code == 204
    topic = "persistent://public/ttl-key-shared/orders"
    shared = pulsar.ConsumerType.KeyShared
    silent = client.subscribe(topic, "ks", consumer_type=shared, consumer_name="silent")
    producer = client.create_producer(topic, batching_enabled=False)
    keys = [f"k{i}" for i in range(32)]
    for key in keys:
        producer.send(b"old", partition_key=key)
    for _ in keys:
        silent.receive(timeout_millis=10_000)  # held, never acknowledged
    late = client.subscribe(topic, "ks", consumer_type=shared, consumer_name="late")
    broker.run(clock.advance, 120)
    broker.call(broker.service.limits_monitor.expire_messages())
    assert _backlog(admin_url, topic, "ks") == 0
    for key in keys:
        producer.send(b"new", partition_key=key)
    # Keys whose hashes moved to the late consumer reach it, though the silent one never acked.
    got = late.receive(timeout_millis=10_000)
    assert got.data() == b"new"


def test_a_topic_message_ttl_wins_over_the_namespace_default(
    broker: BackgroundBroker, clock: ManualClock, admin_url: str, client: pulsar.Client, topic: str
) -> None:
    client.subscribe(topic, "never-acks").close()
    _fill(client, topic, 10).close()
    monitor = broker.service.limits_monitor
    broker.run(clock.advance, 30)
    assert topic not in broker.call(monitor.expire_messages())  # public/default: no TTL
    ttl = f"{admin_url}{_path(topic)}/messageTTL?messageTTL=20"
    json_type = {"Content-Type": "application/json"}  # the admin API refuses other POSTs
    assert httpx.post(ttl, headers=json_type).status_code == 204
    assert topic in broker.call(monitor.expire_messages())
    assert _backlog(admin_url, topic, "never-acks") == 0
