"""Braid's client reads the DAG of a migrated topic (ADR 0063): the old partitions are sealed
legacy roots reached through their ``persistent://`` topics, the new segments through their
``segment://`` names, and keys route by hash over the new segments only."""

from __future__ import annotations

from braid.client.dag import layout_from_dag
from braid.core.hashing import hash16
from braid.core.layout import SegmentLayout
from braid.core.routing import SegmentRouter
from braid.scalable.dag_watch import layout_to_dag

TOPIC = "topic://t/ns/orders"
PARTITIONS = [f"persistent://t/ns/orders-partition-{i}" for i in range(4)]


def test_the_client_routes_roots_to_the_partitions_and_keys_to_the_new_segments() -> None:
    dag = layout_to_dag(SegmentLayout.migrated(PARTITIONS, 2, 10), {4: "pulsar://b:1"}, None)
    layout = layout_from_dag(TOPIC, dag)

    for i, partition in enumerate(PARTITIONS):
        route = layout.route(i)
        assert (route.topic, route.legacy) == (partition, True)
        assert not layout.is_active(i)
    assert layout.route(4).topic == "segment://t/ns/orders/0000-7fff-4"
    assert layout.route(5).topic == "segment://t/ns/orders/8000-ffff-5"
    assert layout.active_ids == (4, 5) and not layout.all_legacy
    assert layout.dag.parents(5) == (0, 1, 2, 3)
    router = SegmentRouter(layout)
    for key in ("a", "customer-17", "order-1"):
        expected = 4 if hash16(key) <= 0x7FFF else 5
        assert router.route(key) == expected
