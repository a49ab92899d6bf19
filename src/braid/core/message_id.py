"""The message identifier of a scalable topic: opaque, totally ordered, versioned bytes.

``docs/client.md#messages-ids-and-checkpoints``: a :class:`MessageId` names one message of a topic,
exposes no structure, compares totally within a topic, and round-trips through
:meth:`MessageId.to_bytes` / :meth:`MessageId.from_bytes` across client versions. Internally it is
the message's position in one segment — ``(segment id, ledger id, entry id, batch index)`` — plus
the batch size, which the client needs to acknowledge batched messages. The client reads those parts
with :func:`message_position`; applications never see them.

Order: ``earliest`` < every position < ``latest``; positions order by ``(segment id, ledger id,
entry id, batch index)``. A key's messages live in one lineage of segments, and a child segment
always has a larger id than its parents (ids are allocated increasing), so the order matches
publish order within every ordered substream, as the data model requires. Across unrelated
segments the order is arbitrary but total and stable.

Encoding, format version 1 (every later version must keep reading it: applications store ids)::

    [0x01][kind]                                   kind 1 = earliest, 2 = latest
    [0x01][0x00][segment][ledger][entry][batch_index + 1][batch_size]   unsigned LEB128 varints

Decoding is strict (unknown version or kind, truncation, trailing bytes all raise
:class:`~braid.core.varint.CorruptEncoding`), so an application that stores ids externally learns
of corruption at restore time instead of resuming from a wrong position.
"""

from __future__ import annotations

from typing import NamedTuple

from braid.core.errors import InvalidInputError
from braid.core.varint import CorruptEncoding, decode_uvarint, encode_uvarint, read_header

FORMAT_VERSION = 1
MAX_LONG = 2**63 - 1
MAX_INT = 2**31 - 1

_POSITION = 0
_EARLIEST = 1
_LATEST = 2
# Rank used for ordering: earliest, then every position, then latest.
_RANK = {_EARLIEST: 0, _POSITION: 1, _LATEST: 2}


class MessagePosition(NamedTuple):
    """Where a message is stored: the parts a :class:`MessageId` hides from applications.

    ``batch_index`` is -1 for a message that was not published in a batch; ``batch_size`` is the
    number of messages in its entry (0 when unknown, 1 for an unbatched message).
    """

    segment_id: int
    ledger_id: int
    entry_id: int
    batch_index: int = -1
    batch_size: int = 0


def _check(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"message id {name} must be an integer in {low}..{high}: {value!r}")
    return value


