"""Where a cursor's snapshots are persisted: a *cursor ledger*, pointed at by the cursor's node.

Acknowledgements are frequent, so snapshots are appended to a storage ledger of their own (the
bookie's group commit makes that cheap) rather than rewriting a metadata node each time, as
Pulsar does. The cursor's metadata node records which ledger holds the snapshots
(``cursorsLedgerId``) and on which storage cluster (``bookieClusterName``, PIP-470); it also holds
the snapshot written when that ledger was started, and the full state after a clean close
(``cursorsLedgerId = -1``). See ADR 0012.

* **First writes**: the first ``node_snapshots`` snapshots after opening go into the node (one CAS
  each; 0 unless configured). A segment topic's cursor is written a few times in its life (up to
  the acknowledgment that drains it), and starting a ledger for that costs a ledger creation, an
  add and a CAS on the path of every segment hand-over (ADR 0043).
* **Start a ledger**: create it on the active cluster, append the current snapshot, CAS the node to
  point at it, delete the previous one. Done on the first write after those, and again every
  ``max_entries`` snapshots so old snapshots are reclaimed.
* **Write**: append the snapshot. ``LedgerFenced`` means a new owner recovered the ledger.
  Any other storage failure falls back to writing the snapshot into the node.
* **Re-attribute** (PIP-470 PROMOTE and ROLLBACK, under the cursor's write lock): when the
  ledger the node points at still holds exactly what a switch copied to another storage cluster
  (same id, same entry ids), CAS *only* the node's ``bookieClusterName`` (I9) and detach the
  writer, so the next write starts a ledger on the active cluster; when the cursor wrote since the
  copy, roll over to a new ledger on the active cluster instead (PIP-470's
  promoted-via-rollover).
* **Load** (a new owner): recover the ledger the node points at - fencing the previous owner's
  writes - read its last snapshot, and CAS that into the node with ``cursorsLedgerId = -1``
  (this *claims* the node: the previous owner's next CAS fails). The recovered ledger is kept,
  still fenced, until this owner's first write replaces it: deleting it at once would let the
  previous owner's next append land in a fresh, unfenced ledger and look successful.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import NoReturn

from braid.core.errors import BraidError
from braid.ledger.api import ManagedLedgerFenced
from braid.ledger.codec import ManagedCursorInfo, decode_cursor_info, encode_cursor_info
from braid.ledger.routing import StorageRouting
from braid.ledger.storage_ops import delete_quietly
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.storage.api import (
    LedgerFenced,
    NoSuchLedger,
    StorageError,
    StorageReadOnly,
    WriteHandle,
)

log = logging.getLogger(__name__)

_CLAIM_ATTEMPTS = 8


@dataclasses.dataclass(frozen=True, slots=True)
class CursorStoreContext:
    """What a cursor store needs from its managed ledger."""

    metadata: MetadataStore
    storage: StorageRouting
    ledger_name: str
    on_fenced: Callable[[], None]
    max_entries: int
    ensemble: int = 1
    #: Snapshots written into the node after opening before a cursor ledger is started.
    node_snapshots: int = 0
    write_quorum: int = 1
    ack_quorum: int = 1


class CursorStore:
    """Persists one cursor's snapshots (see the module docstring)."""

    def __init__(self, ctx: CursorStoreContext, cursor_name: str, path: str, version: int) -> None:
        self._ctx = ctx
        self._cursor_name = cursor_name
        self._path = path
        self._version = version
        self._ledger: WriteHandle | None = None
        self._ledger_entries = 0
        self._node_snapshots = 0
        # The previous owner's recovered cursor ledger, deleted once nothing points at it.
        self._stale: tuple[int, str] | None = None

    @property
    def cursors_ledger_id(self) -> int:
        """The ledger snapshots are appended to now (-1: none yet, state is in the node)."""
        return self._ledger.ledger_id if self._ledger is not None else -1

    # -- opening ---------------------------------------------------------------------------------

    @classmethod
    async def create(
        cls, ctx: CursorStoreContext, cursor_name: str, path: str, info: ManagedCursorInfo
    ) -> CursorStore | None:
        """Create the cursor's node holding ``info``; ``None`` if the node already exists."""
        try:
            stat = await ctx.metadata.put(path, encode_cursor_info(info), expected_version=-1)
        except BadVersion:
            return None
        return cls(ctx, cursor_name, path, stat.version)

    @classmethod
    async def load(
        cls, ctx: CursorStoreContext, cursor_name: str, path: str
    ) -> tuple[CursorStore, ManagedCursorInfo] | None:
        """Restore and claim the cursor (``None`` if its node is gone).

        Raises:
            ManagedLedgerFenced: the node kept changing (another owner is active).
            ManagedLedgerMetadataError: the node or the last snapshot is corrupt.
        """
        for _ in range(_CLAIM_ATTEMPTS):
            got = await ctx.metadata.get(path)
            if got is None:
                return None
            data, stat = got
            node = decode_cursor_info(data)
            state = node
            if node.cursors_ledger_id >= 0 and node.bookie_cluster_name is not None:
                latest = await _last_snapshot(ctx, node.cursors_ledger_id, node.bookie_cluster_name)
                if latest is not None:
                    state = latest
            claimed = dataclasses.replace(state, cursors_ledger_id=-1, bookie_cluster_name=None)
            try:
                new_stat = await ctx.metadata.put(
                    path, encode_cursor_info(claimed), expected_version=stat.version
                )
            except BadVersion:
                continue  # the previous owner wrote meanwhile: read its newer state
            except NodeNotFound:
                return None
            store = cls(ctx, cursor_name, path, new_stat.version)
            if node.cursors_ledger_id >= 0 and node.bookie_cluster_name is not None:
                store._stale = (node.cursors_ledger_id, node.bookie_cluster_name)
            return store, claimed
        raise ManagedLedgerFenced(f"cursor {cursor_name!r} keeps changing: another owner is active")

    # -- PIP-470 re-attribution -------------------------------------------------------------------

    async def reattribute(
        self, expected_ledger_id: int, copied_last_entry: int, from_cluster: str, to_cluster: str
    ) -> bool:
        """Point the node at the copy of ``expected_ledger_id`` on ``to_cluster`` (same id, same
        entry ids), changing only ``bookieClusterName``. The caller holds the cursor's write lock.

        Returns ``True`` when re-attributed (or already attributed to ``to_cluster``), ``False``
        when the cursor no longer uses that ledger or wrote past ``copied_last_entry`` since it
        was copied (the caller then rolls the cursor over to the active cluster).

        Raises:
            ManagedLedgerFenced: another owner took the cursor over.
        """
        writer = self._ledger
        if writer is not None:
            if writer.ledger_id != expected_ledger_id or writer.cluster_name != from_cluster:
                return False
            if writer.last_add_confirmed != copied_last_entry:
                return False
        got = await self._ctx.metadata.get(self._path)
        if got is None:
            self._fenced(NodeNotFound(self._path))
        data, stat = got
        if stat.version != self._version:
            self._fenced(BadVersion(f"{self._path} changed under its owner"))
        node = decode_cursor_info(data)
        if node.cursors_ledger_id != expected_ledger_id:
            return False
        if node.bookie_cluster_name == to_cluster:
            return True
        if node.bookie_cluster_name != from_cluster:
            return False
        await self._write_node(dataclasses.replace(node, bookie_cluster_name=to_cluster))
        if writer is not None:
            # The source ledger stays (a rollback needs it; CLEANUP deletes it): close only.
            try:
                await writer.close()
            except BraidError as exc:
                log.debug("closing cursor ledger %s: %r", writer.ledger_id, exc)
            self._ledger, self._ledger_entries = None, 0
        # Once the next write starts a new ledger, this copy is no longer referenced.
        self._stale = (expected_ledger_id, to_cluster)
        return True

    def request_rollover(self) -> None:
        """Make the next write start a new ledger on the active cluster."""
        self._ledger_entries = self._ctx.max_entries

    # -- writing ---------------------------------------------------------------------------------

    async def write(self, info: ManagedCursorInfo) -> None:
        """Persist ``info`` durably.

        Raises:
            ManagedLedgerFenced: another owner took the cursor over.
        """
        if self._ledger is None and self._node_snapshots < self._ctx.node_snapshots:
            await self._abandon_ledger(info)  # one of the first snapshots: into the node
            self._node_snapshots += 1
            return
        if self._ledger is None or self._ledger_entries >= self._ctx.max_entries:
            await self._start_ledger(info)
            return
        try:
            await self._ledger.add_entry(encode_cursor_info(info))
        except LedgerFenced as exc:
            self._fenced(exc)
        except StorageReadOnly:
            # Storage is full (a state the bookie logs once): the node holds the snapshot.
            await self._abandon_ledger(info)
            return
        except StorageError as exc:
            log.warning("cursor %s: ledger write failed (%r); using the node", self._path, exc)
            await self._abandon_ledger(info)
            return
        self._ledger_entries += 1

    async def _start_ledger(self, info: ManagedCursorInfo) -> None:
        client = self._ctx.storage.active
        if client.write_refusal(self._ctx.ack_quorum) is not None:
            # No ledger nobody could write to: the node holds the snapshot meanwhile.
            await self._abandon_ledger(info)
            return
        try:
            handle = await client.create_ledger(
                ensemble=self._ctx.ensemble,
                write_quorum=self._ctx.write_quorum,
                ack_quorum=self._ctx.ack_quorum,
                custom_metadata={
                    "component": b"managed-cursor",
                    "managed-ledger": self._ctx.ledger_name.encode(),
                    "cursor": self._cursor_name.encode(),
                },
            )
            await handle.add_entry(encode_cursor_info(info))
        except StorageError as exc:
            log.warning("cursor %s: no cursor ledger (%r); using the node", self._path, exc)
            await self._abandon_ledger(info)
            return
        pointer = dataclasses.replace(
            info, cursors_ledger_id=handle.ledger_id, bookie_cluster_name=handle.cluster_name
        )
        try:
            await self._write_node(pointer)
        except ManagedLedgerFenced:
            await delete_quietly(client, handle.ledger_id)
            raise
        previous, self._ledger, self._ledger_entries = self._ledger, handle, 1
        if previous is not None:
            await self._retire(previous)
        await self._drop_stale()

    async def _abandon_ledger(self, info: ManagedCursorInfo) -> None:
        """Fall back to the node: it gets the whole snapshot and no longer names a ledger."""
        await self._write_node(
            dataclasses.replace(info, cursors_ledger_id=-1, bookie_cluster_name=None)
        )
        previous, self._ledger, self._ledger_entries = self._ledger, None, 0
        if previous is not None:
            await self._retire(previous)
        await self._drop_stale()

    async def _drop_stale(self) -> None:
        if self._stale is not None:
            ledger_id, cluster_name = self._stale
            self._stale = None
            await delete_quietly(self._ctx.storage.client_for(cluster_name), ledger_id)

    async def _retire(self, handle: WriteHandle) -> None:
        """Close and delete a cursor ledger the node no longer points at."""
        try:
            await handle.close()
        except BraidError as exc:
            log.debug("closing cursor ledger %s: %r", handle.ledger_id, exc)
        await delete_quietly(self._ctx.storage.client_for(handle.cluster_name), handle.ledger_id)

    async def _write_node(self, info: ManagedCursorInfo) -> None:
        try:
            stat = await self._ctx.metadata.put(
                self._path, encode_cursor_info(info), expected_version=self._version
            )
        except (BadVersion, NodeNotFound) as exc:
            self._fenced(exc)
        self._version = stat.version

    def _fenced(self, exc: BaseException) -> NoReturn:
        self._ctx.on_fenced()
        raise ManagedLedgerFenced(
            f"cursor {self._cursor_name!r} of {self._ctx.ledger_name!r} was taken over: {exc}"
        ) from exc

    # -- closing ---------------------------------------------------------------------------------

    async def close(self, info: ManagedCursorInfo) -> None:
        """Write the final state into the node and drop the cursor ledger (clean shutdown)."""
        await self._abandon_ledger(info)

    async def delete(self) -> None:
        """Delete the node and the cursor ledger (``delete_cursor``)."""
        try:
            await self._ctx.metadata.delete(self._path)
        except NodeNotFound:
            pass
        await self.drop_ledgers()

    async def drop_ledgers(self) -> None:
        """Delete the cursor's ledgers, leaving the node alone (deleted with the whole log)."""
        previous, self._ledger = self._ledger, None
        if previous is not None:
            await self._retire(previous)
        await self._drop_stale()


async def _last_snapshot(
    ctx: CursorStoreContext, ledger_id: int, cluster_name: str
) -> ManagedCursorInfo | None:
    """Recover (fence) a cursor ledger and return its last snapshot; ``None`` if it has none."""
    client = ctx.storage.client_for(cluster_name)
    try:
        handle = await client.open_ledger(ledger_id, recovery=True)
    except NoSuchLedger:
        return None
    try:
        last = handle.metadata.last_entry_id
        if last < 0:
            return None
        (entry,) = await handle.read_entries(last, last)
        return decode_cursor_info(entry.data)
    finally:
        await handle.close()
