"""The segment DAG of a scalable topic: :class:`SegmentInfo` and immutable :class:`SegmentLayout`.

A layout is a versioned snapshot (PIP-468 "SegmentLayout"): every segment ever created and not yet
pruned, active or sealed, linked by parent/child edges from splits and merges. Its ``ACTIVE``
segments tile the ring ``0x0000-0xFFFF`` exactly. Every DAG mutation (split, merge, prune) returns a
new layout with ``epoch + 1`` and leaves the original untouched, so readers share snapshots without
locks.

Decisions (see the tests that pin them):

* ``with_properties`` / ``with_auto_scale_policy`` keep the epoch: the epoch versions the DAG, which
  clients compare to drop stale pushes, and neither call changes the DAG. The metadata store's own
  version guards concurrent writes.
* ``prune_segment`` removes the segment's id from its children's ``parent_ids`` and its parents'
  ``child_ids``, so no id ever dangles; a loaded document with an unknown parent or child id is
  corrupt. The garbage collector is expected to prune from the roots down: pruning a segment that
  still has parents disconnects them from its children.
* Every constructed layout is validated (tiling, references, epochs, acyclicity) and a violation
  raises :class:`CorruptLayout` naming the problem, so a loaded document and a computed layout obey
  the same rules.
* The JSON is PIP-468's ``ScalableTopicMetadata`` plus ``createdAtMs``/``sealedAtMs`` per segment
  (written only when non-zero) and an optional top-level ``autoScalePolicy``.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType

from braid.core.errors import IllegalStateError, InvalidInputError, NotFoundError
from braid.core.ranges import MAX_HASH, MIN_HASH, RING_SIZE, HashRange

# Epochs, ids and timestamps are Java longs upstream; keep every value within a signed 64-bit.
MAX_LONG = 2**63 - 1


class SegmentNotFound(NotFoundError):
    """The layout has no segment with the requested id."""


class InvalidLayoutOperation(IllegalStateError):
    """A split, merge or prune is not valid for the segments' current state."""


class CorruptLayout(InvalidInputError):
    """A layout (usually a loaded document) breaks an invariant; the message names it."""


class SegmentState(StrEnum):
    """Lifecycle state of a segment, spelled as in the metadata JSON."""

    ACTIVE = "ACTIVE"
    SEALED = "SEALED"


def _check_long(what: str, value: object) -> int:
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
            _check_long(f"segment {sid}: {name} entry", i)
    if len(set(ids)) != len(ids):
        raise CorruptLayout(f"segment {sid}: {name} lists an id twice: {list(ids)}")
    if sid in ids:
        raise CorruptLayout(f"segment {sid}: lists itself in {name}")
    return tuple(ids)


def _check_now_ms(now_ms: object) -> int:
    if isinstance(now_ms, bool) or not isinstance(now_ms, int) or not 0 <= now_ms <= MAX_LONG:
        raise InvalidInputError(f"now_ms must be a non-negative integer, got {now_ms!r}")
    return now_ms


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment of the DAG (PIP-468 "SegmentInfo" plus wall-clock creation/seal times).

    ``sealed_at_epoch`` and ``sealed_at_ms`` are 0 while the segment is active.

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

    def __post_init__(self) -> None:
        # Layouts are rebuilt (and so revalidated) on every mutation: check cheaply first and build
        # an error message only on failure.
        sid = self.segment_id
        if not _is_long(sid):
            _check_long("segmentId", sid)
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
                _check_long(f"segment {sid}: {name}", value)
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


