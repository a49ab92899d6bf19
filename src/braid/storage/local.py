"""The standalone storage cluster: in-process bookies on a local data directory.

:func:`open_local_cluster` gives ``braid standalone`` its fixed set of in-process bookies
(:class:`~braid.storage.bookie_set.StaticBookieSet`). :class:`LocalBookieSet` is a set of
in-process bookies whose membership changes - a bookie leaves (it stopped, or its registration
is gone) and joins again - with listeners called as the registration-watching set of bookie
processes calls them: what auto-recovery and the ensemble-change tests run on without processes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from braid.clock import Clock
from braid.metadata.api import MetadataStore
from braid.storage.api import BookieUnavailable, InvalidQuorum
from braid.storage.bookie import Bookie
from braid.storage.bookie.disk import DiskThresholds
from braid.storage.bookie_client import BookieClient, LocalBookieClient
from braid.storage.bookie_set import MembershipListener, StaticBookieSet
from braid.storage.client import BookKeeperClient, ClientSettings
from braid.storage.ledger_metadata import validate_cluster_name

log = logging.getLogger(__name__)


async def open_local_cluster(
    metadata: MetadataStore,
    data_dir: Path,
    cluster_name: str = "standalone",
    *,
    clock: Clock | None = None,
    bookies: int = 1,
    disk_thresholds: DiskThresholds | None = None,
    settings: ClientSettings | None = None,
) -> BookKeeperClient:
    """Start ``bookies`` in-process bookies in ``data_dir/bookie-<i>`` and return a client that owns
    them (closing the client closes the bookies).

    Reopening the same ``data_dir`` after a crash replays each bookie's journal, so every
    acknowledged entry is there again. ``disk_thresholds`` say when a bookie turns read-only
    (its disk nearly full) and back. The bookies form a :class:`StaticBookieSet`.

    Raises:
        InvalidQuorum: ``bookies`` < 1.
        InvalidClusterName: ``cluster_name`` cannot be a metadata path segment.
        StorageIOError: a data directory cannot be opened.
    """
    validate_cluster_name(cluster_name)
    if bookies < 1:
        raise InvalidQuorum(f"a storage cluster needs at least one bookie, got {bookies}")
    data_dir = Path(data_dir)
    clients: list[BookieClient] = []
    try:
        for i in range(bookies):
            clients.append(
                await open_local_bookie(data_dir, i, clock=clock, disk_thresholds=disk_thresholds)
            )
    except BaseException:
        for client in clients:
            await client.close()
        raise
    return BookKeeperClient(
        metadata, cluster_name, StaticBookieSet(clients), clock=clock, settings=settings
    )


class LocalBookieSet:
    """In-process bookies whose membership changes (a
    :class:`~braid.storage.bookie_set.BookieSet`).

    A bookie is a member while it has joined and not left; a member whose disk is full is
    read-only. A bookie that left is gone: :meth:`client` raises ``BookieUnavailable`` for it
    (its ledgers are read from other replicas) until it joins again. The set owns every client
    it was ever given and closes them all on :meth:`close`.
    """

    def __init__(
        self,
        clients: Iterable[BookieClient] = (),
        *,
        racks: Mapping[str, str] | None = None,
    ) -> None:
        self._clients: dict[str, BookieClient] = {}
        self._members: set[str] = set()
        self._racks = dict(racks or {})
        self._listeners: list[MembershipListener] = []
        self._closed = False
        for client in clients:
            self._clients[client.bookie_id] = client
            self._members.add(client.bookie_id)

    def writable(self) -> Sequence[str]:
        return sorted(b for b in self._members if self._clients[b].read_only_reason is None)

    def readonly(self) -> Sequence[str]:
        return sorted(b for b in self._members if self._clients[b].read_only_reason is not None)

    def client(self, bookie_id: str) -> BookieClient:
        if bookie_id not in self._members:
            raise BookieUnavailable(f"bookie {bookie_id} is not available")
        return self._clients[bookie_id]

    def rack_of(self, bookie_id: str) -> str | None:
        return self._racks.get(bookie_id)

    def add_listener(self, listener: MembershipListener) -> None:
        self._listeners.append(listener)

    def join(self, client: BookieClient, rack: str | None = None) -> None:
        """``client``'s bookie becomes (again) a member; a client it replaces is closed later."""
        self._clients[client.bookie_id] = client
        self._members.add(client.bookie_id)
        if rack is not None:
            self._racks[client.bookie_id] = rack
        self._changed()

    def leave(self, bookie_id: str) -> BookieClient:
        """The bookie is gone (stopped, unreachable, its registration expired); returns its client.

        Raises:
            BookieUnavailable: it is not a member.
        """
        client = self.client(bookie_id)
        self._members.discard(bookie_id)
        self._changed()
        return client

    def _changed(self) -> None:
        if not self._listeners:
            return
        loop = asyncio.get_running_loop()
        for listener in list(self._listeners):
            loop.call_soon(_call_listener, listener)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for client in self._clients.values():
            await client.close()


def _call_listener(listener: MembershipListener) -> None:
    try:
        listener()
    except Exception:
        log.exception("bookie set listener failed")


async def open_local_bookies(
    data_dir: Path,
    count: int,
    *,
    clock: Clock | None = None,
    racks: Mapping[str, str] | None = None,
    disk_thresholds: DiskThresholds | None = None,
) -> LocalBookieSet:
    """Open ``count`` in-process bookies ``bookie-<i>`` in ``data_dir/bookie-<i>`` as a
    :class:`LocalBookieSet` (closing the set closes them)."""
    bookie_set = LocalBookieSet(racks=racks)
    try:
        for i in range(count):
            bookie_set.join(
                await open_local_bookie(data_dir, i, clock=clock, disk_thresholds=disk_thresholds)
            )
    except BaseException:
        await bookie_set.close()
        raise
    return bookie_set


async def open_local_bookie(
    data_dir: Path,
    index: int,
    *,
    clock: Clock | None = None,
    disk_thresholds: DiskThresholds | None = None,
) -> LocalBookieClient:
    """Open (or reopen, replaying its journal) bookie ``bookie-<index>`` in
    ``data_dir/bookie-<index>``; the client owns it."""
    bookie = await Bookie.open(
        Path(data_dir) / f"bookie-{index}",
        bookie_id=f"bookie-{index}",
        disk_thresholds=disk_thresholds,
        clock=clock,
    )
    return LocalBookieClient(bookie, owns_bookie=True)
