"""Checkpoints: a consistent read position across every segment of a topic.

A checkpoint consumer holds its position client-side
(``docs/client.md#messages-ids-and-checkpoints``). :class:`Checkpoint` is that position: for
each segment of the consumer's layout, where reading resumes. It is opaque to applications,
serializable (:meth:`Checkpoint.to_bytes`, format-versioned like
:class:`~braid.core.message_id.MessageId`) and comes with two sentinels, :meth:`Checkpoint.earliest`
and :meth:`Checkpoint.latest`.

Per segment a checkpoint records one :class:`SegmentCursor`:

* ``after(ledger, entry, batch_index)`` - resume with the first message after that one;
* ``DRAINED`` - the segment (sealed) was read to its end; nothing more to read;
* ``LATEST`` - resume at whatever is newest when restoring (only for a reader that had not yet
  resolved its start when the checkpoint was taken).

A segment the checkpoint does not mention starts at its beginning: that is how a restore works
across later splits and merges — children created after the capture are read from their first
message, and :func:`plan_restore` leaves the parent-before-child gating to the consumer.

Encoding, format version 1::

    [0x01][kind]                                  kind 1 = earliest, 2 = latest
    [0x01][0x00][layout_epoch][count] then per segment, ascending id:
        [segment_id][tag] with tag 0 = after + [ledger][entry][batch_index + 1],
                               tag 1 = drained, tag 2 = latest          (LEB128 varints)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.varint import CorruptEncoding, decode_uvarint, encode_uvarint, read_header

FORMAT_VERSION = 1
MAX_LONG = 2**63 - 1
MAX_INT = 2**31 - 1

_POSITIONS = 0
_EARLIEST = 1
_LATEST = 2

_TAG_AFTER = 0
_TAG_DRAINED = 1
_TAG_LATEST = 2


def _check(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"checkpoint {name} must be an integer in {low}..{high}: {value!r}")
    return value


class CursorKind(Enum):
    """How a segment's read position is expressed."""

    AFTER = "after"
    DRAINED = "drained"
    LATEST = "latest"


@dataclass(frozen=True, slots=True)
class SegmentCursor:
    """Where reading of one segment resumes (see the module docstring)."""

    kind: CursorKind
    ledger_id: int = 0
    entry_id: int = 0
    batch_index: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.kind, CursorKind):
            raise InvalidInputError(f"cursor kind must be a CursorKind, got {self.kind!r}")
        _check("ledger id", self.ledger_id, 0, MAX_LONG)
        _check("entry id", self.entry_id, 0, MAX_LONG)
        _check("batch index", self.batch_index, -1, MAX_INT)
        if self.kind is not CursorKind.AFTER and (self.ledger_id, self.entry_id) != (0, 0):
            raise InvalidInputError(f"a {self.kind.value} cursor carries no position")

    @classmethod
    def after(cls, ledger_id: int, entry_id: int, batch_index: int = -1) -> SegmentCursor:
        """Resume after the message at ``(ledger_id, entry_id, batch_index)``."""
        return cls(CursorKind.AFTER, ledger_id, entry_id, batch_index)

    def is_after(self, ledger_id: int, entry_id: int, batch_index: int) -> bool:
        """Whether the message at that position comes after this cursor (so it is read)."""
        if self.kind is CursorKind.AFTER:
            return (ledger_id, entry_id, batch_index) > (
                self.ledger_id,
                self.entry_id,
                self.batch_index,
            )
        return self.kind is CursorKind.LATEST


DRAINED = SegmentCursor(CursorKind.DRAINED)
LATEST_CURSOR = SegmentCursor(CursorKind.LATEST)


