"""Key_Shared routing: sticky keys, the consumer selectors, and the draining-hash rule (PIP-379).

A Key_Shared subscription routes each entry, whole, by its *sticky key*: the outer metadata's
``ordering_key`` when present, else its ``partition_key`` (base64-decoded when the producer marked
it so), else Pulsar's ``NONE_KEY``. The key's hash (:func:`braid.core.hashing.sticky_key_hash`,
``0..65535``) picks the consumer:

* **AUTO_SPLIT** (``KeySharedMode.AUTO_SPLIT``): the broker spreads hashes over the consumers,
  either on a consistent-hash ring (:class:`ConsistentHashingSelector`, Pulsar's default,
  ``subscriptionKeySharedUseConsistentHashing=true``) or by halving the largest range for each new
  consumer (:class:`AutoSplitSelector`, Pulsar's classic ``HashRangeAutoSplit``).
* **STICKY**: each consumer declares the ``hashRanges`` it serves (:class:`StickyRangeSelector`);
  ranges may not overlap, and hashes nobody declared wait.

When the consumer of a hash changes (a consumer joins or leaves), messages already delivered to the
previous consumer may still be unacknowledged. :class:`PendingHashes` keeps, per hash, which
consumer holds unacknowledged messages of it and how many; a hash held by a consumer other than
the one now selected is *draining* and is not dispatched until those messages are acknowledged
(or come back because that consumer left) - PIP-379's rule, which replaced "recently joined
consumers". No I/O and no asyncio here: the dispatcher (:mod:`braid.broker.key_shared`) drives it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import enum
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from braid.broker.errors import ConsumerAssignError
from braid.core.hashing import KEY_SHARED_HASH_RANGE, sticky_key_hash
from braid.ledger.api import Position
from braid.protocol.generated import PulsarApi_pb2 as pb

#: The key of messages that have neither an ordering key nor a partition key (Pulsar's).
NONE_KEY = b"NONE_KEY"
#: The largest hash a STICKY range may name.
MAX_HASH = KEY_SHARED_HASH_RANGE - 1


class KeySharedMode(enum.Enum):
    """``KeySharedMeta.keySharedMode``."""

    AUTO_SPLIT = pb.AUTO_SPLIT
    STICKY = pb.STICKY


@dataclass(frozen=True, slots=True)
class KeySharedPolicy:
    """A consumer's ``KeySharedMeta``: mode, declared ranges (inclusive), out-of-order flag, and
    PIP-486's ``entryBucketDispatch`` (the ranges are then a segment's bucket boundaries:
    :mod:`braid.broker.entry_buckets`)."""

    mode: KeySharedMode = KeySharedMode.AUTO_SPLIT
    hash_ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order_delivery: bool = False
    entry_bucket_dispatch: bool = False

    @classmethod
    def from_meta(cls, meta: pb.KeySharedMeta | None) -> KeySharedPolicy:
        """The policy a SUBSCRIBE carries (no ``keySharedMeta``: AUTO_SPLIT, in order).

        Raises:
            ConsumerAssignError: STICKY without ranges, or a range outside ``0..65535`` or
                reversed.
        """
        if meta is None:
            return cls()
        mode = KeySharedMode(meta.keySharedMode)
        ranges = tuple((r.start, r.end) for r in meta.hashRanges)
        if mode is KeySharedMode.STICKY:
            if not ranges:
                raise ConsumerAssignError("Ranges for KeyShared policy must not be empty")
            for start, end in ranges:
                if not 0 <= start <= end <= MAX_HASH:
                    raise ConsumerAssignError(
                        f"hash range [{start}, {end}] must satisfy 0 <= start <= end <= {MAX_HASH}"
                    )
        return cls(mode, ranges, meta.allowOutOfOrderDelivery, meta.entryBucketDispatch)

    def same_subscription_policy(self, other: KeySharedPolicy) -> bool:
        """Consumers of one subscription must agree on mode, out-of-order delivery and
        entry-bucket dispatch."""
        return (self.mode, self.allow_out_of_order_delivery, self.entry_bucket_dispatch) == (
            other.mode,
            other.allow_out_of_order_delivery,
            other.entry_bucket_dispatch,
        )


def sticky_key(metadata: pb.MessageMetadata) -> bytes:
    """The key an entry is routed by: ordering key, else partition key, else ``NONE_KEY``."""
    if metadata.HasField("ordering_key"):
        return bytes(metadata.ordering_key)
    if metadata.HasField("partition_key"):
        key = metadata.partition_key
        if metadata.partition_key_b64_encoded:
            try:
                return base64.b64decode(key, validate=True)
            except (binascii.Error, ValueError):
                return key.encode()
        return key.encode()
    return NONE_KEY


def sticky_hash_of(metadata: pb.MessageMetadata) -> int:
    """The Key_Shared hash of an entry (``1..65535``)."""
    return sticky_key_hash(sticky_key(metadata))


class Member(Hashable, Protocol):
    """What a selector needs from a consumer."""

    @property
    def consumer_name(self) -> str: ...

    @property
    def priority_level(self) -> int: ...


_M = TypeVar("_M", bound=Member)


class StickyKeySelector(Protocol[_M]):
    """Which consumer serves a hash."""

    def add(self, consumer: _M, policy: KeySharedPolicy) -> None:
        """Give ``consumer`` its share; raises :class:`ConsumerAssignError` when it cannot."""
        ...

    def remove(self, consumer: _M) -> None: ...

    def select(self, key_hash: int) -> _M | None:
        """The consumer of ``key_hash`` (``None``: nobody serves it now)."""
        ...

    def ranges(self) -> dict[_M, list[tuple[int, int]]]:
        """Each consumer's hash ranges, inclusive (for stats)."""
        ...


