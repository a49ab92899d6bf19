"""Which ledgers lost a replica, and who is copying them (BookKeeper's
``LedgerUnderreplicationManager``), in a storage cluster's metadata root.

A cluster named ``c`` keeps:

* ``/storage/c/underreplication/ledgers/<ledgerId>`` - a *mark*: the ledger has a fragment whose
  copies on the listed bookies are missing (JSON ``{"missingReplicas": [...], "markedMs": n}``).
  The auditor and ``decommission`` add marks; a mark of a ledger already marked merges the bookie
  lists (CAS, retried);
* ``/storage/c/underreplication/locks/<ledgerId>`` - an *ephemeral* node held by the worker copying
  that ledger, so two workers never copy the same ledger; it vanishes with its worker's session;
* ``/storage/c/underreplication/auditor`` - the auditor's leader election.

A worker removes a mark only at the version it read (:meth:`UnderreplicationManager.
mark_replicated`): a bookie lost again while it was copying leaves the new mark in place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from braid.clock import Clock
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.storage.api import InvalidLedgerMetadata
from braid.storage.ledger_metadata import cluster_root
from braid.storage.validation import validate_ledger_id

#: CAS retries of a mark before giving up on a store that keeps changing.
_CAS_ATTEMPTS = 16


def underreplication_root(cluster_name: str) -> str:
    return f"{cluster_root(cluster_name)}/underreplication"


def auditor_election_path(cluster_name: str) -> str:
    """Where the auditor of a cluster is elected."""
    return f"{underreplication_root(cluster_name)}/auditor"


@dataclass(frozen=True, slots=True)
class UnderreplicatedLedger:
    """A mark: the ledger, the bookies whose copies are missing, when, and the node's version."""

    ledger_id: int
    missing_replicas: tuple[str, ...]
    marked_ms: int
    version: int


def _encode(missing: Iterable[str], marked_ms: int) -> bytes:
    doc = {"missingReplicas": sorted(set(missing)), "markedMs": marked_ms}
    return json.dumps(doc, separators=(",", ":")).encode()


def _decode(ledger_id: int, raw: bytes, version: int) -> UnderreplicatedLedger:
    try:
        doc = json.loads(raw)
        missing = doc["missingReplicas"]
        marked = doc["markedMs"]
        if not isinstance(missing, list) or not all(isinstance(b, str) for b in missing):
            raise TypeError("missingReplicas is not a list of bookie ids")
        if not isinstance(marked, int):
            raise TypeError("markedMs is not an integer")
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidLedgerMetadata(
            f"under-replication mark of ledger {ledger_id} does not decode: {exc}"
        ) from None
    return UnderreplicatedLedger(ledger_id, tuple(missing), marked, version)


class UnderreplicationManager:
    """Marks and locks of one cluster's under-replicated ledgers (every change a CAS)."""

    def __init__(self, store: MetadataStore, cluster_name: str, clock: Clock) -> None:
        root = underreplication_root(cluster_name)
        self._store = store
        self._ledgers = f"{root}/ledgers"
        self._locks = f"{root}/locks"
        self._clock = clock

    @property
    def ledgers_path(self) -> str:
        """Parent of the marks (watch it to learn of new ones)."""
        return self._ledgers

    async def mark(self, ledger_id: int, missing: Iterable[str]) -> None:
        """Mark ``ledger_id`` as missing copies on ``missing`` (merged with an existing mark)."""
        path = f"{self._ledgers}/{validate_ledger_id(ledger_id)}"
        wanted = set(missing)
        for _ in range(_CAS_ATTEMPTS):
            got = await self._store.get(path)
            if got is None:
                try:
                    await self._store.put(path, _encode(wanted, self._clock.now_ms()), -1)
                    return
                except BadVersion:
                    continue
            current = _decode(ledger_id, got[0], got[1].version)
            if wanted <= set(current.missing_replicas):
                return
            merged = _encode([*current.missing_replicas, *wanted], current.marked_ms)
            try:
                await self._store.put(path, merged, got[1].version)
                return
            except BadVersion:
                continue
        raise BadVersion(f"under-replication mark of ledger {ledger_id} kept changing")

    async def get(self, ledger_id: int) -> UnderreplicatedLedger | None:
        got = await self._store.get(f"{self._ledgers}/{validate_ledger_id(ledger_id)}")
        return None if got is None else _decode(ledger_id, got[0], got[1].version)

    async def marked(self) -> list[int]:
        """Ids of the marked ledgers, ascending."""
        names = await self._store.children(self._ledgers)
        return sorted(int(n) for n in names if n.isdigit())

    async def try_lock(self, ledger_id: int, owner: str) -> bool:
        """Take the copy lock of ``ledger_id`` (ephemeral); ``False`` if another worker has it."""
        try:
            await self._store.put(
                f"{self._locks}/{validate_ledger_id(ledger_id)}",
                owner.encode(),
                -1,
                ephemeral=True,
            )
        except BadVersion:
            return False
        return True

    async def release(self, ledger_id: int) -> None:
        try:
            await self._store.delete(f"{self._locks}/{ledger_id}")
        except NodeNotFound:
            pass

    async def mark_replicated(self, mark: UnderreplicatedLedger) -> bool:
        """Remove ``mark`` if it was not changed since it was read; ``False`` if it was."""
        try:
            await self._store.delete(f"{self._ledgers}/{mark.ledger_id}", mark.version)
        except NodeNotFound:
            return True
        except BadVersion:
            return False
        return True
