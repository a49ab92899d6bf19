"""Routing vectors (conformance C2): a fixed table of keys and layouts -> segment ids.

Three independent computations must agree on every row: the hard-coded table, Braid's router
(its ``mmh3`` fast path and its :mod:`braid.core.hashing` reference path), and a from-scratch
Murmur3 x86_32 written in this file. Keyed routing on a managed layout uses the **high** 16 bits
of the raw hash (``docs/protocol.md#routing-a-key``, ADR 0002; older upstream texts
say ``& 0xFFFF``); an all-legacy layout uses v4's ``signSafeMod(murmur3 & 0x7FFFFFFF, N)``, as the
Java and Go clients' ``Murmur3_32Hash`` do.
"""

from __future__ import annotations

import mmh3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.hashing import hash16, legacy_partition
from braid.core.layout import SegmentLayout
from braid.core.routing import SegmentRouter, bucket_hash, bucket_of
from braid.core.topic_layout import SegmentRoute, TopicLayout, segment_topic_name

TOPIC = "topic://public/default/vectors"


def reference_murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """Austin Appleby's MurmurHash3_x86_32, transcribed independently of mmh3."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & 0xFFFFFFFF
    blocks = len(data) // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    tail = data[4 * blocks :]
    k = 0
    if len(tail) >= 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if tail:
        k ^= tail[0]
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * c2) & 0xFFFFFFFF
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def _managed(dag: SegmentLayout) -> TopicLayout:
    routes = {sid: SegmentRoute(sid, segment_topic_name(TOPIC, dag, sid)) for sid in dag.segments}
    return TopicLayout(TOPIC, dag, routes)


ONE = _managed(SegmentLayout.initial(1))
TWO = _managed(SegmentLayout.initial(2))
FOUR = _managed(SegmentLayout.initial(4))
# initial(2), then split segment 0 -> 2 [0000-3fff] + 3 [4000-7fff], then merge 2+3 -> 4.
SPLIT = _managed(SegmentLayout.initial(2).split_segment(0))
MERGED = _managed(SegmentLayout.initial(2).split_segment(0).merge_segments([2, 3]))
LEGACY3 = TopicLayout.synthetic("persistent://public/default/vectors", 3)
LEGACY5 = TopicLayout.synthetic("persistent://public/default/vectors", 5)
LEGACY7 = TopicLayout.synthetic("persistent://public/default/vectors", 7)

# key, raw murmur3, then the segment id in ONE, TWO, FOUR, SPLIT, MERGED, LEGACY3/5/7.
VECTORS = [
    ("", 0x00000000, 0, 0, 0, 2, 4, 0, 0, 0),
    ("a", 0x3C2569B2, 0, 0, 0, 2, 4, 2, 0, 4),
    ("key-0", 0xE337F8BF, 0, 1, 3, 1, 1, 2, 3, 6),
    ("key-1", 0x98B115A0, 0, 1, 2, 1, 1, 1, 2, 6),
    ("order-42", 0x4B11A18E, 0, 0, 1, 3, 4, 2, 0, 6),
    ("customer/17", 0x3B3E6E01, 0, 0, 0, 2, 4, 1, 2, 1),
    ("ünïcødé", 0x83BEF376, 0, 1, 2, 1, 1, 2, 4, 3),
    ("日本語キー", 0xDFFDD7D8, 0, 1, 3, 1, 1, 2, 4, 4),
    ("🙂emoji", 0x6E0A153B, 0, 0, 1, 3, 4, 2, 0, 0),
    ("x" * 37, 0xC409EA7B, 0, 1, 3, 1, 1, 2, 4, 4),
    ("segment-boundary", 0x362427DC, 0, 0, 0, 2, 4, 1, 4, 5),
    ("user:1001", 0x9A98BFC0, 0, 1, 2, 1, 1, 0, 1, 5),
    ("user:1002", 0x512185DD, 0, 0, 1, 3, 4, 0, 3, 4),
    ("ledger", 0xE745A892, 0, 1, 3, 1, 1, 0, 1, 2),
    ("braid", 0xA3BDDE18, 0, 1, 2, 1, 1, 2, 0, 2),
]
LAYOUTS = [ONE, TWO, FOUR, SPLIT, MERGED, LEGACY3, LEGACY5, LEGACY7]


@pytest.mark.parametrize("row", VECTORS, ids=[repr(r[0])[:20] for r in VECTORS])
def test_routing_vector(row: tuple[object, ...]) -> None:
    key, raw, *expected = row
    assert isinstance(key, str)
    data = key.encode("utf-8")
    assert reference_murmur3_x86_32(data) == raw
    assert mmh3.hash(data, 0, signed=False) == raw
    assert hash16(key) == raw >> 16  # type: ignore[operator]
    for layout, want in zip(LAYOUTS, expected, strict=True):
        router = SegmentRouter(layout)
        assert router.route(key) == want, (key, layout.topic, layout.epoch)
        assert router.route_keyed(key) == want
        assert router.route(data) == want


def test_legacy_routing_matches_v4_partitioning() -> None:
    for key, raw, *_ in VECTORS:
        for n, layout in ((3, LEGACY3), (5, LEGACY5), (7, LEGACY7)):
            partition = (raw & 0x7FFFFFFF) % n  # type: ignore[operator]
            assert legacy_partition(key, n) == partition  # type: ignore[arg-type]
            sid = SegmentRouter(layout).route(key)  # type: ignore[arg-type]
            assert layout.route(sid).topic.endswith(f"-partition-{partition}")


def test_high_not_low_bits_route_managed_segments() -> None:
    # "key-0" hashes to 0xe337f8bf: high half 0xe337 (upper segment), low half 0xf8bf (also
    # upper), but "a" = 0x3c2569b2 has high 0x3c25 (lower half) and low 0x69b2 (lower half too);
    # pick a key whose halves disagree to show which half is used.
    raw = 0x98B115A0  # "key-1": high 0x98b1 -> upper, low 0x15a0 -> lower
    assert raw >> 16 >= 0x8000 > raw & 0xFFFF
    assert SegmentRouter(TWO).route("key-1") == 1


@given(st.text(max_size=40))
def test_fast_path_equals_reference_path_for_any_key(key: str) -> None:
    for layout in (TWO, FOUR, SPLIT, MERGED, LEGACY3, LEGACY7):
        router = SegmentRouter(layout)
        assert router.route(key) == router.route_keyed(key)


@given(st.binary(max_size=40))
def test_bytes_keys_hash_as_given(key: bytes) -> None:
    assert (
        SegmentRouter(FOUR).route(key)
        == FOUR.dag.find_active_segment(reference_murmur3_x86_32(key) >> 16).segment_id
    )


def test_single_segment_layout_never_hashes() -> None:
    router = SegmentRouter(ONE)
    assert {router.route(k) for k in ("a", None, b"b", "\ud800")} == {0}


def test_keyless_messages_go_round_robin_in_ring_order() -> None:
    router = SegmentRouter(SPLIT)
    assert [router.route(None) for _ in range(7)] == [2, 3, 1, 2, 3, 1, 2]


def test_sealed_segments_never_receive_messages() -> None:
    router = SegmentRouter(MERGED)
    seen = {router.route(f"k{i}") for i in range(500)} | {router.route(None) for _ in range(5)}
    assert seen == {1, 4}


def test_bucket_of_uses_the_low_half() -> None:
    # "key-1" low half 0x15a0 lies in bucket 0 of [0000-7fff | 8000-ffff]; "key-0" low 0xf8bf in 1.
    assert bucket_hash("key-1") == 0x15A0
    assert bucket_of("key-1", [0x8000]) == 0
    assert bucket_of("key-0", [0x8000]) == 1
    assert bucket_of("key-0", []) == 0
    assert bucket_of("key-0", [0x1000, 0xF8BF]) == 2
    assert bucket_of("key-0", [0x1000, 0xF8C0]) == 1


@pytest.mark.parametrize("row", VECTORS, ids=[repr(r[0])[:20] for r in VECTORS])
def test_a_resend_routed_by_its_recorded_hash_goes_where_its_key_went(
    row: tuple[object, ...],
) -> None:
    # A producer re-routes a pending message after a split by the hash it recorded (route_hash),
    # not by its key: both must name the same active segment on every managed layout.
    key, raw, *expected = row
    for layout, want in zip(LAYOUTS[:5], expected[:5], strict=True):
        assert SegmentRouter(layout).route_hash(raw >> 16) == want, (key, layout.epoch)  # type: ignore[operator]


def test_a_recorded_hash_on_an_all_legacy_layout_goes_round_robin() -> None:
    router = SegmentRouter(LEGACY3)
    assert [router.route_hash(h) for h in (0, 0xFFFF, 0x8000, 0)] == [0, 1, 2, 0]


def test_the_ring_edges_route_to_the_first_and_last_segment() -> None:
    router = SegmentRouter(FOUR)
    assert [router.route_hash(h) for h in (0x0000, 0x3FFF, 0x4000, 0xFFFF)] == [0, 0, 1, 3]
