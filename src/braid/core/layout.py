"""PIP-468's ``SegmentLayout``: the immutable, versioned segment DAG of a scalable topic.

A layout is a snapshot: every segment (:class:`~braid.core.segment_info.SegmentInfo`) ever created
and not yet pruned, active or sealed, linked by parent/child edges from splits and merges. Its
``ACTIVE`` segments tile the ring ``0x0000-0xFFFF`` exactly. Every DAG mutation (split, merge,
prune) returns a new layout with ``epoch + 1`` and leaves the original untouched, so readers share
snapshots without locks.

Decisions (see the tests that pin them):

* ``with_properties`` / ``with_auto_scale_policy`` keep the epoch: the epoch versions the DAG, which
  clients compare to drop stale pushes, and neither call changes the DAG. The metadata store's own
  version guards concurrent writes.
* ``prune_segment`` removes the segment's id from its children's ``parent_ids`` and its parents'
  ``child_ids``, so no id ever dangles; a loaded document with an unknown parent or child id is
  corrupt. The garbage collector is expected to prune from the roots down: pruning a segment that
  still has parents disconnects them from its children.
* Every constructed layout is validated (:mod:`braid.core.layout_invariants`: tiling, references,
  epochs, acyclicity) and a violation raises :class:`~braid.core.segment_info.CorruptLayout`
  naming the problem, so a loaded document and a computed layout obey the same rules.
* Its JSON form, PIP-468's ``ScalableTopicMetadata``, is :mod:`braid.core.layout_codec`'s.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from braid.core.errors import IllegalStateError, InvalidInputError, NotFoundError
from braid.core.layout_invariants import check_layout_invariants
from braid.core.names import TopicDomain, TopicName
from braid.core.ranges import MAX_HASH, MIN_HASH, RING_SIZE, HashRange
from braid.core.segment_info import MAX_LONG, CorruptLayout, SegmentInfo, check_long

#: The most entry buckets a segment may have (a bucket is owned by one consumer at a time).
MAX_ENTRY_BUCKETS = 256


class SegmentNotFound(NotFoundError):
    """The layout has no segment with the requested id."""


class InvalidSplitHash(InvalidInputError):
    """A split point outside the segment (it must leave a hash on each side)."""


class InvalidLayoutOperation(IllegalStateError):
    """A split, merge or prune is not valid for the segments' current state."""


def _check_now_ms(now_ms: object) -> int:
    if isinstance(now_ms, bool) or not isinstance(now_ms, int) or not 0 <= now_ms <= MAX_LONG:
        raise InvalidInputError(f"now_ms must be a non-negative integer, got {now_ms!r}")
    return now_ms