class MessageId:
    """An opaque, totally ordered identifier of one message of a topic.

    Obtain one from a received message or a send, or use the sentinels :meth:`earliest` and
    :meth:`latest`. Compare with ``<``/``==``, hash it, and persist it with :meth:`to_bytes`.
    """

    __slots__ = ("_batch_index", "_batch_size", "_entry_id", "_kind", "_ledger_id", "_segment_id")

    _kind: int
    _segment_id: int
    _ledger_id: int
    _entry_id: int
    _batch_index: int
    _batch_size: int

    def __init__(self) -> None:
        raise TypeError(
            "MessageId is opaque: take one from a message or a send, or use "
            "MessageId.earliest(), MessageId.latest() or MessageId.from_bytes()"
        )

    @classmethod
    def _make(
        cls,
        kind: int,
        segment_id: int = 0,
        ledger_id: int = 0,
        entry_id: int = 0,
        batch_index: int = -1,
        batch_size: int = 0,
    ) -> MessageId:
        mid = object.__new__(cls)
        mid._kind = kind
        mid._segment_id = segment_id
        mid._ledger_id = ledger_id
        mid._entry_id = entry_id
        mid._batch_index = batch_index
        mid._batch_size = batch_size
        return mid

    @classmethod
    def earliest(cls) -> MessageId:
        """The sentinel before every message: the oldest available message."""
        return _EARLIEST_ID

    @classmethod
    def latest(cls) -> MessageId:
        """The sentinel after every message: the next message to be published."""
        return _LATEST_ID

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
        if self._kind == _POSITION:
            encode_uvarint(self._segment_id, out)
            encode_uvarint(self._ledger_id, out)
            encode_uvarint(self._entry_id, out)
            encode_uvarint(self._batch_index + 1, out)
            encode_uvarint(self._batch_size, out)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> MessageId:
        """Restore an identifier written by :meth:`to_bytes` (of this or an earlier version).

        Raises:
            CorruptEncoding: the bytes are not a message id of a known format version.
        """
        data, kind = read_header(data, "MessageId", FORMAT_VERSION, (_EARLIEST, _LATEST))
        if kind in (_EARLIEST, _LATEST):
            return _EARLIEST_ID if kind == _EARLIEST else _LATEST_ID
        if kind != _POSITION:
            raise CorruptEncoding(f"unknown message id kind {kind}")
        pos = 2
        values = []
        for _ in range(5):
            value, pos = decode_uvarint(data, pos)
            values.append(value)
        if pos != len(data):
            raise CorruptEncoding(f"{len(data) - pos} unexpected bytes after a message id")
        segment_id, ledger_id, entry_id, batch_plus_one, batch_size = values
        try:
            return message_id_at(
                MessagePosition(segment_id, ledger_id, entry_id, batch_plus_one - 1, batch_size)
            )
        except InvalidInputError as exc:
            raise CorruptEncoding(f"message id out of range: {exc}") from exc

    def _sort_key(self) -> tuple[int, int, int, int, int]:
        return (
            _RANK[self._kind],
            self._segment_id,
            self._ledger_id,
            self._entry_id,
            self._batch_index,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._sort_key() == other._sort_key()

    def __hash__(self) -> int:
        return hash(self._sort_key())

    def __lt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._sort_key() < other._sort_key()

    def __le__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._sort_key() <= other._sort_key()

    def __gt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._sort_key() > other._sort_key()

    def __ge__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._sort_key() >= other._sort_key()

    def __repr__(self) -> str:
        if self._kind == _EARLIEST:
            return "MessageId.earliest()"
        if self._kind == _LATEST:
            return "MessageId.latest()"
        return f"MessageId.from_bytes(bytes.fromhex({self.to_bytes().hex()!r}))"

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        # Pickling goes through the versioned bytes, like any other persistence, and refers to a
        # module-level function: cloudpickle (Spark) pickles a bound classmethod by value and
        # then cannot rebuild it in another process.
        return (message_id_from_bytes, (self.to_bytes(),))


def message_id_from_bytes(data: bytes) -> MessageId:
    """:meth:`MessageId.from_bytes` as a plain function (what pickling refers to)."""
    return MessageId.from_bytes(data)


_EARLIEST_ID = MessageId._make(_EARLIEST)
_LATEST_ID = MessageId._make(_LATEST)


def message_id_at(position: MessagePosition) -> MessageId:
    """The identifier of the message stored at ``position`` (validated).

    Raises:
        InvalidInputError: a part is out of range.
    """
    segment_id, ledger_id, entry_id, batch_index, batch_size = position
    return MessageId._make(
        _POSITION,
        _check("segment id", segment_id, 0, MAX_LONG),
        _check("ledger id", ledger_id, 0, MAX_LONG),
        _check("entry id", entry_id, 0, MAX_LONG),
        _check("batch index", batch_index, -1, MAX_INT),
        _check("batch size", batch_size, 0, MAX_INT),
    )


def unchecked_message_id(
    segment_id: int, ledger_id: int, entry_id: int, batch_index: int, batch_size: int
) -> MessageId:
    """Like :func:`message_id_at` without validation: for values the broker already bounded.

    The receive and send-receipt paths build one id per message, so they skip the checks; the
    values come from ``uint64``/``int32`` protocol fields of a connection that parsed them.
    """
    return MessageId._make(_POSITION, segment_id, ledger_id, entry_id, batch_index, batch_size)


def message_position(message_id: MessageId) -> MessagePosition | None:
    """The position behind ``message_id``, or ``None`` for the earliest/latest sentinels.

    For the client's internal use (ack routing, seeks); applications treat ids as opaque.
    """
    if message_id._kind != _POSITION:
        return None
    return MessagePosition(
        message_id._segment_id,
        message_id._ledger_id,
        message_id._entry_id,
        message_id._batch_index,
        message_id._batch_size,
    )


__all__ = [
    "FORMAT_VERSION",
    "MessageId",
    "MessagePosition",
    "message_id_at",
    "message_id_from_bytes",
    "message_position",
    "unchecked_message_id",
]
