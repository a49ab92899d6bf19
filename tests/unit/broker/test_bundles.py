"""Namespace bundles: Pulsar's boundaries and its topic-name hash, pinned by independent values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.broker.bundles import (
    FULL_UPPER_BOUND,
    InvalidBundles,
    NamespaceBundle,
    NamespaceBundles,
    boundaries_for,
    topic_hash,
)
from braid.core.names import TopicName


def test_the_hash_is_the_standard_crc32_that_pulsar_uses() -> None:
    # The CRC-32 check value of the catalogue of parametrised CRCs: crc32("123456789").
    assert topic_hash("123456789") == 0xCBF43926


def test_four_bundles_have_pulsars_boundaries() -> None:
    # What Pulsar's getBundles(4) writes into a namespace's policies.
    assert NamespaceBundles.of("public/default", 4).to_json() == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 4,
    }
    assert boundaries_for(16)[1] == 0x10000000
    assert boundaries_for(3) == (0, 0x55555555, 0xAAAAAAAA, FULL_UPPER_BOUND)


def test_the_last_bundle_includes_the_top_hash_and_the_others_exclude_their_upper_bound() -> None:
    first, *_, last = NamespaceBundles.of("t/n", 4).bundles
    assert first.includes(0) and not first.includes(0x40000000)
    assert last.includes(FULL_UPPER_BOUND)
    assert last.range_name == "0xc0000000_0xffffffff"


@given(st.text(min_size=1, max_size=40).filter(lambda s: "/" not in s and s.strip() == s))
def test_every_topic_falls_in_exactly_one_bundle(local: str) -> None:
    try:
        topic = TopicName.parse(f"persistent://public/default/{local}")
    except Exception:
        return
    bundles = NamespaceBundles.of("public/default", 7)
    found = bundles.find(topic)
    assert [b for b in bundles.bundles if b.includes(topic_hash(topic))] == [found]


def test_policies_boundaries_win_over_the_default() -> None:
    policies = {"bundles": {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"]}}
    bundles = NamespaceBundles.from_policies("public/default", policies, 16)
    assert [b.range_name for b in bundles.bundles] == [
        "0x00000000_0x80000000",
        "0x80000000_0xffffffff",
    ]
    assert len(NamespaceBundles.from_policies("public/default", {}, 16).bundles) == 16


@pytest.mark.parametrize(
    "boundaries", [["0x00000001", "0xffffffff"], ["0x00000000", "0x10"], ["0x0", "0x5", "0x5"]]
)
def test_boundaries_that_do_not_cut_the_full_range_are_refused(boundaries: list[str]) -> None:
    with pytest.raises(InvalidBundles):
        NamespaceBundles.from_policies("t/n", {"bundles": {"boundaries": boundaries}}, 4)


def test_a_bundle_name_parses_back() -> None:
    bundle = NamespaceBundle.parse("t/n", "0x40000000_0x80000000")
    assert (bundle.lower, bundle.upper, str(bundle)) == (
        0x40000000,
        0x80000000,
        "t/n/0x40000000_0x80000000",
    )
    with pytest.raises(InvalidBundles):
        NamespaceBundle.parse("t/n", "0x80000000_0x40000000")
