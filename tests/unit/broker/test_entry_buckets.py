"""PIP-486 entry-bucket dispatch on the broker: the declared boundary list, the bucket of an
entry, and which sharer owns each bucket (ADR 0055)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from braid.broker.entry_buckets import EntryBucketSelector, bucket_splits, entry_bucket
from braid.broker.errors import ConsumerAssignError
from braid.broker.sticky_keys import KeySharedMode, KeySharedPolicy
from braid.core.routing import bucket_hash, bucket_of
from braid.ledger.api import Position
from braid.protocol.generated import PulsarApi_pb2 as pb

FOUR = ((0, 0x3FFF), (0x4000, 0x7FFF), (0x8000, 0xBFFF), (0xC000, 0xFFFF))
SPLITS = (0x4000, 0x8000, 0xC000)


def policy(ranges: tuple[tuple[int, int], ...] = FOUR) -> KeySharedPolicy:
    return KeySharedPolicy(KeySharedMode.STICKY, ranges, entry_bucket_dispatch=True)


@dataclass(frozen=True)
class Sharer:
    consumer_name: str
    priority_level: int = 0


def test_the_declared_ranges_give_the_boundary_list_and_must_tile_the_space() -> None:
    assert bucket_splits(policy()) == SPLITS
    assert bucket_splits(policy(((0, 0xFFFF),))) == ()
    with pytest.raises(ConsumerAssignError, match="contiguous"):
        bucket_splits(policy(((0, 0x3FFF), (0x5000, 0xFFFF))))
    with pytest.raises(ConsumerAssignError, match="end at"):
        bucket_splits(policy(((0, 0x3FFF),)))


def test_an_entry_goes_by_its_stamp_else_its_key_else_its_position() -> None:
    stamped = pb.MessageMetadata(entry_hash_min=0x8123, entry_hash_max=0x8200, partition_key="x")
    assert entry_bucket(stamped, SPLITS, Position(1, 0)) == 3
    keyed = pb.MessageMetadata(partition_key="customer-17")
    expected = bucket_of("customer-17", SPLITS) + 1
    assert entry_bucket(keyed, SPLITS, Position(1, 0)) == expected
    assert bucket_of("customer-17", SPLITS) == sum(bucket_hash("customer-17") >= s for s in SPLITS)
    keyless = pb.MessageMetadata()
    assert {entry_bucket(keyless, SPLITS, Position(1, i)) for i in range(8)} == {1, 2, 3, 4}


def test_buckets_spread_over_the_sharers_by_name_and_move_only_on_membership_changes() -> None:
    selector: EntryBucketSelector[Sharer] = EntryBucketSelector(SPLITS)
    a, b, c = Sharer("a"), Sharer("b"), Sharer("c")
    selector.add(b, policy())
    selector.add(a, policy())
    assert [selector.select(h).consumer_name for h in (1, 2, 3, 4)] == ["a", "b", "a", "b"]
    selector.add(c, policy())
    assert [selector.select(h).consumer_name for h in (1, 2, 3, 4)] == ["a", "b", "c", "a"]
    selector.remove(b)
    assert [selector.select(h).consumer_name for h in (1, 2, 3, 4)] == ["a", "c", "a", "c"]
    assert selector.ranges()[a] == [(0, 0x3FFF), (0x8000, 0xBFFF)]


def test_a_sharer_with_another_boundary_list_has_a_stale_layout_and_is_refused() -> None:
    selector: EntryBucketSelector[Sharer] = EntryBucketSelector(SPLITS)
    with pytest.raises(ConsumerAssignError, match="stale"):
        selector.add(Sharer("a"), policy(((0, 0x7FFF), (0x8000, 0xFFFF))))


def test_entry_bucket_dispatch_is_part_of_the_subscription_policy() -> None:
    meta = pb.KeySharedMeta(keySharedMode=pb.STICKY, entryBucketDispatch=True)
    for start, end in FOUR:
        meta.hashRanges.add(start=start, end=end)
    parsed = KeySharedPolicy.from_meta(meta)
    assert parsed.entry_bucket_dispatch and parsed.hash_ranges == FOUR
    assert not parsed.same_subscription_policy(KeySharedPolicy(KeySharedMode.STICKY, FOUR))
