"""On-disk record formats of the bookie: journal records and entry-index slots (pure, no I/O).

Journal record::

    [u32 body length][u32 CRC32C of body][body]
    body = [u8 kind][u64 ledger id][i64 entry id][i64 last add confirmed][u64 length][data]

The length + checksum prefix lets restart find where a torn (partly written) tail begins: the first
record whose length runs past the end of the file or whose checksum does not match ends the valid
journal, and everything after it is dropped. No record after it was ever acknowledged, because an
add is acknowledged only after the fsync that covers it, and fsyncs happen in file order.

Index slot (one per entry id, at ``entry_id * SLOT_SIZE`` in ``<ledger>.idx``)::

    [u64 data offset + 1][u32 size][u32 CRC32C of data][i64 last add confirmed][u64 length]

An all-zero slot (offset field 0) is a hole: the entry is not stored on this bookie.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import crc32c

JOURNAL_MAGIC = b"BRDJRNL1"
_HEADER = struct.Struct("<II")
_BODY = struct.Struct("<BQqqQ")
HEADER_SIZE = _HEADER.size
BODY_FIXED_SIZE = _BODY.size
_SLOT = struct.Struct("<QIIqQ")
SLOT_SIZE = _SLOT.size


class RecordKind(enum.IntEnum):
    ADD = 1
    FENCE = 2
    DELETE = 3


class JournalRecord(NamedTuple):
    """One journal record. ``entry_id``/``last_add_confirmed``/``length`` are only meaningful
    for ``ADD``; ``data`` is the entry payload.

    Immutable like a frozen dataclass, but a ``NamedTuple``: one is built per add on the event
    loop's hot path, and tuple construction costs a fraction of a frozen dataclass's.
    """

    kind: RecordKind
    ledger_id: int
    entry_id: int = -1
    last_add_confirmed: int = -1
    length: int = 0
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class IndexSlot:
    """Where one entry lives in its ledger's data file, plus the writer's piggybacked state."""

    offset: int
    size: int
    crc: int
    last_add_confirmed: int
    length: int


def encode_record(record: JournalRecord) -> bytes:
    """Frame ``record`` for the journal (length + CRC32C prefix)."""
    return encode_record_head(record) + record.data


def encode_record_head(record: JournalRecord) -> bytes:
    """Everything of ``record``'s journal frame before its data (which follows unchanged).

    The journal writes head and data as separate buffers (``pwritev``), so an entry's data is
    never copied in user space on its way to the disk.
    """
    kind, ledger_id, entry_id, last_add_confirmed, length, data = record  # one per add: unpack once
    fixed = _BODY.pack(kind, ledger_id, entry_id, last_add_confirmed, length)
    # CRC over fixed part + data without building the body first.
    crc = crc32c.crc32c(data, crc32c.crc32c(fixed))
    return _HEADER.pack(len(fixed) + len(data), crc) + fixed


def decode_records(buf: bytes | memoryview, start: int = 0) -> Iterator[tuple[JournalRecord, int]]:
    """Yield ``(record, end offset)`` for each valid record of ``buf`` from ``start``.

    Stops silently at the first torn or corrupt record: the caller truncates the file at the last
    end offset yielded (or ``start`` if none).
    """
    view = memoryview(buf)
    pos = start
    total = len(view)
    while pos + HEADER_SIZE <= total:
        body_len, crc = _HEADER.unpack_from(view, pos)
        body_start = pos + HEADER_SIZE
        body_end = body_start + body_len
        if body_len < BODY_FIXED_SIZE or body_end > total:
            return
        body = view[body_start:body_end]
        if crc32c.crc32c(body) != crc:
            return
        kind, ledger_id, entry_id, lac, length = _BODY.unpack_from(body, 0)
        try:
            rkind = RecordKind(kind)
        except ValueError:
            return
        yield (
            JournalRecord(rkind, ledger_id, entry_id, lac, length, bytes(body[BODY_FIXED_SIZE:])),
            body_end,
        )
        pos = body_end


def encode_slot(slot: IndexSlot) -> bytes:
    """Encode an index slot (offset stored + 1 so that zero means "no entry")."""
    return _SLOT.pack(slot.offset + 1, slot.size, slot.crc, slot.last_add_confirmed, slot.length)


def pack_slot(offset: int, size: int, crc: int, last_add_confirmed: int, length: int) -> bytes:
    """:func:`encode_slot` without building an :class:`IndexSlot` first (flusher hot path)."""
    return _SLOT.pack(offset + 1, size, crc, last_add_confirmed, length)


def decode_slot(buf: bytes | memoryview) -> IndexSlot | None:
    """Decode a slot; ``None`` for a hole (all zero or short)."""
    if len(buf) < SLOT_SIZE:
        return None
    off1, size, crc, lac, length = _SLOT.unpack_from(buf, 0)
    if off1 == 0:
        return None
    return IndexSlot(off1 - 1, size, crc, lac, length)


def checksum(data: bytes | memoryview) -> int:
    """CRC32C of an entry's payload (stored in its index slot, checked on every file read)."""
    return crc32c.crc32c(data)
