"""PIP-468's ``SegmentInfo``: one segment of a scalable topic's DAG, validated on construction.

A segment covers an inclusive hash range of the ring, is ``ACTIVE`` (accepts writes) or
``SEALED`` (split or merged away), and links to the segments it came from (``parent_ids``) and
the ones that replaced it (``child_ids``). Braid adds wall-clock ``created_at_ms`` /
``sealed_at_ms``. A record never contradicts its own state: an active segment has no children and
no seal time; a sealed one was sealed in a later epoch than it was created.

A *legacy* segment (``legacy_topic_name`` set) is served by a classic ``persistent://`` topic - a
partition of a topic migrated to a scalable topic (ADR 0063). Its keys were placed by the
producer's partition routing, not by hash, so it covers the whole ring, and it is a root (no
parents): a classic topic existed before the scalable topic. Checks that span segments (edges,
tiling, acyclicity, the migration rule) are :mod:`braid.core.layout_invariants`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName
from braid.core.ranges import MAX_HASH, MIN_HASH, HashRange

# Epochs, ids and timestamps are Java longs upstream; keep every value within a signed 64-bit.
MAX_LONG = 2**63 - 1

#: The range of a legacy segment: a classic topic may hold a key of any hash.
FULL_RING = HashRange(MIN_HASH, MAX_HASH)


class CorruptLayout(InvalidInputError):
    """A layout (usually a loaded document) breaks an invariant; the message names it."""


class SegmentState(StrEnum):
    """Lifecycle state of a segment, spelled as in the metadata JSON."""

    ACTIVE = "ACTIVE"
    SEALED = "SEALED"


def check_long(what: str, value: object) -> int:
    """``value`` if it is an integer in ``0..MAX_LONG``, else raise :class:`CorruptLayout`.

    Epochs, ids and timestamps are Java longs upstream; the message names ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptLayout(f"{what} must be an integer, got {value!r}")
    if not 0 <= value <= MAX_LONG:
        raise CorruptLayout(f"{what} must be in 0..{MAX_LONG}, got {value}")
    return value


def _is_long(value: object) -> bool:
    # ``type(...) is int`` also rules out ``bool``.
    return type(value) is int and 0 <= value <= MAX_LONG


_TIME_FIELDS = ("createdAtEpoch", "sealedAtEpoch", "createdAtMs", "sealedAtMs")


