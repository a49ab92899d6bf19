"""Key_Shared routing pieces: the sticky key, the three selectors and the draining-hash books."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.errors import ConsumerAssignError
from braid.broker.sticky_keys import (
    NONE_KEY,
    AutoSplitSelector,
    ConsistentHashingSelector,
    KeySharedMode,
    KeySharedPolicy,
    PendingHashes,
    StickyRangeSelector,
    sticky_key,
)
from braid.core.hashing import sticky_key_hash
from braid.ledger.api import Position
from braid.protocol.generated import PulsarApi_pb2 as pb


@dataclass(frozen=True)
class Member:
    consumer_name: str
    priority_level: int = 0


AUTO = KeySharedPolicy()


def _sticky(*ranges: tuple[int, int]) -> KeySharedPolicy:
    return KeySharedPolicy(KeySharedMode.STICKY, tuple(ranges))


def test_the_ordering_key_wins_over_the_partition_key() -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    assert sticky_key(meta) == NONE_KEY
    meta.partition_key = "pk"
    assert sticky_key(meta) == b"pk"
    meta.ordering_key = b"\x00ok"
    assert sticky_key(meta) == b"\x00ok"


def test_a_base64_partition_key_is_hashed_as_its_bytes() -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    meta.partition_key = base64.b64encode(b"\xff\x01").decode()
    meta.partition_key_b64_encoded = True
    assert sticky_key(meta) == b"\xff\x01"


@pytest.mark.parametrize(
    "meta",
    [
        pb.KeySharedMeta(keySharedMode=pb.STICKY),
        pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=5, end=4)]),
        pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=-1, end=4)]),
        pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=0, end=65536)]),
    ],
)
def test_invalid_sticky_policies_are_refused(meta: pb.KeySharedMeta) -> None:
    with pytest.raises(ConsumerAssignError):
        KeySharedPolicy.from_meta(meta)


def test_auto_split_halves_the_widest_range_as_pulsar_does() -> None:
    a, b, c = Member("a"), Member("b"), Member("c")
    selector: AutoSplitSelector[Member] = AutoSplitSelector()
    selector.add(a, AUTO)
    assert selector.ranges() == {a: [(0, 65535)]}
    selector.add(b, AUTO)
    assert selector.ranges() == {b: [(0, 32768)], a: [(32769, 65535)]}
    selector.add(c, AUTO)  # both halves are as wide: the first is split
    assert selector.ranges() == {c: [(0, 16384)], b: [(16385, 32768)], a: [(32769, 65535)]}
    assert selector.select(16384) is c and selector.select(16385) is b
    selector.remove(a)  # the top range goes to its neighbour below
    assert selector.ranges() == {c: [(0, 16384)], b: [(16385, 65535)]}
    selector.remove(c)
    assert selector.select(0) is b and selector.select(65535) is b


def test_sticky_ranges_must_not_overlap_and_uncovered_hashes_have_no_consumer() -> None:
    a, b = Member("a"), Member("b")
    selector: StickyRangeSelector[Member] = StickyRangeSelector()
    selector.add(a, _sticky((0, 99), (200, 299)))
    with pytest.raises(ConsumerAssignError, match="'a'"):
        selector.add(b, _sticky((250, 400)))
    with pytest.raises(ConsumerAssignError):
        selector.add(b, _sticky((300, 310), (305, 320)))  # its own ranges overlap
    selector.add(b, _sticky((100, 199)))
    assert selector.select(99) is a and selector.select(100) is b and selector.select(299) is a
    assert selector.select(300) is None
    selector.remove(a)
    assert selector.select(0) is None and selector.select(150) is b


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6, unique=True))
def test_consistent_hashing_moves_only_hashes_to_a_newcomer(names: list[str]) -> None:
    members = [Member(n) for n in names]
    selector: ConsistentHashingSelector[Member] = ConsistentHashingSelector(20)
    for m in members[:-1] or members:
        selector.add(m, AUTO)
    probes = range(1, 65536, 97)
    before = {h: selector.select(h) for h in probes}
    assert all(c is not None for c in before.values())
    if len(members) > 1:
        newcomer = members[-1]
        selector.add(newcomer, AUTO)
        after = {h: selector.select(h) for h in probes}
        assert all(after[h] in (before[h], newcomer) for h in probes)
        selector.remove(newcomer)
        assert {h: selector.select(h) for h in probes} == before


def test_consistent_hashing_points_are_the_sticky_hash_of_name_and_index() -> None:
    selector: ConsistentHashingSelector[Member] = ConsistentHashingSelector(3)
    only = Member("only")
    selector.add(only, AUTO)
    points = sorted(sticky_key_hash(f"only\0{i}".encode()) for i in range(3))
    assert [hi for _, hi in selector.ranges()[only]][: len(points)] == points


def test_a_hash_drains_from_its_holder_before_another_consumer_may_have_it() -> None:
    old, new = Member("old"), Member("new")
    books: PendingHashes[Member] = PendingHashes()
    p1, p2 = Position(1, 1), Position(1, 2)
    books.delivered(old, p1, 7)
    books.delivered(old, p2, 7)
    assert books.blocks(7, new) and not books.blocks(7, old) and not books.blocks(8, new)
    assert books.release([p1]) is False  # old still holds p2 of hash 7
    assert books.blocks(7, new)
    assert books.release([p2]) is True
    assert not books.blocks(7, new)
    with pytest.raises(ValueError):
        books.delivered(new, p1, 9)
        books.delivered(old, p2, 9)
