"""How the controller addresses a legacy root of a migrated topic (ADR 0063).

A legacy root is served by the ``persistent://`` partition it wraps, never by a ``segment://``
topic: a ``segment://`` name would name a topic that never exists, which the drain check reads as
*pruned, so drained* - skipping the partition's backlog. Across brokers the internal segments API
names segments only, so a legacy root on another broker is refused loudly.
"""

from __future__ import annotations

import pytest

from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.scalable.coordinator import segment_topic_name
from braid.scalable.segment_routing import _segment_path
from braid.scalable.segments import LegacyRootNotServed

TOPIC = TopicName.parse("topic://t/ns/orders")
LAYOUT = SegmentLayout.migrated(["persistent://t/ns/orders-partition-0"], 2)


def test_a_legacy_root_is_addressed_by_the_partition_it_wraps() -> None:
    name = segment_topic_name(TOPIC, LAYOUT.segment(0))
    assert name == TopicName.parse("persistent://t/ns/orders-partition-0")


def test_a_managed_segment_of_a_migrated_topic_keeps_its_segment_name() -> None:
    assert str(segment_topic_name(TOPIC, LAYOUT.segment(2))) == "segment://t/ns/orders/8000-ffff-2"


def test_a_legacy_root_on_another_broker_is_refused_by_the_internal_segments_api() -> None:
    assert _segment_path(segment_topic_name(TOPIC, LAYOUT.segment(2))).startswith(
        "/segments/t/ns/orders/"
    )
    with pytest.raises(LegacyRootNotServed, match="orders-partition-0 of a migrated topic"):
        _segment_path(segment_topic_name(TOPIC, LAYOUT.segment(0)))
