"""The invariants every :class:`~braid.core.layout.SegmentLayout` obeys, checked in one place.

A layout is validated whenever it is constructed — computed by a split, merge or prune, or loaded
from a document — so both obey the same rules:

* every id is below ``nextSegmentId`` and no segment was created or sealed after the layout's
  epoch;
* every parent/child edge is listed on both ends, points at a segment in the layout, and joins
  segments that share a hash;
* the DAG has no cycle, and a child is created in the very epoch its parents are sealed;
* the ``ACTIVE`` segments tile the ring ``0x0000-0xFFFF`` exactly: no gap, no overlap;
* legacy segments (the partitions of a migrated topic, ADR 0063) wrap distinct classic topics,
  and every child of a legacy root has *every* legacy root as a parent and no other parent, so a
  key's messages in any old partition are read before its messages in a new segment.

A violation raises :class:`~braid.core.segment_info.CorruptLayout` naming the offending segments.
"""

from __future__ import annotations

from collections.abc import Mapping

from braid.core.ranges import MAX_HASH, MIN_HASH
from braid.core.segment_info import CorruptLayout, SegmentInfo


def check_layout_invariants(
    epoch: int, next_segment_id: int, segments: Mapping[int, SegmentInfo]
) -> tuple[SegmentInfo, ...]:
    """Check every invariant of a layout; return the active segments sorted by range start.

    Raises:
        CorruptLayout: an invariant does not hold; the message names the segments involved.
    """
    for sid, info in segments.items():
        if sid >= next_segment_id:
            raise CorruptLayout(f"nextSegmentId {next_segment_id} is not above segment id {sid}")
        if info.created_at_epoch > epoch:
            raise CorruptLayout(
                f"segment {sid}: createdAtEpoch {info.created_at_epoch} is after the layout "
                f"epoch {epoch}"
            )
        if info.sealed_at_epoch > epoch:
            raise CorruptLayout(
                f"segment {sid}: sealedAtEpoch {info.sealed_at_epoch} is after the layout "
                f"epoch {epoch}"
            )
    _check_edges(segments)
    _check_acyclic(segments)
    _check_edge_epochs(segments)
    _check_legacy_roots(segments)
    return _check_tiling(segments)


def _check_edges(segments: Mapping[int, SegmentInfo]) -> None:
    for sid, info in segments.items():
        for pid in info.parent_ids:
            parent = segments.get(pid)
            if parent is None:
                raise CorruptLayout(f"segment {sid}: parent id {pid} is not in the layout")
            if sid not in parent.child_ids:
                raise CorruptLayout(
                    f"segment {sid} lists parent {pid}, but segment {pid} does not list it as a "
                    f"child (childIds {list(parent.child_ids)})"
                )
        for cid in info.child_ids:
            child = segments.get(cid)
            if child is None:
                raise CorruptLayout(f"segment {sid}: child id {cid} is not in the layout")
            if sid not in child.parent_ids:
                raise CorruptLayout(
                    f"segment {sid} lists child {cid}, but segment {cid} does not list it as a "
                    f"parent (parentIds {list(child.parent_ids)})"
                )
            if not info.hash_range.overlaps(child.hash_range):
                raise CorruptLayout(
                    f"segment {sid} {info.hash_range} and its child {cid} {child.hash_range} "
                    "share no hash"
                )


def _check_acyclic(segments: Mapping[int, SegmentInfo]) -> None:
    # Kahn's algorithm over child edges; whatever is never freed sits on (or behind) a cycle.
    indegree = {sid: len(info.parent_ids) for sid, info in segments.items()}
    ready = [sid for sid, d in indegree.items() if d == 0]
    freed = 0
    while ready:
        sid = ready.pop()
        freed += 1
        for cid in segments[sid].child_ids:
            indegree[cid] -= 1
            if indegree[cid] == 0:
                ready.append(cid)
    if freed != len(segments):
        stuck = sorted(sid for sid, d in indegree.items() if d > 0)
        raise CorruptLayout(f"the segment DAG has a cycle through segments {stuck}")


def _check_edge_epochs(segments: Mapping[int, SegmentInfo]) -> None:
    for sid, info in segments.items():
        for cid in info.child_ids:
            child = segments[cid]
            if child.created_at_epoch != info.sealed_at_epoch:
                raise CorruptLayout(
                    f"segment {cid} was created at epoch {child.created_at_epoch}, but its parent "
                    f"{sid} was sealed at epoch {info.sealed_at_epoch} (they must be equal)"
                )


def _check_legacy_roots(segments: Mapping[int, SegmentInfo]) -> None:
    roots: dict[int, str] = {}
    for sid, info in segments.items():
        if info.legacy_topic_name is not None:
            roots[sid] = info.legacy_topic_name
    if not roots:
        return
    seen: dict[str, int] = {}
    for sid, name in sorted(roots.items()):
        if name in seen:
            raise CorruptLayout(
                f"segments {seen[name]} and {sid} both wrap the legacy topic {name}"
            )
        seen[name] = sid
    expected = sorted(roots)
    for sid in expected:
        for cid in segments[sid].child_ids:
            parents = sorted(segments[cid].parent_ids)
            if parents != expected:
                raise CorruptLayout(
                    f"segment {cid} is a child of legacy segment {sid} but has parents {parents}, "
                    f"not exactly the legacy segments {expected}: a key's old messages could be "
                    "read after its new ones"
                )


def _check_tiling(segments: Mapping[int, SegmentInfo]) -> tuple[SegmentInfo, ...]:
    active = sorted((s for s in segments.values() if s.is_active), key=lambda s: s.hash_range)
    if not active:
        raise CorruptLayout("the layout has no active segment: the ring is not covered")
    expected = MIN_HASH
    previous: SegmentInfo | None = None
    for info in active:
        start = info.hash_range.start
        if start > expected:
            raise CorruptLayout(
                f"gap: no active segment covers 0x{expected:04x}-0x{start - 1:04x} "
                f"(before segment {info.segment_id} {info.hash_range})"
            )
        if start < expected and previous is not None:
            raise CorruptLayout(
                f"overlap: active segments {previous.segment_id} {previous.hash_range} and "
                f"{info.segment_id} {info.hash_range} both cover 0x{start:04x}"
            )
        expected = info.hash_range.end + 1
        previous = info
    if expected <= MAX_HASH:
        raise CorruptLayout(
            f"gap: no active segment covers 0x{expected:04x}-0x{MAX_HASH:04x} (after segment "
            f"{active[-1].segment_id} {active[-1].hash_range})"
        )
    return tuple(active)


__all__ = ["check_layout_invariants"]