class Checkpoint:
    """An opaque, serializable read position across all of a topic's segments.

    Create the sentinels with :meth:`earliest` and :meth:`latest`; a checkpoint consumer's
    ``checkpoint()`` returns the others. Persist with :meth:`to_bytes`, restore with
    :meth:`from_bytes`.
    """

    __slots__ = ("_cursors", "_kind", "_layout_epoch")

    _kind: int
    _layout_epoch: int
    _cursors: Mapping[int, SegmentCursor]

    def __init__(self) -> None:
        raise TypeError(
            "Checkpoint is opaque: use Checkpoint.earliest(), Checkpoint.latest(), "
            "a consumer's checkpoint() or Checkpoint.from_bytes()"
        )

    @classmethod
    def _make(
        cls, kind: int, layout_epoch: int = 0, cursors: Mapping[int, SegmentCursor] | None = None
    ) -> Checkpoint:
        cp = object.__new__(cls)
        cp._kind = kind
        cp._layout_epoch = layout_epoch
        cp._cursors = MappingProxyType(dict(sorted((cursors or {}).items())))
        return cp

    @classmethod
    def earliest(cls) -> Checkpoint:
        """Read every segment from its oldest available message."""
        return _EARLIEST_CP

    @classmethod
    def latest(cls) -> Checkpoint:
        """Read only messages published after the consumer starts."""
        return _LATEST_CP

    @property
    def is_earliest(self) -> bool:
        """Whether this is the :meth:`earliest` sentinel."""
        return self._kind == _EARLIEST

    @property
    def is_latest(self) -> bool:
        """Whether this is the :meth:`latest` sentinel."""
        return self._kind == _LATEST

    def to_bytes(self) -> bytes:
        """Serialize (format version 1); any later Braid version can read it back."""
        out = bytearray((FORMAT_VERSION, self._kind))
        if self._kind != _POSITIONS:
            return bytes(out)
        encode_uvarint(self._layout_epoch, out)
        encode_uvarint(len(self._cursors), out)
        for segment_id, cursor in self._cursors.items():
            encode_uvarint(segment_id, out)
            if cursor.kind is CursorKind.AFTER:
                out.append(_TAG_AFTER)
                encode_uvarint(cursor.ledger_id, out)
                encode_uvarint(cursor.entry_id, out)
                encode_uvarint(cursor.batch_index + 1, out)
            elif cursor.kind is CursorKind.DRAINED:
                out.append(_TAG_DRAINED)
            else:
                out.append(_TAG_LATEST)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        """Restore a checkpoint written by :meth:`to_bytes` (of this or an earlier version).

        Raises:
            CorruptEncoding: the bytes are not a checkpoint of a known format version.
        """
        data, kind = read_header(data, "Checkpoint", FORMAT_VERSION, (_EARLIEST, _LATEST))
        if kind in (_EARLIEST, _LATEST):
            return _EARLIEST_CP if kind == _EARLIEST else _LATEST_CP
        if kind != _POSITIONS:
            raise CorruptEncoding(f"unknown checkpoint kind {kind}")
        epoch, pos = decode_uvarint(data, 2)
        count, pos = decode_uvarint(data, pos)
        cursors: dict[int, SegmentCursor] = {}
        previous = -1
        for _ in range(count):
            segment_id, pos = decode_uvarint(data, pos)
            if segment_id <= previous:
                raise CorruptEncoding("checkpoint segments are not in ascending order")
            previous = segment_id
            if pos >= len(data):
                raise CorruptEncoding("checkpoint truncated before a cursor tag")
            tag = data[pos]
            pos += 1
            try:
                if tag == _TAG_AFTER:
                    ledger_id, pos = decode_uvarint(data, pos)
                    entry_id, pos = decode_uvarint(data, pos)
                    batch_plus_one, pos = decode_uvarint(data, pos)
                    cursor = SegmentCursor.after(ledger_id, entry_id, batch_plus_one - 1)
                elif tag == _TAG_DRAINED:
                    cursor = DRAINED
                elif tag == _TAG_LATEST:
                    cursor = LATEST_CURSOR
                else:
                    raise CorruptEncoding(f"unknown checkpoint cursor tag {tag}")
            except CorruptEncoding:
                raise
            except InvalidInputError as exc:
                raise CorruptEncoding(f"checkpoint cursor out of range: {exc}") from exc
            cursors[segment_id] = cursor
        if pos != len(data):
            raise CorruptEncoding(f"{len(data) - pos} unexpected bytes after a checkpoint")
        try:
            return checkpoint_of(epoch, cursors)
        except InvalidInputError as exc:
            raise CorruptEncoding(f"checkpoint out of range: {exc}") from exc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Checkpoint):
            return NotImplemented
        return (self._kind, self._layout_epoch, dict(self._cursors)) == (
            other._kind,
            other._layout_epoch,
            dict(other._cursors),
        )

    def __hash__(self) -> int:
        return hash((self._kind, self._layout_epoch, tuple(self._cursors.items())))

    def __repr__(self) -> str:
        if self._kind == _EARLIEST:
            return "Checkpoint.earliest()"
        if self._kind == _LATEST:
            return "Checkpoint.latest()"
        return f"Checkpoint.from_bytes(bytes.fromhex({self.to_bytes().hex()!r}))"

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        # A module-level function, not the bound classmethod: cloudpickle (Spark) would pickle a
        # bound method of this class by value and fail to rebuild it in another process.
        return (checkpoint_from_bytes, (self.to_bytes(),))


