"""Which bookies of a fragment store an entry, and when enough of them have answered (pure).

BookKeeper's ``RoundRobinDistributionSchedule``: entry ``e`` of a fragment whose ensemble has
``E`` bookies is stored on the *write set* ``ensemble[(e + i) % E] for i < write_quorum`` (the
position is counted from entry 0 of the ledger, not of the fragment, so an ensemble change that
replaces one bookie keeps every other bookie's share).

*Coverage* (BookKeeper's ``QuorumCoverageSet``): a set of bookies that answered covers the
ensemble when every write set has fewer than ``ack_quorum`` members that did not answer. Then no
entry can have been acknowledged without one of them holding it (reading the last add confirmed),
and once they are fenced no writer can reach an ack quorum any more (recovery).
"""

from __future__ import annotations

from collections.abc import Collection

from braid.storage.api import LedgerMetadata


def write_set_positions(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Positions in the ensemble of the bookies that store ``entry_id``."""
    return [(entry_id + i) % ensemble_size for i in range(write_quorum)]


def write_set(md: LedgerMetadata, entry_id: int) -> list[str]:
    """Bookie ids that store ``entry_id`` of the ledger described by ``md`` (in the fragment
    that holds it)."""
    ensemble = md.ensemble_at(entry_id)
    size = len(ensemble)
    return [ensemble[(entry_id + i) % size] for i in range(md.write_quorum)]


def covers(
    ensemble_size: int, write_quorum: int, ack_quorum: int, answered: Collection[int]
) -> bool:
    """Whether the bookies at positions ``answered`` cover the ensemble (module docstring)."""
    for start in range(ensemble_size if write_quorum < ensemble_size else 1):
        missing = sum(
            1 for p in write_set_positions(start, ensemble_size, write_quorum) if p not in answered
        )
        if missing >= ack_quorum:
            return False
    return True
