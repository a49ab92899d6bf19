"""The controller refuses to address a legacy root of a migrated topic as a ``segment://`` topic.

Until the controller serves legacy roots (ADR 0063), every path from a segment to its topic name
goes through :func:`~braid.scalable.coordinator.segment_topic_name`; a legacy root there would
name a ``segment://`` topic that never exists, which the drain check reads as *pruned, so
drained* - skipping the partition's backlog. It must fail loudly instead.
"""

from __future__ import annotations

import pytest

from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.scalable.coordinator import LegacyRootNotServed, segment_topic_name

TOPIC = TopicName.parse("topic://t/ns/orders")


def test_a_legacy_root_is_refused_naming_its_classic_topic() -> None:
    layout = SegmentLayout.migrated(["persistent://t/ns/orders-partition-0"], 2)
    with pytest.raises(
        LegacyRootNotServed,
        match="segment 0 of topic://t/ns/orders is the legacy topic persistent://t/ns/orders-p",
    ):
        segment_topic_name(TOPIC, layout.segment(0))


def test_a_managed_segment_of_a_migrated_topic_keeps_its_segment_name() -> None:
    layout = SegmentLayout.migrated(["persistent://t/ns/orders-partition-0"], 2)
    assert str(segment_topic_name(TOPIC, layout.segment(2))) == "segment://t/ns/orders/8000-ffff-2"
