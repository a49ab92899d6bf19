"""Property tests: any sequence of valid splits, merges and prunes keeps every layout invariant."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.layout import SegmentLayout
from braid.core.layout_codec import (
    decode_layout,
    encode_layout,
    layout_from_metadata,
    layout_to_metadata,
)
from braid.core.ranges import MAX_HASH


def assert_tiles_the_ring(layout: SegmentLayout) -> None:
    active = sorted(layout.active_segments, key=lambda s: s.hash_range.start)
    assert active == layout.active_segments
    assert active[0].hash_range.start == 0
    assert active[-1].hash_range.end == MAX_HASH
    for prev, cur in itertools.pairwise(active):
        assert prev.hash_range.end + 1 == cur.hash_range.start
    assert sum(s.hash_range.size for s in active) == MAX_HASH + 1


def assert_routes_every_hash_once(layout: SegmentLayout, probes: list[int]) -> None:
    # Every boundary (and its neighbours) plus random probes: each has exactly one active owner.
    edges = {h for s in layout.active_segments for h in (s.hash_range.start, s.hash_range.end)}
    candidates = {h + d for h in edges for d in (-1, 0, 1)} | set(probes)
    for h in sorted(c for c in candidates if 0 <= c <= MAX_HASH):
        owners = [s for s in layout.active_segments if s.hash_range.contains(h)]
        assert len(owners) == 1
        assert layout.find_active_segment(h) == owners[0]


def assert_acyclic_and_consistent(layout: SegmentLayout) -> None:
    segments = layout.segments
    for sid, info in segments.items():
        assert sid < layout.next_segment_id
        for pid in info.parent_ids:
            assert sid in segments[pid].child_ids
        for cid in info.child_ids:
            assert sid in segments[cid].parent_ids
            assert segments[cid].created_at_epoch == info.sealed_at_epoch
        if info.is_active:
            assert info.child_ids == ()
        assert sid not in layout.ancestors(sid)
        assert sid not in layout.descendants(sid)
        for anc in layout.ancestors(sid):
            assert sid in layout.descendants(anc)
    # Independent cycle check: depth-first search with colours.
    colour: dict[int, int] = {}

    def visit(sid: int) -> None:
        colour[sid] = 1
        for cid in segments[sid].child_ids:
            assert colour.get(cid) != 1, "cycle"
            if cid not in colour:
                visit(cid)
        colour[sid] = 2

    for sid in segments:
        if sid not in colour:
            visit(sid)


def reference_merge_depth(layout: SegmentLayout, sid: int) -> int:
    info = layout.segment(sid)
    inherited = max((reference_merge_depth(layout, p) for p in info.parent_ids), default=0)
    return inherited + (1 if len(info.parent_ids) >= 2 else 0)


def apply_random_step(layout: SegmentLayout, rng: random.Random, now_ms: int) -> SegmentLayout:
    """One valid split, merge or prune chosen by ``rng`` (falls back to a split when needed)."""
    active = layout.active_segments
    sealed = layout.sealed_segments
    choice = rng.choice(["split", "merge", "prune"])
    if choice == "merge" and len(active) >= 2:
        count = rng.randint(2, min(4, len(active)))
        first = rng.randint(0, len(active) - count)
        ids = [s.segment_id for s in active[first : first + count]]
        rng.shuffle(ids)
        return layout.merge_segments(ids, now_ms)
    if choice == "prune" and sealed:
        return layout.prune_segment(rng.choice(sealed).segment_id)
    splittable = [s for s in active if s.hash_range.size >= 2]
    return layout.split_segment(rng.choice(splittable).segment_id, now_ms)


@settings(max_examples=150, deadline=None)
@given(
    initial=st.sampled_from([1, 2, 3, 4, 7]),
    rng=st.randoms(use_true_random=False),
    steps=st.integers(1, 15),
    probes=st.lists(st.integers(0, MAX_HASH), min_size=1, max_size=8),
)
def test_any_sequence_of_valid_operations_keeps_the_invariants(
    initial: int, rng: random.Random, steps: int, probes: list[int]
) -> None:
    layout = SegmentLayout.initial(initial, now_ms=0)
    ever_created = set(layout.segments)
    for step in range(1, steps + 1):
        before_json = encode_layout(layout)
        before_ids = set(layout.segments)
        after = apply_random_step(layout, rng, now_ms=step * 1000)

        # The original is never modified.
        assert encode_layout(layout) == before_json
        assert set(layout.segments) == before_ids
        # Epochs strictly increase, by exactly one per mutation.
        assert after.epoch == layout.epoch + 1
        # Ids are never reused.
        new_ids = set(after.segments) - before_ids
        assert not new_ids & ever_created
        assert all(i >= layout.next_segment_id for i in new_ids)
        ever_created |= new_ids

        assert_tiles_the_ring(after)
        assert_routes_every_hash_once(after, probes)
        assert_acyclic_and_consistent(after)
        for info in after.segments.values():
            assert after.merge_depth(info.segment_id) == reference_merge_depth(
                after, info.segment_id
            )
        # JSON round-trips exactly.
        restored = decode_layout(encode_layout(after))
        assert restored == after
        assert hash(restored) == hash(after)
        assert layout_from_metadata(layout_to_metadata(after)) == after
        layout = after


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2048), probe=st.integers(0, MAX_HASH))
def test_any_initial_layout_tiles_the_ring(n: int, probe: int) -> None:
    layout = SegmentLayout.initial(n)
    assert len(layout.active_segments) == n
    widths = {s.hash_range.size for s in layout.active_segments[:-1]}
    assert widths <= {65536 // n}
    assert_tiles_the_ring(layout)
    assert layout.find_active_segment(probe).hash_range.contains(probe)


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    properties=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4),
    policy=st.none() | st.dictionaries(st.text(max_size=6), _JSON, max_size=5),
    splits=st.integers(0, 3),
)
def test_properties_and_policy_round_trip_through_json(
    properties: dict[str, str], policy: dict[str, object] | None, splits: int
) -> None:
    layout = SegmentLayout.initial(2, now_ms=1).with_properties(properties)
    layout = layout.with_auto_scale_policy(policy)
    for step in range(splits):
        layout = layout.split_segment(layout.active_segments[0].segment_id, now_ms=step)
    restored = decode_layout(encode_layout(layout))
    assert restored == layout
    assert layout_to_metadata(restored) == layout_to_metadata(layout)
    assert dict(restored.properties) == properties
    if policy is None:
        assert "autoScalePolicy" not in layout_to_metadata(layout)
    else:
        assert layout_to_metadata(layout)["autoScalePolicy"] == policy
