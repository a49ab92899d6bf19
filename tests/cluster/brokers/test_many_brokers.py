"""Issue 25, first slice: several ``braid broker`` processes on one ZooKeeper and three
``braid bookie`` processes (E=3, W=2, A=2), each a separate process.

* A broker refuses a store that ``braid initialize-cluster-metadata`` did not prepare.
* The official client produces to and consumes from topics of several bundles through *any*
  broker (LOOKUP redirects it to the owner); each topic is owned by exactly one broker (one
  ephemeral ownership node per bundle, every broker's HTTP lookup names the same owner), the
  bundles are spread over the brokers, and admin calls about a topic are redirected (307) to its
  owner. The brokers are listed and one leads.
* SIGKILL of the broker owning a topic under keyed load: another broker takes its bundle within
  the ZooKeeper session timeout plus :data:`TAKEOVER_BOUND_S`, and no acknowledged message is lost
  or reordered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.admin import AdminClient
from braid.cli.process import StandaloneStartError
from tests.support.broker_cluster import (
    CLUSTER,
    SESSION_TIMEOUT_S,
    Cluster,
    broker_settings,
    bundle_of,
    http_lookup,
)
from tests.support.broker_process import BrokerProcess
from tests.support.keyed_load import OfficialKeyedLoad, run_until
from tests.support.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

#: After the dead owner's session expires: the clients' reconnect back-off (the official client
#: doubles it from 100 ms) and the new owner's recovery of the topic's ledger.
TAKEOVER_BOUND_S = 30.0


def test_a_broker_refuses_a_store_no_cluster_was_initialized_in(
    tmp_path: Path, zk_url: str
) -> None:
    broker = BrokerProcess(tmp_path / "lonely", broker_settings(zk_url))
    with pytest.raises(StandaloneStartError) as refused:
        broker.start(timeout=60)
    errors = [line for line in str(refused.value).splitlines() if "level=ERROR" in line]
    assert len(errors) == 1, str(refused.value)
    assert "braid initialize-cluster-metadata --cluster c1" in errors[0]
    assert "Traceback" not in str(refused.value)


def test_any_broker_leads_clients_to_the_one_owner_of_each_topic(cluster: Cluster) -> None:
    cluster.start()
    brokers = cluster.brokers
    topics = [f"persistent://public/default/spread-{i}" for i in range(9)]
    assert len({bundle_of(t) for t in topics}) >= 4  # several bundles
    for i, topic in enumerate(topics):
        # Produce through one broker, consume through another: lookups redirect both.
        producer_client = pulsar.Client(brokers[i % 3].service_url, operation_timeout_seconds=30)
        consumer_client = pulsar.Client(
            brokers[(i + 1) % 3].service_url, operation_timeout_seconds=30
        )
        try:
            consumer = consumer_client.subscribe(
                topic, "s", initial_position=pulsar.InitialPosition.Earliest
            )
            producer = producer_client.create_producer(topic)
            for n in range(10):
                producer.send(f"{topic}-{n}".encode())
            got = []
            for _ in range(10):
                message = consumer.receive(timeout_millis=30_000)
                got.append(message.data().decode())
                consumer.acknowledge(message)
            assert got == [f"{topic}-{n}" for n in range(10)]
        finally:
            producer_client.close()
            consumer_client.close()

    # One owner per topic, the same from every broker's lookup, and exactly one lock per bundle.
    owners = {t: {http_lookup(b, t) for b in brokers} for t in topics}
    assert all(len(seen) == 1 for seen in owners.values()), owners
    nodes = cluster.ownership_nodes()
    for topic in topics:
        assert nodes[bundle_of(topic)].native_url == next(iter(owners[topic]))
    assert len({o.native_url for o in nodes.values()}) >= 2, nodes  # spread over brokers

    # Admin calls about a topic go to its owner (307), and a following client gets the answer.
    topic = topics[0]
    owner = cluster.by_url(next(iter(owners[topic])))
    other = next(b for b in brokers if b is not owner)
    stats_path = "/admin/v2/persistent/public/default/spread-0/stats"
    with httpx.Client(base_url=other.web_url, timeout=30) as http:
        moved = http.get(stats_path)
    assert moved.status_code == 307
    assert moved.headers["location"] == owner.web_url + stats_path
    with AdminClient(other.web_url) as admin:
        assert "s" in admin.topics.stats(topic)["subscriptions"]
        assert sorted(admin.brokers(CLUSTER)) == sorted(b.broker_id for b in brokers)
        assert admin.leader_broker()["brokerId"] in {b.broker_id for b in brokers}
        assert admin.broker_health() == "ok"
    cli = [sys.executable, "-m", "braid.cli.main", "admin", "--url", other.web_url]
    listed = subprocess.run(
        [*cli, "--output", "json", "brokers", "list"],
        capture_output=True,
        text=True,
        env=other.env,
        timeout=60,
        check=True,
    )
    assert sorted(json.loads(listed.stdout)) == sorted(b.broker_id for b in brokers)


def test_a_killed_owners_bundles_move_and_no_acknowledged_message_is_lost(
    cluster: Cluster,
) -> None:
    cluster.start()
    topic = "persistent://public/default/failover"
    load = OfficialKeyedLoad(cluster.service_url, topic).start()
    try:
        run_until(lambda: load.acked_count >= 300, 60, "300 receipts before the kill")
        owner = cluster.by_url(http_lookup(cluster.brokers[0], topic))
        before = load.acked_count
        owner.kill()
        gap = run_until(
            lambda: load.acked_count >= before + 300,
            SESSION_TIMEOUT_S + TAKEOVER_BOUND_S,
            "300 more receipts after the owner was killed",
        )
        print(f"receipts resumed {gap:.1f}s after the SIGKILL of the owner")
        live = [b for b in cluster.brokers if b is not owner]
        new_owner = http_lookup(live[0], topic)
        assert new_owner in {b.service_url for b in live}
        assert http_lookup(live[1], topic) == new_owner
        with AdminClient(live[0].web_url) as admin:
            wait_for(
                lambda: sorted(admin.brokers(CLUSTER)) == sorted(b.broker_id for b in live),
                within=SESSION_TIMEOUT_S + 10,
                message="the killed broker to leave the registry",
            )
        load.stop_producing()
        load.wait_delivered(60)
        report = load.report()
    finally:
        load.close()
    print(report.line())
    assert report.acknowledged > 600
    assert report.lost == 0, report.line()
    assert report.reordered == 0, f"{report.line()}: {report.order_problems}"


def test_a_partitioned_topics_partitions_spread_over_the_brokers(cluster: Cluster) -> None:
    """Creating a partitioned topic through one broker's admin API writes its partition count
    only: each partition is loaded by the owner of its bundle on first use, so the partitions
    spread over the brokers instead of all landing on the broker that took the call."""
    cluster.start()
    brokers = cluster.brokers
    topic = "persistent://public/default/spread-partitioned"
    partitions = [f"{topic}-partition-{i}" for i in range(8)]
    with AdminClient(brokers[0].web_url) as admin:
        admin.topics.create_partitioned(topic, 8)
    assert not {bundle_of(p) for p in partitions} & set(cluster.ownership_nodes())
    client = pulsar.Client(brokers[0].service_url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(
            topic,
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for n in range(32):
            producer.send(b"m-%d" % n)
        got = set()
        for _ in range(32):
            message = consumer.receive(timeout_millis=30_000)
            got.add(message.data())
            consumer.acknowledge(message)
        assert got == {b"m-%d" % n for n in range(32)}
    finally:
        client.close()
    owners = {p: http_lookup(brokers[1], p) for p in partitions}
    assert len(set(owners.values())) >= 2, owners
