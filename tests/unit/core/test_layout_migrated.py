"""The layout of a partitioned topic migrated to a scalable topic (ADR 0063).

Pins the shape :meth:`SegmentLayout.migrated` builds (partitions as sealed legacy roots over the
whole ring, every new segment a child of every partition), the invariants a loaded or computed
layout must keep about legacy segments (each violation names the offending segment), the JSON and
wire forms, and - by property - that after any later splits, merges and prunes every key's owner
still descends from every partition left, so a key's old messages are read before its new ones.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.hashing import hash16
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import decode_layout, encode_layout, layout_to_metadata
from braid.core.ranges import MAX_HASH, HashRange
from braid.core.segment_info import FULL_RING, CorruptLayout, SegmentInfo, SegmentState
from braid.protocol.dag import ScalableTopicDag

TOPIC = "persistent://t/ns/orders"


def partitions(n: int) -> list[str]:
    return [f"{TOPIC}-partition-{i}" for i in range(n)]


def test_a_four_partition_topic_migrates_to_sealed_roots_and_two_children_of_all_of_them() -> None:
    layout = SegmentLayout.migrated(partitions(4), 2, now_ms=1234)

    assert layout.epoch == 1
    assert layout.next_segment_id == 6
    roots = layout.legacy_segments
    assert [s.segment_id for s in roots] == [0, 1, 2, 3]
    for i, root in enumerate(roots):
        assert root.legacy_topic_name == f"{TOPIC}-partition-{i}"
        assert root.state is SegmentState.SEALED
        assert root.hash_range == HashRange(0, MAX_HASH)
        assert root.parent_ids == ()
        assert root.child_ids == (4, 5)
        assert (root.created_at_epoch, root.sealed_at_epoch) == (0, 1)
        assert root.sealed_at_ms == 1234
    low, high = layout.active_segments
    assert (low.segment_id, low.hash_range) == (4, HashRange(0, 0x7FFF))
    assert (high.segment_id, high.hash_range) == (5, HashRange(0x8000, MAX_HASH))
    for child in (low, high):
        assert child.parent_ids == (0, 1, 2, 3)
        assert child.created_at_epoch == 1
        assert child.legacy_topic_name is None


def test_a_non_partitioned_topic_migrates_to_one_root_wrapping_the_topic_itself() -> None:
    layout = SegmentLayout.migrated([TOPIC], 3)
    assert [s.legacy_topic_name for s in layout.legacy_segments] == [TOPIC]
    assert [s.segment_id for s in layout.active_segments] == [1, 2, 3]
    assert all(s.parent_ids == (0,) for s in layout.active_segments)


def test_every_key_of_a_migrated_topic_descends_from_every_partition() -> None:
    layout = SegmentLayout.migrated(partitions(4), 3)
    for key in ("a", "customer-17", "order-1", "ключ", ""):
        owner = layout.find_active_segment(hash16(key))
        assert layout.ancestors(owner.segment_id) == frozenset({0, 1, 2, 3})


@pytest.mark.parametrize(
    ("topics", "segments", "message"),
    [
        ([], 2, "at least one classic topic"),
        (["topic://t/ns/orders"], 2, "not a canonical persistent://"),
        (["orders"], 2, "not a canonical persistent://"),
        ([f"{TOPIC}-partition-0", f"{TOPIC}-partition-0"], 2, "listed twice"),
        (partitions(2), 0, "between 1 and 65536"),
    ],
)
def test_a_migration_with_bad_input_is_refused_with_a_clear_error(
    topics: list[str], segments: int, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        SegmentLayout.migrated(topics, segments)


def _doc(layout: SegmentLayout) -> dict[str, Any]:
    return json.loads(encode_layout(layout))


def test_the_json_document_names_each_root_s_classic_topic_and_round_trips() -> None:
    layout = SegmentLayout.migrated(partitions(2), 2, now_ms=7)
    doc = _doc(layout)
    assert doc["segments"]["0"]["legacyTopicName"] == f"{TOPIC}-partition-0"
    assert doc["segments"]["1"]["legacyTopicName"] == f"{TOPIC}-partition-1"
    assert "legacyTopicName" not in doc["segments"]["2"]
    assert decode_layout(encode_layout(layout)) == layout


def test_a_layout_without_legacy_segments_writes_no_legacy_field() -> None:
    doc = layout_to_metadata(SegmentLayout.initial(2))
    assert all("legacyTopicName" not in seg for seg in doc["segments"].values())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["segments"]["0"].__setitem__("legacyTopicName", 5),
            "segment 0: legacyTopicName must be a string",
        ),
        (
            lambda d: d["segments"]["1"].__setitem__("legacyTopicName", "topic://t/ns/orders"),
            "segment 1: legacyTopicName 'topic://t/ns/orders' is not a canonical persistent",
        ),
        (
            lambda d: d["segments"]["1"].__setitem__("legacyTopicName", "t/ns/orders"),
            "segment 1: legacyTopicName 't/ns/orders' is not a canonical persistent",
        ),
        (
            lambda d: d["segments"]["1"].__setitem__("legacyTopicName", f"{TOPIC}-partition-0"),
            "segments 0 and 1 both wrap the legacy topic",
        ),
        (
            lambda d: d["segments"]["0"].__setitem__("hashRange", {"start": 0, "end": 0x7FFF}),
            r"segment 0: legacy segment of .* covers \[0000, 7fff\], not the whole ring",
        ),
    ],
)
def test_a_loaded_document_breaking_a_legacy_rule_names_the_segment(
    edit: Any, message: str
) -> None:
    doc = _doc(SegmentLayout.migrated(partitions(2), 2))
    edit(doc)
    with pytest.raises(CorruptLayout, match=message):
        decode_layout(json.dumps(doc))


def test_a_legacy_segment_with_a_parent_is_refused() -> None:
    with pytest.raises(CorruptLayout, match=r"segment 3: legacy segment of .* has parents"):
        SegmentInfo(
            segment_id=3,
            hash_range=FULL_RING,
            state=SegmentState.ACTIVE,
            parent_ids=(1,),
            child_ids=(),
            created_at_epoch=1,
            sealed_at_epoch=0,
            legacy_topic_name=TOPIC,
        )


def test_a_child_missing_one_partition_as_parent_is_refused_naming_it() -> None:
    layout = SegmentLayout.migrated(partitions(3), 2)
    segments = dict(layout.segments)
    # Segment 4 forgets partition 2: keys of segment 4 in partition 2 could be read late.
    segments[4] = replace(segments[4], parent_ids=(0, 1))
    segments[2] = replace(segments[2], child_ids=(3,))
    with pytest.raises(
        CorruptLayout, match=r"segment 4 is a child of legacy segment 0 but has parents \[0, 1\]"
    ):
        SegmentLayout(layout.epoch, layout.next_segment_id, segments)
    # Both children forget partition 2, which is left without children.
    segments[3] = replace(segments[3], parent_ids=(0, 1))
    segments[2] = replace(segments[2], child_ids=())
    with pytest.raises(CorruptLayout, match=r"segment 3 is a child of legacy segment 0"):
        SegmentLayout(layout.epoch, layout.next_segment_id, segments)


def test_a_child_of_the_partitions_with_a_managed_parent_too_is_refused() -> None:
    base = SegmentLayout.migrated(partitions(2), 1)  # roots 0, 1; active 2 (whole ring)
    # Hand-build: a managed sealed segment 3 also parent of a new child would break the rule.
    segments = dict(base.segments)
    segments[2] = replace(segments[2], parent_ids=(0, 1, 3))
    segments[3] = SegmentInfo(
        segment_id=3,
        hash_range=FULL_RING,
        state=SegmentState.SEALED,
        parent_ids=(),
        child_ids=(2,),
        created_at_epoch=0,
        sealed_at_epoch=1,
    )
    with pytest.raises(CorruptLayout, match=r"segment 2 is a child of legacy segment 0 but has "):
        SegmentLayout(1, 4, segments)


def test_the_wire_dag_names_each_root_s_classic_topic() -> None:
    layout = SegmentLayout.migrated(partitions(2), 2)
    dag = ScalableTopicDag.of_layout(layout)
    legacy = {s.info.segment_id: s.legacy_topic_name for s in dag.segments}
    assert legacy == {0: f"{TOPIC}-partition-0", 1: f"{TOPIC}-partition-1", 2: None, 3: None}
    proto = dag.to_proto()
    assert {s.segment_id: s.legacy_topic_name for s in proto.segments} == {
        0: f"{TOPIC}-partition-0",
        1: f"{TOPIC}-partition-1",
        2: "",
        3: "",
    }


def _random_step(layout: SegmentLayout, rng: random.Random, now_ms: int) -> SegmentLayout:
    active = layout.active_segments
    choice = rng.choice(["split", "merge", "prune"])
    if choice == "merge" and len(active) >= 2:
        first = rng.randint(0, len(active) - 2)
        return layout.merge_segments([s.segment_id for s in active[first : first + 2]], now_ms)
    # Prune from the roots down, as the garbage collector does.
    roots = [s for s in layout.sealed_segments if not s.parent_ids]
    if choice == "prune" and roots:
        return layout.prune_segment(rng.choice(roots).segment_id)
    splittable = [s for s in active if s.hash_range.size >= 2]
    return layout.split_segment(rng.choice(splittable).segment_id, now_ms)


@settings(max_examples=120, deadline=None)
@given(
    partition_count=st.integers(1, 6),
    segment_count=st.integers(1, 5),
    rng=st.randoms(use_true_random=False),
    steps=st.integers(0, 12),
    probes=st.lists(st.integers(0, MAX_HASH), min_size=1, max_size=6),
)
def test_after_any_splits_merges_and_prunes_every_key_still_descends_from_every_partition_left(
    partition_count: int,
    segment_count: int,
    rng: random.Random,
    steps: int,
    probes: list[int],
) -> None:
    layout = SegmentLayout.migrated(partitions(partition_count), segment_count, now_ms=1)
    for step in range(steps):
        after = _random_step(layout, rng, now_ms=2 + step)
        assert after.epoch == layout.epoch + 1
        layout = after
        remaining_roots = {s.segment_id for s in layout.legacy_segments}
        for probe in probes:
            owner = layout.find_active_segment(probe)
            assert remaining_roots <= layout.ancestors(owner.segment_id) | {owner.segment_id}
        assert decode_layout(encode_layout(layout)) == layout
    for root in layout.legacy_segments:
        assert root.hash_range == FULL_RING and root.parent_ids == ()
