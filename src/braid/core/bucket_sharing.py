"""PIP-486 read scaling inside a segment: which Stream consumers share a segment by bucket.

A Stream subscription gives each readable segment to one consumer (:mod:`braid.core.assignment`);
with more consumers than readable segments the extra ones would sit idle. When the topic's
segments have several entry buckets, :func:`share_buckets` hands each idle consumer a share of a
segment instead: the segment with the fewest sharers (ties: ring order), never more sharers than
the segment has buckets. A shared segment's every sharer - its owner included - is told the
segment's whole boundary list (``ScalableAssignedSegment.bucket_ranges``) and subscribes
Key_Shared with entry-bucket dispatch; the broker then spreads the buckets over them
(:mod:`braid.broker.entry_buckets`). Consumers left over once every bucket has an owner stay
idle (PIP-486 lets the controller do that).

The result depends only on the assignment and the layout (consumers are taken by name), so a
recomputation with nothing changed shares exactly as before. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from braid.core.assignment import ConsumerAssignment, SubscriptionAssignment
from braid.core.layout import SegmentLayout
from braid.core.ranges import MAX_HASH, HashRange
from braid.core.segment_info import ring_order


def share_buckets(
    assignment: SubscriptionAssignment, layout: SegmentLayout
) -> SubscriptionAssignment:
    """``assignment`` with its idle consumers sharing segments by bucket (see the module doc)."""
    capacity = layout.entry_buckets
    idle = [c.consumer_name for c in assignment.consumers if not c.segment_ids]
    if capacity < 2 or not idle:
        return assignment
    sharers: dict[int, int] = {}
    for entry in assignment.consumers:
        for sid in entry.segment_ids:
            sharers[sid] = sharers.get(sid, 0) + 1
    order = sorted(
        (layout.segments[sid] for sid in sharers if sid in layout.segments), key=ring_order
    )
    rank = {info.segment_id: i for i, info in enumerate(order)}
    extra: dict[str, int] = {}
    for name in idle:
        open_ = [sid for sid in rank if sharers[sid] < capacity]
        if not open_:
            break
        sid = min(open_, key=lambda s: (sharers[s], rank[s]))
        sharers[sid] += 1
        extra[name] = sid
    if not extra:
        return assignment
    return SubscriptionAssignment(
        assignment.layout_epoch,
        tuple(
            ConsumerAssignment(c.consumer_name, (extra[c.consumer_name],))
            if c.consumer_name in extra
            else c
            for c in assignment.consumers
        ),
    )


def shared_segments(
    assignment: SubscriptionAssignment | Mapping[str, tuple[int, ...]],
) -> frozenset[int]:
    """The segments more than one consumer was given."""
    lists = assignment.as_dict() if isinstance(assignment, SubscriptionAssignment) else assignment
    seen: set[int] = set()
    shared: set[int] = set()
    for ids in lists.values():
        for sid in ids:
            (shared if sid in seen else seen).add(sid)
    return frozenset(shared)


def bucket_ranges(layout: SegmentLayout) -> tuple[HashRange, ...]:
    """A segment's whole bucket boundary list as inclusive bucket-hash ranges (what a sharer is
    told and declares); empty with one bucket."""
    splits = layout.entry_bucket_splits
    if not splits:
        return ()
    starts = (0, *splits)
    ends = (*(s - 1 for s in splits), MAX_HASH)
    return tuple(HashRange(a, b) for a, b in zip(starts, ends, strict=True))


__all__ = ["bucket_ranges", "share_buckets", "shared_segments"]
