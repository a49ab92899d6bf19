"""How far a ledger's writer got, and recovering a ledger whose writer is gone.

**Last add confirmed** (BookKeeper's ``ReadLastConfirmedOp``): every bookie of the *last* fragment
is asked for the highest LAC piggybacked on its entries and its highest entry; the answers count
only once they *cover* the ensemble (:func:`braid.storage.distribution.covers`: every write set has
fewer than ``ack_quorum`` silent members), so no acknowledged entry can be missed. Entries before
the last fragment were all acknowledged before it began (an ensemble change starts the new fragment
at the writer's LAC + 1), so the LAC is at least its first entry - 1.

**Recovery** (``open_ledger(recovery=True)``, BookKeeper's ``LedgerRecoveryOp``): the metadata is
marked ``IN_RECOVERY`` (CAS), the last fragment's bookies are *fenced* (a covering set must answer,
so the old writer can no longer reach an ack quorum anywhere), bookies that did not answer are
replaced in a new fragment from LAC + 1 when a replacement exists, then every entry past the LAC
that some bookie still holds is read and written again, with ``recovery`` set, to every bookie of
its write set that lacks it (it may have been acknowledged: it is kept). The scan stops at the
first entry that enough bookies answer they do not hold (``write_quorum - ack_quorum + 1`` of its
original write set: it cannot have been acknowledged). The ledger is closed with CAS, recording its
last entry id and length (the running length piggybacked on that entry).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from braid.storage.api import (
    BookieUnavailable,
    LedgerMetadata,
    LedgerState,
    StorageError,
)
from braid.storage.bookie import LacInfo
from braid.storage.distribution import covers, write_set
from braid.storage.ledger_metadata import with_ensemble_change
from braid.storage.ledger_reads import ReplicaAccess, probe_entry, read_entry
from braid.storage.placement import NotEnoughBookies

log = logging.getLogger(__name__)
#: Recovery restarts (after a concurrent metadata change) before it gives up.
_RECOVERY_ATTEMPTS = 5


class RecoveryClient(ReplicaAccess, Protocol):
    """What recovery needs from the ledger client (``BookKeeperClient``): replica reads, the
    ledger's metadata with CAS, and replacements for bookies that are gone."""

    async def read_metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """The ledger's metadata and its version."""
        ...

    async def write_metadata(self, md: LedgerMetadata, version: int) -> bool:
        """CAS ``md`` over ``version``; ``False`` if the version moved."""
        ...

    def choose_replacements(
        self,
        ensemble: Sequence[str],
        indices: Sequence[int],
        write_quorum: int,
        exclude: Iterable[str] = (),
    ) -> dict[int, str]:
        """A replacement for the bookie at each of ``indices`` (raises ``NotEnoughBookies``)."""
        ...


@dataclass(frozen=True, slots=True)
class LacView:
    """What a covering set of the last fragment's bookies said."""

    last_add_confirmed: int
    highest_entry_id: int
    answered: tuple[str, ...]
    silent: tuple[str, ...]


async def read_lac_covered(client: RecoveryClient, md: LedgerMetadata, *, fence: bool) -> LacView:
    """Ask (or fence) every bookie of the last fragment; the answers must cover it.

    Raises:
        BookieUnavailable: too few bookies answered.
    """
    ensemble = md.ensemble

    async def ask(bookie_id: str) -> LacInfo | BaseException:
        bookie = client.client_of(bookie_id)
        if bookie is None:
            return BookieUnavailable(f"bookie {bookie_id} is gone")
        try:
            return await (bookie.fence(md.ledger_id) if fence else bookie.read_lac(md.ledger_id))
        except StorageError as exc:
            client.record_failure(bookie_id)
            return exc

    answers = await asyncio.gather(*(ask(b) for b in ensemble))
    floor = md.last_fragment_start - 1
    lac, highest = floor, floor
    answered: list[str] = []
    silent: list[str] = []
    positions: set[int] = set()
    for position, (bookie_id, answer) in enumerate(zip(ensemble, answers, strict=True)):
        if isinstance(answer, LacInfo):
            answered.append(bookie_id)
            positions.add(position)
            lac = max(lac, answer.last_add_confirmed)
            highest = max(highest, answer.last_entry_id)
        else:
            silent.append(f"{bookie_id} ({answer})")
    if not covers(len(ensemble), md.write_quorum, md.ack_quorum, positions):
        raise BookieUnavailable(
            f"ledger {md.ledger_id}: too few bookies of its ensemble answered to "
            f"{'fence' if fence else 'read'} it safely (write quorum {md.write_quorum}, ack "
            f"quorum {md.ack_quorum}); silent: {'; '.join(silent)}"
        )
    silent_ids = tuple(b for b in ensemble if b not in answered)
    return LacView(lac, max(lac, highest), tuple(answered), silent_ids)


async def probe_lac(client: RecoveryClient, md: LedgerMetadata, known: int) -> int:
    """How far the writer of an open ledger got: the highest entry durable on an ack quorum with
    every lower one too (for tailing readers)."""
    view = await read_lac_covered(client, md, fence=False)
    entry_id = max(known, view.last_add_confirmed)
    while entry_id < view.highest_entry_id:
        probe = await probe_entry(client, md, entry_id + 1, write_set(md, entry_id + 1))
        if len(probe.holders) < md.ack_quorum:
            break
        entry_id += 1
    return entry_id


