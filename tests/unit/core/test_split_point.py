"""Where a load-driven split cuts: the key-hash histogram's weighted median (ADR 0023)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.autoscale_policy import InvalidAutoScalePolicy
from braid.core.hashing import hash16
from braid.core.ranges import HashRange
from braid.core.segment_load import SegmentLoad
from braid.core.split_point import (
    KEY_HASH_BUCKETS,
    InvalidKeyHistogram,
    balanced_split_hash,
    bucket_index,
    bucket_start,
    midpoint_split_hash,
    split_point_moved,
)

FULL = HashRange.full()


def histogram(hash_range: HashRange, hashes: list[int], buckets: int = KEY_HASH_BUCKETS) -> list:
    weights = [0.0] * buckets
    for h in hashes:
        weights[bucket_index(hash_range, buckets, h)] += 1
    return weights


def share_below(hashes: list[int], at: int) -> float:
    return sum(1 for h in hashes if h < at) / len(hashes)


def test_buckets_tile_the_range_with_the_index_function() -> None:
    for hash_range in (FULL, HashRange(0x8000, 0xFFFF), HashRange(10, 110), HashRange(5, 9)):
        n = KEY_HASH_BUCKETS
        assert bucket_start(hash_range, n, 0) == hash_range.start
        assert bucket_start(hash_range, n, n) == hash_range.end + 1
        for h in range(hash_range.start, hash_range.end + 1, max(1, hash_range.size // 997)):
            i = bucket_index(hash_range, n, h)
            assert bucket_start(hash_range, n, i) <= h < bucket_start(hash_range, n, i + 1)


def test_skewed_keys_move_the_split_to_where_the_load_halves() -> None:
    """80 % of the messages carry keys hashing into the top eighth of the ring: a midpoint split
    would leave ~90 % of the load in the upper child; the balanced split puts ~half on each side."""
    rng = random.Random(7)
    hot_keys = [k for k in (f"hot-{i}" for i in range(20_000)) if hash16(k) >= 0xE000][:50]
    cold_keys = [f"cold-{i}" for i in range(500)]
    messages = [
        rng.choice(hot_keys) if rng.random() < 0.8 else rng.choice(cold_keys) for _ in range(20_000)
    ]
    hashes = [hash16(k) for k in messages]
    at = balanced_split_hash(FULL, histogram(FULL, hashes))
    assert share_below(hashes, midpoint_split_hash(FULL)) < 0.2  # the midpoint is lopsided
    assert 0xE000 < at <= 0xFFFF  # the cut is inside the hot range
    assert 0.4 <= share_below(hashes, at) <= 0.6


def test_uniform_keys_keep_the_midpoint() -> None:
    hashes = [hash16(f"user-{i}") for i in range(5_000)]
    assert balanced_split_hash(FULL, histogram(FULL, hashes)) == 0x8000
    upper = HashRange(0x8000, 0xFFFF)
    inside = [h for h in hashes if h >= 0x8000]
    assert balanced_split_hash(upper, histogram(upper, inside)) == 0xC000


@pytest.mark.parametrize("weights", [None, [], [0.0] * 64, [1.0] * 63 + [0.0]])
def test_no_or_thin_histogram_splits_at_the_midpoint(weights: list[float] | None) -> None:
    assert balanced_split_hash(FULL, weights) == 0x8000
    assert balanced_split_hash(HashRange(0x100, 0x1FF), weights) == 0x180


def test_a_single_hot_key_cannot_be_divided_so_the_cut_stays_nearest_the_midpoint() -> None:
    weights = [0.0] * 64
    weights[60] = 1_000.0
    assert balanced_split_hash(FULL, weights) == 0x8000


def test_the_cut_lands_on_a_bucket_boundary_of_the_segments_own_range() -> None:
    hash_range = HashRange(0x4000, 0x7FFF)  # 16384 positions: 256 per bucket
    weights = [0.0] * 64
    weights[10] = weights[11] = 500.0  # all the load in buckets 10 and 11
    at = balanced_split_hash(hash_range, weights)
    assert at == bucket_start(hash_range, 64, 11) == 0x4000 + 11 * 256


def test_a_range_smaller_than_the_histogram_still_splits_inside_it() -> None:
    hash_range = HashRange(100, 104)
    weights = [0.0] * 64
    weights[63] = 1_000.0
    at = balanced_split_hash(hash_range, weights)
    assert hash_range.start < at <= hash_range.end
    assert balanced_split_hash(HashRange(7, 8), weights) == 8


def test_malformed_histograms_are_refused() -> None:
    with pytest.raises(InvalidKeyHistogram):
        balanced_split_hash(FULL, [1.0, -1.0])
    with pytest.raises(InvalidKeyHistogram):
        balanced_split_hash(FULL, [float("nan")])
    with pytest.raises(InvalidKeyHistogram):
        balanced_split_hash(FULL, [0.0] * 2000)
    with pytest.raises(InvalidKeyHistogram):
        balanced_split_hash(HashRange(5, 5), [1.0])


def test_the_load_record_carries_the_histogram_and_ignores_it_when_absent() -> None:
    record = SegmentLoad(1.0, 2.0, 3.0, 4.0, modified_ms=5, key_hash_buckets=(0, 1.5))
    decoded = SegmentLoad.decode(record.encode(), 5)
    assert decoded == record and decoded.key_hash_buckets == (0.0, 1.5)
    plain = SegmentLoad.decode(
        b'{"msgRateIn":1,"bytesRateIn":2,"msgRateOut":3,"bytesRateOut":4}', 9
    )
    assert plain.key_hash_buckets == () and "keyHashBuckets" not in plain.to_json()
    with pytest.raises(InvalidAutoScalePolicy):
        SegmentLoad.decode(
            b'{"msgRateIn":1,"bytesRateIn":2,"msgRateOut":3,"bytesRateOut":4,'
            b'"keyHashBuckets":[-1]}',
            9,
        )
    with pytest.raises(InvalidAutoScalePolicy):
        SegmentLoad.decode(
            b'{"msgRateIn":1,"bytesRateIn":2,"msgRateOut":3,"bytesRateOut":4,"keyHashBuckets":7}',
            9,
        )


ranges = st.tuples(st.integers(0, 0xFFFE), st.integers(1, 0xFFFF)).map(
    lambda p: HashRange(min(p[0], 0xFFFE), max(p[1], min(p[0], 0xFFFE) + 1))
)


@given(ranges, st.lists(st.floats(0, 1e6), min_size=1, max_size=128))
def test_the_split_hash_is_always_a_valid_cut_of_the_range(
    hash_range: HashRange, weights: list[float]
) -> None:
    at = balanced_split_hash(hash_range, weights)
    assert hash_range.start < at <= hash_range.end
    hash_range.split(at)  # accepted by the layout's own check


@given(st.lists(st.integers(0, 0xFFFF), min_size=200, max_size=2_000))
def test_the_balanced_cut_is_never_worse_than_the_midpoint(hashes: list[int]) -> None:
    at = balanced_split_hash(FULL, histogram(FULL, hashes))
    midpoint = midpoint_split_hash(FULL)
    imbalance_at = abs(share_below(hashes, at) - 0.5)
    imbalance_mid = abs(share_below(hashes, midpoint) - 0.5)
    # Whole buckets on each side are exact, so the chosen boundary is at least as balanced as
    # the midpoint (itself a boundary of the full ring's 64 buckets).
    assert imbalance_at <= imbalance_mid + 1e-9


def test_the_split_point_moves_only_when_the_histogram_says_so() -> None:
    thin = [1.0] * 64
    skewed = [0.0] * 56 + [100.0] * 8  # everything in the top eighth
    assert split_point_moved(FULL, thin, skewed)  # filled up: the cut leaves the midpoint
    assert not split_point_moved(FULL, skewed, [w * 1.3 for w in skewed])  # same shape
    assert not split_point_moved(FULL, None, thin)  # thin either way: the midpoint
    nearby = [0.0] * 55 + [100.0] * 9  # one bucket lower: within 1/16 of the range
    assert not split_point_moved(FULL, skewed, nearby)
    assert not split_point_moved(HashRange(3, 3), None, skewed)


def test_a_move_of_exactly_a_sixteenth_of_the_range_is_not_a_move() -> None:
    """The threshold is strict: the balanced cut four buckets (1/16 of 64) below the midpoint
    keeps the old split point, five buckets below moves it."""
    at_threshold = [0.0] * 64
    at_threshold[27] = at_threshold[28] = 50.0  # half the load below bucket 28's boundary
    beyond = [0.0] * 64
    beyond[26] = beyond[27] = 50.0  # half below bucket 27's boundary
    sixteenth = FULL.size // 16
    midpoint = midpoint_split_hash(FULL)
    assert midpoint - balanced_split_hash(FULL, at_threshold) == sixteenth
    assert not split_point_moved(FULL, None, at_threshold)
    assert midpoint - balanced_split_hash(FULL, beyond) > sixteenth
    assert split_point_moved(FULL, None, beyond)
