"""Non-persistent topics across three ``braid broker`` processes (ADR 0062): a non-persistent
topic lives on the one broker owning its bundle, so a producer connected through one broker and
a consumer connected through another meet there (LOOKUP redirects both), and its stats on
Pulsar's REST path are redirected (307) to that owner."""

from __future__ import annotations

import httpx
import pulsar
import pytest

from braid.core.names import TopicName
from tests.support.broker_cluster import Cluster, bundle_of

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def _lookup(web_url: str, topic: str) -> str:
    name = TopicName.parse(topic)
    path = f"/lookup/v2/topic/non-persistent/{name.tenant}/{name.namespace}/{name.local_name}"
    with httpx.Client(base_url=web_url, follow_redirects=True, timeout=30) as http:
        response = http.get(path)
    response.raise_for_status()
    return str(response.json()["brokerUrl"])


def test_producer_and_consumer_on_different_brokers_meet_at_the_owner(cluster: Cluster) -> None:
    cluster.start()
    brokers = cluster.brokers
    topics = [f"non-persistent://public/default/np-spread-{i}" for i in range(6)]
    assert len({bundle_of(t) for t in topics}) >= 3  # several bundles
    for i, topic in enumerate(topics):
        producer_client = pulsar.Client(brokers[i % 3].service_url, operation_timeout_seconds=30)
        consumer_client = pulsar.Client(
            brokers[(i + 1) % 3].service_url, operation_timeout_seconds=30
        )
        try:
            consumer = consumer_client.subscribe(topic, "s")
            producer = producer_client.create_producer(topic, batching_enabled=False)
            for n in range(10):
                producer.send(f"{topic}-{n}".encode())
            got = [consumer.receive(timeout_millis=30_000).data().decode() for _ in range(10)]
            assert got == [f"{topic}-{n}" for n in range(10)]
        finally:
            producer_client.close()
            consumer_client.close()

    # Every broker's lookup names the one owner of the topic's bundle.
    nodes = cluster.ownership_nodes()
    for topic in topics:
        seen = {_lookup(b.web_url, topic) for b in brokers}
        assert seen == {nodes[bundle_of(topic)].native_url}, (topic, seen)

    # The stats are the owner's: another broker redirects to it.
    topic = topics[0]
    owner = cluster.by_url(nodes[bundle_of(topic)].native_url)
    other = next(b for b in brokers if b is not owner)
    path = "/admin/v2/non-persistent/public/default/np-spread-0/stats"
    with httpx.Client(base_url=other.web_url, timeout=30) as http:
        moved = http.get(path)
    assert moved.status_code == 307
    assert moved.headers["location"] == owner.web_url + path
    with httpx.Client(base_url=owner.web_url, timeout=30) as http:
        stats = http.get(path).json()
    assert stats["msgInCounter"] == 10 and stats["msgOutCounter"] == 10