def _check_ids(sid: int, name: str, ids: object) -> tuple[int, ...]:
    if not isinstance(ids, tuple | list):
        raise CorruptLayout(f"segment {sid}: {name} must be a sequence of ids, got {ids!r}")
    if not all(_is_long(i) for i in ids):
        for i in ids:
            check_long(f"segment {sid}: {name} entry", i)
    if len(set(ids)) != len(ids):
        raise CorruptLayout(f"segment {sid}: {name} lists an id twice: {list(ids)}")
    if sid in ids:
        raise CorruptLayout(f"segment {sid}: lists itself in {name}")
    return tuple(ids)


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment of the DAG (PIP-468 "SegmentInfo" plus wall-clock creation/seal times).

    ``sealed_at_epoch`` and ``sealed_at_ms`` are 0 while the segment is active.
    ``legacy_topic_name`` is the canonical ``persistent://`` topic serving a legacy segment, or
    ``None`` for a managed segment (served as its ``segment://`` topic).

    Raises:
        CorruptLayout: a field has the wrong type or the record contradicts its own state.
    """

    segment_id: int
    hash_range: HashRange
    state: SegmentState
    parent_ids: tuple[int, ...]
    child_ids: tuple[int, ...]
    created_at_epoch: int
    sealed_at_epoch: int
    created_at_ms: int = 0
    sealed_at_ms: int = 0
    legacy_topic_name: str | None = None

    def __post_init__(self) -> None:
        # Layouts are rebuilt (and so revalidated) on every mutation: check cheaply first and build
        # an error message only on failure.
        sid = self.segment_id
        if not _is_long(sid):
            check_long("segmentId", sid)
        if not isinstance(self.hash_range, HashRange):
            raise CorruptLayout(
                f"segment {sid}: hash range must be a HashRange: {self.hash_range!r}"
            )
        if not isinstance(self.state, SegmentState):
            raise CorruptLayout(f"segment {sid}: state must be a SegmentState, got {self.state!r}")
        object.__setattr__(self, "parent_ids", _check_ids(sid, "parentIds", self.parent_ids))
        object.__setattr__(self, "child_ids", _check_ids(sid, "childIds", self.child_ids))
        times = (self.created_at_epoch, self.sealed_at_epoch, self.created_at_ms, self.sealed_at_ms)
        if not all(_is_long(t) for t in times):
            for name, value in zip(_TIME_FIELDS, times, strict=True):
                check_long(f"segment {sid}: {name}", value)
        if self.state is SegmentState.ACTIVE:
            if self.sealed_at_epoch != 0 or self.sealed_at_ms != 0:
                raise CorruptLayout(
                    f"segment {sid}: ACTIVE but sealedAtEpoch={self.sealed_at_epoch}, "
                    f"sealedAtMs={self.sealed_at_ms} (both must be 0)"
                )
            if self.child_ids:
                raise CorruptLayout(
                    f"segment {sid}: ACTIVE but has children {list(self.child_ids)}"
                )
        elif self.sealed_at_epoch <= self.created_at_epoch:
            # Sealing is part of a split/merge, which always runs in a later epoch.
            raise CorruptLayout(
                f"segment {sid}: sealedAtEpoch {self.sealed_at_epoch} is not after its "
                f"createdAtEpoch {self.created_at_epoch}"
            )
        if self.legacy_topic_name is not None:
            self._check_legacy()

    def _check_legacy(self) -> None:
        sid = self.segment_id
        name = self.legacy_topic_name
        if not isinstance(name, str):
            raise CorruptLayout(f"segment {sid}: legacyTopicName must be a string, got {name!r}")
        try:
            parsed = TopicName.parse(name)
        except InvalidInputError as exc:
            raise CorruptLayout(f"segment {sid}: legacyTopicName {name!r}: {exc}") from exc
        if parsed.domain is not TopicDomain.PERSISTENT or str(parsed) != name:
            raise CorruptLayout(
                f"segment {sid}: legacyTopicName {name!r} is not a canonical persistent:// name"
            )
        if self.hash_range != FULL_RING:
            raise CorruptLayout(
                f"segment {sid}: legacy segment of {name} covers {self.hash_range}, not the whole "
                f"ring {FULL_RING} (its keys were placed by partition routing, not by hash)"
            )
        if self.parent_ids:
            raise CorruptLayout(
                f"segment {sid}: legacy segment of {name} has parents {list(self.parent_ids)} "
                "(a legacy segment is a root of the DAG)"
            )

    @classmethod
    def active(
        cls,
        segment_id: int,
        hash_range: HashRange,
        epoch: int,
        now_ms: int = 0,
        parent_ids: Sequence[int] = (),
    ) -> SegmentInfo:
        """A new active segment created at ``epoch`` (and wall-clock ``now_ms``)."""
        return cls(
            segment_id=segment_id,
            hash_range=hash_range,
            state=SegmentState.ACTIVE,
            parent_ids=tuple(parent_ids),
            child_ids=(),
            created_at_epoch=epoch,
            sealed_at_epoch=0,
            created_at_ms=now_ms,
            sealed_at_ms=0,
        )

    @classmethod
    def legacy_root(
        cls,
        segment_id: int,
        topic: str,
        sealed_at_epoch: int,
        child_ids: Sequence[int],
        now_ms: int,
    ) -> SegmentInfo:
        """A sealed legacy root wrapping the classic topic ``topic`` (created at epoch 0, sealed
        at ``sealed_at_epoch`` with ``child_ids``), as a migration creates it (ADR 0063)."""
        return cls(
            segment_id=segment_id,
            hash_range=FULL_RING,
            state=SegmentState.SEALED,
            parent_ids=(),
            child_ids=tuple(child_ids),
            created_at_epoch=0,
            sealed_at_epoch=sealed_at_epoch,
            created_at_ms=now_ms,
            sealed_at_ms=now_ms,
            legacy_topic_name=topic,
        )

    @property
    def is_legacy(self) -> bool:
        """Whether a classic ``persistent://`` topic serves this segment."""
        return self.legacy_topic_name is not None

    @property
    def is_active(self) -> bool:
        """Whether the segment still accepts writes."""
        return self.state is SegmentState.ACTIVE

    def sealed(self, epoch: int, now_ms: int, child_ids: Sequence[int]) -> SegmentInfo:
        """This segment sealed at ``epoch``/``now_ms`` with the given children."""
        return replace(
            self,
            state=SegmentState.SEALED,
            sealed_at_epoch=epoch,
            sealed_at_ms=now_ms,
            child_ids=tuple(child_ids),
        )


def ring_order(segment: SegmentInfo) -> tuple[int, int]:
    """Sort key of segments along the ring: hash range start, then id (sealed ones may overlap)."""
    return (segment.hash_range.start, segment.segment_id)


__all__ = [
    "FULL_RING",
    "MAX_LONG",
    "CorruptLayout",
    "SegmentInfo",
    "SegmentState",
    "check_long",
    "ring_order",
]
