"""Ensemble placement: which bookies store a new ledger, replace a failed one, or take a copy.

Pure functions (no I/O, no clock; randomness comes from an injected :class:`random.Random`), the
decisions of BookKeeper's ``EnsemblePlacementPolicy``:

* random placement (BookKeeper's ``DefaultEnsemblePlacementPolicy``, Pulsar's default): any
  ``ensemble_size`` distinct candidates;
* rack-aware placement (``bookkeeperClientRackawarePolicyEnabled``, BookKeeper's
  ``RackawareEnsemblePlacementPolicy``): every write set - ``write_quorum`` consecutive positions of
  the ensemble, cyclically - spans as many distinct racks as the candidates allow. With
  ``bookkeeperClientEnforceMinNumRacksPerWriteQuorum`` a placement whose write sets span fewer than
  ``min(write_quorum, bookkeeperClientMinNumRacksPerWriteQuorum)`` racks is refused with
  :class:`NotEnoughBookies`; without it the best spread possible is taken.

The caller decides who is a candidate: only writable bookies (never read-only ones), minus the
current ensemble for a replacement, minus quarantined (slow or failing) bookies while enough
others remain. A bookie without a rack is on :data:`DEFAULT_RACK`.

Invariants: a returned ensemble has ``ensemble_size`` distinct members, all candidates; a
replacement is a candidate not in the ensemble; the same inputs and RNG state give the same
answer.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from braid.core.errors import InvalidInputError
from braid.storage.api import BookieUnavailable, StorageError

#: BookKeeper's ``NetworkTopology.DEFAULT_REGION_AND_RACK``.
DEFAULT_RACK = "/default-region/default-rack"
#: Backtracking steps a rack-aware search may take before settling for a lesser spread.
_SEARCH_BUDGET = 20_000


class NotEnoughBookies(BookieUnavailable):
    """Too few candidate bookies for the placement asked (BookKeeper's
    ``BKNotEnoughBookiesException``)."""


class InvalidPlacementPolicy(StorageError, InvalidInputError):
    """Impossible placement settings."""


@dataclass(frozen=True, slots=True)
class PlacementPolicy:
    """How ensembles are placed (Pulsar's ``bookkeeperClient*`` placement keys)."""

    rack_aware: bool = False
    min_racks_per_write_quorum: int = 2
    enforce_min_racks: bool = False

    def __post_init__(self) -> None:
        if self.min_racks_per_write_quorum < 1:
            raise InvalidPlacementPolicy(
                "bookkeeperClientMinNumRacksPerWriteQuorum must be at least 1, got "
                f"{self.min_racks_per_write_quorum}"
            )


def rack_of(racks: Mapping[str, str | None], bookie_id: str) -> str:
    """The rack a bookie is on for placement (:data:`DEFAULT_RACK` when unknown)."""
    return racks.get(bookie_id) or DEFAULT_RACK


def write_set_windows(ensemble_size: int, write_quorum: int) -> list[list[int]]:
    """The positions of each distinct write set of an ensemble (one per start position, or a
    single one when the write set is the whole ensemble)."""
    if write_quorum >= ensemble_size:
        return [list(range(ensemble_size))]
    return [[(i + k) % ensemble_size for k in range(write_quorum)] for i in range(ensemble_size)]


def min_racks_per_write_set(
    ensemble: Sequence[str], write_quorum: int, racks: Mapping[str, str | None]
) -> int:
    """The fewest distinct racks any write set of ``ensemble`` spans."""
    labels = [rack_of(racks, b) for b in ensemble]
    return min(
        len({labels[p] for p in window})
        for window in write_set_windows(len(ensemble), write_quorum)
    )


def _check_sizes(ensemble_size: int, write_quorum: int, candidates: Sequence[str]) -> None:
    if not 1 <= write_quorum <= ensemble_size:
        raise InvalidPlacementPolicy(
            f"need 1 <= write_quorum <= ensemble, got {write_quorum} and {ensemble_size}"
        )
    if len(set(candidates)) < ensemble_size:
        raise NotEnoughBookies(
            f"an ensemble of {ensemble_size} needs {ensemble_size} writable bookies, "
            f"{len(set(candidates))} available"
        )


def new_ensemble(
    policy: PlacementPolicy,
    candidates: Sequence[str],
    ensemble_size: int,
    write_quorum: int,
    racks: Mapping[str, str | None],
    rng: random.Random,
) -> tuple[str, ...]:
    """Choose the ensemble of a new ledger among ``candidates``.

    Raises:
        NotEnoughBookies: fewer distinct candidates than ``ensemble_size``, or (enforced rack
            spread) no placement meets the minimum number of racks per write set.
    """
    _check_sizes(ensemble_size, write_quorum, candidates)
    pool = sorted(set(candidates))
    if not policy.rack_aware:
        return tuple(rng.sample(pool, ensemble_size))
    by_rack: dict[str, list[str]] = {}
    for bookie in pool:
        by_rack.setdefault(rack_of(racks, bookie), []).append(bookie)
    for members in by_rack.values():
        rng.shuffle(members)
    labels = _rack_sequence(policy, by_rack, ensemble_size, write_quorum, rng)
    return tuple(by_rack[label].pop() for label in labels)


def _rack_sequence(
    policy: PlacementPolicy,
    by_rack: Mapping[str, Sequence[str]],
    ensemble_size: int,
    write_quorum: int,
    rng: random.Random,
) -> list[str]:
    """Rack of each position: the widest spread per write set that the racks' sizes allow."""
    capacity = {rack: len(members) for rack, members in by_rack.items()}
    best = min(write_quorum, len(capacity))
    floor = min(write_quorum, policy.min_racks_per_write_quorum) if policy.enforce_min_racks else 1
    for target in range(best, max(floor, 1) - 1, -1):
        found = _search(capacity, ensemble_size, write_quorum, target, rng)
        if found is not None:
            return found
    raise NotEnoughBookies(
        f"no ensemble of {ensemble_size} whose write sets of {write_quorum} span "
        f"{floor} racks (bookkeeperClientEnforceMinNumRacksPerWriteQuorum is on; racks: "
        f"{dict(sorted(capacity.items()))})"
    )


def _search(
    capacity: Mapping[str, int],
    size: int,
    write_quorum: int,
    target: int,
    rng: random.Random,
) -> list[str] | None:
    """Backtracking: a rack per position so that every write set spans ``target`` racks."""
    windows = write_set_windows(size, write_quorum)
    by_last: dict[int, list[list[int]]] = {}
    for window in windows:
        by_last.setdefault(max(window), []).append(window)
    left = dict(capacity)
    order = list(left)
    rng.shuffle(order)
    seq: list[str] = []
    steps = 0

    def ok(position: int) -> bool:
        return all(len({seq[p] for p in window}) >= target for window in by_last.get(position, ()))

    def place(position: int) -> bool:
        nonlocal steps
        if position == size:
            return True
        steps += 1
        if steps > _SEARCH_BUDGET:
            return False
        # Racks with most bookies left first: keeps the choice balanced and the search short.
        for rack in sorted(order, key=lambda r: -left[r]):
            if left[rack] == 0:
                continue
            seq.append(rack)
            left[rack] -= 1
            if ok(position) and place(position + 1):
                return True
            seq.pop()
            left[rack] += 1
        return False

    return list(seq) if place(0) else None


def replace_bookie(
    policy: PlacementPolicy,
    ensemble: Sequence[str],
    index: int,
    candidates: Sequence[str],
    write_quorum: int,
    racks: Mapping[str, str | None],
    rng: random.Random,
) -> str:
    """Choose the bookie that takes position ``index`` of ``ensemble`` (an ensemble change or a
    re-replication). Candidates already in the ensemble are skipped.

    With rack awareness the replacement keeps the write sets through ``index`` as widely spread
    as possible (a random pick among the best).

    Raises:
        NotEnoughBookies: no candidate outside the ensemble (or, enforced, none keeping the
            minimum rack spread).
    """
    members = set(ensemble)
    pool = sorted({c for c in candidates if c not in members})
    if not pool:
        raise NotEnoughBookies(
            f"no writable bookie outside the ensemble {list(ensemble)} to replace {ensemble[index]}"
        )
    if not policy.rack_aware:
        return rng.choice(pool)
    windows = [w for w in write_set_windows(len(ensemble), write_quorum) if index in w]

    def spread(candidate: str) -> int:
        labels = [
            rack_of(racks, candidate if p == index else ensemble[p]) for p in range(len(ensemble))
        ]
        return min(len({labels[p] for p in window}) for window in windows)

    scores = {c: spread(c) for c in pool}
    top = max(scores.values())
    if policy.enforce_min_racks and top < min(write_quorum, policy.min_racks_per_write_quorum):
        raise NotEnoughBookies(
            f"no replacement for {ensemble[index]} keeps its write sets on "
            f"{min(write_quorum, policy.min_racks_per_write_quorum)} racks"
        )
    return rng.choice([c for c in pool if scores[c] == top])
