"""Partition naming (Pulsar's ``-partition-N``), the topic-list filter and its hash."""

from __future__ import annotations

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.partitions import (
    MAX_PARTITIONS,
    InvalidPartitionCount,
    check_partition_count,
    partition_index,
    partition_name,
    partitioned_topic_of,
)
from braid.core.topic_list import (
    InvalidTopicsPattern,
    compile_pattern,
    filter_topics,
    remove_domain_scheme,
    topics_hash,
)


@pytest.mark.parametrize(
    ("local", "index", "base"),
    [
        ("orders-partition-0", 0, "orders"),
        ("orders-partition-12", 12, "orders"),
        ("a-partition-1-partition-2", 2, "a-partition-1"),
        ("orders", -1, "orders"),
        ("orders-partition-", -1, "orders-partition-"),
        ("orders-partition-x", -1, "orders-partition-x"),
        ("-partition-3", -1, "-partition-3"),
        ("orders-partition-٣", -1, "orders-partition-٣"),  # a non-ASCII digit is not an index
    ],
)
def test_partition_names(local: str, index: int, base: str) -> None:
    assert partition_index(local) == index
    assert partitioned_topic_of(local) == base


@given(st.text(min_size=1).filter(lambda s: "/" not in s), st.integers(0, 10_000))
def test_partition_name_round_trips(base: str, index: int) -> None:
    name = partition_name(base, index)
    assert partition_index(name) == index
    assert partitioned_topic_of(name) == base


def test_partition_counts() -> None:
    assert check_partition_count(1) == 1
    for bad in (0, -1, 10_001, True, "3", 2.0):
        with pytest.raises(InvalidPartitionCount):
            check_partition_count(bad)


def test_hash_is_pulsars_crc32c_over_sorted_names_printed_little_endian() -> None:
    names = ["persistent://t/n/b", "persistent://t/n/a"]
    expected = crc32c.crc32c(b"persistent://t/n/a,persistent://t/n/b")
    assert topics_hash(names) == expected.to_bytes(4, "little").hex()
    assert topics_hash(names) == topics_hash(reversed(names))
    assert topics_hash([]) == "00000000"
    # Guava's HashCode.toString of crc32c("a") = 0xc1d04330 prints its bytes low first.
    assert topics_hash(["a"]) == "3043d0c1"


def test_pattern_matches_names_without_scheme_and_partition_suffix() -> None:
    topics = [
        "persistent://public/default/orders-eu",
        "persistent://public/default/orders-us-partition-0",
        "persistent://public/default/payments",
        "persistent://public/default/xorders-1",
    ]
    for pattern in ("persistent://public/default/orders-.*", "public/default/orders-.*"):
        assert filter_topics(topics, compile_pattern(pattern)) == topics[:2]
    # A whole-name match: a pattern matching a prefix only matches nothing.
    assert filter_topics(topics, compile_pattern("public/default/orders")) == []
    assert remove_domain_scheme("non-persistent://a/b/c") == "a/b/c"
    with pytest.raises(InvalidTopicsPattern):
        compile_pattern("public/default/(")
    with pytest.raises(InvalidTopicsPattern):
        compile_pattern("kafka://public/default/x")


def test_the_largest_partition_count_is_accepted_and_the_refusal_names_the_range() -> None:
    assert check_partition_count(MAX_PARTITIONS) == MAX_PARTITIONS
    with pytest.raises(InvalidPartitionCount) as refused:
        check_partition_count(MAX_PARTITIONS + 1)
    assert str(refused.value) == (
        f"the number of partitions must be an integer from 1 to {MAX_PARTITIONS}, "
        f"got {MAX_PARTITIONS + 1}"
    )


def test_a_regex_around_the_domain_word_keeps_what_precedes_it() -> None:
    assert remove_domain_scheme("^persistent://public/default/x.*") == "^public/default/x.*"
    # Only the first "://" separates the domain: a later one belongs to the pattern.
    assert remove_domain_scheme("persistent://public/default/x(://)?") == "public/default/x(://)?"
    with pytest.raises(InvalidTopicsPattern) as refused:
        remove_domain_scheme("kafka://public/default/x")
    assert "unsupported topic domain 'kafka'" in str(refused.value)
    with pytest.raises(InvalidTopicsPattern, match="is not a regex"):
        compile_pattern("public/default/(")


def test_a_name_without_namespace_is_matched_without_its_partition_suffix() -> None:
    topics = ["persistent://orders-partition-1", "persistent://payments"]
    assert filter_topics(topics, compile_pattern("orders")) == [topics[0]]


@pytest.mark.parametrize("index", [-1, True, 1.0, "2", None])
def test_a_partition_index_that_is_not_a_natural_number_is_refused_naming_it(
    index: object,
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        partition_name("orders", index)  # type: ignore[arg-type]
    assert str(refused.value) == f"a partition index is an integer >= 0, got {index!r}"
    assert partition_name("orders", 0) == "orders-partition-0"


def test_a_topic_named_only_like_a_partition_suffix_is_matched_as_itself() -> None:
    # "-partition-3" has no partitioned topic before the suffix: it is a topic of its own.
    topics = ["persistent://public/default/-partition-3", "persistent://public/default/x"]
    assert filter_topics(topics, compile_pattern("public/default/-partition-3")) == [topics[0]]
    assert filter_topics(topics, compile_pattern("public/default/")) == []
