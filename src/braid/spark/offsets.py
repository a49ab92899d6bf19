"""The source's offsets: per topic and segment, how far a query has read.

Spark stores a streaming source's offsets as JSON in the query's checkpoint (the offset log) and
hands them back to ``partitions(start, end)`` and on restart. :class:`SourceOffset` is that
document. It is a plain value: built and read strictly, serialized with a stable key order (topics
by name, segments by numeric id, fields in a fixed order), so the same progress always gives the
same JSON and Spark's "no new data" test (``start == end``) is exact.

Per segment a :class:`SegmentProgress` says where reading resumes:

* ``after`` - ``None`` (from the segment's beginning: nothing of it read yet) or the position
  ``(ledger, entry, batch_index)`` of the last message read; ``batch_index`` is
  :data:`WHOLE_ENTRY` when everything of that entry was read (positions resolved from a
  broker's "last message" are whole entries);
* ``drained`` - the segment is sealed and was read to its end: nothing more to read, and its
  children may now be read (parent-before-child, :mod:`braid.spark.planning`).

:class:`TopicProgress` adds the layout epoch the progress was planned against (for diagnostics
and the data-loss check; planning never needs an older layout).

JSON, format version 1::

    {"version": 1, "topics": {"topic://public/default/orders": {"epoch": 3, "segments": {
        "0": {"drained": true},
        "3": {"after": [3, 1, 2147483647]},
        "4": {"after": null}}}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from braid.core.errors import InvalidInputError

FORMAT_VERSION = 1
#: Batch index meaning "every message of the entry" (the client's convention for whole entries).
WHOLE_ENTRY = 2**31 - 1
_MAX_LONG = 2**63 - 1

Position = tuple[int, int, int]


class InvalidOffset(InvalidInputError):
    """An offset document (from Spark's checkpoint or an option) is malformed."""


def _int(value: object, low: int, high: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidOffset(f"{where} must be an integer in {low}..{high}, got {value!r}")
    return value


def check_position(value: object, where: str) -> Position:
    """A ``(ledger, entry, batch_index)`` position from JSON (a 3-element list or tuple).

    Raises:
        InvalidOffset: not three integers in range.
    """
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise InvalidOffset(f"{where} must be [ledger, entry, batch_index], got {value!r}")
    return (
        _int(value[0], 0, _MAX_LONG, f"{where} ledger"),
        _int(value[1], 0, _MAX_LONG, f"{where} entry"),
        _int(value[2], -1, WHOLE_ENTRY, f"{where} batch index"),
    )


@dataclass(frozen=True, slots=True)
class SegmentProgress:
    """How far one segment was read (see the module docstring)."""

    after: Position | None = None
    drained: bool = False

    def __post_init__(self) -> None:
        if self.after is not None:
            check_position(self.after, "segment position")
        if self.drained and self.after is not None:
            raise InvalidOffset("a drained segment carries no position")

    def rank(self) -> tuple[int, Position]:
        """Total order of progress within one segment: beginning < positions < drained."""
        if self.drained:
            return (2, (0, 0, 0))
        if self.after is None:
            return (0, (0, 0, 0))
        return (1, self.after)

    def to_json(self) -> dict[str, Any]:
        if self.drained:
            return {"drained": True}
        return {"after": None if self.after is None else list(self.after)}

    @classmethod
    def from_json(cls, doc: object, where: str) -> SegmentProgress:
        if not isinstance(doc, dict):
            raise InvalidOffset(f"{where} must be an object, got {doc!r}")
        unknown = set(doc) - {"after", "drained"}
        if unknown:
            raise InvalidOffset(f"{where} has unknown fields {sorted(unknown)}")
        drained = doc.get("drained", False)
        if not isinstance(drained, bool):
            raise InvalidOffset(f"{where}.drained must be true or false, got {drained!r}")
        after = doc.get("after")
        if drained:
            if after is not None:
                raise InvalidOffset(f"{where} is drained and has a position")
            return DRAINED
        return cls(None if after is None else check_position(after, f"{where}.after"))


BEGINNING = SegmentProgress()
DRAINED = SegmentProgress(drained=True)


def later(a: SegmentProgress, b: SegmentProgress) -> SegmentProgress:
    """The further of two progresses of the same segment."""
    return a if a.rank() >= b.rank() else b


def earlier(a: SegmentProgress, b: SegmentProgress) -> SegmentProgress:
    """The lesser of two progresses of the same segment."""
    return a if a.rank() <= b.rank() else b


@dataclass(frozen=True, slots=True)
class TopicProgress:
    """The progress of every known segment of one topic, planned against layout ``epoch``."""

    epoch: int = 0
    segments: Mapping[int, SegmentProgress] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _int(self.epoch, 0, _MAX_LONG, "layout epoch")
        for sid, progress in self.segments.items():
            _int(sid, 0, _MAX_LONG, "segment id")
            if not isinstance(progress, SegmentProgress):
                raise InvalidOffset(f"segment {sid}: {progress!r} is not a SegmentProgress")
        object.__setattr__(self, "segments", MappingProxyType(dict(sorted(self.segments.items()))))

    def get(self, segment_id: int) -> SegmentProgress:
        """The progress of ``segment_id`` (from the beginning when it is not recorded)."""
        return self.segments.get(segment_id, BEGINNING)

    def is_drained(self, segment_id: int) -> bool:
        return self.get(segment_id).drained

    def to_json(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "segments": {str(sid): p.to_json() for sid, p in self.segments.items()},
        }

    @classmethod
    def from_json(cls, doc: object, where: str) -> TopicProgress:
        if not isinstance(doc, dict):
            raise InvalidOffset(f"{where} must be an object, got {doc!r}")
        unknown = set(doc) - {"epoch", "segments"}
        if unknown:
            raise InvalidOffset(f"{where} has unknown fields {sorted(unknown)}")
        segments_doc = doc.get("segments", {})
        if not isinstance(segments_doc, dict):
            raise InvalidOffset(f"{where}.segments must be an object")
        segments: dict[int, SegmentProgress] = {}
        for key, value in segments_doc.items():
            if not isinstance(key, str) or not key.isdigit():
                raise InvalidOffset(f"{where}: segment id {key!r} is not a decimal integer")
            segments[int(key)] = SegmentProgress.from_json(value, f"{where} segment {key}")
        return cls(_int(doc.get("epoch", 0), 0, _MAX_LONG, f"{where}.epoch"), segments)


@dataclass(frozen=True, slots=True)
class SourceOffset:
    """The progress of every topic a query reads (Spark's offset for this source)."""

    topics: Mapping[str, TopicProgress]

    def __post_init__(self) -> None:
        for topic, progress in self.topics.items():
            if not isinstance(topic, str) or not topic:
                raise InvalidOffset(f"topic names must be non-empty strings, got {topic!r}")
            if not isinstance(progress, TopicProgress):
                raise InvalidOffset(f"topic {topic}: {progress!r} is not a TopicProgress")
        object.__setattr__(self, "topics", MappingProxyType(dict(sorted(self.topics.items()))))

    def topic(self, name: str) -> TopicProgress:
        """The progress of ``name`` (nothing read when it is not recorded)."""
        return self.topics.get(name, TopicProgress())

    def to_json(self) -> dict[str, Any]:
        """The JSON value Spark stores (stable key order)."""
        return {
            "version": FORMAT_VERSION,
            "topics": {name: p.to_json() for name, p in self.topics.items()},
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, doc: object) -> SourceOffset:
        """Read an offset document strictly.

        Raises:
            InvalidOffset: wrong version, unknown fields, bad ids or positions.
        """
        if not isinstance(doc, dict):
            raise InvalidOffset(f"a Braid offset must be a JSON object, got {doc!r}")
        unknown = set(doc) - {"version", "topics"}
        if unknown:
            raise InvalidOffset(f"unknown offset fields {sorted(unknown)}")
        if doc.get("version") != FORMAT_VERSION:
            raise InvalidOffset(
                f"unsupported offset version {doc.get('version')!r} (this Braid reads "
                f"version {FORMAT_VERSION})"
            )
        topics_doc = doc.get("topics")
        if not isinstance(topics_doc, dict):
            raise InvalidOffset("offset.topics must be an object")
        return cls(
            {
                name: TopicProgress.from_json(value, f"topic {name}")
                for name, value in topics_doc.items()
            }
        )

    @classmethod
    def loads(cls, text: str) -> SourceOffset:
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InvalidOffset(f"offset is not valid JSON: {exc}") from exc
        return cls.from_json(doc)

    def __iter__(self) -> Iterator[str]:
        return iter(self.topics)


__all__ = [
    "BEGINNING",
    "DRAINED",
    "FORMAT_VERSION",
    "WHOLE_ENTRY",
    "InvalidOffset",
    "Position",
    "SegmentProgress",
    "SourceOffset",
    "TopicProgress",
    "check_position",
    "earlier",
    "later",
]
