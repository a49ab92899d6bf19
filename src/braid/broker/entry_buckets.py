"""PIP-486 entry-bucket dispatch: several Stream consumers share one segment, bucket by bucket.

A segment of a scalable topic with several *entry buckets* (its boundary list, advertised in the
DAG as ``entry_bucket_splits``) can be shared by consumers of one Stream subscription. Each sharer
subscribes ``Key_Shared`` STICKY with ``KeySharedMeta.entryBucketDispatch`` and declares the
segment's whole boundary list as its ``hashRanges``; the broker

* checks that every sharer declares the same list (a different one is a consumer working from a
  stale layout: refused);
* routes every entry, whole, to the consumer owning its bucket: the bucket of the producer's
  cleartext stamp (``entry_hash_min``), else of the message key's bucket hash (the low 16 bits of
  its Murmur3-32), and a keyless unstamped entry - which has no order to keep - by its entry id;
* spreads buckets over the live sharers deterministically (sorted by consumer name, bucket ``i``
  to sharer ``i mod n``), so a join or a leave moves only buckets, and the Key_Shared dispatcher's
  draining rule (PIP-379) withholds a moved bucket from its new owner until the previous owner
  acknowledged what it was given: per-key order holds across every change.

The dispatcher sees a bucket as the "hash" ``index + 1`` (``1..N``). Pure: no I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Generic, TypeVar

from braid.broker.errors import ConsumerAssignError
from braid.broker.sticky_keys import KeySharedPolicy, Member, sticky_key
from braid.core.routing import bucket_hash
from braid.ledger.api import Position
from braid.protocol.generated import PulsarApi_pb2 as pb

_M = TypeVar("_M", bound=Member)
_BUCKET_SPACE_END = 0xFFFF


def bucket_splits(policy: KeySharedPolicy) -> tuple[int, ...]:
    """The boundary list a consumer declared (start hashes of buckets ``1..N-1``).

    Raises:
        ConsumerAssignError: the declared ranges do not tile ``0..0xFFFF`` in order.
    """
    ranges = sorted(policy.hash_ranges)
    expected = 0
    for start, end in ranges:
        if start != expected:
            raise ConsumerAssignError(
                "entry-bucket dispatch needs the segment's whole boundary list, contiguous from "
                f"0 to {_BUCKET_SPACE_END}: got {[list(r) for r in ranges]}"
            )
        expected = end + 1
    if expected != _BUCKET_SPACE_END + 1:
        raise ConsumerAssignError(
            f"entry-bucket ranges must end at {_BUCKET_SPACE_END}: got {[list(r) for r in ranges]}"
        )
    return tuple(start for start, _ in ranges[1:])


def entry_bucket(meta: pb.MessageMetadata | None, splits: Sequence[int], position: Position) -> int:
    """The dispatcher's "hash" of an entry: its bucket index plus one."""
    if meta is not None and meta.HasField("entry_hash_min"):
        return bisect.bisect_right(splits, meta.entry_hash_min) + 1
    if meta is not None and (meta.HasField("partition_key") or meta.HasField("ordering_key")):
        return bisect.bisect_right(splits, bucket_hash(sticky_key(meta))) + 1
    return position.entry_id % (len(splits) + 1) + 1


class EntryBucketSelector(Generic[_M]):
    """The sharers of a segment and which owns each bucket (a ``StickyKeySelector``)."""

    def __init__(self, splits: Sequence[int]) -> None:
        self.splits = tuple(splits)
        self._members: list[_M] = []

    def add(self, consumer: _M, policy: KeySharedPolicy) -> None:
        declared = bucket_splits(policy)
        if declared != self.splits:
            raise ConsumerAssignError(
                f"the consumer declares entry buckets starting at {list(declared)}, the segment "
                f"has {list(self.splits)}: its layout is stale"
            )
        self._members.append(consumer)
        self._members.sort(key=lambda c: c.consumer_name)

    def remove(self, consumer: _M) -> None:
        self._members = [c for c in self._members if c is not consumer]

    def select(self, key_hash: int) -> _M | None:
        members = self._members
        if not members:
            return None
        return members[(key_hash - 1) % len(members)]

    def ranges(self) -> dict[_M, list[tuple[int, int]]]:
        """Each sharer's buckets as bucket-hash ranges (for stats)."""
        out: dict[_M, list[tuple[int, int]]] = {}
        starts = (0, *self.splits)
        ends = (*(s - 1 for s in self.splits), _BUCKET_SPACE_END)
        for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
            owner = self.select(index + 1)
            if owner is not None:
                out.setdefault(owner, []).append((start, end))
        return out


__all__ = ["EntryBucketSelector", "bucket_splits", "entry_bucket"]
