"""Deduplication state carried across splits and merges (PIP-460 "Exactly-once"): the highest
sequence id each producer had stored in a segment's ancestors, per hash range.

A producer numbers its messages with one counter per topic producer; on each segment it attaches
as ``<name>-seg-<segment id>`` (the per-segment producer name of the scalable-topic wire
protocol). Broker deduplication keeps, per producer name, the highest sequence id a segment
stored. When a split or merge seals a segment, the producer's unreceipted messages move to the
successor that covers their key, and a resend of a message the sealed segment *did* store must be
recognised there. So a child inherits, from each parent, a :class:`SequenceFloor`: the part of
the parent's range the child covers and the parent's highest stored sequence id per producer
*base* name (the name without its ``-seg-<id>`` suffix), plus the parent's own inherited floors
clipped to the child's range.

Why per range, not one number per producer: a merge child has several parents, and a producer can
have stored sequence id 22 in one parent while 21, sent to the other parent just before it was
sealed, was refused there. Judging the resent 21 against the maximum (22) would drop a message
that was never stored. A keyed resend is therefore judged against the floor of the range its key
hashes into (:meth:`InheritedSequenceIds.floor`): every message a producer sent for that key went,
in sequence order, through the ancestors covering it. A message whose key the broker cannot see
(keyless, or inside a batch) is judged against the *lowest* floor over the segment, so it is
never wrongly dropped; in the rare case the floors differ it may be stored twice (at least once).

Invariants: floors lie inside :attr:`InheritedSequenceIds.span`; merging is idempotent and
commutative (maximum per range and name), so carrying the state again after a crash is harmless.
Pure: no I/O. The broker stores the state in its dedup cursor's properties
(:meth:`InheritedSequenceIds.to_properties`); the controller moves it as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from braid.core.errors import InvalidInputError
from braid.core.ranges import HashRange

#: Cursor-property keys of the inherited state start with this (never a producer's own entry).
PROPERTY_PREFIX = "braid.inherited."
_SEGMENT_SUFFIX = re.compile(r"^(.*)-seg-\d+$")


def base_name(producer_name: str) -> str:
    """``producer_name`` without its per-segment ``-seg-<id>`` suffix (unchanged without one)."""
    match = _SEGMENT_SUFFIX.match(producer_name)
    return match.group(1) if match else producer_name


def by_base_name(sequence_ids: Mapping[str, int]) -> dict[str, int]:
    """Highest sequence id per base name of a producer-name map."""
    out: dict[str, int] = {}
    for name, seq in sequence_ids.items():
        base = base_name(name)
        if seq > out.get(base, -1):
            out[base] = seq
    return out


def _packed(hash_range: HashRange) -> int:
    return (hash_range.start << 16) | hash_range.end


def _unpacked(value: int) -> HashRange:
    return HashRange((value >> 16) & 0xFFFF, value & 0xFFFF)


@dataclass(frozen=True)
class SequenceFloor:
    """The highest stored sequence id per producer base name, over one hash range."""

    hash_range: HashRange
    sequence_ids: Mapping[str, int]

    def __post_init__(self) -> None:
        for name, seq in self.sequence_ids.items():
            if not isinstance(name, str) or isinstance(seq, bool) or not isinstance(seq, int):
                raise InvalidInputError(f"a sequence floor maps names to ints: {name!r}={seq!r}")
        object.__setattr__(self, "sequence_ids", MappingProxyType(dict(self.sequence_ids)))


@dataclass(frozen=True)
class InheritedSequenceIds:
    """What a segment inherited from its ancestors (see the module docstring).

    Attributes:
        span: the segment's own hash range (``None`` while nothing is inherited).
        floors: the inherited floors, each inside ``span``.
    """

    span: HashRange | None = None
    floors: tuple[SequenceFloor, ...] = field(default=())

    def __post_init__(self) -> None:
        span = self.span
        if self.floors and span is None:
            raise InvalidInputError("inherited sequence ids need the segment's hash range")
        for floor in self.floors:
            if span is not None and not span.contains(floor.hash_range):
                raise InvalidInputError(
                    f"an inherited floor over {floor.hash_range} lies outside {span}"
                )

    def __bool__(self) -> bool:
        return bool(self.floors)

    # -- questions ------------------------------------------------------------------------------

    def highest(self, base: str) -> int:
        """The highest inherited sequence id of ``base`` anywhere (``-1`` when none)."""
        return max((f.sequence_ids.get(base, -1) for f in self.floors), default=-1)

    def floor(self, base: str, key_hash: int | None) -> int:
        """The sequence id up to which a resend of ``base`` is known stored (``-1``: none).

        With the key's ``hash16`` it is the highest floor covering that hash; without one (a
        keyless message, a batch) it is the lowest such value over the whole span, so a message
        is never judged a duplicate unless it is one wherever it came from.
        """
        if key_hash is not None:
            return max(
                (
                    f.sequence_ids.get(base, -1)
                    for f in self.floors
                    if f.hash_range.contains(key_hash)
                ),
                default=-1,
            )
        span = self.span
        if span is None:
            return -1
        cuts = sorted(
            {span.start}
            | {f.hash_range.start for f in self.floors}
            | {f.hash_range.end + 1 for f in self.floors if f.hash_range.end < span.end}
        )
        return min(self.floor(base, cut) for cut in cuts)

    # -- building ------------------------------------------------------------------------------

    def merged(self, other: InheritedSequenceIds) -> InheritedSequenceIds:
        """Both states together (maximum per range and name): idempotent and commutative."""
        if not other.floors:
            return self
        if not self.floors:
            return other
        if self.span != other.span:
            raise InvalidInputError(f"cannot merge inherited state of {self.span} and {other.span}")
        return _combined(self.span, (*self.floors, *other.floors))

    @classmethod
    def for_child(
        cls, child: HashRange, parents: Iterable[tuple[HashRange, SegmentSequenceIds]]
    ) -> InheritedSequenceIds:
        """What ``child`` inherits from its sealed ``parents`` (each with its range).

        A parent contributes its own stored sequence ids (by base name) over the part of its
        range the child covers, and its own inherited floors clipped to the child's range; an
        inherited value no higher than the parent's own for that name adds nothing.
        """
        floors: list[SequenceFloor] = []
        for parent_range, state in parents:
            if not parent_range.overlaps(child):
                continue
            own = by_base_name(state.own)
            if own:
                floors.append(SequenceFloor(_clip(parent_range, child), own))
            for floor in state.inherited.floors:
                if not floor.hash_range.overlaps(child):
                    continue
                kept = {n: s for n, s in floor.sequence_ids.items() if s > own.get(n, -1)}
                if kept:
                    floors.append(SequenceFloor(_clip(floor.hash_range, child), kept))
        return _combined(child, floors) if floors else cls()

    # -- storage --------------------------------------------------------------------------------

    def to_properties(self) -> dict[str, int]:
        """The state as dedup-cursor properties (``str -> int``, keys under the prefix)."""
        if self.span is None or not self.floors:
            return {}
        out = {f"{PROPERTY_PREFIX}span": _packed(self.span)}
        for i, floor in enumerate(self.floors):
            out[f"{PROPERTY_PREFIX}{i}.range"] = _packed(floor.hash_range)
            for name, seq in floor.sequence_ids.items():
                out[f"{PROPERTY_PREFIX}{i}.seq.{name}"] = seq
        return out

    @classmethod
    def from_properties(cls, properties: Mapping[str, int]) -> InheritedSequenceIds:
        """Read :meth:`to_properties`' keys back (other keys are ignored)."""
        span = properties.get(f"{PROPERTY_PREFIX}span")
        if span is None:
            return cls()
        ranges: dict[int, HashRange] = {}
        ids: dict[int, dict[str, int]] = {}
        for key, value in properties.items():
            if not key.startswith(PROPERTY_PREFIX) or key == f"{PROPERTY_PREFIX}span":
                continue
            index, _, rest = key[len(PROPERTY_PREFIX) :].partition(".")
            if rest == "range":
                ranges[int(index)] = _unpacked(value)
            elif rest.startswith("seq."):
                ids.setdefault(int(index), {})[rest[4:]] = value
        floors = tuple(SequenceFloor(ranges[i], ids.get(i, {})) for i in sorted(ranges))
        return cls(_unpacked(span), floors)

    def to_json(self) -> dict[str, Any]:
        """The state as JSON (what the controller hands a child's broker)."""
        if self.span is None:
            return {}
        return {
            "span": [self.span.start, self.span.end],
            "floors": [
                {
                    "range": [f.hash_range.start, f.hash_range.end],
                    "sequenceIds": dict(f.sequence_ids),
                }
                for f in self.floors
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> InheritedSequenceIds:
        """Read :meth:`to_json` back.

        Raises:
            InvalidInputError: the document is malformed.
        """
        if not doc:
            return cls()
        try:
            span = HashRange(*doc["span"])
            floors = tuple(
                SequenceFloor(HashRange(*f["range"]), dict(f["sequenceIds"])) for f in doc["floors"]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"malformed inherited sequence ids: {exc}") from None
        return cls(span, floors)


@dataclass(frozen=True)
class SegmentSequenceIds:
    """A segment's deduplication state as its children see it once it is sealed.

    Attributes:
        own: the highest sequence id the segment stored, per producer name.
        inherited: what the segment itself inherited.
    """

    own: Mapping[str, int] = field(default_factory=dict)
    inherited: InheritedSequenceIds = field(default_factory=InheritedSequenceIds)

    def to_json(self) -> dict[str, Any]:
        return {"own": dict(self.own), "inherited": self.inherited.to_json()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SegmentSequenceIds:
        """Raises: InvalidInputError: the document is malformed."""
        own = doc.get("own", {})
        if not isinstance(own, Mapping):
            raise InvalidInputError("malformed segment sequence ids: 'own' is not an object")
        return cls(dict(own), InheritedSequenceIds.from_json(doc.get("inherited") or {}))


def _combined(span: HashRange | None, floors: Iterable[SequenceFloor]) -> InheritedSequenceIds:
    """``floors`` with one floor per range (maximum per name), in range order."""
    by_range: dict[HashRange, dict[str, int]] = {}
    for floor in floors:
        ids = by_range.setdefault(floor.hash_range, {})
        for name, seq in floor.sequence_ids.items():
            if seq > ids.get(name, -1):
                ids[name] = seq
    return InheritedSequenceIds(
        span, tuple(SequenceFloor(r, ids) for r, ids in sorted(by_range.items()))
    )


def _clip(hash_range: HashRange, to: HashRange) -> HashRange:
    return HashRange(max(hash_range.start, to.start), min(hash_range.end, to.end))


__all__ = [
    "PROPERTY_PREFIX",
    "InheritedSequenceIds",
    "SegmentSequenceIds",
    "SequenceFloor",
    "base_name",
    "by_base_name",
]
