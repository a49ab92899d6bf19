"""Segment-to-consumer assignment of ordered subscriptions, with drain gating (PIP-468).

A STREAM or CHECKPOINT subscription's ``SubscriptionCoordinator`` (an I/O shell in
``braid.scalable``) gives every *assignable* segment to exactly one consumer, round-robin: segments
sorted by hash range start (then id), consumers sorted by name, segment ``i`` to consumer
``i mod n``. The coordinator recomputes on every consumer change, layout change and seek, and
pushes a new assignment only to consumers whose segments changed (:func:`changed_consumers`).

Drain gating keeps per-key order across splits and merges: a segment may be read only after every
one of its ancestors still in the layout has been fully consumed ("drained") by this subscription.
All ancestors count, not only direct parents: with a direct-parent rule, a sealed but already
drained intermediate segment lets its children through while a grandparent still holds older
messages for the same keys (upstream issue #26274). Sealed segments that still hold data are
assignable — they must be read before their children — and drained ones retire.

A seek can rewind a subscription into segments it had drained, so the drained set is an input
recomputed by the caller each time and may shrink; nothing here assumes it only grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.segment_info import SegmentInfo


def _position(segment: SegmentInfo) -> tuple[int, int]:
    return (segment.hash_range.start, segment.segment_id)


def assign_round_robin(
    segments: Sequence[SegmentInfo], consumers: Iterable[str]
) -> dict[str, tuple[int, ...]]:
    """Deal segments to consumers round-robin; the result does not depend on input order.

    Segments are sorted by ``(hash range start, segment id)`` and consumers by name (duplicates
    collapse); segment ``i`` goes to consumer ``i mod n``, so counts differ by at most one. Every
    consumer appears, possibly with no segments; with no consumers the result is ``{}``.

    Raises:
        InvalidInputError: a segment id appears twice, or a consumer name is not a string.
    """
    names: set[str] = set()
    for name in consumers:
        if not isinstance(name, str):
            raise InvalidInputError(f"consumer names must be strings, got {name!r}")
        names.add(name)
    ordered_names = sorted(names)
    if not ordered_names:
        return {}
    ids = [segment.segment_id for segment in segments]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"a segment is listed twice for assignment: {sorted(ids)}")
    dealt: dict[str, list[int]] = {name: [] for name in ordered_names}
    for index, segment in enumerate(sorted(segments, key=_position)):
        dealt[ordered_names[index % len(ordered_names)]].append(segment.segment_id)
    return {name: tuple(segment_ids) for name, segment_ids in dealt.items()}


def assignable_segments(layout: SegmentLayout, drained: Set[int]) -> list[SegmentInfo]:
    """The segments an ordered subscription may read now, sorted by (range start, id).

    Args:
        layout: the topic's current layout.
        drained: ids of SEALED segments whose data this subscription has fully consumed, as of
            now (after a seek this set can be smaller than before). Ids no longer in the layout
            (pruned) are ignored; a pruned ancestor counts as drained.

    Returns:
        Every segment in the layout that is not drained and whose ancestors still in the layout
        are all drained (transitively, not only direct parents). Active segments with an
        undrained ancestor wait; sealed segments with data are included; drained ones retire.
        The result never holds two segments with overlapping hash ranges, because overlapping
        segments are always ancestor and descendant.

    Raises:
        InvalidInputError: ``drained`` names an ACTIVE segment (it can still receive messages, so
            it can never be drained).
    """
    active_drained = sorted(
        sid for sid in drained if sid in layout.segments and layout.segments[sid].is_active
    )
    if active_drained:
        raise InvalidInputError(
            f"active segments {active_drained} cannot be drained: they still accept messages"
        )
    ready = [
        segment
        for sid, segment in layout.segments.items()
        if sid not in drained and layout.ancestors(sid) <= drained
    ]
    return sorted(ready, key=_position)


@dataclass(frozen=True)
class ConsumerAssignment:
    """The segments one consumer of a subscription owns (PIP-468 ``ConsumerAssignment``)."""

    consumer_name: str
    segment_ids: tuple[int, ...]


@dataclass(frozen=True)
class SubscriptionAssignment:
    """Every consumer's segments for one subscription, computed against ``layout_epoch``.

    ``consumers`` is sorted by name and lists every consumer, including those with no segments.
    """

    layout_epoch: int
    consumers: tuple[ConsumerAssignment, ...]

    def segments_of(self, consumer_name: str) -> tuple[int, ...]:
        """The segment ids assigned to ``consumer_name`` (empty if it is not a member)."""
        for entry in self.consumers:
            if entry.consumer_name == consumer_name:
                return entry.segment_ids
        return ()

    def as_dict(self) -> dict[str, tuple[int, ...]]:
        """Consumer name -> assigned segment ids."""
        return {entry.consumer_name: entry.segment_ids for entry in self.consumers}

    @property
    def consumer_names(self) -> tuple[str, ...]:
        """Every member consumer, sorted."""
        return tuple(entry.consumer_name for entry in self.consumers)


def compute_assignment(
    layout: SegmentLayout, consumers: Iterable[str], drained: Set[int]
) -> SubscriptionAssignment:
    """Drain-gate the layout for this subscription, then deal the assignable segments round-robin.

    Call it again whenever a consumer joins or leaves, the layout changes, a segment drains, or
    the subscription seeks (passing the drained set as it is *after* the seek).

    Raises:
        InvalidInputError: see :func:`assignable_segments` and :func:`assign_round_robin`.
    """
    dealt = assign_round_robin(assignable_segments(layout, drained), consumers)
    return SubscriptionAssignment(
        layout_epoch=layout.epoch,
        consumers=tuple(ConsumerAssignment(name, ids) for name, ids in dealt.items()),
    )


def changed_consumers(
    before: SubscriptionAssignment | Mapping[str, tuple[int, ...]] | None,
    after: SubscriptionAssignment,
) -> tuple[str, ...]:
    """Consumers of ``after`` whose segments differ from ``before`` (new members included).

    The coordinator pushes a new assignment only to these. A change of layout epoch alone does
    not count: a consumer keeping the same segments has nothing to reconnect. Consumers that
    left (in ``before`` only) are not listed; there is nobody to push to.
    """
    if before is None:
        previous: Mapping[str, tuple[int, ...]] = {}
    elif isinstance(before, SubscriptionAssignment):
        previous = before.as_dict()
    else:
        previous = before
    return tuple(
        entry.consumer_name
        for entry in after.consumers
        if previous.get(entry.consumer_name) != entry.segment_ids
    )


__all__ = [
    "ConsumerAssignment",
    "SubscriptionAssignment",
    "assign_round_robin",
    "assignable_segments",
    "changed_consumers",
    "compute_assignment",
]