@dataclass(frozen=True, eq=True)
class SegmentLayout:
    """An immutable, validated snapshot of a scalable topic's segment DAG.

    Attributes:
        epoch: version of the DAG, incremented by every split, merge and prune.
        next_segment_id: the id the next created segment gets; above every id in the layout.
        segments: every segment (active and sealed) by id; read-only.
        properties: free-form string properties of the topic; read-only.
        auto_scale_policy: the topic's raw auto-scale override (a JSON object, deeply read-only),
            or ``None``; :mod:`braid.core.autoscale_policy` gives it meaning.
        entry_buckets: the PIP-486 entry-bucket count of every segment (Braid's
            ``entryBuckets``; 1 = no bucket sharing), fixed when the topic is created.

    Raises:
        CorruptLayout: the snapshot breaks an invariant (message names the offending segments).
    """

    epoch: int
    next_segment_id: int
    segments: Mapping[int, SegmentInfo]
    properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    auto_scale_policy: Mapping[str, object] | None = None
    entry_buckets: int = 1
    _active: tuple[SegmentInfo, ...] = field(init=False, repr=False, compare=False)
    _active_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_long("epoch", self.epoch)
        check_long("nextSegmentId", self.next_segment_id)
        if not isinstance(self.segments, Mapping):
            raise CorruptLayout(f"segments must be a mapping, got {type(self.segments).__name__}")
        segments: dict[int, SegmentInfo] = {}
        for key in sorted(self.segments, key=_sort_key):
            info = self.segments[key]
            if not isinstance(info, SegmentInfo):
                raise CorruptLayout(f"segment {key!r} is not a SegmentInfo: {info!r}")
            if key != info.segment_id:
                raise CorruptLayout(f"segment keyed {key!r} has segmentId {info.segment_id}")
            segments[info.segment_id] = info
        object.__setattr__(self, "segments", MappingProxyType(segments))
        object.__setattr__(self, "properties", _freeze_properties(self.properties))
        if self.auto_scale_policy is not None:
            if not isinstance(self.auto_scale_policy, Mapping):
                raise CorruptLayout(
                    f"autoScalePolicy must be a JSON object, got {self.auto_scale_policy!r}"
                )
            object.__setattr__(
                self, "auto_scale_policy", freeze_json(self.auto_scale_policy, "autoScalePolicy")
            )
        buckets = self.entry_buckets
        if isinstance(buckets, bool) or not isinstance(buckets, int):
            raise CorruptLayout(f"entryBuckets must be an integer, got {buckets!r}")
        if not 1 <= buckets <= MAX_ENTRY_BUCKETS:
            raise CorruptLayout(f"entryBuckets must be in 1..{MAX_ENTRY_BUCKETS}, got {buckets}")
        active = check_layout_invariants(self.epoch, self.next_segment_id, segments)
        object.__setattr__(self, "_active", active)
        object.__setattr__(self, "_active_starts", tuple(s.hash_range.start for s in active))

    def __hash__(self) -> int:
        return hash((self.epoch, self.next_segment_id, tuple(self.segments.values())))

    # ----------------------------------------------------------------------------- construction

    @classmethod
    def initial(
        cls,
        n: int,
        now_ms: int = 0,
        properties: Mapping[str, str] | None = None,
        *,
        entry_buckets: int = 1,
    ) -> SegmentLayout:
        """The epoch-0 layout of a new topic: ``n`` equal active segments with ids ``0..n-1``.

        Each covers ``65536 // n`` positions; the last also takes the remainder up to ``0xFFFF``.
        ``entry_buckets`` is the PIP-486 bucket count of every segment of the topic (fixed for
        the topic's life, so a segment's boundaries never change).

        Raises:
            InvalidInputError: ``n`` is not an integer in ``1..65536``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= RING_SIZE:
            raise InvalidInputError(
                f"a scalable topic needs between 1 and {RING_SIZE} initial segments, got {n!r}"
            )
        now_ms = _check_now_ms(now_ms)
        width = RING_SIZE // n
        segments = {}
        for i in range(n):
            end = MAX_HASH if i == n - 1 else (i + 1) * width - 1
            segments[i] = SegmentInfo.active(i, HashRange(i * width, end), 0, now_ms)
        return cls(
            0, n, segments, properties if properties is not None else {}, None, entry_buckets
        )

    @classmethod
    def migrated(
        cls,
        legacy_topics: Sequence[str],
        segments: int,
        now_ms: int = 0,
        properties: Mapping[str, str] | None = None,
        *,
        entry_buckets: int = 1,
    ) -> SegmentLayout:
        """The epoch-1 layout of a classic topic migrated to a scalable topic (ADR 0063).

        Segment ``i`` is a sealed legacy root wrapping ``legacy_topics[i]`` (the partitions in
        order, or the one non-partitioned topic); segments ``P..P+segments-1`` are active, with
        the ranges :meth:`initial` gives, and each has *every* legacy root as a parent.

        Raises:
            InvalidInputError: no legacy topic, a name that is not ``persistent://`` or twice,
                or ``segments`` not an integer in ``1..65536``.
        """
        topics = list(legacy_topics)
        if not topics:
            raise InvalidInputError("a migration needs at least one classic topic")
        for topic in topics:
            name = TopicName.parse(topic) if isinstance(topic, str) else None
            if name is None or name.domain is not TopicDomain.PERSISTENT or str(name) != topic:
                raise InvalidInputError(f"{topic!r} is not a canonical persistent:// topic name")
        if len(set(topics)) != len(topics):
            raise InvalidInputError(f"a classic topic is listed twice: {topics}")
        now_ms = _check_now_ms(now_ms)
        shape = cls.initial(segments, now_ms)
        roots = tuple(range(len(topics)))
        children = tuple(len(topics) + s.segment_id for s in shape.active_segments)
        infos: dict[int, SegmentInfo] = {
            sid: SegmentInfo.legacy_root(sid, topic, 1, children, now_ms)
            for sid, topic in zip(roots, topics, strict=True)
        }
        for seg in shape.active_segments:
            cid = len(topics) + seg.segment_id
            infos[cid] = SegmentInfo.active(cid, seg.hash_range, 1, now_ms, roots)
        return cls(
            1,
            len(topics) + shape.next_segment_id,
            infos,
            properties if properties is not None else {},
            None,
            entry_buckets,
        )

    # ----------------------------------------------------------------------------- queries

    @property
    def active_segments(self) -> list[SegmentInfo]:
        """The active segments, sorted by hash range start (a fresh list)."""
        return list(self._active)

    @property
    def legacy_segments(self) -> list[SegmentInfo]:
        """The legacy roots (partitions of a migrated topic) still in the DAG, by id."""
        return [s for s in self.segments.values() if s.legacy_topic_name is not None]

    @property
    def sealed_segments(self) -> list[SegmentInfo]:
        """The sealed segments still in the DAG, sorted by id (a fresh list)."""
        return [s for s in self.segments.values() if not s.is_active]

    def segment(self, segment_id: int) -> SegmentInfo:
        """The segment with this id.

        Raises:
            SegmentNotFound: no such segment in the layout.
        """
        info = self.segments.get(segment_id)
        if info is None:
            raise SegmentNotFound(
                f"segment {segment_id!r} is not in the layout (epoch {self.epoch})"
            )
        return info

    def find_active_segment(self, hash_value: int) -> SegmentInfo:
        """The active segment whose range contains ``hash_value``.

        Raises:
            InvalidInputError: ``hash_value`` is not a ring position ``0..0xFFFF``.
        """
        if (
            isinstance(hash_value, bool)
            or not isinstance(hash_value, int)
            or not MIN_HASH <= hash_value <= MAX_HASH
        ):
            raise InvalidInputError(f"hash {hash_value!r} is not a ring position 0..0xffff")
        # The active set tiles the ring, so the last start <= hash is the owner.
        return self._active[bisect.bisect_right(self._active_starts, hash_value) - 1]

    def parents(self, segment_id: int) -> tuple[int, ...]:
        """Ids of the segment's parents, ascending."""
        return tuple(sorted(self.segment(segment_id).parent_ids))

    def children(self, segment_id: int) -> tuple[int, ...]:
        """Ids of the segment's children, ascending."""
        return tuple(sorted(self.segment(segment_id).child_ids))

    def ancestors(self, segment_id: int) -> frozenset[int]:
        """Ids of every segment reachable through parent edges (the segment itself excluded)."""
        return self._reach(segment_id, "parent_ids")

    def descendants(self, segment_id: int) -> frozenset[int]:
        """Ids of every segment reachable through child edges (the segment itself excluded)."""
        return self._reach(segment_id, "child_ids")

    def lineage(self, segment_id: int) -> frozenset[int]:
        """Ancestors, the segment itself and descendants."""
        return self.ancestors(segment_id) | {segment_id} | self.descendants(segment_id)

    def merge_depth(self, segment_id: int) -> int:
        """Merges on the deepest path from a root to this segment, the segment included.

        A merge node is a segment with two or more parents; splits never count, so a segment that
        was never merged (nor descends from a merge) has depth 0. This is PIP-483's ``dagDepth``.
        It is computed on the DAG as it stands: once pruning removes a merge's parents, that merge
        no longer counts.
        """
        lineage = self.ancestors(segment_id) | {segment_id}
        depth: dict[int, int] = {}
        # Parents are always created in an earlier epoch than their children, so creation order is
        # a topological order; iterating avoids recursion limits on very deep DAGs.
        order = sorted(lineage, key=lambda i: (self.segments[i].created_at_epoch, i))
        for sid in order:
            info = self.segments[sid]
            inherited = max((depth[p] for p in info.parent_ids), default=0)
            depth[sid] = inherited + (1 if len(info.parent_ids) >= 2 else 0)
        return depth[segment_id]

    def _reach(self, segment_id: int, edge: str) -> frozenset[int]:
        start: SegmentInfo = self.segment(segment_id)
        seen: set[int] = set()
        stack = list(getattr(start, edge))
        while stack:
            sid = stack.pop()
            if sid not in seen:
                seen.add(sid)
                stack.extend(getattr(self.segments[sid], edge))
        return frozenset(seen)

    # ----------------------------------------------------------------------------- mutations

    def split_segment(
        self, segment_id: int, now_ms: int = 0, *, split_hash: int | None = None
    ) -> SegmentLayout:
        """Split an active segment into two new children (PIP-468).

        At its midpoint by default; ``split_hash`` instead names the first hash of the upper
        child (Kinesis' ``NewStartingHashKey``), so a split can cut where the load is. The lower
        half gets id ``next_segment_id``, the upper half the one after.

        Raises:
            SegmentNotFound: no such segment.
            InvalidLayoutOperation: the segment is sealed or covers a single hash.
            InvalidSplitHash: ``split_hash`` is not inside it with a hash on each side.
        """
        now_ms = _check_now_ms(now_ms)
        parent = self.segment(segment_id)
        if not parent.is_active:
            raise InvalidLayoutOperation(f"cannot split segment {segment_id}: it is sealed")
        if parent.hash_range.size < 2:
            raise InvalidLayoutOperation(
                f"cannot split segment {segment_id}: its range {parent.hash_range} is one hash wide"
            )
        epoch = self.epoch + 1
        try:
            low, high = parent.hash_range.split(split_hash)
        except InvalidInputError as exc:
            raise InvalidSplitHash(f"cannot split segment {segment_id}: {exc}") from exc
        low_id, high_id = self.next_segment_id, self.next_segment_id + 1
        segments = dict(self.segments)
        segments[segment_id] = parent.sealed(epoch, now_ms, (low_id, high_id))
        segments[low_id] = SegmentInfo.active(low_id, low, epoch, now_ms, (segment_id,))
        segments[high_id] = SegmentInfo.active(high_id, high, epoch, now_ms, (segment_id,))
        return self._evolve(epoch, high_id + 1, segments)

    def merge_segments(self, segment_ids: Sequence[int], now_ms: int = 0) -> SegmentLayout:
        """Merge two or more active, hash-adjacent segments into one new child.

        The ids may come in any order; together the ranges must form one contiguous range. The
        child's ``parent_ids`` are sorted ascending.

        Raises:
            SegmentNotFound: an id is not in the layout.
            InvalidLayoutOperation: fewer than two distinct ids, a sealed segment, or ranges that do
                not join into one contiguous range.
        """
        now_ms = _check_now_ms(now_ms)
        ids = list(segment_ids)
        if len(ids) < 2:
            raise InvalidLayoutOperation(f"a merge needs at least two segments, got {ids}")
        if len(set(ids)) != len(ids):
            raise InvalidLayoutOperation(f"a merge lists a segment twice: {ids}")
        parents = sorted((self.segment(i) for i in ids), key=lambda s: s.hash_range)
        sealed = [s.segment_id for s in parents if not s.is_active]
        if sealed:
            raise InvalidLayoutOperation(f"cannot merge segments {ids}: {sealed} already sealed")
        merged = parents[0].hash_range
        for prev, cur in itertools.pairwise(parents):
            if prev.hash_range.end + 1 != cur.hash_range.start:
                raise InvalidLayoutOperation(
                    f"cannot merge segments {ids}: segment {prev.segment_id} {prev.hash_range} and "
                    f"segment {cur.segment_id} {cur.hash_range} are not adjacent"
                )
            merged = merged.merge(cur.hash_range)
        epoch = self.epoch + 1
        child_id = self.next_segment_id
        parent_ids = tuple(sorted(ids))
        segments = dict(self.segments)
        for info in parents:
            segments[info.segment_id] = info.sealed(epoch, now_ms, (child_id,))
        segments[child_id] = SegmentInfo.active(child_id, merged, epoch, now_ms, parent_ids)
        return self._evolve(epoch, child_id + 1, segments)

    def prune_segment(self, segment_id: int) -> SegmentLayout:
        """Remove a sealed segment and every edge to it (epoch + 1).

        Raises:
            SegmentNotFound: no such segment.
            InvalidLayoutOperation: the segment is still active.
        """
        return self.prune_segments((segment_id,))

    def prune_segments(self, segment_ids: Sequence[int]) -> SegmentLayout:
        """Remove several sealed segments and every edge to them as one change (epoch + 1).

        The garbage collector prunes everything it found in one tick this way, so clients see
        one layout change, not one per segment. An empty ``segment_ids`` returns this layout.

        Raises:
            SegmentNotFound: an id is not in the layout.
            InvalidLayoutOperation: a segment is still active.
        """
        if not segment_ids:
            return self
        segments = dict(self.segments)
        for segment_id in dict.fromkeys(segment_ids):
            info = self.segment(segment_id)
            if info.is_active:
                raise InvalidLayoutOperation(
                    f"cannot prune segment {segment_id}: it is still active"
                )
            del segments[segment_id]
        for segment_id in dict.fromkeys(segment_ids):
            info = self.segments[segment_id]
            for child_id in info.child_ids:
                if child_id in segments:
                    child = segments[child_id]
                    segments[child_id] = replace(
                        child,
                        parent_ids=tuple(pid for pid in child.parent_ids if pid != segment_id),
                    )
            for parent_id in info.parent_ids:
                if parent_id in segments:
                    parent = segments[parent_id]
                    segments[parent_id] = replace(
                        parent,
                        child_ids=tuple(cid for cid in parent.child_ids if cid != segment_id),
                    )
        return self._evolve(self.epoch + 1, self.next_segment_id, segments)

    def with_properties(self, properties: Mapping[str, str]) -> SegmentLayout:
        """The same DAG with ``properties`` replaced; the epoch is kept (the DAG did not change)."""
        return SegmentLayout(
            self.epoch,
            self.next_segment_id,
            self.segments,
            properties,
            self.auto_scale_policy,
            self.entry_buckets,
        )

    def with_auto_scale_policy(self, policy: Mapping[str, object] | None) -> SegmentLayout:
        """The same DAG with the per-topic auto-scale override replaced (``None`` clears it).

        The epoch is kept: the DAG did not change.
        """
        return SegmentLayout(
            self.epoch,
            self.next_segment_id,
            self.segments,
            self.properties,
            policy,
            self.entry_buckets,
        )

    def _evolve(
        self, epoch: int, next_segment_id: int, segments: Mapping[int, SegmentInfo]
    ) -> SegmentLayout:
        return SegmentLayout(
            epoch,
            next_segment_id,
            segments,
            self.properties,
            self.auto_scale_policy,
            self.entry_buckets,
        )

    @property
    def entry_bucket_splits(self) -> tuple[int, ...]:
        """Every segment's PIP-486 bucket boundaries: the start hashes of buckets ``1..N-1``
        (``SegmentInfoProto.entry_bucket_splits``), equal widths of the 16-bit bucket-hash
        space; empty with one bucket."""
        n = self.entry_buckets
        return tuple(i * RING_SIZE // n for i in range(1, n))

    def __str__(self) -> str:
        active = " ".join(f"{s.segment_id}:{s.hash_range.to_hex()}" for s in self._active)
        return (
            f"SegmentLayout(epoch={self.epoch}, next={self.next_segment_id}, "
            f"active=[{active}], sealed={len(self.segments) - len(self._active)})"
        )


# --------------------------------------------------------------------------------- field checks


def _sort_key(key: object) -> tuple[int, str]:
    # Non-int keys are reported by the caller's check; sorting must not crash on them first.
    return (key, "") if isinstance(key, int) and not isinstance(key, bool) else (-1, repr(key))


def _freeze_properties(properties: object) -> Mapping[str, str]:
    if not isinstance(properties, Mapping):
        raise CorruptLayout(f"properties must be a mapping of strings, got {properties!r}")
    frozen: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise CorruptLayout(f"property {key!r}={value!r}: keys and values must be strings")
        frozen[key] = value
    return MappingProxyType(frozen)


def freeze_json(value: object, where: str) -> Mapping[str, object]:
    """A deeply read-only copy of a JSON object (objects become mappings, arrays tuples).

    Raises:
        CorruptLayout: ``value`` is not a JSON object of JSON values (finite numbers only).
    """
    frozen = _freeze_value(value, where)
    if not isinstance(frozen, Mapping):
        raise CorruptLayout(f"{where} must be a JSON object, got {value!r}")
    return frozen


def _freeze_value(value: object, where: str) -> object:
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise CorruptLayout(f"{where} holds a non-finite number {value!r}")
        return value
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CorruptLayout(f"{where} has a non-string key {key!r}")
            out[key] = _freeze_value(item, f"{where}.{key}")
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(_freeze_value(item, f"{where}[{i}]") for i, item in enumerate(value))
    raise CorruptLayout(f"{where} holds a value that is not JSON: {value!r}")


def thaw_json(value: object) -> object:
    """A plain ``dict``/``list`` copy of a value frozen by :func:`freeze_json`."""
    if isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(item) for item in value]
    return value


__all__ = [
    "InvalidLayoutOperation",
    "InvalidSplitHash",
    "SegmentLayout",
    "SegmentNotFound",
    "freeze_json",
    "thaw_json",
]
