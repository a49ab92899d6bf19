"""HashRange: bounds, containment, split at the midpoint, adjacency, merge, hex and text forms."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.ranges import MAX_HASH, MIN_HASH, HashRange, InvalidHashRange


@st.composite
def ranges(draw: st.DrawFn) -> HashRange:
    start = draw(st.integers(MIN_HASH, MAX_HASH))
    end = draw(st.integers(start, MAX_HASH))
    return HashRange(start, end)


def test_full_range_covers_the_whole_ring_of_65536_positions() -> None:
    full = HashRange.full()
    assert (full.start, full.end) == (0x0000, 0xFFFF)
    assert full.size == 65536
    assert HashRange(5, 5).size == 1


def test_contains_a_hash_inclusive_of_both_bounds() -> None:
    r = HashRange(0x1000, 0x1FFF)
    assert r.contains(0x1000)
    assert r.contains(0x1FFF)
    assert not r.contains(0x0FFF)
    assert not r.contains(0x2000)


def test_contains_a_whole_range() -> None:
    r = HashRange(0x1000, 0x1FFF)
    assert r.contains(HashRange(0x1000, 0x1FFF))
    assert r.contains(HashRange(0x1100, 0x1200))
    assert not r.contains(HashRange(0x0FFF, 0x1200))
    assert not r.contains(HashRange(0x1F00, 0x2000))
    assert HashRange.full().contains(r)


def test_contains_rejects_something_that_is_neither_hash_nor_range() -> None:
    with pytest.raises(InvalidHashRange):
        HashRange.full().contains("10")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("start", "end", "names"),
    [
        (-1, 10, "start -1"),
        (0, 0x10000, "end 65536"),
        (0x10000, 0x10000, "start 65536"),
        (10, 9, "end 0x0009 is below its start 0x000a"),
    ],
)
def test_invalid_ranges_are_rejected_naming_the_bad_bound(start: int, end: int, names: str) -> None:
    with pytest.raises(InvalidHashRange, match=names):
        HashRange(start, end)


def test_invalid_range_error_is_an_invalid_input_error() -> None:
    with pytest.raises(InvalidInputError):
        HashRange(0, -5)


@pytest.mark.parametrize(("start", "end"), [(True, 5), (0, 1.5), ("0", 1), (None, 1)])
def test_non_integer_bounds_are_rejected(start: object, end: object) -> None:
    with pytest.raises(InvalidHashRange, match="must be an integer"):
        HashRange(start, end)  # type: ignore[arg-type]


def test_str_is_the_bracketed_hex_form() -> None:
    assert str(HashRange.full()) == "[0000, ffff]"
    assert str(HashRange(0x0A0B, 0xF0F0)) == "[0a0b, f0f0]"


def test_hex_form_round_trips() -> None:
    r = HashRange(0x0A0B, 0xF0F0)
    assert r.to_hex() == "0a0b-f0f0"
    assert HashRange.from_hex("0a0b-f0f0") == r
    assert HashRange.from_hex("0000-7fff") == HashRange(0, 0x7FFF)


@pytest.mark.parametrize(
    "text",
    ["", "0000", "0-7fff", "0000-7FFF", "00000-7fff", "0000_7fff", " 0000-7fff", "zzzz-0000"],
)
def test_from_hex_rejects_anything_but_the_canonical_form(text: str) -> None:
    with pytest.raises(InvalidHashRange, match="expected 'ssss-eeee'"):
        HashRange.from_hex(text)


def test_from_hex_rejects_bounds_out_of_order() -> None:
    with pytest.raises(InvalidHashRange, match="below its start"):
        HashRange.from_hex("8000-0000")


def test_ranges_order_by_start_then_end() -> None:
    items = [HashRange(5, 9), HashRange(0, 10), HashRange(5, 6), HashRange(0, 3)]
    assert sorted(items) == [HashRange(0, 3), HashRange(0, 10), HashRange(5, 6), HashRange(5, 9)]
    assert HashRange(0, 3) < HashRange(0, 4) < HashRange(1, 1)


def test_split_of_the_full_range_gives_two_halves() -> None:
    low, high = HashRange.full().split()
    assert (low.to_hex(), high.to_hex()) == ("0000-7fff", "8000-ffff")


def test_split_of_a_two_hash_range_gives_single_hashes() -> None:
    assert HashRange(100, 101).split() == (HashRange(100, 100), HashRange(101, 101))


def test_split_of_an_odd_sized_range_puts_the_extra_hash_in_the_lower_half() -> None:
    assert HashRange(0, 2).split() == (HashRange(0, 1), HashRange(2, 2))


def test_a_size_one_range_cannot_split() -> None:
    with pytest.raises(InvalidHashRange, match="size 1"):
        HashRange(7, 7).split()


def test_adjacency_is_end_plus_one_equals_start_on_either_side() -> None:
    a, b = HashRange(0, 9), HashRange(10, 20)
    assert a.is_adjacent_to(b)
    assert b.is_adjacent_to(a)
    assert not a.is_adjacent_to(HashRange(11, 20))  # gap
    assert not a.is_adjacent_to(HashRange(9, 20))  # overlap
    assert not a.is_adjacent_to(a)


def test_merge_works_in_either_order() -> None:
    a, b = HashRange(0, 0x7FFF), HashRange(0x8000, 0xFFFF)
    assert a.merge(b) == b.merge(a) == HashRange.full()


def test_merge_of_non_adjacent_ranges_fails() -> None:
    with pytest.raises(InvalidHashRange, match="not adjacent"):
        HashRange(0, 10).merge(HashRange(12, 20))
    with pytest.raises(InvalidHashRange, match="not adjacent"):
        HashRange(0, 10).merge(HashRange(5, 20))


def test_overlaps() -> None:
    assert HashRange(0, 10).overlaps(HashRange(10, 20))
    assert not HashRange(0, 9).overlaps(HashRange(10, 20))


@settings(max_examples=200)
@given(ranges().filter(lambda r: r.size >= 2))
def test_split_halves_are_adjacent_and_merge_back(r: HashRange) -> None:
    low, high = r.split()
    assert low.start == r.start and high.end == r.end
    assert low.end + 1 == high.start
    assert 0 <= low.size - high.size <= 1
    assert low.is_adjacent_to(high)
    assert low.merge(high) == high.merge(low) == r
    assert r.contains(low) and r.contains(high)


@settings(max_examples=200)
@given(ranges())
def test_hex_form_round_trips_for_any_range(r: HashRange) -> None:
    assert HashRange.from_hex(r.to_hex()) == r


@settings(max_examples=200)
@given(ranges(), st.integers(MIN_HASH, MAX_HASH))
def test_contains_agrees_with_the_bounds(r: HashRange, h: int) -> None:
    assert r.contains(h) == (r.start <= h <= r.end)


@pytest.mark.parametrize(
    ("start", "end", "at", "low", "high"),
    [
        (0x0000, 0xFFFF, 0x0001, (0x0000, 0x0000), (0x0001, 0xFFFF)),
        (0x0000, 0xFFFF, 0xFFFF, (0x0000, 0xFFFE), (0xFFFF, 0xFFFF)),
        (0x0000, 0xFFFF, 0x4000, (0x0000, 0x3FFF), (0x4000, 0xFFFF)),
        (100, 101, 101, (100, 100), (101, 101)),
    ],
)
def test_split_at_a_hash_makes_it_the_first_hash_of_the_upper_half(
    start: int, end: int, at: int, low: tuple[int, int], high: tuple[int, int]
) -> None:
    assert HashRange(start, end).split(at) == (HashRange(*low), HashRange(*high))


def test_split_without_a_hash_is_the_midpoint_split() -> None:
    assert HashRange(0, 0xFFFF).split(None) == HashRange(0, 0xFFFF).split()
    assert HashRange(0, 0xFFFF).split(0x8000) == HashRange(0, 0xFFFF).split()


@pytest.mark.parametrize("at", [0x0100, 0x00FF, 0x0300, -1, True, "5"])
def test_split_hash_outside_the_range_or_at_its_start_is_refused(at: object) -> None:
    with pytest.raises(InvalidHashRange, match="split hash"):
        HashRange(0x0100, 0x01FF).split(at)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: HashRange(0, 5).contains("3"),
            "contains() needs a hash or a HashRange, got '3'",
        ),
        (lambda: HashRange.from_hex(7), "a hex hash range must be a string, got 7"),
        (
            lambda: HashRange.from_hex("0000-7FFF"),
            "invalid hex hash range '0000-7FFF': expected 'ssss-eeee' with four lowercase hex "
            "digits per bound, e.g. '0000-7fff'",
        ),
    ],
)
def test_bad_range_input_is_refused_word_for_word(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(InvalidHashRange) as info:
        build()
    assert str(info.value) == message