def checkpoint_from_bytes(data: bytes) -> Checkpoint:
    """:meth:`Checkpoint.from_bytes` as a plain function (what pickling refers to)."""
    return Checkpoint.from_bytes(data)


_EARLIEST_CP = Checkpoint._make(_EARLIEST)
_LATEST_CP = Checkpoint._make(_LATEST)


def checkpoint_of(layout_epoch: int, cursors: Mapping[int, SegmentCursor]) -> Checkpoint:
    """A checkpoint of explicit per-segment cursors, captured against ``layout_epoch``.

    Raises:
        InvalidInputError: an id or the epoch is out of range, or a value is not a cursor.
    """
    _check("layout epoch", layout_epoch, 0, MAX_LONG)
    for segment_id, cursor in cursors.items():
        _check("segment id", segment_id, 0, MAX_LONG)
        if not isinstance(cursor, SegmentCursor):
            raise InvalidInputError(f"segment {segment_id}: {cursor!r} is not a SegmentCursor")
    return Checkpoint._make(_POSITIONS, layout_epoch, cursors)


def checkpoint_cursors(checkpoint: Checkpoint) -> Mapping[int, SegmentCursor] | None:
    """The per-segment cursors of ``checkpoint``, or ``None`` for the two sentinels."""
    if checkpoint._kind != _POSITIONS:
        return None
    return checkpoint._cursors


class StartKind(Enum):
    """Where a segment's reader starts after a restore."""

    BEGINNING = "beginning"
    AFTER = "after"
    LATEST = "latest"
    DRAINED = "drained"


@dataclass(frozen=True, slots=True)
class SegmentStart:
    """The start of one segment's reader: :class:`StartKind` plus the cursor for ``AFTER``."""

    kind: StartKind
    cursor: SegmentCursor | None = None


BEGINNING = SegmentStart(StartKind.BEGINNING)
AT_LATEST = SegmentStart(StartKind.LATEST)
ALREADY_DRAINED = SegmentStart(StartKind.DRAINED)


def start_for(checkpoint: Checkpoint, layout: SegmentLayout, segment_id: int) -> SegmentStart:
    """Where the reader of ``segment_id`` (a segment of ``layout``) starts for ``checkpoint``.

    * earliest: every segment from its beginning;
    * latest: active segments at their newest message; sealed ones hold nothing new (drained);
    * captured: the recorded cursor, and a segment the checkpoint does not mention (created
      after the capture, by a later split or merge) from its beginning.

    Ordering between segments (a child waits until its ancestors are drained) is the consumer's
    gating, not part of the start.
    """
    if checkpoint._kind == _EARLIEST:
        return BEGINNING
    if checkpoint._kind == _LATEST:
        info = layout.segments.get(segment_id)
        return AT_LATEST if info is None or info.is_active else ALREADY_DRAINED
    cursor = checkpoint._cursors.get(segment_id)
    if cursor is None:
        return BEGINNING
    if cursor.kind is CursorKind.DRAINED:
        return ALREADY_DRAINED
    if cursor.kind is CursorKind.LATEST:
        return AT_LATEST
    return SegmentStart(StartKind.AFTER, cursor)


def plan_restore(checkpoint: Checkpoint, layout: SegmentLayout) -> dict[int, SegmentStart]:
    """:func:`start_for` every segment of ``layout``, by segment id."""
    return {sid: start_for(checkpoint, layout, sid) for sid in layout.segments}


__all__ = [
    "ALREADY_DRAINED",
    "AT_LATEST",
    "BEGINNING",
    "DRAINED",
    "FORMAT_VERSION",
    "LATEST_CURSOR",
    "Checkpoint",
    "CursorKind",
    "SegmentCursor",
    "SegmentStart",
    "StartKind",
    "checkpoint_cursors",
    "checkpoint_from_bytes",
    "checkpoint_of",
    "plan_restore",
    "start_for",
]
