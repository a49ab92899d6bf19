"""Batch-index ack sets (PIP-54) against golden words and a plain set-of-indexes model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core import ack_set
from braid.core.errors import InvalidInputError

_indexes = st.sets(st.integers(min_value=0, max_value=200), max_size=40)


def test_words_are_javas_bitset_long_array() -> None:
    # BitSet.set(0, 3).toLongArray() == [7]; bit 63 makes the word negative; bit 64 opens word 1.
    assert ack_set.all_set(3) == (7,)
    assert ack_set.of_indexes([63]) == (-(2**63),)
    assert ack_set.of_indexes([62]) == (2**62,)  # only bit 63 is the sign
    assert ack_set.of_indexes([64]) == (0, 1)
    assert ack_set.all_set(0) == ()
    # A consumer acknowledging message 1 of a batch of 3 sends the other two bits.
    assert ack_set.of_indexes([0, 2]) == (5,)


def test_a_batch_is_acknowledged_once_the_and_of_partial_acks_is_empty() -> None:
    held = ack_set.of_indexes([0, 2])  # message 1 acknowledged
    held = ack_set.intersect(held, ack_set.of_indexes([1, 2]))  # then message 0
    assert held == (4,) and not ack_set.is_empty(held)
    held = ack_set.intersect(held, ack_set.of_indexes([0, 1]))  # then message 2
    assert ack_set.is_empty(held)


@given(_indexes, _indexes)
def test_intersection_is_the_set_intersection(a: set[int], b: set[int]) -> None:
    result = ack_set.intersect(ack_set.of_indexes(a), ack_set.of_indexes(b))
    assert ack_set.indexes(result) == sorted(a & b)
    assert ack_set.cardinality(result) == len(a & b)
    assert ack_set.is_empty(result) == (not (a & b))


@given(_indexes, st.integers(min_value=0, max_value=220))
def test_indexes_and_membership_match_the_model(a: set[int], count: int) -> None:
    words = ack_set.of_indexes(a)
    assert ack_set.indexes(words) == sorted(a)
    assert ack_set.indexes(words, count) == sorted(i for i in a if i < count)
    assert ack_set.cardinality(words, count) == len([i for i in a if i < count])
    assert all(ack_set.is_set(words, i) == (i in a) for i in range(210))
    assert all(-(2**63) <= w < 2**63 for w in words)


@pytest.mark.parametrize("word", [2**63, -(2**63) - 1, True, "1", 1.0])
def test_words_outside_int64_are_refused(word: object) -> None:
    with pytest.raises(InvalidInputError):
        ack_set.check_words([word])  # type: ignore[list-item]


def test_negative_batch_index_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="batch index -3 is negative"):
        ack_set.of_indexes([0, 5, -3])


@pytest.mark.parametrize("word", [-(2**63), -1, 0, 2**63 - 1])
def test_every_signed_64_bit_word_is_accepted_as_it_is(word: int) -> None:
    assert ack_set.check_words([word, 5]) == (word, 5)


@pytest.mark.parametrize("word", [-(2**63) - 1, 2**63, 2**64 - 1])
def test_a_word_outside_the_signed_64_bit_range_is_refused_naming_it(word: int) -> None:
    with pytest.raises(InvalidInputError) as refused:
        ack_set.check_words([0, word])
    assert str(refused.value) == f"ack set word {word!r} is not a signed 64-bit integer"
