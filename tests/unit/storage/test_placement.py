"""Ensemble placement: random and rack-aware, new ensembles and replacements, against a brute-force
search of every rack assignment."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.storage.placement import (
    DEFAULT_RACK,
    InvalidPlacementPolicy,
    NotEnoughBookies,
    PlacementPolicy,
    min_racks_per_write_set,
    new_ensemble,
    rack_of,
    replace_bookie,
    write_set_windows,
)

RANDOM = PlacementPolicy()
RACK_AWARE = PlacementPolicy(rack_aware=True)


@st.composite
def cluster(draw: st.DrawFn, max_bookies: int = 9) -> tuple[list[str], dict[str, str | None]]:
    count = draw(st.integers(1, max_bookies))
    bookies = [f"b{i}" for i in range(count)]
    rack_names = draw(st.lists(st.sampled_from(["/r/a", "/r/b", "/r/c", "/r/d", None]), min_size=1))
    racks = {b: rack_names[i % len(rack_names)] for i, b in enumerate(bookies)}
    return bookies, racks


def _best_spread(bookies: list[str], racks: dict[str, str | None], size: int, wq: int) -> int:
    """Independent reference: the best min-racks-per-write-set over every rack sequence."""
    capacity = Counter(rack_of(racks, b) for b in bookies)
    best = 0
    for labels in itertools.product(sorted(capacity), repeat=size):
        if any(Counter(labels)[r] > capacity[r] for r in capacity):
            continue
        spread = min(len({labels[p] for p in w}) for w in write_set_windows(size, wq))
        best = max(best, spread)
    return best


@given(cluster(), st.data())
def test_a_random_ensemble_has_distinct_candidates_only(
    c: tuple[list[str], dict[str, str | None]], data: st.DataObject
) -> None:
    bookies, racks = c
    size = data.draw(st.integers(1, len(bookies)))
    wq = data.draw(st.integers(1, size))
    ensemble = new_ensemble(
        RANDOM, bookies, size, wq, racks, random.Random(data.draw(st.integers()))
    )
    assert len(ensemble) == size == len(set(ensemble))
    assert set(ensemble) <= set(bookies)


@settings(max_examples=150, deadline=None)
@given(cluster(max_bookies=7), st.data())
def test_a_rack_aware_ensemble_spreads_every_write_set_as_widely_as_any_placement_can(
    c: tuple[list[str], dict[str, str | None]], data: st.DataObject
) -> None:
    bookies, racks = c
    size = data.draw(st.integers(1, min(len(bookies), 5)))
    wq = data.draw(st.integers(1, size))
    ensemble = new_ensemble(
        RACK_AWARE, bookies, size, wq, racks, random.Random(data.draw(st.integers()))
    )
    assert len(set(ensemble)) == size and set(ensemble) <= set(bookies)
    assert min_racks_per_write_set(ensemble, wq, racks) == _best_spread(bookies, racks, size, wq)


def test_rack_aware_placement_puts_each_write_set_on_different_racks() -> None:
    racks: dict[str, str | None] = {f"a{i}": "/east/a" for i in range(3)}
    racks.update({f"b{i}": "/east/b" for i in range(3)})
    for seed in range(20):
        ensemble = new_ensemble(RACK_AWARE, sorted(racks), 4, 2, racks, random.Random(seed))
        assert min_racks_per_write_set(ensemble, 2, racks) == 2


def test_enforced_minimum_racks_refuses_a_placement_on_one_rack() -> None:
    racks: dict[str, str | None] = {"a": "/r/1", "b": "/r/1", "c": "/r/1", "d": "/r/2"}
    enforced = PlacementPolicy(
        rack_aware=True, min_racks_per_write_quorum=2, enforce_min_racks=True
    )
    with pytest.raises(NotEnoughBookies, match="racks"):
        new_ensemble(enforced, ["a", "b", "c"], 3, 2, racks, random.Random(1))
    # Best effort without enforcement.
    assert len(new_ensemble(RACK_AWARE, ["a", "b", "c"], 3, 2, racks, random.Random(1))) == 3
    with pytest.raises(NotEnoughBookies):
        replace_bookie(enforced, ["a", "d"], 1, ["b", "c"], 2, racks, random.Random(1))


def test_too_few_candidates_is_not_enough_bookies() -> None:
    with pytest.raises(NotEnoughBookies):
        new_ensemble(RANDOM, ["a", "b"], 3, 2, {}, random.Random(0))
    with pytest.raises(NotEnoughBookies):
        replace_bookie(RANDOM, ["a", "b"], 0, ["a", "b"], 2, {}, random.Random(0))
    with pytest.raises(InvalidPlacementPolicy):
        PlacementPolicy(min_racks_per_write_quorum=0)


@given(cluster(), st.data())
def test_a_replacement_is_a_candidate_outside_the_ensemble(
    c: tuple[list[str], dict[str, str | None]], data: st.DataObject
) -> None:
    bookies, racks = c
    size = data.draw(st.integers(1, len(bookies)))
    ensemble = bookies[:size]
    index = data.draw(st.integers(0, size - 1))
    wq = data.draw(st.integers(1, size))
    policy = data.draw(st.sampled_from([RANDOM, RACK_AWARE]))
    rng = random.Random(data.draw(st.integers()))
    if size == len(bookies):
        with pytest.raises(NotEnoughBookies):
            replace_bookie(policy, ensemble, index, bookies, wq, racks, rng)
        return
    chosen = replace_bookie(policy, ensemble, index, bookies, wq, racks, rng)
    assert chosen in bookies and chosen not in ensemble
    if policy.rack_aware:
        # No other candidate would have spread the write sets through ``index`` wider.
        def spread(candidate: str) -> int:
            new = [candidate if p == index else b for p, b in enumerate(ensemble)]
            windows = [w for w in write_set_windows(size, wq) if index in w]
            return min(len({rack_of(racks, new[p]) for p in w}) for w in windows)

        assert spread(chosen) == max(spread(b) for b in bookies if b not in ensemble)


def test_the_same_seed_gives_the_same_ensemble() -> None:
    bookies = [f"b{i}" for i in range(8)]
    first = new_ensemble(RANDOM, bookies, 3, 2, {}, random.Random(42))
    assert new_ensemble(RANDOM, bookies, 3, 2, {}, random.Random(42)) == first
    assert rack_of({}, "x") == DEFAULT_RACK
