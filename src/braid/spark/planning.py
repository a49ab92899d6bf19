"""Micro-batch planning: the next end offset, and the read ranges between two offsets. Pure.

The driver gathers a :class:`TopicSnapshot` (the topic's segment DAG and the newest position of
every active segment, :mod:`braid.spark.topology`) and calls :func:`plan_next` to decide how far
the next micro-batch reads. The rules:

* **parent before child** - a segment is *eligible* for a batch only when every ancestor still in
  the layout is drained in the batch's *start* offset, i.e. was read to its end in an earlier
  batch. So every row of a key from a parent is in an earlier batch than any row of that key from
  a child. (A segment whose sealed parent has no data waits one extra batch: the batch that marks
  the parent drained.)
* an eligible **sealed** segment is read to its end (``drained``); an eligible **active** one up
  to its newest position; nothing moves backwards;
* a **target** (``Trigger.AvailableNow``) caps every segment at its progress in the target, and
  segments the target does not know are not read;
* a segment recorded in ``start`` (not drained) that is no longer in the layout was deleted by
  retention before the query read it: it is reported in :attr:`Plan.lost`, and with
  ``skip_lost`` marked drained so the query goes on (``failOnDataLoss=false``).

Every segment of the layout is recorded in the end offset (``after: null`` until it is read), so
a later deletion of unread data is detected.

:func:`plan_ranges` turns ``(start, end)`` into one :class:`SegmentRange` per segment with data
to read; it depends on nothing but the two offsets, so Spark re-planning a batch after a restart
gets exactly the same ranges, whatever happened to the topic since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from braid.spark.offsets import (
    BEGINNING,
    DRAINED,
    Position,
    SegmentProgress,
    SourceOffset,
    TopicProgress,
    earlier,
    later,
)


@dataclass(frozen=True, slots=True)
class SegmentView:
    """One segment of a snapshot: its parents and whether it is sealed."""

    segment_id: int
    parents: tuple[int, ...] = ()
    sealed: bool = False


@dataclass(frozen=True, slots=True)
class TopicSnapshot:
    """What the driver knows about a topic right now.

    ``latest`` holds the newest stored position of each *active* segment that has data (sealed
    segments are read to their end, whatever it is).
    """

    topic: str
    epoch: int
    segments: Mapping[int, SegmentView]
    latest: Mapping[int, Position] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "segments", MappingProxyType(dict(sorted(self.segments.items()))))
        object.__setattr__(self, "latest", MappingProxyType(dict(self.latest)))

    def ancestors(self, segment_id: int) -> set[int]:
        """Every ancestor of ``segment_id`` still in the snapshot."""
        seen: set[int] = set()
        todo = list(self.segments[segment_id].parents)
        while todo:
            sid = todo.pop()
            if sid in seen or sid not in self.segments:
                continue
            seen.add(sid)
            todo.extend(self.segments[sid].parents)
        return seen

    def newest(self, segment_id: int) -> SegmentProgress:
        """How far ``segment_id`` can be read right now."""
        if self.segments[segment_id].sealed:
            return DRAINED
        position = self.latest.get(segment_id)
        return BEGINNING if position is None else SegmentProgress(position)

    def everything(self) -> TopicProgress:
        """The progress of having read everything available now (a ``Trigger.AvailableNow`` target,
        a batch query's ``latest`` end)."""
        return TopicProgress(self.epoch, {sid: self.newest(sid) for sid in self.segments})


@dataclass(frozen=True, slots=True)
class Plan:
    """The end offset of the next batch of one topic, and the segments lost to retention."""

    end: TopicProgress
    lost: tuple[int, ...] = ()


def plan_next(
    start: TopicProgress,
    snapshot: TopicSnapshot,
    target: TopicProgress | None = None,
    *,
    skip_lost: bool = False,
) -> Plan:
    """How far the next micro-batch of one topic reads (see the module docstring)."""
    end: dict[int, SegmentProgress] = {}
    lost: list[int] = []
    for sid, progress in start.segments.items():
        if sid in snapshot.segments:
            continue
        if progress.drained:
            continue  # read to its end, then deleted: nothing to remember
        lost.append(sid)
        end[sid] = DRAINED if skip_lost else progress
    for sid in snapshot.segments:
        current = start.get(sid)
        if current.drained:
            end[sid] = current
            continue
        eligible = all(start.is_drained(a) for a in snapshot.ancestors(sid))
        if not eligible:
            end[sid] = current
            continue
        proposed = later(current, snapshot.newest(sid))
        if target is not None:
            cap = target.segments.get(sid)
            proposed = current if cap is None else later(current, earlier(proposed, cap))
        end[sid] = proposed
    return Plan(TopicProgress(snapshot.epoch, end), tuple(sorted(lost)))


def reached(start: SourceOffset, target: SourceOffset) -> bool:
    """Whether ``start`` is at or past ``target`` in every segment the target names, and names
    no undrained segment the target does not.

    Then :func:`plan_next` with that target plans nothing more, whatever the topic looks like
    now: a segment the target names is capped at the target, one it does not name is not read,
    and no segment of ``start`` can be lost (one missing from the target - deleted before the
    target was taken - makes this false, so the caller plans and reports the loss).
    """
    for topic, goal in target.topics.items():
        progress = start.topic(topic)
        for sid, cap in goal.segments.items():
            if progress.get(sid).rank() < cap.rank():
                return False
    for topic, progress in start.topics.items():
        goal = target.topic(topic)
        for sid, at in progress.segments.items():
            if not at.drained and sid not in goal.segments:
                return False
    return True


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """Read one segment from just after ``start`` through ``end`` (to its end when drained),
    as planned against the layout at ``epoch``."""

    topic: str
    segment_id: int
    start: SegmentProgress
    end: SegmentProgress
    epoch: int


def plan_ranges(start: SourceOffset, end: SourceOffset) -> list[SegmentRange]:
    """The read ranges of the batch ``(start, end]``, ordered by topic then segment id.

    Deterministic: a function of the two offsets only.
    """
    ranges: list[SegmentRange] = []
    for topic, end_progress in end.topics.items():
        begin = start.topic(topic)
        for sid, stop in end_progress.segments.items():
            first = begin.get(sid)
            if first.drained or stop.rank() <= first.rank():
                continue
            ranges.append(SegmentRange(topic, sid, first, stop, end_progress.epoch))
    return ranges


def beyond(end: Position, position: Position) -> bool:
    """Whether the message at ``position`` comes after a range ending at ``end`` (not read)."""
    ledger, entry, index = position
    end_ledger, end_entry, end_index = end
    if (ledger, entry) != (end_ledger, end_entry):
        return (ledger, entry) > (end_ledger, end_entry)
    return index > end_index


def reaches(end: Position, position: Position, batch_size: int) -> bool:
    """Whether the message at ``position`` (of an entry of ``batch_size`` messages) is the last
    one of a range ending at ``end`` (a message not :func:`beyond` it)."""
    ledger, entry, index = position
    end_ledger, end_entry, end_index = end
    if (ledger, entry) != (end_ledger, end_entry):
        return False
    return index == end_index or index < 0 or index >= batch_size - 1


def budget_rounds(budget: int, open_ranges: Sequence[object]) -> int:
    """The per-range share of ``budget`` in one round of admission control (at least 1)."""
    return max(1, budget // max(1, len(open_ranges)))


__all__ = [
    "Plan",
    "SegmentRange",
    "SegmentView",
    "TopicSnapshot",
    "beyond",
    "budget_rounds",
    "plan_next",
    "plan_ranges",
    "reached",
    "reaches",
]
