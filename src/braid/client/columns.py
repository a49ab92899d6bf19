"""Columnar decoding of dispatched entries: :class:`MessageColumns` and :class:`EntryColumnDecoder`.

The message-at-a-time path (:func:`braid.client.message.decode_entry`) builds one
:class:`~braid.client.message.Message` per message; an application that turns messages into
columns anyway (a Spark executor building Arrow batches) then pays for that object, its
``MessageId`` and its properties copy, and a dozen attribute reads per row. This module decodes
an entry straight into per-column Python lists, with no object per message:

* the outer ``MessageMetadata`` is parsed once per entry; its producer name, publish time and
  base sequence id are repeated into their columns with ``list * n``;
* each batched message's ``SingleMessageMetadata`` is parsed once per *distinct byte string*:
  the decoder keeps a bounded memo from metadata bytes to the decoded fields, because the
  metadata of a batch repeats (same key, same size, no per-message event time); parsing is a
  pure function of the bytes, so a hit is exactly what a parse would give.
* the per-message fields that make metadata unique - a trailing ``sequence_id`` (a producer
  writes it whenever its ids are not contiguous within the entry, e.g. keys routed to several
  segments) and ``event_time`` - are split off the end and read here; the memo is keyed by the
  rest. Exact by protobuf's concatenation rule: when the rest parses on its own, parsing the
  whole is parsing the rest, then those fields (the last occurrence of a field wins). When it
  does not parse on its own (the split was not at a field boundary), the whole is parsed.

The values are what :class:`~braid.client.message.Message` gives, field for field (pinned by
``tests/unit/client/test_columns.py`` against ``decode_entry`` on the same entries): ``key``
(``None`` when unset), ``value``, ``publish_time`` and ``event_time`` (ms; ``None`` when unset),
``properties`` (read-only mappings; rows without properties share one empty mapping),
``producer_name``, ``sequence_id`` (the message's own, else the entry's plus the batch index),
and the position (``ledger_id``, ``entry_id``, ``batch_index`` = -1 for a non-batched entry,
``batch_size``). Compacted-out messages are skipped but counted in the dispatched total.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from braid.core.message_id import MessageId, unchecked_message_id
from braid.protocol.batch import decompress
from braid.protocol.errors import CorruptPayload
from braid.protocol.frames import decode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb

#: The ``properties`` of every row that has none (shared, read-only).
EMPTY_PROPERTIES: Mapping[str, str] = MappingProxyType({})
#: Distinct ``SingleMessageMetadata`` byte strings a decoder remembers before it starts over.
MEMO_SIZE = 4096

_U32 = struct.Struct(">I").unpack_from

_NativeDecode: TypeAlias = Callable[..., tuple[int, int]]
_native_decode: _NativeDecode | None
try:  # the compiled decoder of the common message shape (ADR 0041); optional
    from braid.client._entry_columns import decode as _native_decode
except ImportError:  # pragma: no cover - no C compiler where Braid was installed
    _native_decode = None
#: Whether batch payloads are decoded by the compiled decoder (else all in Python).
NATIVE_ENTRY_COLUMNS = _native_decode is not None

#: (payload_size, compacted_out, key, event_time, properties, own sequence id or None)
_Single = tuple[int, bool, str | None, int | None, Mapping[str, str], int | None]


@dataclass(slots=True)
class MessageColumns:
    """Messages of one segment of ``topic``, column by column (row ``i`` of every list is
    message ``i``, in segment order).

    Positions: ``ledger_ids``, ``entry_ids``, ``batch_indexes`` (-1 for a non-batched entry),
    ``batch_sizes``; :meth:`message_id` builds a row's :class:`~braid.core.message_id.MessageId`.
    The other columns hold what the same-named :class:`~braid.client.message.Message`
    attributes return. Treat the lists as read-only: slices share nothing, but a reader hands
    them out without copying.
    """

    topic: str
    segment_id: int
    ledger_ids: list[int] = field(default_factory=list)
    entry_ids: list[int] = field(default_factory=list)
    batch_indexes: list[int] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    publish_times: list[int] = field(default_factory=list)
    event_times: list[int | None] = field(default_factory=list)
    properties: list[Mapping[str, str]] = field(default_factory=list)
    producer_names: list[str] = field(default_factory=list)
    sequence_ids: list[int] = field(default_factory=list)

    #: The list attributes, in declaration order.
    COLUMNS = (
        "ledger_ids",
        "entry_ids",
        "batch_indexes",
        "batch_sizes",
        "keys",
        "values",
        "publish_times",
        "event_times",
        "properties",
        "producer_names",
        "sequence_ids",
    )

    def __len__(self) -> int:
        return len(self.values)

    def position(self, row: int) -> tuple[int, int, int]:
        """``(ledger_id, entry_id, batch_index)`` of a row."""
        return self.ledger_ids[row], self.entry_ids[row], self.batch_indexes[row]

    def batch_size(self, row: int) -> int:
        """The number of messages in the entry of a row."""
        return self.batch_sizes[row]

    def message_id(self, row: int) -> MessageId:
        """The :class:`~braid.core.message_id.MessageId` of a row."""
        return unchecked_message_id(
            self.segment_id,
            self.ledger_ids[row],
            self.entry_ids[row],
            self.batch_indexes[row],
            self.batch_sizes[row],
        )

    def slice(self, start: int, stop: int | None = None) -> MessageColumns:
        """Rows ``start`` up to ``stop`` (exclusive; default: the end) as new columns."""
        cut = slice(start, stop)
        return MessageColumns(
            self.topic, self.segment_id, *(getattr(self, name)[cut] for name in self.COLUMNS)
        )

    def take_front(self, count: int) -> MessageColumns:
        """Remove the first ``count`` rows and return them (all of them without a copy)."""
        if count >= len(self):
            taken = MessageColumns(
                self.topic, self.segment_id, *(getattr(self, n) for n in self.COLUMNS)
            )
            for name in self.COLUMNS:
                setattr(self, name, [])
            return taken
        taken = self.slice(0, count)
        for name in self.COLUMNS:
            del getattr(self, name)[:count]
        return taken

    def extend(self, other: MessageColumns) -> None:
        """Append ``other``'s rows (same topic and segment)."""
        for name in self.COLUMNS:
            getattr(self, name).extend(getattr(other, name))

    @classmethod
    def concat(cls, topic: str, segment_id: int, parts: Iterable[MessageColumns]) -> MessageColumns:
        """One :class:`MessageColumns` holding every row of ``parts`` in order."""
        out = cls(topic, segment_id)
        for part in parts:
            out.extend(part)
        return out


