"""Issue 33 on ``braid broker`` (ADR 0063): a partitioned topic whose partitions are owned by
several brokers migrates to a scalable topic.

Three ``braid broker`` processes over three ``braid bookie`` processes on a real ZooKeeper. The
official client writes a keyed backlog to an 8-partition topic and reads part of it; the
migration, asked through one broker, terminates every partition on its owner (the internal
Segments API addresses a legacy root by its partition) and publishes the layout. Braid's client
then writes to the new name and reads the whole rest with a Stream subscription: each partition's
drain reaches the controller leader even when another broker owns the partition (the drain relay
names the partition), so the new segments are handed out after every old message, and each key
runs in order from the partitions into the segments. The official producer gets
``TopicTerminated``.
"""

from __future__ import annotations

import contextlib

import httpx
import pulsar
import pytest

import braid
from tests.support.broker_cluster import Cluster
from tests.support.keyed_order import assert_each_key_in_order, drain_braid, payload, take_official

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

SOURCE = "persistent://public/default/orders"
TARGET = "topic://public/default/orders"
MIGRATE = "/admin/v2/persistent/public/default/orders/migrateToScalable"
PARTITIONS = 8
KEYS = [f"key-{i}" for i in range(12)]
OLD, NEW = 8, 4


def test_partitions_owned_by_several_brokers_migrate_and_are_read_in_order(
    cluster: Cluster,
) -> None:
    cluster.start()
    first, second = cluster.brokers[0], cluster.brokers[1]
    with httpx.Client(base_url=first.web_url, timeout=60, follow_redirects=True) as http:
        put = http.put("/admin/v2/persistent/public/default/orders/partitions", json=PARTITIONS)
        assert put.status_code == 204, put.text

    official = pulsar.Client(cluster.service_url, operation_timeout_seconds=30)
    try:
        ordered = official.subscribe(
            SOURCE,
            "ordered",
            consumer_type=pulsar.ConsumerType.Failover,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = official.create_producer(SOURCE, batching_enabled=False)
        for seq in range(OLD):
            for key in KEYS:
                producer.send(payload(key, seq), partition_key=key)
        read = take_official(ordered, 30)
        ordered.close()
        owners = {cluster.owner_of(f"{SOURCE}-partition-{i}") for i in range(PARTITIONS)}
        assert None not in owners and len(owners) >= 2, owners

        with httpx.Client(base_url=second.web_url, timeout=120, follow_redirects=True) as http:
            done = http.post(MIGRATE, json={"segments": 3})
            assert done.status_code == 200, done.text
            status = done.json()
        assert status["phase"] == "DONE", status
        assert status["partitionsTerminated"] == PARTITIONS
        with pytest.raises(pulsar.TopicTerminated):
            producer.send(payload("late", 0), partition_key=KEYS[0])
    finally:
        with contextlib.suppress(pulsar.AlreadyClosed):  # its producers were terminated
            official.close()

    with braid.Client(cluster.service_url, operation_timeout=60) as client:
        new_producer = client.create_producer(TARGET)
        for seq in range(OLD, OLD + NEW):
            for key in KEYS:
                new_producer.send(payload(key, seq), key=key)
        stream = client.subscribe_stream(TARGET, "ordered")
        expected = {payload(k, s) for k in KEYS for s in range(OLD + NEW)} - read
        got = drain_braid(stream, len(expected), within=240)
        leader = cluster.controller_leader(TARGET)  # started by the first lookup
    assert leader is not None
    assert owners - {leader}, "every partition is on the leader's broker: nothing remote"
    assert len(got) == len(set(got)) and set(got) == expected
    assert_each_key_in_order(got)
