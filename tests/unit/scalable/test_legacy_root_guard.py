"""How the controller addresses a legacy root of a migrated topic (ADR 0063).

A legacy root is served by the ``persistent://`` partition it wraps, never by a ``segment://``
topic: a ``segment://`` name would name a topic that never exists, which the drain check reads as
*pruned, so drained* - skipping the partition's backlog. Across brokers the internal Segments API
addresses it by the partition's name (``.../{partition}/legacy``), and the callee reads that
path back as the partition.
"""

from __future__ import annotations

from braid.admin.internal import _segment
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.scalable.coordinator import segment_topic_name
from braid.scalable.segment_routing import _segment_path

TOPIC = TopicName.parse("topic://t/ns/orders")
LAYOUT = SegmentLayout.migrated(["persistent://t/ns/orders-partition-0"], 2)


def test_a_legacy_root_is_addressed_by_the_partition_it_wraps() -> None:
    name = segment_topic_name(TOPIC, LAYOUT.segment(0))
    assert name == TopicName.parse("persistent://t/ns/orders-partition-0")


def test_a_managed_segment_of_a_migrated_topic_keeps_its_segment_name() -> None:
    assert str(segment_topic_name(TOPIC, LAYOUT.segment(2))) == "segment://t/ns/orders/8000-ffff-2"


def test_the_internal_segments_api_addresses_a_legacy_root_by_its_partition() -> None:
    managed = segment_topic_name(TOPIC, LAYOUT.segment(2))
    assert _segment_path(managed) == "/segments/t/ns/orders/8000-ffff-2"
    root = segment_topic_name(TOPIC, LAYOUT.segment(0))
    path = _segment_path(root)
    assert path == "/segments/t/ns/orders-partition-0/legacy"
    tenant, namespace, topic, descriptor = path.split("/")[2:]
    assert _segment(tenant, namespace, topic, descriptor) == root
    assert _segment(*_segment_path(managed).split("/")[2:]) == managed
