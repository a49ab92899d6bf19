"""The ``message_id`` column's bytes, encoded once per entry instead of once per message. Pure.

A read yields thousands of messages per entry batch; ``MessageId.to_bytes()`` re-encodes all five
varints of every message. :class:`MessageIdBytes` keeps the version/kind/segment/ledger/entry
prefix of the current entry and the ``batch_index + 1`` / ``batch_size`` suffixes it has seen,
and produces byte-for-byte the same value as ``MessageId.to_bytes()`` (format version 1, pinned
by a test against the core encoder). :meth:`MessageIdBytes.encode_columns` does it for the
position columns of a :class:`braid.MessageColumns` chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

from braid.core.message_id import FORMAT_VERSION, MessagePosition
from braid.core.varint import encode_uvarint

_POSITION_KIND = 0
#: Entries of more messages than this get their id suffixes encoded per message, not cached.
_MAX_CACHED_BATCH = 4096


def _uvarint(value: int) -> bytes:
    out = bytearray()
    encode_uvarint(value, out)
    return bytes(out)


class MessageIdBytes:
    """Encodes message positions as ``MessageId`` bytes, caching per entry (not thread-safe)."""

    __slots__ = ("_by_size", "_entry", "_prefix", "_suffixes")

    def __init__(self) -> None:
        self._entry: tuple[int, int, int] | None = None
        self._prefix = b""
        self._suffixes: dict[tuple[int, int], bytes] = {}
        self._by_size: dict[int, list[bytes]] = {}

    def encode(self, position: MessagePosition) -> bytes:
        """The bytes of the ``MessageId`` at ``position``."""
        segment, ledger, entry, batch_index, batch_size = position
        key = (segment, ledger, entry)
        if key != self._entry:
            self._entry = key
            head = bytearray((FORMAT_VERSION, _POSITION_KIND))
            encode_uvarint(segment, head)
            encode_uvarint(ledger, head)
            encode_uvarint(entry, head)
            self._prefix = bytes(head)
        tail_key = (batch_index, batch_size)
        tail = self._suffixes.get(tail_key)
        if tail is None:
            tail = _uvarint(batch_index + 1) + _uvarint(batch_size)
            if len(self._suffixes) < 65536:
                self._suffixes[tail_key] = tail
        return self._prefix + tail

    @staticmethod
    def prefix(segment_id: int, ledger_id: int, entry_id: int) -> bytes:
        """The bytes every message id of one entry starts with."""
        head = bytearray((FORMAT_VERSION, _POSITION_KIND))
        encode_uvarint(segment_id, head)
        encode_uvarint(ledger_id, head)
        encode_uvarint(entry_id, head)
        return bytes(head)

    def tails(self, batch_size: int) -> list[bytes]:
        """What follows :meth:`prefix` for batch index ``i`` of an entry of ``batch_size``
        messages, at position ``i + 1`` (a non-batched message, index -1, at 0)."""
        tails = self._tails_of(batch_size)
        if not tails:  # too large to cache
            size = _uvarint(batch_size)
            tails = [_uvarint(i) + size for i in range(batch_size + 1)]
        return tails

    def _tails_of(self, batch_size: int) -> list[bytes]:
        """``uvarint(batch_index + 1) + uvarint(batch_size)`` for every index of an entry of
        ``batch_size`` messages (-1, a non-batched message, first)."""
        tails = self._by_size.get(batch_size)
        if tails is None:
            if batch_size > _MAX_CACHED_BATCH:
                return []
            size = _uvarint(batch_size)
            tails = [_uvarint(i) + size for i in range(batch_size + 1)]
            if len(self._by_size) >= 64:
                self._by_size.clear()
            self._by_size[batch_size] = tails
        return tails

    def encode_columns(
        self,
        segment_id: int,
        ledger_ids: Sequence[int],
        entry_ids: Sequence[int],
        batch_indexes: Sequence[int],
        batch_sizes: Sequence[int],
    ) -> list[bytes]:
        """The ``MessageId`` bytes of every row of a chunk's position columns."""
        out: list[bytes] = []
        append = out.append
        entry_key = self._entry
        if entry_key is not None and entry_key[0] != segment_id:
            entry_key = None
        prefix = self._prefix
        last_size = -1
        tails: list[bytes] = []
        for ledger, entry, index, size in zip(
            ledger_ids, entry_ids, batch_indexes, batch_sizes, strict=True
        ):
            if entry_key is None or entry_key[2] != entry or entry_key[1] != ledger:
                entry_key = (segment_id, ledger, entry)
                head = bytearray((FORMAT_VERSION, _POSITION_KIND))
                encode_uvarint(segment_id, head)
                encode_uvarint(ledger, head)
                encode_uvarint(entry, head)
                prefix = bytes(head)
            if size != last_size:
                tails = self._tails_of(size)
                last_size = size
            try:
                tail = tails[index + 1]
            except IndexError:  # a batch too large to cache (or an index outside it)
                tail = _uvarint(index + 1) + _uvarint(size)
            append(prefix + tail)
        self._entry, self._prefix = entry_key, prefix
        return out


__all__ = ["MessageIdBytes"]