async def recover_and_close(
    client: RecoveryClient, md: LedgerMetadata, version: int
) -> LedgerMetadata:
    """Recover a ledger marked ``IN_RECOVERY`` (``md`` at ``version``) and close it; returns the
    closed metadata (another recovery's, if it finished first).

    Raises:
        BookieUnavailable: too few bookies answered, or a recovered entry could not be written
            to an ack quorum.
    """
    for _ in range(_RECOVERY_ATTEMPTS):
        closed = await _recover_once(client, md, version)
        if closed is not None:
            return closed
        md, version = await client.read_metadata(md.ledger_id)
        if md.state is LedgerState.CLOSED:
            return md
    raise BookieUnavailable(f"ledger {md.ledger_id}: metadata kept changing during recovery")


async def _recover_once(
    client: RecoveryClient, md: LedgerMetadata, version: int
) -> LedgerMetadata | None:
    view = await read_lac_covered(client, md, fence=True)
    original = md
    lac = view.last_add_confirmed
    if view.silent:
        changed = await _replace_silent(client, md, version, view, lac + 1)
        if changed is None:
            return None  # the metadata moved: start over
        md, version = changed
    length = 0
    if lac >= 0:
        length = (await read_entry(client, md, lac)).length
    entry_id = lac + 1
    while entry_id <= view.highest_entry_id:
        recovered = await _recover_entry(client, original, md, entry_id)
        if recovered is None:
            break
        lac, length = entry_id, recovered
        entry_id += 1
    closed = dataclasses.replace(md, state=LedgerState.CLOSED, last_entry_id=lac, length=length)
    if await client.write_metadata(closed, version):
        log.info("ledger %d recovered and closed at entry %d", md.ledger_id, lac)
        return closed
    return None


async def _replace_silent(
    client: RecoveryClient, md: LedgerMetadata, version: int, view: LacView, start: int
) -> tuple[LedgerMetadata, int] | None:
    """Replace the bookies that did not answer the fence in a new fragment from ``start``, so
    the recovered tail gets whole write sets. Keeps ``md`` when there is no replacement."""
    ensemble = list(md.ensemble)
    indices = [ensemble.index(b) for b in view.silent]
    try:
        replacements = client.choose_replacements(ensemble, indices, md.write_quorum)
    except NotEnoughBookies as exc:
        log.warning(
            "ledger %d: recovering without replacing %s: %s", md.ledger_id, view.silent, exc
        )
        return md, version
    for index, bookie_id in replacements.items():
        ensemble[index] = bookie_id
    changed = with_ensemble_change(md, start, tuple(ensemble))
    if not await client.write_metadata(changed, version):
        return None
    log.info(
        "ledger %d: recovery replaced %s with %s from entry %d",
        md.ledger_id,
        list(view.silent),
        [replacements[i] for i in indices],
        start,
    )
    return changed, version + 1


async def _recover_entry(
    client: RecoveryClient, original: LedgerMetadata, md: LedgerMetadata, entry_id: int
) -> int | None:
    """Make ``entry_id`` whole on its write set; its piggybacked running length, or ``None``
    when it cannot have been acknowledged (the end of the ledger)."""
    old_set = write_set(original, entry_id)
    new_set = write_set(md, entry_id)
    asked = list(dict.fromkeys([*new_set, *old_set]))
    probe = await probe_entry(client, md, entry_id, asked)
    if probe.entry is None:
        absent = sum(1 for b in old_set if b in probe.absent)
        if absent >= md.write_quorum - md.ack_quorum + 1:
            return None
        raise BookieUnavailable(
            f"ledger {md.ledger_id}: cannot tell whether entry {entry_id} was acknowledged "
            f"(no answer from {list(probe.unknown)})"
        )
    entry = probe.entry
    targets = [b for b in new_set if b not in probe.holders]

    async def copy(bookie_id: str) -> bool:
        bookie = client.client_of(bookie_id)
        if bookie is None:
            return False
        try:
            await bookie.add_entry(
                md.ledger_id,
                entry_id,
                entry.data,
                last_add_confirmed=entry.last_add_confirmed,
                length=entry.length,
                recovery=True,
            )
        except StorageError as exc:
            log.warning(
                "ledger %d: recovery copy of entry %d to %s failed: %s",
                md.ledger_id,
                entry_id,
                bookie_id,
                exc,
            )
            return False
        return True

    # Wait for every copy (not just a quorum): the ledger is about to be closed and its write
    # sets should be whole.
    results = await asyncio.gather(*(copy(b) for b in targets))
    copies = sum(1 for b in new_set if b in probe.holders) + sum(results)
    if copies < md.ack_quorum:
        raise BookieUnavailable(
            f"ledger {md.ledger_id}: recovered entry {entry_id} reached {copies} bookie(s), "
            f"ack quorum is {md.ack_quorum}"
        )
    return entry.length
