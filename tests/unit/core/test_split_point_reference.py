"""The balanced split hash against an independent reference, and the histogram's typed errors.

The reference spreads each bucket's weight evenly over the hash positions the bucket covers
(:func:`bucket_index` says which) and sums exact fractions position by position; the candidates
are the positions where the bucket index changes. That is the rule of ADR 0023 computed the slow
way, so the fast code's arithmetic (the share of the bucket the midpoint cuts, the tolerance and
the thin-sample thresholds, the tie-breaks) is pinned hash by hash.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from braid.core.ranges import HashRange
from braid.core.split_point import (
    MAX_BUCKETS,
    MIN_SAMPLE_WEIGHT,
    InvalidKeyHistogram,
    balanced_split_hash,
    bucket_index,
    check_histogram,
    midpoint_split_hash,
)


def _exact_share_below(hash_range: HashRange, weights: list[int], at: int) -> Fraction:
    n = len(weights)
    positions = range(hash_range.start, hash_range.end + 1)
    covered = [0] * n
    for h in positions:
        covered[bucket_index(hash_range, n, h)] += 1
    below = sum(
        (
            Fraction(
                weights[bucket_index(hash_range, n, h)], covered[bucket_index(hash_range, n, h)]
            )
            for h in range(hash_range.start, at)
        ),
        Fraction(0),
    )
    return below / sum(weights)


def reference_split(hash_range: HashRange, weights: list[int]) -> int | None:
    """ADR 0023 by brute force; ``None`` when the midpoint share is exactly on the tolerance
    edge (float rounding may go either way there: tested with exact values separately)."""
    midpoint = midpoint_split_hash(hash_range)
    total = sum(weights)
    if total < MIN_SAMPLE_WEIGHT:
        return midpoint
    distance = abs(_exact_share_below(hash_range, weights, midpoint) - Fraction(1, 2))
    if distance == Fraction(1, 10):
        return None
    if distance < Fraction(1, 10):
        return midpoint
    n = len(weights)
    candidates = []
    for h in range(hash_range.start + 1, hash_range.end + 1):
        index = bucket_index(hash_range, n, h)
        if index != bucket_index(hash_range, n, h - 1):
            below = sum(weights[:index])
            candidates.append((abs(2 * below - total), abs(h - midpoint), h))
    return min(candidates)[2] if candidates else midpoint


@st.composite
def ranges_and_histograms(draw: st.DrawFn) -> tuple[HashRange, list[int]]:
    buckets = draw(st.integers(1, 8))
    start = draw(st.integers(0, 0xFFFF - 200))
    size = draw(st.integers(max(2, buckets), 200))
    weights = draw(st.lists(st.integers(0, 200), min_size=buckets, max_size=buckets))
    return HashRange(start, start + size - 1), weights


@settings(max_examples=150, deadline=None)
@given(case=ranges_and_histograms())
@example(case=(HashRange(0, 15), [39, 0, 61]))  # midpoint 8 cuts bucket 1 (6..10): 39 % below
@example(case=(HashRange(0, 15), [20, 50, 30]))  # 20 + 50 * 2/5 = 40 of 100: just kept
@example(case=(HashRange(0, 15), [10, 50, 40]))  # 10 + 20 = 30 of 100: too few below
@example(case=(HashRange(0, 15), [30, 100, 0]))  # 30 + 40 = 70 of 130: too many below
@example(case=(HashRange(100, 114), [0, 64, 64]))  # bucket 1 is 105..109, midpoint 108
@example(case=(HashRange(7, 9), [100]))  # one bucket, midpoint 9 holds 2/3: no boundary to take
@example(case=(HashRange(0, 3), [0, 0, 100, 100]))  # the best cut is the range's last hash
@example(case=(HashRange(0, 7), [0, 0, 64, 0]))  # all cuts equally bad: nearest the midpoint
def test_the_split_hash_matches_the_brute_force_rule(case: tuple[HashRange, list[int]]) -> None:
    hash_range, weights = case
    expected = reference_split(hash_range, weights)
    if expected is not None:
        assert balanced_split_hash(hash_range, [float(w) for w in weights]) == expected


def test_exactly_the_minimum_sample_weight_is_enough_to_move_the_cut() -> None:
    hash_range = HashRange(0, 7)  # 8 buckets of one hash each; midpoint 4
    thin = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, MIN_SAMPLE_WEIGHT - 1, 0.0]
    enough = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, MIN_SAMPLE_WEIGHT / 2, MIN_SAMPLE_WEIGHT / 2]
    assert balanced_split_hash(hash_range, thin) == 4
    assert balanced_split_hash(hash_range, enough) == 7


def test_a_midpoint_holding_exactly_forty_or_sixty_percent_is_kept() -> None:
    hash_range = HashRange(0, 9)  # 10 one-hash buckets, midpoint 5
    forty = [8.0] * 5 + [12.0] * 5  # 40 of 100 below 5
    sixty = [12.0] * 5 + [8.0] * 5
    assert balanced_split_hash(hash_range, forty) == 5
    assert balanced_split_hash(hash_range, sixty) == 5
    assert balanced_split_hash(hash_range, [7.0] * 5 + [13.0] * 5) != 5


def test_a_histogram_of_exactly_max_buckets_is_accepted_and_one_more_is_refused() -> None:
    assert check_histogram([1] * MAX_BUCKETS) == (1.0,) * MAX_BUCKETS
    with pytest.raises(
        InvalidKeyHistogram, match=rf"has 1\.\.{MAX_BUCKETS} buckets, got {MAX_BUCKETS + 1}"
    ):
        check_histogram([1.0] * (MAX_BUCKETS + 1))
    with pytest.raises(InvalidKeyHistogram, match=rf"has 1\.\.{MAX_BUCKETS} buckets, got 0"):
        check_histogram([])


@pytest.mark.parametrize("weights", ["abc", b"\x01", 5, None, {1.0: 2.0}])
def test_a_histogram_that_is_not_a_list_of_numbers_is_named_in_the_error(weights: object) -> None:
    with pytest.raises(InvalidKeyHistogram, match="a key-hash histogram is a list of numbers, got"):
        check_histogram(weights)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        (True, "must be a number, got True"),
        ("1", "must be a number, got '1'"),
        (None, "must be a number, got None"),
        (-0.5, r"must be >= 0, got -0\.5"),
        (float("inf"), "must be >= 0, got inf"),
    ],
)
def test_a_bad_bucket_weight_is_named_in_the_error(weight: object, message: str) -> None:
    with pytest.raises(InvalidKeyHistogram, match=message):
        check_histogram([1.0, weight, 2.0])  # type: ignore[list-item]


def test_a_single_position_range_cannot_be_split_and_the_error_names_it() -> None:
    with pytest.raises(InvalidKeyHistogram, match=r"cannot split \[0005, 0005\]: .*single hash"):
        midpoint_split_hash(HashRange(5, 5))
