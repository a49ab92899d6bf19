"""A scalable topic's backlog quota counts the whole DAG when its segments are spread over brokers
(issue 25, ADR 0045): three ``braid broker`` processes over three bookies on a real ZooKeeper.

A Stream subscription that never acknowledges, messages on every segment, then a
``producer_exception`` quota on the topic sized between the largest backlog any one broker holds
and the DAG's total: no broker is over it with its own segments alone, the topic is. Each
broker's periodic check adds the backlogs of the segments the others serve (asked over the
internal listener, cached for one check interval), so producers are refused on every segment -
and accepted again once the stream has caught up.
"""

from __future__ import annotations

from typing import Any

import pytest

import braid
from braid.admin import AdminClient
from tests.cluster.brokers.conftest import MakeCluster
from tests.support.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

TOPIC = "topic://public/default/quota-spread"
PAYLOAD = b"q" * 200


def _backlogs(web_url: str) -> dict[str, int]:
    """Each active segment's ``never-acks`` backlog bytes, by segment topic name (the stats of
    the controller, which asks each segment's owner)."""
    with AdminClient(web_url) as admin:
        stats: dict[str, Any] = admin.scalable_topics.stats(TOPIC)
    found = {}
    for segment in stats["segments"].values():
        subs = segment.get("topicStats", {}).get("subscriptions", {})
        found[segment["segmentTopic"]] = int(subs.get("never-acks", {}).get("backlogSize", 0))
    return found


def _refused(client: braid.Client, key: str) -> bool:
    try:
        producer = client.create_producer(TOPIC, batching=False)
        try:
            producer.send(b"probe", key=key)
        finally:
            producer.close()
    except braid.ProducerBlockedQuotaExceededException:
        return True
    return False


def test_a_scalable_topics_quota_counts_the_segments_every_broker_serves(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(extra={"backlogQuotaCheckIntervalInSeconds": "1"})
    cluster.start()
    web = cluster.brokers[0].web_url
    with AdminClient(web) as admin:
        admin.scalable_topics.create(TOPIC, segments=4)
    client = braid.Client(cluster.service_url, operation_timeout=30)
    try:
        stream = client.subscribe_stream(TOPIC, "never-acks", initial_position="earliest")
        producer = client.create_producer(TOPIC)
        keys = [f"k{i}" for i in range(64)]
        for _ in range(10):
            for key in keys:
                producer.send_async(PAYLOAD, key=key)
        producer.flush()
        wait_for(
            lambda: all(size > 0 for size in _backlogs(web).values()),
            within=60,
            message="a backlog on every segment",
        )
        backlogs = _backlogs(web)
        by_broker: dict[str, int] = {}
        for segment, size in backlogs.items():
            owner = cluster.owner_of(segment)
            assert owner is not None, segment
            by_broker[owner] = by_broker.get(owner, 0) + size
        total = sum(backlogs.values())
        assert len(by_broker) >= 2, by_broker  # the segments are spread
        limit = (max(by_broker.values()) + total) // 2
        assert max(by_broker.values()) < limit < total, (by_broker, total)
        print(f"backlog by broker {by_broker}, total {total}, quota {limit}")

        assert not _refused(client, keys[0])  # no quota yet
        with AdminClient(web) as admin:
            admin.backlog.set_backlog_quota(TOPIC, limit_size=limit, policy="producer_exception")
        wait_for(
            lambda: all(_refused(client, key) for key in keys[:16]),
            within=60,
            message="every segment's producers refused: the DAG is over its quota",
        )

        received = 0
        while received < 10 * len(keys):
            batch = stream.receive_many(200, timeout=30)
            assert batch, f"the stream stalled after {received} messages"
            stream.acknowledge_cumulative(batch[-1])
            received += len(batch)
        wait_for(
            lambda: not any(_refused(client, key) for key in keys[:16]),
            within=60,
            message="producers accepted again once the stream caught up",
        )
        producer.close()
        stream.close()
    finally:
        client.close()
