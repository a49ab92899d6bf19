"""What a corrupt or malformed layout is told, word for word, and the edges of its integer fields.

A loaded ``ScalableTopicMetadata`` that breaks a rule is refused with a message naming the field
and segment; these tests pin the messages an operator reads, the bounds of Java-long fields, and
layout behaviour that only shows on loaded documents (ids need not grow along edges there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from braid.core.layout import SegmentLayout
from braid.core.layout_codec import decode_layout, layout_from_metadata
from braid.core.ranges import HashRange
from braid.core.segment_info import (
    MAX_LONG,
    CorruptLayout,
    SegmentInfo,
    SegmentState,
    check_long,
)

FULL = HashRange.full()


def sealed(segment_id: int, hash_range: HashRange, children: tuple[int, ...]) -> SegmentInfo:
    return SegmentInfo(segment_id, hash_range, SegmentState.SEALED, (), children, 0, 1)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: check_long("epoch", "1"), "epoch must be an integer, got '1'"),
        (lambda: check_long("epoch", True), "epoch must be an integer, got True"),
        (lambda: check_long("epoch", -1), f"epoch must be in 0..{MAX_LONG}, got -1"),
        (
            lambda: check_long("epoch", MAX_LONG + 1),
            f"epoch must be in 0..{MAX_LONG}, got {MAX_LONG + 1}",
        ),
        (lambda: SegmentInfo.active(True, FULL, 0), "segmentId must be an integer, got True"),
        (lambda: SegmentInfo.active(-3, FULL, 0), f"segmentId must be in 0..{MAX_LONG}, got -3"),
        (
            lambda: SegmentInfo.active(3, (0, 5), 0),
            "segment 3: hash range must be a HashRange: (0, 5)",
        ),
        (
            lambda: SegmentInfo(3, FULL, SegmentState.ACTIVE, 5, (), 0, 0),
            "segment 3: parentIds must be a sequence of ids, got 5",
        ),
        (
            lambda: SegmentInfo(3, FULL, SegmentState.ACTIVE, ("x",), (), 0, 0),
            "segment 3: parentIds entry must be an integer, got 'x'",
        ),
        (
            lambda: SegmentInfo(3, FULL, SegmentState.SEALED, (), (True,), 0, 1),
            "segment 3: childIds entry must be an integer, got True",
        ),
        (
            lambda: SegmentInfo(3, FULL, SegmentState.ACTIVE, (), (), 0, 0, created_at_ms=-1),
            f"segment 3: createdAtMs must be in 0..{MAX_LONG}, got -1",
        ),
        (
            lambda: SegmentLayout("0", 1, {}),
            "epoch must be an integer, got '0'",
        ),
        (
            lambda: SegmentLayout(0, -1, {}),
            f"nextSegmentId must be in 0..{MAX_LONG}, got -1",
        ),
        (lambda: SegmentLayout(0, 1, []), "segments must be a mapping, got list"),
        (lambda: SegmentLayout(0, 1, {0: 5}), "segment 0 is not a SegmentInfo: 5"),
        (
            lambda: SegmentLayout(0, 2, {0: SegmentInfo.active(0, FULL, 0), "1": 5}),
            "segment '1' is not a SegmentInfo: 5",
        ),
        (
            lambda: SegmentLayout(0, 1, {0: SegmentInfo.active(0, FULL, 0)}, properties=[]),
            "properties must be a mapping of strings, got []",
        ),
        (
            lambda: SegmentLayout(0, 1, {0: SegmentInfo.active(0, FULL, 0)}, {}, ["x"]),
            "autoScalePolicy must be a JSON object, got ['x']",
        ),
        (
            lambda: SegmentLayout(0, 1, {0: SegmentInfo.active(0, FULL, 1)}),
            "segment 0: createdAtEpoch 1 is after the layout epoch 0",
        ),
        (
            lambda: SegmentLayout(0, 0, {}),
            "the layout has no active segment: the ring is not covered",
        ),
        (
            lambda: SegmentLayout(
                1,
                2,
                {
                    0: sealed(0, HashRange(0, 9), (1,)),
                    1: SegmentInfo(1, HashRange(10, 0xFFFF), SegmentState.ACTIVE, (0,), (), 1, 0),
                },
            ),
            "segment 0 [0000, 0009] and its child 1 [000a, ffff] share no hash",
        ),
    ],
)
def test_each_broken_rule_is_reported_in_words(build: Callable[[], object], message: str) -> None:
    with pytest.raises(CorruptLayout) as info:
        build()
    assert str(info.value) == message


def test_the_largest_java_long_is_a_valid_id_and_time() -> None:
    assert check_long("epoch", MAX_LONG) == MAX_LONG
    info = SegmentInfo.active(MAX_LONG, FULL, MAX_LONG, now_ms=MAX_LONG)
    assert (info.segment_id, info.created_at_epoch, info.created_at_ms) == (MAX_LONG,) * 3
    layout = SegmentLayout.initial(1).split_segment(0, now_ms=MAX_LONG)
    assert layout.segment(1).created_at_ms == MAX_LONG


def test_a_new_active_segment_has_no_wall_clock_time_unless_given() -> None:
    info = SegmentInfo.active(4, FULL, 2)
    assert (info.created_at_ms, info.sealed_at_ms, info.sealed_at_epoch) == (0, 0, 0)
    assert info.parent_ids == () and info.child_ids == ()


def test_segments_are_kept_in_id_order_whatever_the_insertion_order() -> None:
    layout = SegmentLayout.initial(1)
    for _ in range(5):  # ids 1..10; the sealed ones are 0, 1, 2, 3, 5 ... sorted numerically
        layout = layout.split_segment(layout.active_segments[-1].segment_id)
    sealed_ids = [s.segment_id for s in layout.sealed_segments]
    assert sealed_ids == sorted(sealed_ids)
    assert 10 in layout.segments and sealed_ids[-1] > 2  # two-digit ids sort after one-digit ones
    reordered = SegmentLayout(
        layout.epoch, layout.next_segment_id, dict(reversed(list(layout.segments.items())))
    )
    assert list(reordered.segments) == sorted(layout.segments)


def test_merge_depth_does_not_assume_ids_grow_along_edges() -> None:
    # A valid loaded document may give a merge child a lower id than its parents.
    doc: Mapping[str, object] = {
        "epoch": 1,
        "nextSegmentId": 7,
        "segments": {
            "5": {"segmentId": 5, "hashRange": {"start": 0, "end": 32767}, "state": "SEALED",
                  "parentIds": [], "childIds": [2], "createdAtEpoch": 0, "sealedAtEpoch": 1},
            "6": {"segmentId": 6, "hashRange": {"start": 32768, "end": 65535}, "state": "SEALED",
                  "parentIds": [], "childIds": [2], "createdAtEpoch": 0, "sealedAtEpoch": 1},
            "2": {"segmentId": 2, "hashRange": {"start": 0, "end": 65535}, "state": "ACTIVE",
                  "parentIds": [5, 6], "childIds": [], "createdAtEpoch": 1, "sealedAtEpoch": 0},
        },
    }  # fmt: skip
    layout = layout_from_metadata(doc)
    assert layout.merge_depth(2) == 1
    assert layout.merge_depth(5) == 0


def test_replacing_properties_keeps_the_auto_scale_policy_and_vice_versa() -> None:
    layout = SegmentLayout.initial(1).with_auto_scale_policy({"maxSegments": 8})
    with_props = layout.with_properties({"owner": "team-a"})
    assert with_props.auto_scale_policy == {"maxSegments": 8}
    assert with_props.with_auto_scale_policy(None).properties == {"owner": "team-a"}


def test_str_summarises_epoch_active_ranges_and_sealed_count() -> None:
    layout = SegmentLayout.initial(2).split_segment(0)
    assert str(layout) == (
        "SegmentLayout(epoch=1, next=4, active=[2:0000-3fff 3:4000-7fff 1:8000-ffff], sealed=1)"
    )


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            {"a": [1, {"b": float("nan")}]},
            "autoScalePolicy.a[1].b holds a non-finite number nan",
        ),
        ({"a": float("-inf")}, "autoScalePolicy.a holds a non-finite number -inf"),
        ({"a": [float("inf")]}, "autoScalePolicy.a[0] holds a non-finite number inf"),
        ({"a": {1: 2}}, "autoScalePolicy.a has a non-string key 1"),
        ({"a": {1}}, "autoScalePolicy.a holds a value that is not JSON: {1}"),
    ],
)
def test_a_policy_that_is_not_plain_json_is_refused_naming_the_path(
    policy: Mapping[str, object], message: str
) -> None:
    with pytest.raises(CorruptLayout) as info:
        SegmentLayout.initial(1).with_auto_scale_policy(policy)
    assert str(info.value) == message


def test_a_document_with_a_non_finite_policy_value_is_refused() -> None:
    text = (
        '{"epoch":0,"nextSegmentId":1,"segments":{"0":{"segmentId":0,"hashRange":{"start":0,'
        '"end":65535},"state":"ACTIVE","parentIds":[],"childIds":[],"createdAtEpoch":0,'
        '"sealedAtEpoch":0}},"properties":{},"autoScalePolicy":{"x":1e999}}'
    )
    with pytest.raises(CorruptLayout, match=r"autoScalePolicy\.x holds a non-finite number inf"):
        decode_layout(text)


def test_splits_and_merges_without_a_clock_reading_record_time_zero() -> None:
    split = SegmentLayout.initial(1).split_segment(0)
    assert split.segment(0).sealed_at_ms == 0
    assert split.segment(1).created_at_ms == 0
    merged = split.merge_segments([1, 2])
    assert merged.segment(1).sealed_at_ms == 0
    assert merged.segment(3).created_at_ms == 0
