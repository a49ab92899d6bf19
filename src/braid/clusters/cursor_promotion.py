"""Cursor PROMOTE and ROLLBACK where the cursor lives (PIP-470's "Cursor PROMOTE (forwarded to
topic owner)"; ADR 0061).

A cursor's node and cursor ledger are written by exactly one broker: the owner of its topic's
namespace bundle, under the cursor's write lock. Re-pointing the node at another storage cluster
behind that broker's back would race its next snapshot (the owner's compare-and-swap would fail
and it would take itself for fenced, dropping acknowledgements it had not persisted yet), and
the copy BUILD made could miss snapshots the owner appended afterwards. So
:meth:`CursorPromotion.reattribute` runs each cursor's re-attribution where the cursor is:

* **here, open**: the topic's managed ledger is open on this broker -
  :meth:`~braid.ledger.cursor.ManagedCursorImpl.reattribute_storage` under the cursor's lock;
* **elsewhere**: another broker holds the bundle's ownership node (owning or unloading it) - the
  request goes to that broker's internal listener (:class:`PromoteForwarder`), which runs
  :meth:`CursorPromotion.reattribute_here`; a broker that is not (or no longer) the owner, or
  is unreachable, answers 503 and the owner is looked up again, :data:`ATTEMPTS` times, after
  which the item is DEFERRED (the next ``switch --target <same>`` retries it);
* **the node**: nobody holds the bundle, or this broker holds it and the managed ledger is neither
  open nor opening here - no live cursor writes the node, so the node itself is CAS-rewritten.
  The source cursor ledger is first recovered (fencing a writer that lost its bundle): when its
  last entry is the one BUILD copied, only ``bookieClusterName`` changes (I9); when it holds
  more (its owner wrote after BUILD and then died), its last snapshot is folded into the node
  with no ledger, as a new owner's load does, and the item is ROLLED_OVER. A broker loading the
  topic meanwhile claims the node with CAS too, so one of the two re-reads.

BUILD may open a source cursor ledger with recovery (fencing its writer, to copy its last entry)
only when no live cursor can be writing it (:meth:`CursorPromotion.may_recover`): not when
another broker holds the bundle - its cursor would see its ledger fenced.

Without :meth:`CursorPromotion.route_via` (standalone) every cursor is *here*.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import Any, Protocol

from braid.clusters.metrics import SwitchMetrics
from braid.core.errors import BraidError, ConflictError, NotFoundError, ServiceUnavailableError
from braid.core.storage_switch import MAX_PROMOTE_RETRIES, ItemStatus, MigrationItem
from braid.ledger.codec import ManagedCursorInfo, decode_cursor_info, encode_cursor_info
from braid.ledger.cursor import ManagedCursorImpl
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.ledger.names import cursor_path
from braid.metadata.api import BadVersion, MetadataStore
from braid.storage.api import NoSuchLedger, StorageError
from braid.storage.router import StorageRouter

log = logging.getLogger(__name__)

#: Owner look-ups of one cursor's PROMOTE before it is deferred.
ATTEMPTS = 3


class OwnerKind(enum.Enum):
    HERE = "here"
    ELSEWHERE = "elsewhere"
    NOBODY = "nobody"


@dataclasses.dataclass(frozen=True, slots=True)
class CursorOwner:
    """Who writes a managed ledger's cursors: this broker, another one (its service URL), or
    nobody (no broker holds the topic's bundle)."""

    kind: OwnerKind
    service_url: str = ""


OWNED_HERE = CursorOwner(OwnerKind.HERE)


class CursorOwners(Protocol):
    """Where each managed ledger's cursors are written (the broker's bundle ownership)."""

    async def owner_of(self, managed_ledger: str) -> CursorOwner:
        """The broker holding the bundle of ``managed_ledger``'s topic (never takes it)."""
        ...

    async def held_here(self, managed_ledger: str) -> bool:
        """This broker holds the ownership node of that bundle (owning or unloading it)."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class PromoteRequest:
    """One cursor's re-attribution: the node must point at ``expected_ledger_id`` on
    ``from_cluster``, whose copy on ``to_cluster`` holds entries ``0..copied_last_entry``."""

    managed_ledger: str
    cursor: str
    from_cluster: str
    to_cluster: str
    expected_ledger_id: int
    copied_last_entry: int

    def to_json(self) -> dict[str, Any]:
        """The internal endpoint's body (PIP-470's fields plus Braid's two)."""
        return {
            "topic": self.managed_ledger,
            "cursorName": self.cursor,
            "sourceClusterName": self.from_cluster,
            "targetClusterName": self.to_cluster,
            "expectedCursorsLedgerId": self.expected_ledger_id,
            "copiedLastEntryId": self.copied_last_entry,
        }


class PromoteForwarder(Protocol):
    """Sends a :class:`PromoteRequest` to the broker that owns the cursor."""

    async def forward(self, service_url: str, request: PromoteRequest) -> None:
        """Have that broker re-attribute the cursor.

        Raises:
            ConflictError: the cursor rolled over instead (409).
            ServiceUnavailableError: unreachable, not (or no longer) the owner, busy (503).
            NotFoundError: it answered 404 (look the owner up again).
        """
        ...


class CursorRolledOver(ConflictError):
    """PROMOTE of a cursor whose ledger changed since BUILD (HTTP 409): counted as promoted via
    rollover."""

    retriable = False


class NotTheCursorOwner(ServiceUnavailableError):
    """This broker does not hold the cursor's bundle (503: look the owner up again)."""


class CursorBusy(ServiceUnavailableError):
    """The cursor's managed ledger is being opened here, or its node kept changing (503)."""


class CursorPromotion:
    """Runs each cursor's PROMOTE / ROLLBACK where the cursor lives (module docstring)."""

    def __init__(
        self,
        metadata: MetadataStore,
        ml_factory: DefaultManagedLedgerFactory,
        router: StorageRouter,
        metrics: SwitchMetrics,
    ) -> None:
        self._metadata = metadata
        self._ml_factory = ml_factory
        self._router = router
        self._metrics = metrics
        self._owners: CursorOwners | None = None
        self._forwarder: PromoteForwarder | None = None

    def route_via(self, owners: CursorOwners, forwarder: PromoteForwarder) -> None:
        """Brokers among others: find each cursor's owner and forward to it."""
        self._owners = owners
        self._forwarder = forwarder

    async def _owner(self, managed_ledger: str) -> CursorOwner:
        if self._owners is None:
            return OWNED_HERE
        return await self._owners.owner_of(managed_ledger)

    async def may_recover(self, managed_ledger: str) -> bool:
        """BUILD may fence the source cursor ledgers of ``managed_ledger``: no cursor of it is
        live here, and no other broker holds its bundle."""
        if self._ml_factory.opened(managed_ledger) is not None:
            return False
        if self._ml_factory.opening(managed_ledger):
            return False
        return (await self._owner(managed_ledger)).kind is not OwnerKind.ELSEWHERE

    # -- the orchestrator's side ------------------------------------------------------------------

    async def reattribute(
        self, item: MigrationItem, from_cluster: str, to_cluster: str
    ) -> MigrationItem:
        """Re-point one cursor item (PROMOTE, or ROLLBACK with the clusters swapped) where it
        lives; the item comes back PROMOTED, ROLLED_OVER or DEFERRED (with the reason)."""
        request = PromoteRequest(
            item.owner,
            item.cursor,
            from_cluster,
            to_cluster,
            item.ledger_id,
            item.copied_last_entry,
        )
        failure: BraidError | None = None
        for _ in range(ATTEMPTS):
            owner = await self._owner(item.owner)
            try:
                if owner.kind is OwnerKind.ELSEWHERE:
                    assert self._forwarder is not None
                    await self._forwarder.forward(owner.service_url, request)
                    self._metrics.promote_forwarded += 1
                    log.info(
                        "cursor %s of %s re-attributed to %s by its owner %s",
                        item.cursor,
                        item.owner,
                        to_cluster,
                        owner.service_url,
                    )
                    status = ItemStatus.PROMOTED
                else:
                    status = await self._here(request)
            except ConflictError:
                status = ItemStatus.ROLLED_OVER
            except (ServiceUnavailableError, NotFoundError) as exc:
                log.info("cursor %s of %s: %s; looking the owner up again", *request_id(item), exc)
                failure = exc
                continue
            except BraidError as exc:
                failure = exc
                break
            return dataclasses.replace(item, status=status, reason="")
        log.warning(
            "cursor %s of %s: re-attribution deferred to the next switch: %s",
            *request_id(item),
            failure,
        )
        return dataclasses.replace(item, status=ItemStatus.DEFERRED, reason=str(failure))

    # -- the owner's side -------------------------------------------------------------------------

    async def reattribute_here(self, request: PromoteRequest) -> None:
        """Another broker's orchestrator asks this broker, the cursor's owner, to re-attribute it.

        Raises:
            NotTheCursorOwner: this broker does not hold the topic's bundle.
            CursorRolledOver: the cursor rolled over to the active cluster instead.
            CursorBusy: the managed ledger is being opened, or the node kept changing.
        """
        opened = self._ml_factory.opened(request.managed_ledger) is not None
        if (
            not opened
            and self._owners is not None
            and not await self._owners.held_here(request.managed_ledger)
        ):
            raise NotTheCursorOwner(
                f"this broker does not own the topic of managed ledger {request.managed_ledger!r}"
            )
        status = await self._here(request)
        self._metrics.promote_served += 1
        log.info(
            "PROMOTE of cursor %s of %s to %s requested by the orchestrator: %s",
            request.cursor,
            request.managed_ledger,
            request.to_cluster,
            status.value,
        )
        if status is ItemStatus.ROLLED_OVER:
            raise CursorRolledOver(
                f"cursor {request.cursor!r}: ledger {request.expected_ledger_id} changed since "
                f"BUILD; rolled over to the active cluster"
            )

    async def _here(self, request: PromoteRequest) -> ItemStatus:
        """This broker writes the cursor, or nobody does: lock path or node path."""
        ml = self._ml_factory.opened(request.managed_ledger)
        if ml is not None:
            cursor = ml.cursors.get(request.cursor)
            if isinstance(cursor, ManagedCursorImpl):
                done = await cursor.reattribute_storage(
                    request.expected_ledger_id,
                    request.copied_last_entry,
                    request.from_cluster,
                    request.to_cluster,
                )
                return ItemStatus.PROMOTED if done else ItemStatus.ROLLED_OVER
        elif self._ml_factory.opening(request.managed_ledger):
            raise CursorBusy(f"managed ledger {request.managed_ledger!r} is being opened here")
        status = await self._reattribute_node(request)
        if status is ItemStatus.DEFERRED:
            raise CursorBusy(f"cursor node CAS lost {MAX_PROMOTE_RETRIES} times")
        self._metrics.promote_via_node += 1
        return status

    async def _reattribute_node(self, request: PromoteRequest) -> ItemStatus:
        """The node path (module docstring): no live cursor writes this node."""
        path = cursor_path(self._ml_factory.root, request.managed_ledger, request.cursor)
        ledger_id = request.expected_ledger_id
        for _ in range(MAX_PROMOTE_RETRIES):
            got = await self._metadata.get(path)
            if got is None:
                return ItemStatus.ROLLED_OVER
            node = decode_cursor_info(got[0])
            if node.cursors_ledger_id != ledger_id:
                return ItemStatus.ROLLED_OVER
            if node.bookie_cluster_name == request.to_cluster:
                return ItemStatus.PROMOTED
            if node.bookie_cluster_name != request.from_cluster:
                return ItemStatus.ROLLED_OVER
            last, snapshot = await self._recover_last(request.from_cluster, ledger_id)
            if last == request.copied_last_entry:
                updated, status = (
                    dataclasses.replace(node, bookie_cluster_name=request.to_cluster),
                    ItemStatus.PROMOTED,
                )
            else:
                # The copy misses what its dead owner appended: keep the newest snapshot in the
                # node instead (a new owner's load does the same).
                state = snapshot if snapshot is not None else node
                updated, status = (
                    dataclasses.replace(state, cursors_ledger_id=-1, bookie_cluster_name=None),
                    ItemStatus.ROLLED_OVER,
                )
            try:
                await self._metadata.put(path, encode_cursor_info(updated), got[1].version)
            except BadVersion:
                self._metrics.promote_cas_retries += 1
                continue
            if status is ItemStatus.ROLLED_OVER:
                for cluster in (request.from_cluster, request.to_cluster):
                    await self._delete_quietly(cluster, ledger_id)
            return status
        return ItemStatus.DEFERRED

    async def _recover_last(
        self, cluster: str, ledger_id: int
    ) -> tuple[int, ManagedCursorInfo | None]:
        """Recover (fence) a cursor ledger: its last entry id and last snapshot (-1, ``None``
        when it is gone or empty)."""
        try:
            handle = await self._router.client_for(cluster).open_ledger(ledger_id, recovery=True)
        except NoSuchLedger:
            return -1, None
        try:
            last = handle.metadata.last_entry_id
            if last < 0:
                return -1, None
            (entry,) = await handle.read_entries(last, last)
            return last, decode_cursor_info(entry.data)
        finally:
            await handle.close()

    async def _delete_quietly(self, cluster: str, ledger_id: int) -> None:
        try:
            await self._router.client_for(cluster).delete_ledger(ledger_id)
        except NoSuchLedger:
            pass
        except StorageError as exc:
            log.warning("cursor ledger %d of %s was not deleted: %s", ledger_id, cluster, exc)


def request_id(item: MigrationItem) -> tuple[str, str]:
    """``(cursor, managed ledger)`` of an item, for log lines."""
    return item.cursor, item.owner


__all__ = [
    "ATTEMPTS",
    "OWNED_HERE",
    "CursorBusy",
    "CursorOwner",
    "CursorOwners",
    "CursorPromotion",
    "CursorRolledOver",
    "NotTheCursorOwner",
    "OwnerKind",
    "PromoteForwarder",
    "PromoteRequest",
]