def _properties(kvs: Sequence[Any]) -> Mapping[str, str]:
    if not kvs:
        return EMPTY_PROPERTIES
    return MappingProxyType({kv.key: kv.value for kv in kvs})


def _trailing_fields(raw: bytes) -> tuple[int, int | None, int | None]:
    """Split the trailing ``event_time`` (field 5) and ``sequence_id`` (field 8) varint fields
    off a ``SingleMessageMetadata``: ``(cut, event_time, sequence_id)``, where ``raw[:cut]`` is
    the rest and a field not split off is ``None``. Whether ``raw[:cut]`` really ends at a field
    boundary is for the caller's parse to check.
    """
    event_time: int | None = None
    sequence_id: int | None = None
    cut = len(raw)
    found = _trailing_varint(raw, cut)
    while found is not None:
        tag, value = found
        if raw[tag] == 0x40 and sequence_id is None:
            sequence_id = value
        elif raw[tag] == 0x28 and event_time is None:
            event_time = value
        else:
            break
        cut = tag
        found = _trailing_varint(raw, cut)
    return cut, event_time, sequence_id


def _trailing_varint(raw: bytes, stop: int) -> tuple[int, int] | None:
    """``(tag position, value)`` of the varint field ending at ``raw[stop - 1]``, or ``None``.

    Read backwards: a varint ends with a byte whose high bit is clear, its other bytes have it
    set, and the byte before it is the field's one-byte tag (any byte below 0x80). Varints of
    more than nine bytes (values of 2**63 and up) are not split off. One to three bytes (a
    sequence id below 2**21) are unrolled: the common case, paid per message.
    """
    last = stop - 1
    if last < 1:
        return None
    b0 = raw[last]
    if b0 >= 0x80:
        return None
    b1 = raw[last - 1]
    if b1 < 0x80:
        return last - 1, b0
    if last < 2:
        return None
    b2 = raw[last - 2]
    if b2 < 0x80:
        return last - 2, (b1 & 0x7F) | b0 << 7
    if last < 3:
        return None
    b3 = raw[last - 3]
    if b3 < 0x80:
        return last - 3, (b2 & 0x7F) | (b1 & 0x7F) << 7 | b0 << 14
    start = last - 3
    while start > 0 and raw[start - 1] >= 0x80:
        start -= 1
    if start == 0 or last - start > 8:
        return None
    value = 0
    shift = 0
    for byte in raw[start:stop]:
        value |= (byte & 0x7F) << shift
        shift += 7
    return start - 1, value