@dataclass(frozen=True, eq=True)
class SegmentLayout:
    """An immutable, validated snapshot of a scalable topic's segment DAG.

    Attributes:
        epoch: version of the DAG, incremented by every split, merge and prune.
        next_segment_id: the id the next created segment gets; above every id in the layout.
        segments: every segment (active and sealed) by id; read-only.
        properties: free-form string properties of the topic; read-only.
        auto_scale_policy: the topic's raw auto-scale override (a JSON object, deeply read-only),
            or ``None``; :mod:`braid.core.autoscale` gives it meaning.

    Raises:
        CorruptLayout: the snapshot breaks an invariant (message names the offending segments).
    """

    epoch: int
    next_segment_id: int
    segments: Mapping[int, SegmentInfo]
    properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    auto_scale_policy: Mapping[str, object] | None = None
    _active: tuple[SegmentInfo, ...] = field(init=False, repr=False, compare=False)
    _active_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_long("epoch", self.epoch)
        _check_long("nextSegmentId", self.next_segment_id)
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
        active = _validate_dag(self.epoch, self.next_segment_id, segments)
        object.__setattr__(self, "_active", active)
        object.__setattr__(self, "_active_starts", tuple(s.hash_range.start for s in active))

    def __hash__(self) -> int:
        return hash((self.epoch, self.next_segment_id, tuple(self.segments.values())))

    # ----------------------------------------------------------------------------- construction

    @classmethod
    def initial(
        cls, n: int, now_ms: int = 0, properties: Mapping[str, str] | None = None
    ) -> SegmentLayout:
        """The epoch-0 layout of a new topic: ``n`` equal active segments with ids ``0..n-1``.

        Each covers ``65536 // n`` positions; the last also takes the remainder up to ``0xFFFF``.

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
        return cls(0, n, segments, properties if properties is not None else {})

    # ----------------------------------------------------------------------------- queries

    @property
    def active_segments(self) -> list[SegmentInfo]:
        """The active segments, sorted by hash range start (a fresh list)."""
        return list(self._active)

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
            InvalidLayoutOperation: the segment is sealed, covers a single hash, or
                ``split_hash`` is not inside it with a hash on each side.
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
            raise InvalidLayoutOperation(f"cannot split segment {segment_id}: {exc}") from exc
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
        info = self.segment(segment_id)
        if info.is_active:
            raise InvalidLayoutOperation(f"cannot prune segment {segment_id}: it is still active")
        segments = dict(self.segments)
        del segments[segment_id]
        for child in info.child_ids:
            c = segments[child]
            segments[child] = replace(
                c, parent_ids=tuple(p for p in c.parent_ids if p != segment_id)
            )
        for parent in info.parent_ids:
            p = segments[parent]
            segments[parent] = replace(
                p, child_ids=tuple(x for x in p.child_ids if x != segment_id)
            )
        return self._evolve(self.epoch + 1, self.next_segment_id, segments)

    def with_properties(self, properties: Mapping[str, str]) -> SegmentLayout:
        """The same DAG with ``properties`` replaced; the epoch is kept (the DAG did not change)."""
        return SegmentLayout(
            self.epoch, self.next_segment_id, self.segments, properties, self.auto_scale_policy
        )

    def with_auto_scale_policy(self, policy: Mapping[str, object] | None) -> SegmentLayout:
        """The same DAG with the per-topic auto-scale override replaced (``None`` clears it).

        The epoch is kept: the DAG did not change.
        """
        return SegmentLayout(
            self.epoch, self.next_segment_id, self.segments, self.properties, policy
        )

    def _evolve(
        self, epoch: int, next_segment_id: int, segments: Mapping[int, SegmentInfo]
    ) -> SegmentLayout:
        return SegmentLayout(
            epoch, next_segment_id, segments, self.properties, self.auto_scale_policy
        )

    # ----------------------------------------------------------------------------- codec

    def to_metadata(self) -> dict[str, object]:
        """The PIP-468 ``ScalableTopicMetadata`` document of this layout.

        Keys as in the PIP; ``createdAtMs``/``sealedAtMs`` are written only when non-zero (so the
        PIP's own example, which has none, round-trips unchanged) and ``autoScalePolicy`` only when
        set.
        """
        doc: dict[str, object] = {
            "epoch": self.epoch,
            "nextSegmentId": self.next_segment_id,
            "segments": {str(sid): _segment_to_doc(info) for sid, info in self.segments.items()},
            "properties": dict(self.properties),
        }
        if self.auto_scale_policy is not None:
            doc["autoScalePolicy"] = thaw_json(self.auto_scale_policy)
        return doc

    @classmethod
    def from_metadata(cls, doc: object) -> SegmentLayout:
        """Load and validate a ``ScalableTopicMetadata`` document.

        ``epoch``, ``nextSegmentId`` and ``segments`` are required; ``properties`` defaults to
        ``{}`` and ``autoScalePolicy`` to none. Unknown keys are rejected rather than dropped, so a
        rewrite never silently loses data written by a newer version.

        Raises:
            CorruptLayout: a field is missing or malformed, or the DAG is inconsistent.
        """
        top = _expect_object(doc, "the layout document")
        _check_keys(top, _TOP_REQUIRED, _TOP_OPTIONAL, "the layout document")
        raw_segments = _expect_object(top["segments"], "segments")
        segments: dict[int, SegmentInfo] = {}
        for key, raw in raw_segments.items():
            info = _segment_from_doc(key, raw)
            segments[info.segment_id] = info
        policy = top.get("autoScalePolicy")
        return cls(
            epoch=_check_long("epoch", top["epoch"]),
            next_segment_id=_check_long("nextSegmentId", top["nextSegmentId"]),
            segments=segments,
            properties=_expect_object(top.get("properties", {}), "properties"),  # type: ignore[arg-type]
            auto_scale_policy=None if policy is None else freeze_json(policy, "autoScalePolicy"),
        )

    def to_json(self) -> bytes:
        """The metadata document as compact JSON bytes.

        Non-ASCII text is written as ``\\u`` escapes, so even a string holding a lone surrogate
        (which ``json.loads`` can produce) encodes and round-trips.
        """
        return json.dumps(self.to_metadata(), separators=(",", ":"), allow_nan=False).encode(
            "ascii"
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> SegmentLayout:
        """Parse and validate a JSON metadata document.

        Raises:
            CorruptLayout: not UTF-8, not JSON (duplicate keys and NaN/Infinity included), or the
                document is rejected by :meth:`from_metadata`.
        """
        if isinstance(data, bytes | bytearray | memoryview):
            try:
                text = bytes(data).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptLayout(f"layout JSON is not valid UTF-8: {exc}") from exc
        elif isinstance(data, str):
            text = data
        else:
            raise CorruptLayout(f"layout JSON must be bytes or str, got {type(data).__name__}")
        try:
            doc = json.loads(
                text, object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_constant
            )
        except json.JSONDecodeError as exc:
            raise CorruptLayout(f"layout document is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise CorruptLayout("layout document is nested too deeply") from exc
        return cls.from_metadata(doc)

    def __str__(self) -> str:
        active = " ".join(f"{s.segment_id}:{s.hash_range.to_hex()}" for s in self._active)
        return (
            f"SegmentLayout(epoch={self.epoch}, next={self.next_segment_id}, "
            f"active=[{active}], sealed={len(self.segments) - len(self._active)})"
        )


# --------------------------------------------------------------------------------- validation


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


def _validate_dag(
    epoch: int, next_segment_id: int, segments: Mapping[int, SegmentInfo]
) -> tuple[SegmentInfo, ...]:
    """Check every invariant of a layout; return the active segments sorted by range start."""
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


# --------------------------------------------------------------------------------- JSON codec

_TOP_REQUIRED = frozenset({"epoch", "nextSegmentId", "segments"})
_TOP_OPTIONAL = frozenset({"properties", "autoScalePolicy"})
_SEGMENT_REQUIRED = frozenset(
    {
        "segmentId",
        "hashRange",
        "state",
        "parentIds",
        "childIds",
        "createdAtEpoch",
        "sealedAtEpoch",
    }
)
_SEGMENT_OPTIONAL = frozenset({"createdAtMs", "sealedAtMs"})
_RANGE_KEYS = frozenset({"start", "end"})


def _segment_to_doc(info: SegmentInfo) -> dict[str, object]:
    doc: dict[str, object] = {
        "segmentId": info.segment_id,
        "hashRange": {"start": info.hash_range.start, "end": info.hash_range.end},
        "state": info.state.value,
        "parentIds": list(info.parent_ids),
        "childIds": list(info.child_ids),
        "createdAtEpoch": info.created_at_epoch,
        "sealedAtEpoch": info.sealed_at_epoch,
    }
    if info.created_at_ms:
        doc["createdAtMs"] = info.created_at_ms
    if info.sealed_at_ms:
        doc["sealedAtMs"] = info.sealed_at_ms
    return doc


def _segment_from_doc(key: str, raw: object) -> SegmentInfo:
    where = f"segment {key!r}"
    seg = _expect_object(raw, where)
    _check_keys(seg, _SEGMENT_REQUIRED, _SEGMENT_OPTIONAL, where)
    sid = _check_long(f"{where}: segmentId", seg["segmentId"])
    if key != str(sid):
        raise CorruptLayout(f"{where} is keyed differently from its segmentId {sid}")
    where = f"segment {sid}"
    rng = _expect_object(seg["hashRange"], f"{where}: hashRange")
    _check_keys(rng, _RANGE_KEYS, frozenset(), f"{where}: hashRange")
    try:
        hash_range = HashRange(rng["start"], rng["end"])  # type: ignore[arg-type]
    except InvalidInputError as exc:
        raise CorruptLayout(f"{where}: {exc}") from exc
    state = seg["state"]
    if state not in (SegmentState.ACTIVE.value, SegmentState.SEALED.value):
        raise CorruptLayout(f"{where}: unknown state {state!r} (expected 'ACTIVE' or 'SEALED')")
    ids: dict[str, tuple[int, ...]] = {}
    for name in ("parentIds", "childIds"):
        value = seg[name]
        if not isinstance(value, list):
            raise CorruptLayout(f"{where}: {name} must be an array of ids, got {value!r}")
        ids[name] = tuple(_check_long(f"{where}: {name} entry", i) for i in value)
    return SegmentInfo(
        segment_id=sid,
        hash_range=hash_range,
        state=SegmentState(state),
        parent_ids=ids["parentIds"],
        child_ids=ids["childIds"],
        created_at_epoch=_check_long(f"{where}: createdAtEpoch", seg["createdAtEpoch"]),
        sealed_at_epoch=_check_long(f"{where}: sealedAtEpoch", seg["sealedAtEpoch"]),
        created_at_ms=_check_long(f"{where}: createdAtMs", seg.get("createdAtMs", 0)),
        sealed_at_ms=_check_long(f"{where}: sealedAtMs", seg.get("sealedAtMs", 0)),
    )


def _expect_object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise CorruptLayout(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


def _check_keys(
    obj: Mapping[str, object], required: frozenset[str], optional: frozenset[str], where: str
) -> None:
    missing = sorted(required - obj.keys())
    if missing:
        raise CorruptLayout(f"{where} is missing the field(s) {', '.join(missing)}")
    unknown = sorted(str(k) for k in obj.keys() - required - optional)
    if unknown:
        raise CorruptLayout(f"{where} has unknown field(s) {', '.join(unknown)}")


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise CorruptLayout(f"layout JSON repeats the key {key!r} in one object")
        out[key] = value
    return out


def _reject_constant(name: str) -> object:
    raise CorruptLayout(f"layout JSON holds the non-standard constant {name}")


def thaw_json(value: object) -> object:
    """A plain ``dict``/``list`` copy of a value frozen by :func:`freeze_json`."""
    if isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(item) for item in value]
    return value


__all__ = [
    "MAX_LONG",
    "CorruptLayout",
    "InvalidLayoutOperation",
    "SegmentInfo",
    "SegmentLayout",
    "SegmentNotFound",
    "SegmentState",
    "freeze_json",
    "thaw_json",
]
