"""The client's coordinator-assignment watch (WATCH_TC_ASSIGNMENTS, ``docs/client.md``).

Against a broker whose CONNECTED advertises ``supports_tc_metadata_discovery``, a client finds its
transaction coordinators with **one** watch instead of one lookup per coordinator: it sends
CommandWatchTcAssignments on a service-URL connection and the broker answers, and again after
every change, with the **whole** map - how many coordinators there are (``parallelism``) and, for
each coordinator that has a broker now, that broker's URLs.

:class:`TcAssignmentWatch` is the one owner of that map in a client. Invariants:

* each snapshot replaces the map wholesale (no merging: a coordinator absent from the latest
  snapshot has no owner, even if an older one named it);
* a coordinator absent from the map (mid-election) is *parked*: :meth:`TcAssignmentWatch.owner`
  waits for a later snapshot that names it, until the caller's deadline, then raises
  :class:`~braid.client.errors.TimeoutError`;
* a lost connection keeps the last map (the best knowledge there is) and re-opens the watch with
  backoff on a service-URL connection; the broker's first answer there re-syncs the map. If that
  broker no longer advertises the flag, :attr:`TcAssignmentWatch.unsupported` turns true and the
  caller goes back to Pulsar's lookup path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from braid.client.backoff import retry_transient
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.errors import (
    ConnectError,
    FeatureNotSupportedError,
    NotConnectedError,
    error_for_code,
    is_transient,
)
from braid.client.first_update import await_first_update
from braid.core.errors import DeadlineExceededError
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)


class TcAssignmentWatch:
    """One client's coordinator-assignment watch (see the module doc); :meth:`start` it."""

    def __init__(self, ctx: ClientContext) -> None:
        self._ctx = ctx
        self._conn: BrokerConnection | None = None
        self._watch_id = 0
        self._first: asyncio.Future[None] | None = None
        #: ``tc_id -> (service URL, TLS service URL or "")`` of the latest snapshot.
        self._owners: dict[int, tuple[str, str]] = {}
        self._parallelism = 0
        #: Set (and replaced) on each snapshot: what parked callers wait on.
        self._changed = asyncio.Event()
        #: Called after each snapshot was applied (the coordinator handlers retarget).
        self.listeners: list[Callable[[], None]] = []
        #: Snapshots applied so far (the first one and every re-push).
        self.snapshots = 0
        #: The service broker stopped advertising the watch: use the lookup path.
        self.unsupported = False
        self._reconnecting = False
        self.closed = False

    @property
    def parallelism(self) -> int:
        """How many coordinators the cluster runs (from the latest snapshot)."""
        return self._parallelism

    def owners(self) -> dict[int, str]:
        """``tc_id -> URL`` the client connects to (its TLS URL for a TLS client), as of the
        latest snapshot; a coordinator mid-election is absent."""
        found = {}
        for tc_id in self._owners:
            with contextlib.suppress(ConnectError):
                found[tc_id] = self._url(tc_id)
        return found

    async def start(self) -> None:
        """Open the watch and wait for the first snapshot (within the operation timeout).

        Raises:
            FeatureNotSupportedError: the service broker does not advertise the watch.
            NotAllowedError: the broker runs no coordinator.
            ConnectError, TimeoutError: no service broker answered in time.
        """
        await retry_transient(self._open, self._ctx.backoff(), self._ctx.deadline())

    async def _open(self) -> None:
        conn = await self._ctx.pool.service_connection()
        if not conn.supports_tc_metadata_discovery:
            raise FeatureNotSupportedError(
                f"{conn.address.url} does not advertise supports_tc_metadata_discovery"
            )
        self._watch_id = self._ctx.next_id()
        first = self._first = self._ctx.loop.create_future()
        self._conn = conn
        conn.register_tc_watch(self._watch_id, self)
        conn.send(commands.wrap(pb.CommandWatchTcAssignments(watch_id=self._watch_id)))
        watch_id = self._watch_id
        await await_first_update(
            first,
            self._ctx.settings.operation_timeout,
            lambda: conn.unregister_tc_watch(watch_id),
            f"coordinator assignments from {conn.address.url}",
        )

    # -- TcWatchHandler ------------------------------------------------------------------------

    def on_tc_assignments_update(self, update: pb.CommandWatchTcAssignmentsUpdate) -> None:
        first = self._first
        if update.HasField("error"):
            error = error_for_code(update.error, update.message, context="coordinator watch")
            if first is not None and not first.done():
                first.set_exception(error)
            else:
                log.warning("the coordinator-assignment watch reported %s", error)
            return
        if not update.HasField("snapshot"):
            return
        snapshot = update.snapshot
        self._owners = {
            a.tc_id: (a.broker_service_url, a.broker_service_url_tls)
            for a in snapshot.assignments
            if a.tc_id < snapshot.parallelism
        }
        self._parallelism = snapshot.parallelism
        self.snapshots += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for listener in list(self.listeners):
            try:
                listener()
            except Exception:
                log.exception("a coordinator-assignment listener failed")
        if first is not None and not first.done():
            first.set_result(None)

    def on_connection_lost(self) -> None:
        self._conn = None
        first = self._first
        if first is not None and not first.done():
            first.set_exception(NotConnectedError("the coordinator watch lost its connection"))
            return
        if not self.closed and not self._reconnecting:
            self._reconnecting = True
            self._ctx.spawn(self._reconnect(), "coordinator watch reconnect")

    async def _reconnect(self) -> None:
        backoff = self._ctx.backoff()
        try:
            while not self.closed and not self._ctx.closed:
                await asyncio.sleep(backoff.next_delay())
                try:
                    await self._open()
                    return
                except FeatureNotSupportedError as exc:
                    log.warning("%s: finding coordinators by lookup from now on", exc)
                    self.unsupported = True
                    self._changed.set()  # parked callers go to the lookup path
                    return
                except Exception as exc:
                    if not is_transient(exc):
                        log.warning("re-opening the coordinator watch failed: %s", exc)
        finally:
            self._reconnecting = False

    # -- owners --------------------------------------------------------------------------------

    def _url(self, tc_id: int) -> str:
        plain, tls = self._owners[tc_id]
        if not self._ctx.settings.uses_tls:
            return plain
        if not tls:
            raise ConnectError(f"coordinator {tc_id}'s broker {plain} has no TLS (pulsar+ssl) URL")
        return tls

    async def owner(self, tc_id: int, deadline: float) -> str | None:
        """The URL of coordinator ``tc_id``'s broker; parked while the latest snapshot names
        none (mid-election) until one does. ``None``: the watch became unsupported (use the
        lookup path).

        Raises:
            TimeoutError: no snapshot named an owner before ``deadline`` (loop clock).
            ConnectError: a TLS client, and the owner has no TLS URL.
        """
        loop = asyncio.get_running_loop()
        while not self.unsupported:
            if tc_id in self._owners:
                return self._url(tc_id)
            left = deadline - loop.time()
            changed = self._changed
            try:
                if left <= 0:
                    raise TimeoutError
                async with asyncio.timeout(left):
                    await changed.wait()
            except TimeoutError:
                raise DeadlineExceededError(
                    f"transaction coordinator {tc_id} has no broker (mid-election) and got none "
                    f"within the operation timeout of {self._ctx.settings.operation_timeout:g}s"
                ) from None
        return None

    async def close(self) -> None:
        self.closed = True
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            conn.unregister_tc_watch(self._watch_id)
            with contextlib.suppress(Exception):
                conn.send(commands.wrap(pb.CommandWatchTcAssignmentsClose(watch_id=self._watch_id)))


__all__ = ["TcAssignmentWatch"]
