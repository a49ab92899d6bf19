"""Copying a ledger's lost replicas to other bookies (BookKeeper's ``LedgerFragmentReplicator``).

For each fragment that may be copied - every fragment of a closed ledger; of an open one (or one
being recovered) every fragment *but the last*, which its writer still owns and moves itself with
an ensemble change (BookKeeper's rule) - and each position of its ensemble held by a bad bookie
(gone from the cluster, or named by the mark, e.g. decommissioned): a replacement is chosen by the
placement policy (never a bookie of that ensemble nor a bad one), every entry of the fragment
whose write set holds that position is read from a surviving replica and written to the
replacement (with ``recovery`` set, so a fenced ledger takes it; the LAC and running length
piggybacked on the source copy go with it), and only then is the bookie replaced in that fragment
of the ledger metadata with compare-and-swap. A conflict re-reads the document and applies the
same replacement if the fragment is unchanged (the copy is not repeated).

Copies are idempotent: a worker that dies half-way leaves extra copies on a bookie that the
metadata does not name yet, and the next worker copies again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from braid.storage.api import Fragment, LedgerMetadata, LedgerState, NoSuchLedger
from braid.storage.client import BookKeeperClient
from braid.storage.distribution import write_set_positions
from braid.storage.ledger_metadata import with_replaced_bookie
from braid.storage.ledger_reads import read_entry

log = logging.getLogger(__name__)
#: Entries copied concurrently.
_COPY_BATCH = 64


@dataclass(slots=True)
class ReplicationStats:
    """What the workers of this process copied (the ``/metrics`` counters)."""

    bytes: int = 0
    entries: int = 0
    fragments: int = 0
    failures: int = 0
    by_ledger: dict[int, int] = field(default_factory=dict)


def replicable_fragments(md: LedgerMetadata) -> list[Fragment]:
    """The fragments auto-recovery may copy: all of a closed ledger, all but the last of an
    open one."""
    fragments = md.fragments()
    return fragments if md.state is LedgerState.CLOSED else fragments[:-1]


def entries_at(fragment: Fragment, position: int, write_quorum: int) -> list[int]:
    """The entries of ``fragment`` stored at ``position`` of its ensemble."""
    if fragment.last_entry_id is None:
        raise ValueError("an open-ended fragment has no fixed entries")
    size = len(fragment.ensemble)
    return [
        e
        for e in range(fragment.first_entry_id, fragment.last_entry_id + 1)
        if position in write_set_positions(e, size, write_quorum)
    ]


def bad_bookies(client: BookKeeperClient, md: LedgerMetadata, missing: Iterable[str]) -> set[str]:
    """The bookies of ``md`` whose copies need moving: ``missing`` plus any that left the
    cluster."""
    available = set(client.bookie_set.writable()) | set(client.bookie_set.readonly())
    return set(missing) | (md.bookies() - available)


async def replicate_ledger(
    client: BookKeeperClient,
    ledger_id: int,
    missing: Iterable[str],
    stats: ReplicationStats,
) -> bool:
    """Move every copy of ``ledger_id`` held by a bad bookie (see module docstring).

    Returns ``True`` when no fragment names a bad bookie any more, ``False`` when the open
    ledger's last fragment still does (its writer moves it; try again later).

    Raises:
        NotEnoughBookies: no bookie to copy to.
        BookieUnavailable, NoSuchEntry: an entry could not be read from any replica.
    """
    wanted = set(missing)
    while True:
        try:
            md, version = await client.read_metadata(ledger_id)
        except NoSuchLedger:
            return True  # deleted meanwhile: nothing to copy
        bad = bad_bookies(client, md, wanted)
        todo = [
            (fragment, index)
            for fragment in replicable_fragments(md)
            for index, bookie_id in enumerate(fragment.ensemble)
            if bookie_id in bad
        ]
        if not todo:
            tail = md.fragments()[-1]
            return md.state is LedgerState.CLOSED or not bad & set(tail.ensemble)
        fragment, index = todo[0]
        chosen = client.choose_replacements(
            fragment.ensemble, [index], md.write_quorum, exclude=bad
        )[index]
        await _copy(client, md, fragment, index, chosen, stats)
        await _record(client, md, version, fragment, index, chosen)
        stats.fragments += 1
        log.info(
            "ledger %d: fragment from entry %d copied from %s to %s",
            ledger_id,
            fragment.first_entry_id,
            fragment.ensemble[index],
            chosen,
        )


async def _copy(
    client: BookKeeperClient,
    md: LedgerMetadata,
    fragment: Fragment,
    index: int,
    target_id: str,
    stats: ReplicationStats,
) -> None:
    target = client.bookie(target_id)
    entries = entries_at(fragment, index, md.write_quorum)

    async def copy_one(entry_id: int) -> None:
        stored = await read_entry(client, md, entry_id)
        await target.add_entry(
            md.ledger_id,
            entry_id,
            stored.data,
            last_add_confirmed=stored.last_add_confirmed,
            length=stored.length,
            recovery=True,
        )
        stats.bytes += len(stored.data)
        stats.entries += 1
        stats.by_ledger[md.ledger_id] = stats.by_ledger.get(md.ledger_id, 0) + len(stored.data)

    for start in range(0, len(entries), _COPY_BATCH):
        await asyncio.gather(*(copy_one(e) for e in entries[start : start + _COPY_BATCH]))


async def _record(
    client: BookKeeperClient,
    md: LedgerMetadata,
    version: int,
    fragment: Fragment,
    index: int,
    chosen: str,
) -> None:
    """CAS the replacement into the fragment; on conflict re-apply it to the newer document if
    that fragment is unchanged (else the next pass re-plans)."""
    old = fragment.ensemble[index]
    while True:
        updated = with_replaced_bookie(md, fragment.first_entry_id, old, chosen)
        if await client.write_metadata(updated, version):
            return
        md, version = await client.read_metadata(md.ledger_id)
        current = {f.first_entry_id: f for f in replicable_fragments(md)}.get(
            fragment.first_entry_id
        )
        if current is None or current.ensemble != fragment.ensemble:
            return
        if current.last_entry_id != fragment.last_entry_id:
            return