class AutoSplitSelector(Generic[_M]):
    """Pulsar's ``HashRangeAutoSplitStickyKeyConsumerSelector``: the first consumer takes the whole
    range; each newcomer takes the lower half of the largest range; a departing consumer's range
    goes to its neighbour above (the top range's to the one below)."""

    def __init__(self, range_size: int = KEY_SHARED_HASH_RANGE) -> None:
        self._size = range_size
        self._bounds: list[int] = []  # sorted inclusive upper bounds (the last is range_size)
        self._owner: dict[int, _M] = {}
        self._bound_of: dict[_M, int] = {}

    def add(self, consumer: _M, policy: KeySharedPolicy) -> None:
        if not self._bounds:
            self._put(self._size, consumer)
            return
        widest, widest_upper = -1, self._size
        lower = 0
        for upper in self._bounds:
            if upper - lower > widest:
                widest, widest_upper = upper - lower, upper
            lower = upper
        if widest <= 1:
            raise ConsumerAssignError(
                f"no hash range left to give a new consumer ({len(self._bounds)} assigned)"
            )
        self._put(widest_upper - (widest >> 1), consumer)

    def _put(self, upper: int, consumer: _M) -> None:
        bisect.insort(self._bounds, upper)
        self._owner[upper] = consumer
        self._bound_of[consumer] = upper

    def remove(self, consumer: _M) -> None:
        upper = self._bound_of.pop(consumer, None)
        if upper is None:
            return
        i = self._bounds.index(upper)
        del self._bounds[i]
        del self._owner[upper]
        if upper == self._size and self._bounds:
            # The top range must stay covered: the consumer just below takes it over.
            lower = self._bounds.pop()
            neighbour = self._owner.pop(lower)
            self._put(self._size, neighbour)

    def select(self, key_hash: int) -> _M | None:
        if not self._bounds:
            return None
        i = bisect.bisect_left(self._bounds, key_hash % self._size)
        return self._owner[self._bounds[i]]

    def ranges(self) -> dict[_M, list[tuple[int, int]]]:
        out: dict[_M, list[tuple[int, int]]] = {}
        lower = 0
        for upper in self._bounds:
            out.setdefault(self._owner[upper], []).append((lower, min(upper, MAX_HASH)))
            lower = upper + 1
        return out


class ConsistentHashingSelector(Generic[_M]):
    """Pulsar's ``ConsistentHashingStickyKeyConsumerSelector``: every consumer puts
    ``replica_points`` points on a ring of hashes (``sticky_key_hash(name + "\\0" + i)``); a key
    goes to the first point at or after its hash, wrapping around. When points collide, the
    consumer first by (priority level, name, arrival) holds the point, so a consumer joining or
    leaving moves only the hashes next to its own points."""

    def __init__(self, replica_points: int = 100) -> None:
        self._points = max(1, replica_points)
        self._ring: list[int] = []  # sorted point hashes
        self._holders: dict[int, list[tuple[int, str, int, _M]]] = {}
        self._arrival = 0

    def _point_hashes(self, consumer: _M) -> list[int]:
        return [
            sticky_key_hash(f"{consumer.consumer_name}\0{i}".encode()) for i in range(self._points)
        ]

    def add(self, consumer: _M, policy: KeySharedPolicy) -> None:
        self._arrival += 1
        entry = (consumer.priority_level, consumer.consumer_name, self._arrival, consumer)
        for point in self._point_hashes(consumer):
            holders = self._holders.get(point)
            if holders is None:
                holders = self._holders[point] = []
                bisect.insort(self._ring, point)
            holders.append(entry)
            holders.sort(key=lambda e: e[:3])

    def remove(self, consumer: _M) -> None:
        for point in self._point_hashes(consumer):
            holders = self._holders.get(point)
            if holders is None:
                continue
            holders[:] = [e for e in holders if e[3] is not consumer]
            if not holders:
                del self._holders[point]
                self._ring.pop(bisect.bisect_left(self._ring, point))

    def select(self, key_hash: int) -> _M | None:
        if not self._ring:
            return None
        i = bisect.bisect_left(self._ring, key_hash)
        point = self._ring[i] if i < len(self._ring) else self._ring[0]
        return self._holders[point][0][3]

    def ranges(self) -> dict[_M, list[tuple[int, int]]]:
        out: dict[_M, list[tuple[int, int]]] = {}
        lower = 0
        for point in self._ring:
            out.setdefault(self._holders[point][0][3], []).append((lower, point))
            lower = point + 1
        if self._ring and lower <= MAX_HASH:
            out.setdefault(self._holders[self._ring[0]][0][3], []).append((lower, MAX_HASH))
        return out


