"""SegmentLayout and SegmentInfo: initial layouts, routing, split/merge/prune, queries, codec."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from braid.core.errors import IllegalStateError, InvalidInputError, NotFoundError
from braid.core.layout import (
    InvalidLayoutOperation,
    InvalidSplitHash,
    SegmentLayout,
    SegmentNotFound,
)
from braid.core.layout_codec import (
    decode_layout,
    encode_layout,
    layout_from_metadata,
    layout_to_metadata,
)
from braid.core.ranges import HashRange
from braid.core.segment_info import CorruptLayout, SegmentInfo, SegmentState

# PIP-468 "Metadata Store Schema", the example document verbatim.
PIP_468_EXAMPLE = """
{
  "epoch": 3,
  "nextSegmentId": 5,
  "segments": {
    "0": { "segmentId": 0, "hashRange": {"start": 0, "end": 65535}, "state": "SEALED", "parentIds": [], "childIds": [1, 2], "createdAtEpoch": 0, "sealedAtEpoch": 1 },
    "1": { "segmentId": 1, "hashRange": {"start": 0, "end": 32767}, "state": "SEALED", "parentIds": [0], "childIds": [3, 4], "createdAtEpoch": 1, "sealedAtEpoch": 3 },
    "2": { "segmentId": 2, "hashRange": {"start": 32768, "end": 65535}, "state": "ACTIVE", "parentIds": [0], "childIds": [], "createdAtEpoch": 1, "sealedAtEpoch": 0 },
    "3": { "segmentId": 3, "hashRange": {"start": 0, "end": 16383}, "state": "ACTIVE", "parentIds": [1], "childIds": [], "createdAtEpoch": 3, "sealedAtEpoch": 0 },
    "4": { "segmentId": 4, "hashRange": {"start": 16384, "end": 32767}, "state": "ACTIVE", "parentIds": [1], "childIds": [], "createdAtEpoch": 3, "sealedAtEpoch": 0 }
  },
  "properties": {}
}
"""  # noqa: E501


def ranges_of(layout: SegmentLayout) -> list[str]:
    return [s.hash_range.to_hex() for s in layout.active_segments]


def ids_of(segments: list[SegmentInfo]) -> list[int]:
    return [s.segment_id for s in segments]


# ------------------------------------------------------------------------------- initial layouts


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, ["0000-ffff"]),
        (2, ["0000-7fff", "8000-ffff"]),
        (4, ["0000-3fff", "4000-7fff", "8000-bfff", "c000-ffff"]),
        (3, ["0000-5554", "5555-aaa9", "aaaa-ffff"]),  # the last takes the remainder
    ],
)
def test_initial_layout_tiles_the_ring(n: int, expected: list[str]) -> None:
    layout = SegmentLayout.initial(n)
    assert layout.epoch == 0
    assert layout.next_segment_id == n
    assert ranges_of(layout) == expected
    assert ids_of(layout.active_segments) == list(range(n))
    assert layout.sealed_segments == []
    for info in layout.active_segments:
        assert info.is_active
        assert info.parent_ids == () and info.child_ids == ()
        assert info.created_at_epoch == 0 and info.sealed_at_epoch == 0


def test_initial_layout_with_one_segment_per_hash() -> None:
    layout = SegmentLayout.initial(65536, now_ms=5)
    assert len(layout.active_segments) == 65536
    assert layout.find_active_segment(0xFFFF).segment_id == 0xFFFF
    assert layout.segment(7).created_at_ms == 5


@pytest.mark.parametrize("n", [0, -1, 65537, True, 2.0])
def test_initial_layout_rejects_a_bad_segment_count(n: Any) -> None:
    with pytest.raises(InvalidInputError, match="between 1 and 65536"):
        SegmentLayout.initial(n)


def test_initial_layout_keeps_properties() -> None:
    layout = SegmentLayout.initial(2, properties={"key": "value"})
    assert dict(layout.properties) == {"key": "value"}


def test_find_active_segment_routes_a_hash_to_its_owner() -> None:
    layout = SegmentLayout.initial(2)
    assert layout.find_active_segment(0x1000).segment_id == 0
    assert layout.find_active_segment(0x9000).segment_id == 1
    assert layout.find_active_segment(0x7FFF).segment_id == 0
    assert layout.find_active_segment(0x8000).segment_id == 1
    assert layout.find_active_segment(0).segment_id == 0
    assert layout.find_active_segment(0xFFFF).segment_id == 1


@pytest.mark.parametrize("bad", [-1, 0x10000, True, "1"])
def test_find_active_segment_rejects_a_value_off_the_ring(bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="not a ring position"):
        SegmentLayout.initial(1).find_active_segment(bad)


def test_segment_lookup_of_an_unknown_id_raises_not_found() -> None:
    layout = SegmentLayout.initial(2)
    with pytest.raises(SegmentNotFound, match="segment 9 is not in the layout"):
        layout.segment(9)
    assert issubclass(SegmentNotFound, NotFoundError)


# ------------------------------------------------------------------------------- split


def test_split_of_the_full_range_gives_two_halves() -> None:
    layout = SegmentLayout.initial(1).split_segment(0, now_ms=10)
    assert ranges_of(layout) == ["0000-7fff", "8000-ffff"]
    assert ids_of(layout.active_segments) == [1, 2]


def test_split_of_segment_0_of_a_two_segment_layout() -> None:
    layout = SegmentLayout.initial(2, now_ms=100)
    after = layout.split_segment(0, now_ms=250)

    assert after.epoch == 1
    assert len(after.active_segments) == 3
    assert len(after.segments) == 4
    parent = after.segment(0)
    assert parent.state is SegmentState.SEALED
    assert parent.child_ids == (2, 3)
    assert (parent.sealed_at_epoch, parent.sealed_at_ms) == (1, 250)
    assert parent.created_at_ms == 100
    low, high = after.segment(2), after.segment(3)
    assert (low.hash_range, high.hash_range) == (HashRange(0, 0x3FFF), HashRange(0x4000, 0x7FFF))
    for child in (low, high):
        assert child.is_active
        assert child.parent_ids == (0,)
        assert (child.created_at_epoch, child.created_at_ms) == (1, 250)
    assert ids_of(after.active_segments) == [2, 3, 1]  # sorted by range start
    assert ids_of(after.sealed_segments) == [0]


def test_next_segment_id_grows_by_two_per_split() -> None:
    layout = SegmentLayout.initial(2)
    assert layout.next_segment_id == 2
    first = layout.split_segment(0)
    assert first.next_segment_id == 4
    assert first.split_segment(1).next_segment_id == 6


def test_splitting_a_sealed_segment_fails() -> None:
    after = SegmentLayout.initial(2).split_segment(0)
    with pytest.raises(InvalidLayoutOperation, match="cannot split segment 0: it is sealed"):
        after.split_segment(0)
    assert issubclass(InvalidLayoutOperation, IllegalStateError)


def test_splitting_an_unknown_segment_fails_with_not_found() -> None:
    with pytest.raises(SegmentNotFound):
        SegmentLayout.initial(2).split_segment(5)


def test_a_one_hash_segment_cannot_split() -> None:
    layout = SegmentLayout.initial(1)
    for _ in range(16):  # keep splitting the lowest segment down to [0000, 0000]
        layout = layout.split_segment(layout.find_active_segment(0).segment_id)
    lowest = layout.find_active_segment(0)
    assert lowest.hash_range == HashRange(0, 0)
    with pytest.raises(InvalidLayoutOperation, match="one hash wide"):
        layout.split_segment(lowest.segment_id)


@pytest.mark.parametrize("now_ms", [-1, True, 1.5])
def test_mutations_reject_a_bad_timestamp(now_ms: Any) -> None:
    with pytest.raises(InvalidInputError, match="now_ms"):
        SegmentLayout.initial(2).split_segment(0, now_ms)


# ------------------------------------------------------------------------------- merge


def test_split_then_merge_gives_epoch_2_and_a_child_with_both_parents() -> None:
    after_split = SegmentLayout.initial(2).split_segment(0, now_ms=10)
    after_merge = after_split.merge_segments([2, 3], now_ms=20)

    assert after_merge.epoch == 2
    assert len(after_merge.active_segments) == 2
    merged = after_merge.segment(4)
    assert merged.is_active
    assert merged.hash_range == HashRange(0, 0x7FFF)
    assert merged.parent_ids == (2, 3)
    assert (merged.created_at_epoch, merged.created_at_ms) == (2, 20)
    for pid in (2, 3):
        parent = after_merge.segment(pid)
        assert parent.state is SegmentState.SEALED
        assert parent.child_ids == (4,)
        assert (parent.sealed_at_epoch, parent.sealed_at_ms) == (2, 20)
    assert after_merge.next_segment_id == 5


def test_merge_accepts_the_ids_in_any_order_and_sorts_the_parents() -> None:
    after_split = SegmentLayout.initial(2).split_segment(0)
    assert after_split.merge_segments([3, 2]) == after_split.merge_segments([2, 3])
    assert after_split.merge_segments((3, 2)).segment(4).parent_ids == (2, 3)


def test_merge_of_three_adjacent_segments_at_once() -> None:
    layout = SegmentLayout.initial(4).merge_segments([2, 0, 1], now_ms=7)
    merged = layout.segment(4)
    assert merged.hash_range == HashRange(0, 0xBFFF)
    assert merged.parent_ids == (0, 1, 2)
    assert ids_of(layout.active_segments) == [4, 3]
    assert layout.epoch == 1


def test_merging_non_adjacent_segments_fails() -> None:
    layout = SegmentLayout.initial(4)
    with pytest.raises(InvalidLayoutOperation, match="not adjacent"):
        layout.merge_segments([0, 2])
    with pytest.raises(InvalidLayoutOperation, match="not adjacent"):
        layout.merge_segments([0, 1, 3])


def test_merging_a_single_segment_fails() -> None:
    with pytest.raises(InvalidLayoutOperation, match="at least two"):
        SegmentLayout.initial(2).merge_segments([0])


def test_merging_the_same_segment_twice_fails() -> None:
    with pytest.raises(InvalidLayoutOperation, match="twice"):
        SegmentLayout.initial(2).merge_segments([0, 0])


def test_merging_a_sealed_segment_fails() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)
    with pytest.raises(InvalidLayoutOperation, match=r"\[0\] already sealed"):
        layout.merge_segments([0, 1])


def test_merging_an_unknown_segment_fails_with_not_found() -> None:
    with pytest.raises(SegmentNotFound):
        SegmentLayout.initial(2).merge_segments([1, 8])


# ------------------------------------------------------------------------------- prune


def test_prune_removes_a_sealed_segment_and_clears_it_from_its_children() -> None:
    after_split = SegmentLayout.initial(2).split_segment(0)
    pruned = after_split.prune_segment(0)
    assert 0 not in pruned.segments
    assert pruned.segment(2).parent_ids == ()
    assert pruned.segment(3).parent_ids == ()
    assert pruned.epoch == 2
    assert pruned.next_segment_id == after_split.next_segment_id


def test_prune_of_a_middle_segment_clears_it_from_its_parents_too() -> None:
    layout = SegmentLayout.initial(1).split_segment(0).split_segment(1)  # 0 -> 1 -> (3, 4)
    pruned = layout.prune_segment(1)
    assert pruned.segment(0).child_ids == (2,)
    assert pruned.segment(3).parent_ids == ()
    assert pruned.segment(4).parent_ids == ()


def test_pruning_an_active_segment_fails() -> None:
    with pytest.raises(InvalidLayoutOperation, match="still active"):
        SegmentLayout.initial(2).prune_segment(0)


def test_pruning_an_unknown_segment_fails_with_not_found() -> None:
    with pytest.raises(SegmentNotFound):
        SegmentLayout.initial(2).prune_segment(2)


# ------------------------------------------------------------------------------- DAG queries


def test_children_and_parents() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)
    assert layout.children(0) == (1, 2)
    assert layout.parents(1) == (0,)
    assert layout.parents(0) == ()
    assert layout.children(1) == ()


def test_lineage_is_ancestors_self_and_descendants() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)
    assert layout.lineage(0) == {0, 1, 2}
    deeper = layout.split_segment(1).merge_segments([4, 2])  # 0 -> 1 -> 3,4 ; 4 + 2 -> 5
    assert deeper.ancestors(5) == {0, 1, 2, 4}
    assert deeper.descendants(0) == {1, 2, 3, 4, 5}
    assert deeper.descendants(1) == {3, 4, 5}
    assert deeper.lineage(4) == {0, 1, 4, 5}
    assert deeper.lineage(3) == {0, 1, 3}


def test_dag_queries_on_an_unknown_segment_raise_not_found() -> None:
    layout = SegmentLayout.initial(1)
    for query in (layout.parents, layout.children, layout.ancestors, layout.lineage):
        with pytest.raises(SegmentNotFound):
            query(3)


def test_merge_depth_counts_merges_only() -> None:
    layout = SegmentLayout.initial(2)
    assert layout.merge_depth(0) == 0
    layout = layout.split_segment(0)  # 0 -> 2, 3
    assert layout.merge_depth(2) == 0  # splits never count
    layout = layout.merge_segments([2, 3])  # -> 4
    assert layout.merge_depth(4) == 1
    layout = layout.split_segment(4)  # 4 -> 5, 6
    assert layout.merge_depth(5) == 1  # inherited, the split adds nothing
    layout = layout.merge_segments([5, 6])  # -> 7
    assert layout.merge_depth(7) == 2
    layout = layout.merge_segments([7, 1])  # a merged segment with a never-merged one -> 8
    assert layout.merge_depth(8) == 3
    assert layout.merge_depth(1) == 0


def test_merge_depth_follows_the_deepest_path() -> None:
    layout = SegmentLayout.initial(2)
    layout = layout.split_segment(0).merge_segments([2, 3])  # 4 has depth 1
    layout = layout.split_segment(1)  # 1 -> 5, 6 (depth 0)
    layout = layout.merge_segments([4, 5])  # -> 7: max(1, 0) + 1
    assert layout.merge_depth(7) == 2


# ------------------------------------------------------------------------------- immutability


def test_mutations_never_change_the_original() -> None:
    layout = SegmentLayout.initial(2, properties={"a": "b"})
    before = layout_to_metadata(layout)
    layout.split_segment(0)
    layout.merge_segments([0, 1])
    split = layout.split_segment(1)
    split.prune_segment(1)
    layout.with_properties({"x": "y"})
    layout.with_auto_scale_policy({"enabled": False})
    assert layout_to_metadata(layout) == before
    assert split.segment(1).state is SegmentState.SEALED


def test_segments_and_properties_are_read_only() -> None:
    layout = SegmentLayout.initial(1, properties={"a": "b"})
    with pytest.raises(TypeError):
        layout.segments[5] = layout.segment(0)  # type: ignore[index]
    with pytest.raises(TypeError):
        layout.properties["a"] = "c"  # type: ignore[index]
    with pytest.raises(AttributeError):
        layout.epoch = 4  # type: ignore[misc]


def test_a_policy_given_as_a_mutable_dict_is_copied() -> None:
    policy: dict[str, Any] = {"enabled": True, "nested": {"x": [1, 2]}}
    layout = SegmentLayout.initial(1).with_auto_scale_policy(policy)
    policy["nested"]["x"].append(3)
    assert layout_to_metadata(layout)["autoScalePolicy"] == {
        "enabled": True,
        "nested": {"x": [1, 2]},
    }


def test_with_properties_and_policy_keep_the_epoch() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)
    props = layout.with_properties({"k": "v"})
    assert props.epoch == layout.epoch == 1
    assert dict(props.properties) == {"k": "v"}
    policy = props.with_auto_scale_policy({"maxSegments": 8})
    assert policy.epoch == 1
    assert policy.auto_scale_policy == {"maxSegments": 8}
    assert dict(policy.properties) == {"k": "v"}
    assert policy.with_auto_scale_policy(None).auto_scale_policy is None
    assert policy.split_segment(1).auto_scale_policy == {"maxSegments": 8}


def test_layouts_with_equal_content_are_equal_and_hash_alike() -> None:
    a = SegmentLayout.initial(2).split_segment(0, 5)
    b = SegmentLayout.initial(2).split_segment(0, 5)
    assert a == b and hash(a) == hash(b)
    assert a != SegmentLayout.initial(2).split_segment(0, 6)
    assert a != a.with_properties({"k": "v"})


# ------------------------------------------------------------------------------- metadata codec


def test_pip_468_example_loads_and_round_trips() -> None:
    doc = json.loads(PIP_468_EXAMPLE)
    layout = layout_from_metadata(doc)
    assert layout.epoch == 3
    assert layout.next_segment_id == 5
    assert ids_of(layout.active_segments) == [3, 4, 2]
    assert ids_of(layout.sealed_segments) == [0, 1]
    assert layout.find_active_segment(0x5000).segment_id == 4
    assert layout_to_metadata(layout) == doc
    assert decode_layout(PIP_468_EXAMPLE) == layout
    assert decode_layout(PIP_468_EXAMPLE.encode()) == layout
    assert json.loads(encode_layout(layout)) == doc


def test_pip_468_example_can_evolve() -> None:
    layout = decode_layout(PIP_468_EXAMPLE)
    merged = layout.merge_segments([3, 4], now_ms=1_000)
    assert merged.epoch == 4
    assert merged.segment(5).parent_ids == (3, 4)
    assert merged.merge_depth(5) == 1


def test_to_metadata_keeps_properties_and_the_auto_scale_policy() -> None:
    policy = {"enabled": True, "maxSegments": 16, "splitThreshold": {"msgRateIn": 1000.5}}
    layout = (
        SegmentLayout.initial(2, properties={"key": "value"})
        .split_segment(0, now_ms=42)
        .with_auto_scale_policy(policy)
    )
    doc = layout_to_metadata(layout)
    assert doc["epoch"] == 1
    assert doc["nextSegmentId"] == 4
    assert doc["properties"] == {"key": "value"}
    assert doc["autoScalePolicy"] == policy
    segments = doc["segments"]
    assert isinstance(segments, dict)
    assert sorted(segments) == ["0", "1", "2", "3"]
    assert segments["0"]["sealedAtMs"] == 42
    assert segments["2"]["createdAtMs"] == 42
    assert "createdAtMs" not in segments["1"]  # zero times are left out, as in the PIP example
    assert layout_from_metadata(doc) == layout
    assert decode_layout(encode_layout(layout)) == layout


def test_metadata_without_properties_or_policy_defaults_them() -> None:
    doc = json.loads(PIP_468_EXAMPLE)
    del doc["properties"]
    layout = layout_from_metadata(doc)
    assert dict(layout.properties) == {}
    assert layout.auto_scale_policy is None
    doc["autoScalePolicy"] = None
    assert layout_from_metadata(doc).auto_scale_policy is None


def _example() -> dict[str, Any]:
    return copy.deepcopy(json.loads(PIP_468_EXAMPLE))


def _seg(doc: dict[str, Any], sid: int) -> dict[str, Any]:
    segment: dict[str, Any] = doc["segments"][str(sid)]
    return segment


def _corrupt(change: Any) -> dict[str, Any]:
    doc = _example()
    change(doc)
    return doc


CORRUPTIONS = [
    pytest.param(
        lambda d: _seg(d, 3)["hashRange"].update(end=20000),
        r"overlap: active segments 3 \[0000, 4e20\] and 4 \[4000, 7fff\] both cover 0x4000",
        id="overlap",
    ),
    pytest.param(
        lambda d: _seg(d, 3)["hashRange"].update(end=10000),
        r"gap: no active segment covers 0x2711-0x3fff",
        id="gap",
    ),
    pytest.param(
        lambda d: _seg(d, 2)["hashRange"].update(end=65534),
        r"gap: no active segment covers 0xffff-0xffff",
        id="gap-at-the-end",
    ),
    pytest.param(
        lambda d: _seg(d, 2)["parentIds"].append(9),
        r"segment 2: parent id 9 is not in the layout",
        id="dangling-parent",
    ),
    pytest.param(
        lambda d: _seg(d, 1)["childIds"].append(7),
        r"segment 1: child id 7 is not in the layout",
        id="dangling-child",
    ),
    pytest.param(
        lambda d: _seg(d, 0).update(childIds=[1]),
        r"segment 2 lists parent 0, but segment 0 does not list it as a child",
        id="child-list-inconsistent",
    ),
    pytest.param(
        lambda d: _seg(d, 2).update(parentIds=[]),
        r"segment 0 lists child 2, but segment 2 does not list it as a parent",
        id="parent-list-inconsistent",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(state="OPEN"),
        r"segment 4: unknown state 'OPEN' \(expected 'ACTIVE' or 'SEALED'\)",
        id="bad-state",
    ),
    pytest.param(
        lambda d: _seg(d, 3).pop("createdAtEpoch"),
        r"segment '3' is missing the field\(s\) createdAtEpoch",
        id="missing-segment-field",
    ),
    pytest.param(
        lambda d: d.pop("nextSegmentId"),
        r"the layout document is missing the field\(s\) nextSegmentId",
        id="missing-top-field",
    ),
    pytest.param(
        lambda d: d.update(epoch=2),
        r"segment \d: (created|sealed)AtEpoch 3 is after the layout epoch 2",
        id="created-after-epoch",
    ),
    pytest.param(
        lambda d: d.update(nextSegmentId=4),
        r"nextSegmentId 4 is not above segment id 4",
        id="next-id-not-above",
    ),
    pytest.param(
        lambda d: _seg(d, 3).update(createdAtEpoch=2),
        r"segment 3 was created at epoch 2, but its parent 1 was sealed at epoch 3",
        id="edge-epochs-disagree",
    ),
    pytest.param(
        lambda d: _seg(d, 2).update(sealedAtEpoch=2),
        r"segment 2: ACTIVE but sealedAtEpoch=2",
        id="active-with-seal-epoch",
    ),
    pytest.param(
        lambda d: _seg(d, 1).update(sealedAtEpoch=1),
        r"segment 1: sealedAtEpoch 1 is not after its createdAtEpoch 1",
        id="sealed-not-after-created",
    ),
    pytest.param(
        lambda d: d["segments"].update({"7": d["segments"].pop("4")}),
        r"segment '7' is keyed differently from its segmentId 4",
        id="key-mismatch",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(owner="broker-1"),
        r"segment '4' has unknown field\(s\) owner",
        id="unknown-segment-field",
    ),
    pytest.param(
        lambda d: d.update(extra=1),
        r"the layout document has unknown field\(s\) extra",
        id="unknown-top-field",
    ),
    pytest.param(
        lambda d: _seg(d, 4)["hashRange"].update(end=65536),
        r"segment 4: hash range end 65536 is outside the ring",
        id="range-off-the-ring",
    ),
    pytest.param(
        lambda d: d.update(epoch=True),
        r"epoch must be an integer, got True",
        id="bool-epoch",
    ),
    pytest.param(
        lambda d: d.update(epoch=-1),
        r"epoch must be in 0\.\.",
        id="negative-epoch",
    ),
    pytest.param(
        lambda d: _seg(d, 2).update(parentIds="0"),
        r"segment 2: parentIds must be an array of ids",
        id="ids-not-an-array",
    ),
    pytest.param(
        lambda d: _seg(d, 1).update(childIds=[3, 4, 3]),
        r"segment 1: childIds lists an id twice",
        id="duplicate-child",
    ),
    pytest.param(
        lambda d: d.update(properties={"k": 1}),
        r"property 'k'=1: keys and values must be strings",
        id="non-string-property",
    ),
    pytest.param(
        lambda d: d.update(autoScalePolicy=[1, 2]),
        r"autoScalePolicy must be a JSON object",
        id="policy-not-an-object",
    ),
    pytest.param(
        lambda d: d.update(segments=[]),
        r"segments must be a JSON object",
        id="segments-not-an-object",
    ),
    # Each field is named in the message exactly (anchored patterns).
    pytest.param(
        lambda d: d.update(nextSegmentId="5"),
        r"^nextSegmentId must be an integer, got '5'$",
        id="next-id-not-an-integer",
    ),
    pytest.param(
        lambda d: d.update(properties=[]),
        r"^properties must be a JSON object, got list$",
        id="properties-not-an-object",
    ),
    pytest.param(
        lambda d: d["segments"].update({"4": 5}),
        r"^segment '4' must be a JSON object, got int$",
        id="segment-not-an-object",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(segmentId="4"),
        r"^segment '4': segmentId must be an integer, got '4'$",
        id="segment-id-not-an-integer",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(hashRange=[0, 1]),
        r"^segment 4: hashRange must be a JSON object, got list$",
        id="range-not-an-object",
    ),
    pytest.param(
        lambda d: _seg(d, 4)["hashRange"].update(mid=3),
        r"^segment 4: hashRange has unknown field\(s\) mid$",
        id="range-unknown-field",
    ),
    pytest.param(
        lambda d: _seg(d, 2).update(parentIds=["0"]),
        r"^segment 2: parentIds entry must be an integer, got '0'$",
        id="parent-id-not-an-integer",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(createdAtEpoch=-1),
        r"^segment 4: createdAtEpoch must be in 0\.\.9223372036854775807, got -1$",
        id="negative-created-epoch",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(sealedAtEpoch=-1),
        r"^segment 4: sealedAtEpoch must be in 0\.\.9223372036854775807, got -1$",
        id="negative-sealed-epoch",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(createdAtMs="now"),
        r"^segment 4: createdAtMs must be an integer, got 'now'$",
        id="created-ms-not-an-integer",
    ),
    pytest.param(
        lambda d: _seg(d, 4).update(sealedAtMs=-5),
        r"^segment 4: sealedAtMs must be in 0\.\.9223372036854775807, got -5$",
        id="negative-sealed-ms",
    ),
    pytest.param(
        lambda d: (d.pop("epoch"), d.pop("segments")),
        r"^the layout document is missing the field\(s\) epoch, segments$",
        id="two-missing-fields",
    ),
    pytest.param(
        lambda d: d.update(b=1, a=2),
        r"^the layout document has unknown field\(s\) a, b$",
        id="two-unknown-fields",
    ),
]


@pytest.mark.parametrize(("change", "message"), CORRUPTIONS)
def test_corrupt_documents_are_rejected_naming_the_problem(change: Any, message: str) -> None:
    doc = _corrupt(change)
    with pytest.raises(CorruptLayout, match=message):
        layout_from_metadata(doc)
    with pytest.raises(CorruptLayout, match=message):
        decode_layout(json.dumps(doc))


def test_a_document_with_a_cycle_is_rejected() -> None:
    def seg(sid: int, state: str, parents: list[int], children: list[int]) -> dict[str, Any]:
        start, end = (0, 65535)
        return {
            "segmentId": sid,
            "hashRange": {"start": start, "end": end},
            "state": state,
            "parentIds": parents,
            "childIds": children,
            "createdAtEpoch": 1 if state == "SEALED" else 0,
            "sealedAtEpoch": 2 if state == "SEALED" else 0,
        }

    doc = {
        "epoch": 2,
        "nextSegmentId": 3,
        "segments": {
            "0": seg(0, "ACTIVE", [], []),
            "1": seg(1, "SEALED", [2], [2]),
            "2": seg(2, "SEALED", [1], [1]),
        },
        "properties": {},
    }
    with pytest.raises(CorruptLayout, match=r"cycle through segments \[1, 2\]"):
        layout_from_metadata(doc)


def test_a_document_without_active_segments_is_rejected() -> None:
    doc = _example()
    doc["segments"] = {"0": _seg(doc, 0)}
    _seg(doc, 0)["childIds"] = []
    with pytest.raises(CorruptLayout, match="no active segment"):
        layout_from_metadata(doc)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "not valid UTF-8"),
        (b"{", "not valid JSON"),
        ("[]", "the layout document must be a JSON object"),
        ('{"epoch": 1, "epoch": 2}', "repeats the key 'epoch'"),
        ('{"epoch": NaN}', "non-standard constant NaN"),
        ("[" * 100_000 + "]" * 100_000, "^layout document is nested too deeply$"),
        (42, "^layout JSON must be bytes or str, got int$"),
    ],
)
def test_unparseable_json_is_rejected(data: Any, message: str) -> None:
    with pytest.raises(CorruptLayout, match=message):
        decode_layout(data)


def test_the_encoding_is_compact_ascii_json_in_document_order() -> None:
    layout = SegmentLayout.initial(1).with_properties({"team": "caf\u00e9"})
    assert encode_layout(layout) == (
        b'{"epoch":0,"nextSegmentId":1,"segments":{"0":{"segmentId":0,'
        b'"hashRange":{"start":0,"end":65535},"state":"ACTIVE","parentIds":[],"childIds":[],'
        b'"createdAtEpoch":0,"sealedAtEpoch":0}},"properties":{"team":"caf\\u00e9"}}'
    )


def test_non_finite_numbers_in_a_policy_are_rejected() -> None:
    with pytest.raises(CorruptLayout, match="non-finite"):
        SegmentLayout.initial(1).with_auto_scale_policy({"x": float("nan")})


def test_corrupt_layout_is_an_invalid_input_error() -> None:
    assert issubclass(CorruptLayout, InvalidInputError)


# ------------------------------------------------------------------------------- SegmentInfo


def test_segment_info_active_factory() -> None:
    info = SegmentInfo.active(7, HashRange(0, 9), epoch=3, now_ms=99, parent_ids=[1, 2])
    assert info.is_active
    assert info.parent_ids == (1, 2)
    assert info.child_ids == ()
    assert (info.created_at_epoch, info.created_at_ms) == (3, 99)
    assert (info.sealed_at_epoch, info.sealed_at_ms) == (0, 0)


def test_an_active_segment_cannot_have_children() -> None:
    with pytest.raises(CorruptLayout, match="ACTIVE but has children"):
        SegmentInfo(1, HashRange.full(), SegmentState.ACTIVE, (), (2,), 0, 0)


def test_a_segment_cannot_be_its_own_parent() -> None:
    with pytest.raises(CorruptLayout, match="lists itself"):
        SegmentInfo.active(1, HashRange.full(), 0, parent_ids=[1])


def test_segment_state_must_be_the_enum() -> None:
    with pytest.raises(CorruptLayout, match="state must be a SegmentState"):
        SegmentInfo(1, HashRange.full(), "ACTIVE", (), (), 0, 0)  # type: ignore[arg-type]


def test_layout_constructor_validates_too() -> None:
    half = SegmentInfo.active(0, HashRange(0, 0x7FFF), 0)
    with pytest.raises(CorruptLayout, match="gap"):
        SegmentLayout(0, 1, {0: half})
    with pytest.raises(CorruptLayout, match="keyed 1 has segmentId 0"):
        SegmentLayout(0, 2, {1: half})


def test_text_that_is_not_valid_unicode_still_round_trips_through_json() -> None:
    # json.loads turns the escape "\ud800" into a lone surrogate; writing it back must not crash.
    doc = json.loads(PIP_468_EXAMPLE)
    doc["properties"] = json.loads('{"note": "\\ud800 caf\\u00e9"}')
    layout = layout_from_metadata(doc)
    assert decode_layout(encode_layout(layout)) == layout
    assert encode_layout(layout).isascii()


def test_split_at_an_explicit_hash_cuts_where_asked() -> None:
    layout = SegmentLayout.initial(1).split_segment(0, now_ms=5, split_hash=0x1000)
    low, high = (layout.segment(i) for i in (1, 2))
    assert (low.hash_range.start, low.hash_range.end) == (0x0000, 0x0FFF)
    assert (high.hash_range.start, high.hash_range.end) == (0x1000, 0xFFFF)
    assert layout.epoch == 1 and layout.next_segment_id == 3


def test_split_at_a_hash_outside_the_segment_is_invalid_input() -> None:
    layout = SegmentLayout.initial(2)
    with pytest.raises(InvalidSplitHash, match="segment 1"):
        layout.split_segment(1, split_hash=0x1000)  # segment 1 covers 0x8000-0xffff


def test_pruning_several_segments_is_one_change() -> None:
    layout = SegmentLayout.initial(1).split_segment(0).split_segment(1)  # 0 -> 1, 2; 1 -> 3, 4
    pruned = layout.prune_segments([0, 1])
    assert pruned.epoch == layout.epoch + 1
    assert sorted(pruned.segments) == [2, 3, 4]
    assert all(pruned.segment(s).parent_ids == () for s in (2, 3, 4))
    one_by_one = layout.prune_segment(0).prune_segment(1)
    assert dict(pruned.segments) == dict(one_by_one.segments)
    assert one_by_one.epoch == pruned.epoch + 1  # what the collector used to cost clients
    assert layout.prune_segments([]) is layout


def test_pruning_an_active_segment_among_several_is_refused() -> None:
    layout = SegmentLayout.initial(1).split_segment(0)
    with pytest.raises(InvalidLayoutOperation, match="segment 1"):
        layout.prune_segments([0, 1])
