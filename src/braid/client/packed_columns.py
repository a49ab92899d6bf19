"""Packed column chunks: one segment's messages as Arrow-layout buffers, entry by entry (ADR 0072).

:class:`~braid.client.columns.MessageColumns` holds one Python object per message and column;
an application that hands the rows to Arrow (a Spark executor) then pays Arrow's conversion of
each list, after the decoder paid for the objects. A :class:`PackedEntry` holds the rows of one
entry as the buffers of Arrow arrays instead - values and keys as one byte string each with int32
end offsets, validity bitmaps, event times and sequence ids as int64, batch indexes as int32, in
the machine's byte order (Arrow's) - which ``pyarrow.Array.from_buffers`` wraps without a copy.
The per-entry fields (position, batch size, publish time, producer name) are held once.

The compiled decoder (``_entry_columns.pack``) builds them for the common message shape; every
other entry, and every entry where the compiled module is missing, is decoded by the Python
decoder into ``MessageColumns`` and packed by :func:`pack_columns` here (pure Python, the
reference the compiled path is tested against). Either way the values are, field for field,
what ``MessageColumns`` holds (``tests/unit/client/test_columns.py``).

A :class:`PackedColumns` is a run of windows ``[start, stop)`` over packed entries of one
segment, in segment order: taking, slicing and extending move windows, never bytes.
Invariants: a window is never empty; the entries are immutable.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, TypeAlias

from braid.client.columns import EntryColumnDecoder, MessageColumns, open_entry
from braid.core.message_id import unchecked_message_id
from braid.core.varint import encode_uvarint

_I32 = struct.Struct("=i").unpack_from
_U64 = (1 << 64) - 1

_NativePack: TypeAlias = Callable[[bytes, int, int, bytes], tuple[Any, ...] | None]
_native_pack: _NativePack | None
try:  # the compiled packer of the common message shape; optional
    from braid.client._entry_columns import pack as _native_pack
except ImportError:  # pragma: no cover - no C compiler where Braid was installed
    _native_pack = None


def id_prefix(segment_id: int, ledger_id: int, entry_id: int) -> bytes:
    """What the ``MessageId.to_bytes()`` of every message of an entry starts with: all but the
    last two varints (``batch_index + 1`` and ``batch_size``), one byte each for index -1 of 1."""
    return unchecked_message_id(segment_id, ledger_id, entry_id, -1, 1).to_bytes()[:-2]


_SMALL_UVARINTS = [bytes((i,)) for i in range(0x80)]


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    encode_uvarint(value, out)
    return bytes(out)


def validity_bitmap(valid: list[bool]) -> bytes:
    """An Arrow validity bitmap (bit ``i`` set = row ``i`` not null, least significant first)."""
    if all(valid):
        return b"\xff" * ((len(valid) + 7) // 8)
    out = bytearray((len(valid) + 7) // 8)
    for row, ok in enumerate(valid):
        if ok:
            out[row >> 3] |= 1 << (row & 7)
    return bytes(out)


def _offsets(lengths: list[int]) -> bytes:
    return array("i", accumulate(lengths, initial=0)).tobytes()


@dataclass(frozen=True, slots=True)
class PackedEntry:
    """The rows of one entry as Arrow-layout buffers (see the module docstring).

    ``key_validity`` / ``event_time_validity`` are bitmaps (their null counts beside them); an
    event time that is null holds 0. Sequence ids and event times are the wire's uint64 as int64
    (two's complement, the value a Java ``long`` reads: 2**63 and up are negative); a sequence
    id computed past 2**64 (the entry's base plus the batch index) wraps, as Java's does.
    ``message_ids`` holds each row's ``MessageId.to_bytes()`` (int32 end offsets beside it).
    ``properties`` is ``None`` when no row has any, else one read-only mapping per row.
    """

    ledger_id: int
    entry_id: int
    batch_size: int
    publish_time: int
    producer_name: str
    rows: int
    values: bytes
    value_offsets: bytes
    keys: bytes
    key_offsets: bytes
    key_nulls: int
    key_validity: bytes
    event_times: bytes
    event_time_nulls: int
    event_time_validity: bytes
    sequence_ids: bytes
    batch_indexes: bytes
    message_ids: bytes
    message_id_offsets: bytes
    properties: tuple[Mapping[str, str], ...] | None = None

    def batch_index(self, row: int) -> int:
        return int(_I32(self.batch_indexes, 4 * row)[0])


def pack_columns(cols: MessageColumns) -> PackedEntry:
    """The rows of one entry (``cols``: one entry's rows, at least one) as a :class:`PackedEntry`;
    pure Python."""
    values = cols.values
    keys = [None if k is None else k.encode() for k in cols.keys]
    times = cols.event_times
    props = cols.properties
    prefix = id_prefix(cols.segment_id, cols.ledger_ids[0], cols.entry_ids[0])
    size = _uvarint(cols.batch_sizes[0])
    ids = [prefix + _uvarint(index + 1) + size for index in cols.batch_indexes]
    return PackedEntry(
        ledger_id=cols.ledger_ids[0],
        entry_id=cols.entry_ids[0],
        batch_size=cols.batch_sizes[0],
        publish_time=cols.publish_times[0],
        producer_name=cols.producer_names[0],
        rows=len(values),
        values=b"".join(values),
        value_offsets=_offsets([len(v) for v in values]),
        keys=b"".join(k for k in keys if k is not None),
        key_offsets=_offsets([0 if k is None else len(k) for k in keys]),
        key_nulls=keys.count(None),
        key_validity=validity_bitmap([k is not None for k in keys]),
        event_times=array("Q", [t or 0 for t in times]).tobytes(),
        event_time_nulls=times.count(None),
        event_time_validity=validity_bitmap([t is not None for t in times]),
        sequence_ids=array("Q", [s & _U64 for s in cols.sequence_ids]).tobytes(),
        batch_indexes=array("i", cols.batch_indexes).tobytes(),
        message_ids=b"".join(ids),
        message_id_offsets=_offsets([len(i) for i in ids]),
        properties=tuple(props) if any(props) else None,
    )


#: A window of a packed entry: ``(entry, start, stop)``, rows ``start`` up to ``stop``.
Window = tuple[PackedEntry, int, int]


class PackedColumns:
    """Messages of one segment of ``topic`` as windows over packed entries, in segment order."""

    __slots__ = ("_rows", "_windows", "segment_id", "topic")

    def __init__(self, topic: str, segment_id: int, windows: list[Window] | None = None) -> None:
        self.topic = topic
        self.segment_id = segment_id
        self._windows: list[Window] = [w for w in windows or [] if w[2] > w[1]]
        self._rows = sum(stop - start for _, start, stop in self._windows)

    @classmethod
    def of_entry(cls, topic: str, segment_id: int, entry: PackedEntry) -> PackedColumns:
        return cls(topic, segment_id, [(entry, 0, entry.rows)])

    def __len__(self) -> int:
        return self._rows

    @property
    def windows(self) -> list[Window]:
        """The windows, in order (read-only)."""
        return self._windows

    def _locate(self, row: int) -> tuple[PackedEntry, int]:
        if not 0 <= row < self._rows:
            raise IndexError(f"row {row} of {self._rows}")
        for entry, start, stop in self._windows:
            if row < stop - start:
                return entry, start + row
            row -= stop - start
        raise AssertionError("unreachable: rows counted")  # pragma: no cover

    def position(self, row: int) -> tuple[int, int, int]:
        """``(ledger_id, entry_id, batch_index)`` of a row."""
        entry, at = self._locate(row)
        return entry.ledger_id, entry.entry_id, entry.batch_index(at)

    def batch_size(self, row: int) -> int:
        return self._locate(row)[0].batch_size

    def _cut(self, start: int, stop: int) -> list[Window]:
        out: list[Window] = []
        first = 0
        for entry, lo, hi in self._windows:
            n = hi - lo
            a, b = max(start - first, 0), min(stop - first, n)
            if a < b:
                out.append((entry, lo + a, lo + b))
            first += n
            if first >= stop:
                break
        return out

    def slice(self, start: int, stop: int | None = None) -> PackedColumns:
        """Rows ``start`` up to ``stop`` (exclusive; default: the end), sharing the buffers."""
        stop = self._rows if stop is None else min(stop, self._rows)
        return PackedColumns(self.topic, self.segment_id, self._cut(max(start, 0), stop))

    def take_front(self, count: int) -> PackedColumns:
        """Remove the first ``count`` rows and return them."""
        if count >= self._rows:
            taken = PackedColumns(self.topic, self.segment_id)
            taken._windows, taken._rows = self._windows, self._rows
            self._windows, self._rows = [], 0
            return taken
        taken = self.slice(0, count)
        self._windows = self._cut(count, self._rows)
        self._rows -= count
        return taken

    def extend(self, other: PackedColumns) -> None:
        """Append ``other``'s rows (same topic and segment)."""
        self._windows.extend(other._windows)
        self._rows += other._rows

    def __iter__(self) -> Iterator[Window]:
        return iter(self._windows)


def decode_packed(
    decoder: EntryColumnDecoder, body: bytes, ledger_id: int, entry_id: int
) -> tuple[PackedColumns, int]:
    """One dispatched entry as packed columns, and how many messages it holds (as
    :meth:`EntryColumnDecoder.decode <braid.client.columns.EntryColumnDecoder.decode>`).

    Raises:
        MalformedFrame, CorruptPayload, UnsupportedCompression: the entry does not decode.
    """
    meta, payload = open_entry(body)
    native = _native_pack
    if native is not None and meta.HasField("num_messages_in_batch"):
        count = meta.num_messages_in_batch
        packed = None
        if count >= 0:
            prefix = id_prefix(decoder.segment_id, ledger_id, entry_id)
            packed = native(payload, count, int(meta.sequence_id), prefix)
        if packed is not None:
            cols = PackedColumns(decoder.topic, decoder.segment_id)
            if packed[0]:
                entry = PackedEntry(
                    ledger_id, entry_id, count, int(meta.publish_time), meta.producer_name, *packed
                )
                cols = PackedColumns.of_entry(decoder.topic, decoder.segment_id, entry)
            return cols, count
    listed, count = decoder.decode_opened(meta, payload, ledger_id, entry_id)
    if not len(listed):
        return PackedColumns(decoder.topic, decoder.segment_id), count
    return PackedColumns.of_entry(decoder.topic, decoder.segment_id, pack_columns(listed)), count


__all__ = [
    "PackedColumns",
    "PackedEntry",
    "Window",
    "decode_packed",
    "id_prefix",
    "pack_columns",
    "validity_bitmap",
]