class StickyRangeSelector(Generic[_M]):
    """Pulsar's ``HashRangeExclusiveStickyKeyConsumerSelector``: consumers declare disjoint
    inclusive ranges; a hash outside every declared range has no consumer."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._spans: dict[int, tuple[int, _M]] = {}  # start -> (end, consumer)

    def add(self, consumer: _M, policy: KeySharedPolicy) -> None:
        wanted = sorted(policy.hash_ranges)
        for a, b in itertools.pairwise(wanted):
            if b[0] <= a[1]:
                raise ConsumerAssignError(f"the ranges {list(a)} and {list(b)} overlap")
        for start, end in wanted:
            i = bisect.bisect_right(self._starts, end)
            if i > 0:
                other_start = self._starts[i - 1]
                other_end, other = self._spans[other_start]
                if other_end >= start:
                    raise ConsumerAssignError(
                        f"Range conflict with consumer {other.consumer_name!r}: "
                        f"[{start}, {end}] overlaps [{other_start}, {other_end}]"
                    )
        for start, end in wanted:
            bisect.insort(self._starts, start)
            self._spans[start] = (end, consumer)

    def remove(self, consumer: _M) -> None:
        for start in [s for s, (_, c) in self._spans.items() if c is consumer]:
            del self._spans[start]
            self._starts.remove(start)

    def select(self, key_hash: int) -> _M | None:
        i = bisect.bisect_right(self._starts, key_hash)
        if i == 0:
            return None
        end, consumer = self._spans[self._starts[i - 1]]
        return consumer if key_hash <= end else None

    def ranges(self) -> dict[_M, list[tuple[int, int]]]:
        out: dict[_M, list[tuple[int, int]]] = {}
        for start in self._starts:
            end, consumer = self._spans[start]
            out.setdefault(consumer, []).append((start, end))
        return out


def new_selector(
    policy: KeySharedPolicy, *, consistent_hashing: bool, replica_points: int
) -> StickyKeySelector[_M]:
    """The selector a subscription's first consumer's policy calls for."""
    if policy.mode is KeySharedMode.STICKY:
        return StickyRangeSelector()
    if consistent_hashing:
        return ConsistentHashingSelector(replica_points)
    return AutoSplitSelector()


class PendingHashes(Generic[_M]):
    """Per hash, the consumer holding delivered-but-unacknowledged messages of it, and how many
    entries (PIP-379's draining hashes, kept for every hash rather than only moved ones: a hash
    whose holder is not the selected consumer is exactly a draining hash)."""

    def __init__(self) -> None:
        self._holder: dict[int, tuple[_M, int]] = {}
        self._hash_of: dict[Position, int] = {}

    def __len__(self) -> int:
        return len(self._hash_of)

    def blocks(self, key_hash: int, consumer: _M) -> bool:
        """True while another consumer still has unacknowledged messages of ``key_hash``."""
        held = self._holder.get(key_hash)
        return held is not None and held[0] is not consumer

    def delivered(self, consumer: _M, position: Position, key_hash: int) -> None:
        """``consumer`` was sent ``position``, whose hash is ``key_hash``.

        Raises:
            ValueError: another consumer holds the hash (the dispatcher must check
                :meth:`blocks` first).
        """
        held = self._holder.get(key_hash)
        if held is not None and held[0] is not consumer:
            raise ValueError(f"hash {key_hash} is held by {held[0].consumer_name!r}")
        if position in self._hash_of:
            return
        self._hash_of[position] = key_hash
        self._holder[key_hash] = (consumer, (held[1] if held is not None else 0) + 1)

    def hash_of(self, position: Position) -> int | None:
        return self._hash_of.get(position)

    def release(self, positions: Sequence[Position]) -> bool:
        """Forget ``positions`` (acknowledged, or taken back for redelivery); ``True`` when a
        hash was freed (a draining hash may now flow to its new consumer)."""
        freed = False
        for position in positions:
            key_hash = self._hash_of.pop(position, None)
            if key_hash is None:
                continue
            consumer, count = self._holder[key_hash]
            if count <= 1:
                del self._holder[key_hash]
                freed = True
            else:
                self._holder[key_hash] = (consumer, count - 1)
        return freed

    def held_by(self, consumer: _M) -> int:
        """How many hashes ``consumer`` holds unacknowledged messages of (for stats)."""
        return sum(1 for holder, _ in self._holder.values() if holder is consumer)

    def clear(self) -> None:
        self._holder.clear()
        self._hash_of.clear()
