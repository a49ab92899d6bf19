"""The coordinator-assignment watch of scalable-topic clients (the broker's side of
WATCH_TC_ASSIGNMENTS; ADR 0070).

A client that saw ``supports_tc_metadata_discovery`` in CONNECTED (advertised only with
``transactionCoordinatorEnabled=true``) may open one watch (CommandWatchTcAssignments
``{watch_id}``) instead of looking each coordinator up. The broker answers with
CommandWatchTcAssignmentsUpdate carrying the **whole** map - ``parallelism`` (how many coordinators
there are) and, for each coordinator that has a broker now, its ``broker_service_url`` (and
``broker_service_url_tls`` when that broker has a TLS listener) - and pushes the whole map again
whenever it changes (no diffs). A coordinator mid-election (its assign partition's bundle unowned,
or its owner handing it over) is absent. CommandWatchTcAssignmentsClose ends the watch; so does
the connection's end.

:class:`TcAssignments` is the one owner of the watches of a broker: it rebuilds the map after
every pass of the coordinator keeper (which runs on every ownership change of ``pulsar/system``)
and after every change of what this broker serves, and sends it to each watch whose last map
differs (a new watch has none: it gets the map at once). On a standalone every coordinator is
this broker's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from braid.broker.transactions.coordinator import TransactionCoordinators
from braid.broker.transactions.placement import BundleCoordinatorPlacement
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: ``(service URL, TLS service URL or "")`` of coordinator ``tc_id``'s broker, ``None``: none now.
OwnerOf = Callable[[int], Awaitable[tuple[str, str] | None]]
#: Sends one command to a watching client.
Send = Callable[[pb.BaseCommand], None]


async def build_snapshot(count: int, owner_of: OwnerOf) -> pb.TcAssignmentsSnapshot:
    """The full map: every coordinator with a broker now, in id order."""
    snapshot = pb.TcAssignmentsSnapshot(parallelism=count)
    for tc_id in range(count):
        owner = await owner_of(tc_id)
        if owner is None:
            continue
        url, tls = owner
        assignment = snapshot.assignments.add(tc_id=tc_id, broker_service_url=url)
        if tls:
            assignment.broker_service_url_tls = tls
    return snapshot


def update(watch_id: int, snapshot: pb.TcAssignmentsSnapshot) -> pb.BaseCommand:
    """The CommandWatchTcAssignmentsUpdate carrying ``snapshot``."""
    return commands.watch_tc_assignments_update(watch_id, snapshot)


class _Watch:
    """One open watch: where to send, and the map it got last."""

    __slots__ = ("send", "sent")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.sent: pb.TcAssignmentsSnapshot | None = None


class TcAssignments:
    """Every coordinator-assignment watch opened on this broker."""

    def __init__(
        self,
        coordinators: TransactionCoordinators,
        own_urls: Callable[[], tuple[str, str]],
    ) -> None:
        self._coordinators = coordinators
        self._own_urls = own_urls
        self._placement: BundleCoordinatorPlacement | None = None
        #: ``(session key, watch id) -> the watch``.
        self._watches: dict[tuple[int, int], _Watch] = {}
        self._refreshing: asyncio.Task[None] | None = None
        self._again = False
        coordinators.listeners.append(self.changed)

    def place_by(self, placement: BundleCoordinatorPlacement) -> None:
        """On a cluster: the map comes from the assign partitions' bundle owners."""
        self._placement = placement

    async def _owner_of(self, tc_id: int) -> tuple[str, str] | None:
        if self._placement is not None:
            return await self._placement.owner(tc_id)
        return self._own_urls()

    async def snapshot(self) -> pb.TcAssignmentsSnapshot:
        """The map as it is now."""
        return await build_snapshot(self._coordinators.count, self._owner_of)

    def watch(self, session: int, watch_id: int, send: Send) -> None:
        """Open a watch: the current map is sent at once, the whole map again on each change."""
        self._watches[(session, watch_id)] = _Watch(send)
        self.changed()

    def unwatch(self, session: int, watch_id: int | None = None) -> None:
        """Close one watch, or (``watch_id`` ``None``) every watch of ``session``."""
        for key in [k for k in self._watches if k[0] == session]:
            if watch_id is None or key[1] == watch_id:
                del self._watches[key]

    @property
    def watching(self) -> int:
        return len(self._watches)

    def changed(self) -> None:
        """Ownership may have changed: rebuild the map, send it to each watch that has not got
        this very map yet (nothing to do without watches)."""
        if not self._watches:
            return
        if self._refreshing is not None and not self._refreshing.done():
            self._again = True
            return
        self._refreshing = asyncio.ensure_future(self._refresh())

    async def _refresh(self) -> None:
        while True:
            self._again = False
            try:
                snapshot = await self.snapshot()
            except Exception as exc:  # the next change tries again
                log.warning("coordinator assignments could not be read: %s", exc)
                return
            for (_, watch_id), watch in list(self._watches.items()):
                if watch.sent != snapshot:
                    watch.sent = snapshot
                    watch.send(update(watch_id, snapshot))
            if not self._again:
                return

    async def close(self) -> None:
        self._watches.clear()
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.gather(self._refreshing, return_exceptions=True)