def open_entry(body: bytes) -> tuple[pb.MessageMetadata, bytes]:
    """An entry's ``MessageMetadata`` and its (decompressed) payload.

    Raises:
        MalformedFrame, CorruptPayload, UnsupportedCompression: the entry does not decode.
    """
    meta, payload = decode_message_body(body)
    if meta.compression != pb.NONE:
        payload = decompress(meta.compression, payload, meta.uncompressed_size)
    return meta, payload


class EntryColumnDecoder:
    """Decodes entries of one segment into :class:`MessageColumns` (one per reader; not
    thread-safe: its memo is used by one thread, the client's event loop)."""

    __slots__ = ("_keys", "_memo", "segment_id", "topic")

    def __init__(self, topic: str, segment_id: int) -> None:
        self.topic = topic
        self.segment_id = segment_id
        self._memo: dict[bytes, _Single] = {}
        self._keys: dict[bytes, str] = {}  # the compiled decoder's key memo

    def _single(self, raw: bytes, index: int) -> _Single:
        """The fields of one ``SingleMessageMetadata`` that is not in the memo."""
        # The commonest unique metadata, first and unrolled (paid per message): a known rest,
        # then a sequence_id of one to three varint bytes (below 2**21). Every memo key parsed
        # on its own, so the concatenation rule holds for it.
        last = len(raw) - 1
        if last >= 3 and raw[last] < 0x80:
            b0 = raw[last]
            b1 = raw[last - 1]
            if b1 == 0x40:
                known = self._memo.get(raw[: last - 1])
                sequence = b0
            elif b1 >= 0x80:
                b2 = raw[last - 2]
                if b2 == 0x40:
                    known = self._memo.get(raw[: last - 2])
                    sequence = (b1 & 0x7F) | b0 << 7
                elif b2 >= 0x80 and raw[last - 3] == 0x40:
                    known = self._memo.get(raw[: last - 3])
                    sequence = (b2 & 0x7F) | (b1 & 0x7F) << 7 | b0 << 14
                else:
                    known = None
            else:
                known = None
            if known is not None:
                return known[0], known[1], known[2], known[3], known[4], sequence
        cut, event_time, sequence_id = _trailing_fields(raw)
        if event_time is None and sequence_id is None:
            return self._parse(raw, index)
        rest = raw[:cut]
        single = self._memo.get(rest)
        if single is None:
            try:
                single = self._parse(rest, index)
            except CorruptPayload:  # not a field boundary after all: the whole decides
                return self._parse(raw, index, remember=False)
        length, compacted, key, own_event_time, props, own_sequence_id = single
        if event_time is not None:  # the last occurrence wins; 0 means unset, as in a parse
            own_event_time = event_time or None
        if sequence_id is not None:
            own_sequence_id = sequence_id
        return length, compacted, key, own_event_time, props, own_sequence_id

    def _parse(self, raw: bytes, index: int, remember: bool = True) -> _Single:
        try:
            single = pb.SingleMessageMetadata.FromString(raw)
        except Exception as exc:  # protobuf's DecodeError; translated once, here
            raise CorruptPayload(f"metadata of message {index} does not parse: {exc}") from exc
        decoded: _Single = (
            single.payload_size,
            single.compacted_out,
            single.partition_key if single.HasField("partition_key") else None,
            int(single.event_time) if single.event_time else None,
            _properties(single.properties),
            int(single.sequence_id) if single.HasField("sequence_id") else None,
        )
        if remember:
            memo = self._memo
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[raw] = decoded
        return decoded

    def decode(self, body: bytes, ledger_id: int, entry_id: int) -> tuple[MessageColumns, int]:
        """The messages of one dispatched entry as columns, and how many messages the entry
        holds (what the broker counted against the flow permits).

        Raises:
            MalformedFrame, CorruptPayload, UnsupportedCompression: the entry does not decode.
        """
        meta, payload = open_entry(body)
        return self.decode_opened(meta, payload, ledger_id, entry_id)

    def decode_opened(
        self, meta: pb.MessageMetadata, payload: bytes, ledger_id: int, entry_id: int
    ) -> tuple[MessageColumns, int]:
        """:meth:`decode` of an entry :func:`open_entry` opened."""
        cols = MessageColumns(self.topic, self.segment_id)
        if not meta.HasField("num_messages_in_batch"):
            cols.ledger_ids.append(ledger_id)
            cols.entry_ids.append(entry_id)
            cols.batch_indexes.append(-1)
            cols.batch_sizes.append(1)
            cols.keys.append(meta.partition_key if meta.HasField("partition_key") else None)
            cols.values.append(payload)
            cols.publish_times.append(int(meta.publish_time))
            cols.event_times.append(int(meta.event_time) if meta.event_time else None)
            cols.properties.append(_properties(meta.properties))
            cols.producer_names.append(meta.producer_name)
            cols.sequence_ids.append(int(meta.sequence_id))
            return cols, 1
        count = meta.num_messages_in_batch
        if count < 0:
            raise CorruptPayload(f"negative batch size {count}")
        base_sequence = int(meta.sequence_id)
        native = _native_decode
        if native is None:
            self._messages(payload, count, base_sequence, cols, 0, 0, count)
        else:
            # The compiled decoder takes every message of the common shape and stops before any
            # other; this loop decodes that one message (or raises) and hands back.
            index = pos = 0
            key_memo = self._keys
            while index < count:
                index, pos = native(
                    payload,
                    count,
                    index,
                    pos,
                    base_sequence,
                    key_memo,
                    cols.values,
                    cols.keys,
                    cols.event_times,
                    cols.sequence_ids,
                    cols.batch_indexes,
                )
                # Rows the compiled decoder took have no properties (it leaves those to Python).
                taken = len(cols.values) - len(cols.properties)
                if taken:
                    cols.properties.extend([EMPTY_PROPERTIES] * taken)
                if index < count:
                    pos = self._messages(payload, count, base_sequence, cols, index, pos, index + 1)
                    index += 1
        n = len(cols.values)
        cols.ledger_ids = [ledger_id] * n
        cols.entry_ids = [entry_id] * n
        cols.batch_sizes = [count] * n
        cols.publish_times = [int(meta.publish_time)] * n
        cols.producer_names = [meta.producer_name] * n
        return cols, count

    def _messages(
        self,
        payload: bytes,
        count: int,
        base_sequence: int,
        cols: MessageColumns,
        first: int,
        pos: int,
        stop: int,
    ) -> int:
        """Decode messages ``first`` up to ``stop`` of a batch payload (message ``first`` at
        byte ``pos``) into ``cols``, in Python; the byte after the last one."""
        keys = cols.keys
        values = cols.values
        event_times = cols.event_times
        properties = cols.properties
        sequence_ids = cols.sequence_ids
        indexes = cols.batch_indexes
        memo_get = self._memo.get
        end = len(payload)
        for index in range(first, stop):
            if end - pos < 4:
                raise CorruptPayload(f"batch ends before message {index} of {count}")
            (size,) = _U32(payload, pos)
            pos += 4
            if size > end - pos:
                raise CorruptPayload(f"metadata of message {index} overruns the batch")
            raw = payload[pos : pos + size]
            pos += size
            single = memo_get(raw)
            if single is None:
                single = self._single(raw, index)
            length, compacted, key, event_time, props, sequence_id = single
            if length < 0 or pos + length > end:
                raise CorruptPayload(f"payload of message {index} overruns the batch")
            if compacted:
                pos += length
                continue
            values.append(payload[pos : pos + length])
            pos += length
            keys.append(key)
            event_times.append(event_time)
            properties.append(props)
            sequence_ids.append(base_sequence + index if sequence_id is None else sequence_id)
            indexes.append(index)
        return pos


__all__ = [
    "EMPTY_PROPERTIES",
    "MEMO_SIZE",
    "NATIVE_ENTRY_COLUMNS",
    "EntryColumnDecoder",
    "MessageColumns",
    "open_entry",
]
