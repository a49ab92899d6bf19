"""A migrated layout's defaults and carried fields, the exact refusal texts of bad classic
topic names, and the legacy-segment rules of a single SegmentInfo (ADR 0063)."""

from __future__ import annotations

import re

import pytest

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.segment_info import FULL_RING, CorruptLayout, SegmentInfo, SegmentState

TOPIC = "persistent://t/ns/orders"


def test_a_migration_without_a_clock_or_bucket_count_stamps_zero_and_one_bucket() -> None:
    layout = SegmentLayout.migrated([TOPIC], 2)
    assert [s.created_at_ms for s in layout.segments.values()] == [0, 0, 0]
    assert layout.entry_buckets == 1
    assert layout.properties == {}


def test_a_migration_keeps_its_clock_properties_and_entry_buckets() -> None:
    layout = SegmentLayout.migrated(
        [TOPIC], 2, now_ms=1234, properties={"owner": "billing"}, entry_buckets=4
    )
    root = layout.segments[0]
    assert (root.created_at_ms, root.sealed_at_ms) == (1234, 1234)
    assert all(s.created_at_ms == 1234 for s in layout.active_segments)
    assert layout.properties == {"owner": "billing"}
    assert layout.entry_buckets == 4


def test_replacing_properties_or_the_policy_keeps_the_entry_bucket_count() -> None:
    layout = SegmentLayout.initial(2, entry_buckets=4)
    assert layout.with_properties({"a": "b"}).entry_buckets == 4
    assert layout.with_auto_scale_policy(None).entry_buckets == 4


def test_a_migration_of_no_topic_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"^a migration needs at least one classic topic$"):
        SegmentLayout.migrated([], 2)


@pytest.mark.parametrize(
    "topic",
    [
        "t/ns/orders",  # a short form of a persistent topic: not canonical
        "orders",
        "topic://t/ns/orders",  # canonical, but not a classic persistent topic
        "non-persistent://t/ns/orders",
        5,
        None,
    ],
)
def test_a_topic_that_is_not_a_canonical_persistent_name_is_refused_naming_it(
    topic: object,
) -> None:
    expected = f"{topic!r} is not a canonical persistent:// topic name"
    with pytest.raises(InvalidInputError, match=f"^{re.escape(expected)}$"):
        SegmentLayout.migrated([TOPIC + "-partition-0", topic], 2)  # type: ignore[list-item]


def _legacy(name: object, parents: tuple[int, ...] = ()) -> SegmentInfo:
    return SegmentInfo(
        segment_id=3,
        hash_range=FULL_RING,
        state=SegmentState.SEALED,
        parent_ids=parents,
        child_ids=(),
        created_at_epoch=0,
        sealed_at_epoch=1,
        legacy_topic_name=name,  # type: ignore[arg-type]
    )


def test_a_legacy_name_that_is_not_a_string_is_refused_naming_it() -> None:
    with pytest.raises(
        CorruptLayout, match=r"^segment 3: legacyTopicName must be a string, got 5$"
    ):
        _legacy(5)


def test_a_legacy_name_that_does_not_parse_is_refused_with_the_parse_error() -> None:
    with pytest.raises(
        CorruptLayout, match=r"^segment 3: legacyTopicName 'persistent://t/ns': invalid topic name"
    ):
        _legacy("persistent://t/ns")


def test_a_legacy_segment_with_parents_is_refused_as_not_a_root() -> None:
    expected = (
        f"segment 3: legacy segment of {TOPIC} has parents [1, 2] "
        "(a legacy segment is a root of the DAG)"
    )
    with pytest.raises(CorruptLayout, match=f"^{re.escape(expected)}$"):
        _legacy(TOPIC, (1, 2))


def test_a_legacy_root_is_stamped_with_the_clock_it_is_given() -> None:
    root = SegmentInfo.legacy_root(0, TOPIC, 1, (1, 2), now_ms=987)
    assert (root.created_at_ms, root.sealed_at_ms) == (987, 987)
    assert (root.created_at_epoch, root.sealed_at_epoch, root.child_ids) == (0, 1, (1, 2))
