"""Segment-to-consumer assignment of ordered subscriptions (PIP-468 ``ConsumerAssignment``).

A STREAM or CHECKPOINT subscription's ``SubscriptionCoordinator`` (an I/O shell in the scalable
layer) gives every *readable* segment — what drain gating (:mod:`braid.core.drain`) lets this
subscription read now — to exactly one consumer, round-robin: segments sorted by hash range start
(then id), consumers sorted by name, segment ``i`` to consumer ``i mod n``. The coordinator
recomputes on every consumer change, layout change, drained segment and seek, and pushes a new
assignment only to consumers whose segments changed (:func:`changed_consumers`).

A membership change deals afresh (the result depends only on the layout, the drained set and
the members). A drain, layout change or seek deals *stickily* (:func:`deal_sticky`, ADR 0043):
every consumer keeps the readable segments it has, each newly readable segment goes to the
consumer that owned one of its parents (the one that just drained it) - or, below empty drained
segments, to the consumer that opened it ahead - unless that would leave the counts more than one
apart, and only then are segments moved to even the counts. A walk down
a DAG then stays with the consumer that reads it, instead of moving segments that are being read
from one consumer to another at every hand-over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from braid.core.drain import readable_segments
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.segment_info import SegmentInfo, ring_order


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
    for index, segment in enumerate(sorted(segments, key=ring_order)):
        dealt[ordered_names[index % len(ordered_names)]].append(segment.segment_id)
    return {name: tuple(segment_ids) for name, segment_ids in dealt.items()}


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


def deal_sticky(
    segments: Sequence[SegmentInfo],
    consumers: Iterable[str],
    previous: Mapping[str, Sequence[int]],
    ahead: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, tuple[int, ...]]:
    """Deal ``segments`` keeping what ``previous`` gave each consumer (see the module doc).
    ``ahead``: the segments each consumer has opened ahead; a newly readable one goes to the
    consumer that opened it, like one whose parent it owned (the counts permitting).

    Every consumer appears; every segment goes to exactly one consumer; counts differ by at
    most one; each consumer's segments are in ring order. Ties (several parents' owners,
    several least-loaded consumers) go to the consumer first by name, so the result depends
    only on the inputs.

    Raises:
        InvalidInputError: a segment id appears twice, or a consumer name is not a string.
    """
    names = sorted(assign_round_robin([], consumers))
    if not names:
        return {}
    ids = [segment.segment_id for segment in segments]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"a segment is listed twice for assignment: {sorted(ids)}")
    owned_before = {sid: name for name in names for sid in previous.get(name, ())}
    dealt: dict[str, list[int]] = {name: [] for name in names}
    fresh: list[SegmentInfo] = []
    for segment in sorted(segments, key=ring_order):
        owner = owned_before.get(segment.segment_id)
        if owner is not None:
            dealt[owner].append(segment.segment_id)
        else:
            fresh.append(segment)

    def least_loaded(among: Iterable[str]) -> str:
        return min(among, key=lambda name: (len(dealt[name]), name))

    opened_by = {sid: name for name in names for sid in (ahead or {}).get(name, ())}
    for segment in fresh:
        opener = opened_by.get(segment.segment_id)
        parents_owners = (
            {opener}
            if opener is not None
            else {owned_before[p] for p in segment.parent_ids if p in owned_before}
        )
        lightest = least_loaded(names)
        choice = least_loaded(parents_owners) if parents_owners else lightest
        if len(dealt[choice]) > len(dealt[lightest]):
            choice = lightest
        dealt[choice].append(segment.segment_id)
    while True:
        heaviest = max(names, key=lambda name: (len(dealt[name]), name))
        lightest = least_loaded(names)
        if len(dealt[heaviest]) - len(dealt[lightest]) <= 1:
            break
        dealt[lightest].append(dealt[heaviest].pop())
    order = {segment.segment_id: ring_order(segment) for segment in segments}
    return {name: tuple(sorted(sids, key=order.__getitem__)) for name, sids in dealt.items()}


def compute_assignment(
    layout: SegmentLayout,
    consumers: Iterable[str],
    drained: Set[int],
    previous: Mapping[str, Sequence[int]] | None = None,
    *,
    readable: Sequence[SegmentInfo] | None = None,
    ahead: Mapping[str, Sequence[int]] | None = None,
) -> SubscriptionAssignment:
    """Drain-gate the layout for this subscription, then deal the readable segments:
    round-robin, or stickily from ``previous`` (each consumer's current segments) when given.

    Call it again whenever a consumer joins or leaves (without ``previous``), the layout
    changes, a segment drains, or the subscription seeks (passing the drained set as it is
    *after* the seek). ``readable``: what :func:`~braid.core.drain.readable_segments` gives
    for ``layout`` and ``drained``, when the caller keeps it already (a
    :class:`~braid.core.drain.DrainFrontier`). ``ahead``: each consumer's segments opened ahead
    (a sticky deal only, see :func:`deal_sticky`).

    Raises:
        InvalidInputError: see :func:`~braid.core.drain.readable_segments` and
            :func:`assign_round_robin`.
    """
    if readable is None:
        readable = readable_segments(layout, drained)
    if previous is None:
        dealt = assign_round_robin(readable, consumers)
    else:
        dealt = deal_sticky(readable, consumers, previous, ahead)
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
    "changed_consumers",
    "compute_assignment",
    "deal_sticky",
]
