"""Producer routing: which segment a message goes to (``docs/protocol.md#routing-a-key``,
conformance C2).

Every conformant client must route a key to the same segment, so this is the client side of the
wire contract:

1. **keyed** - ``hash16(key)`` (the high 16 bits of Murmur3-32 of the key's UTF-8 bytes, ADR 0002)
   selects the single active segment whose inclusive range contains it;
2. **keyless** - round-robin over the active segments, in ring order;
3. **all-legacy** (every active segment wraps a classic topic) - a keyed message goes to partition
   ``signSafeMod(murmur3_32(key) & 0x7FFFFFFF, N)`` of the ``N`` legacy segments, exactly as v4
   partitioned topics route, so a migrated topic keeps its key → partition mapping.

:class:`SegmentRouter` is built once per layout and called per message, so it calls ``mmh3``
directly (tests pin it to :mod:`braid.core.hashing`) and skips hashing altogether when a layout
has a single active segment.

:func:`bucket_of` gives the PIP-486 entry bucket of a key inside a segment (the low 16 bits of the
same hash against the segment's boundary list); producers batch per bucket.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import mmh3

from braid.core.errors import IllegalStateError
from braid.core.hashing import hash16, key_bytes, legacy_partition, murmur3_32
from braid.core.topic_layout import TopicLayout

_INT32_MAX = 0x7FFFFFFF


class NoActiveSegment(IllegalStateError):
    """The layout has no active segment to route to (the ring must always be tiled)."""


def _murmur(key: str | bytes) -> int:
    """Raw unsigned Murmur3-32 of a key, with :mod:`braid.core.hashing`'s typed errors."""
    try:
        return int(mmh3.hash(key, 0, False))
    except (TypeError, UnicodeEncodeError):
        return murmur3_32(key_bytes(key))


class SegmentRouter:
    """Routes messages over one :class:`~braid.core.topic_layout.TopicLayout`.

    Raises:
        NoActiveSegment: the layout has no active segment.
    """

    __slots__ = ("_active", "_layout", "_legacy", "_next", "_single", "_starts")

    def __init__(self, layout: TopicLayout) -> None:
        active = layout.active_ids
        if not active:
            raise NoActiveSegment(f"layout of {layout.topic} (epoch {layout.epoch}) has none")
        self._layout = layout
        self._active = active
        self._starts = tuple(layout.dag.segments[sid].hash_range.start for sid in active)
        self._legacy = layout.legacy_order
        self._single = active[0] if len(active) == 1 else None
        self._next = 0

    @property
    def layout(self) -> TopicLayout:
        """The layout this router routes over."""
        return self._layout

    def route(self, key: str | bytes | None) -> int:
        """The segment id for a message with ``key`` (``None`` = keyless)."""
        if self._single is not None:
            return self._single
        if key is None:
            return self.next_keyless()
        if self._legacy:
            index = (_murmur(key) & _INT32_MAX) % len(self._legacy)
            return self._legacy[index]
        return self._active[bisect.bisect_right(self._starts, _murmur(key) >> 16) - 1]

    def route_hash(self, hash_value: int) -> int:
        """The active segment whose range holds ``hash_value`` (a ``hash16``); on an all-legacy
        layout, the next keyless segment."""
        if self._single is not None:
            return self._single
        if self._legacy:
            return self.next_keyless()
        return self._active[bisect.bisect_right(self._starts, hash_value) - 1]

    def route_keyed(self, key: str | bytes) -> int:
        """:meth:`route` for a key, computed through :mod:`braid.core.hashing` (no fast path).

        The reference the fast path is tested against.
        """
        if self._legacy:
            return self._legacy[legacy_partition(key, len(self._legacy))]
        return self._layout.dag.find_active_segment(hash16(key)).segment_id

    def next_keyless(self) -> int:
        """The next active segment in round-robin order."""
        index = self._next
        self._next = (index + 1) % len(self._active)
        return self._active[index]


def bucket_of(key: str | bytes, splits: Sequence[int]) -> int:
    """The entry bucket (0..len(splits)) of ``key`` in a segment with these bucket boundaries.

    ``splits`` are the ascending inclusive start hashes of buckets ``1..N-1``
    (``SegmentInfoProto.entry_bucket_splits``); the key's bucket hash is the low 16 bits of its
    Murmur3-32 (``docs/protocol.md#entry-buckets``).
    """
    if not splits:
        return 0
    return bisect.bisect_right(splits, _murmur(key) & 0xFFFF)


def bucket_hash(key: str | bytes) -> int:
    """The key's 16-bit entry-bucket hash: the low half of its Murmur3-32."""
    return _murmur(key) & 0xFFFF


__all__ = ["NoActiveSegment", "SegmentRouter", "bucket_hash", "bucket_of"]
