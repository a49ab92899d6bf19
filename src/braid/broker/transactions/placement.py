"""Where each transaction coordinator is served on a cluster of ``braid broker`` processes (ADR
0070).

Coordinator *n* is served by the broker that owns the namespace bundle of partition *n* of
``persistent://pulsar/system/transaction_coordinator_assign`` (:mod:`braid.broker.ownership`): a
client finds it with a LOOKUP of that partition, as Pulsar's clients do, and the lookup places an
unowned bundle like any other. :class:`BundleCoordinatorPlacement` answers "does this broker serve
coordinator *n*?" from the bundle ownership this broker holds (no I/O), and takes an unowned bundle
for a client sent here.

:class:`CoordinatorKeeper` makes sure no coordinator stays without a broker when no client asks
(a COMMITTING transaction must still be driven to its end after its broker died): whenever an
ownership node of ``pulsar/system`` changes, and every :data:`KEEP_INTERVAL_S` anyway, each broker
looks at every coordinator; one whose bundle nobody owns is looked up as a client would look it up
(redirects followed over the binary protocol), so the broker the cluster's placement picks takes
the bundle (the ownership node's CAS settles a race) and loads the coordinator from its records.
A coordinator whose bundle this broker loses is fenced at once
(:meth:`~.coordinator.TransactionCoordinators.lose`): by an unload, before the ownership node is
deleted (so before another broker can take it); by the node's deletion or the end of the session,
from the notification that tells the broker (a store whose session ended refuses every write, so
nothing is recorded from here meanwhile; ADR 0070).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from braid.broker.broker_registry import BrokerRegistry, broker_id
from braid.broker.bundles import NamespaceBundle
from braid.broker.errors import ServiceNotReady
from braid.broker.ownership import BundleOwnership, LookupAnswer, OwnerData, client_web_url
from braid.broker.transactions.coordinator import ASSIGN_TOPIC, TransactionCoordinators
from braid.clock import Clock
from braid.core.names import TopicName
from braid.metadata.api import MetadataStore, Notification

log = logging.getLogger(__name__)

#: How often every coordinator's placement is checked even without a notification.
KEEP_INTERVAL_S = 5.0
#: Ownership nodes of the assign topic's namespace (Pulsar's path).
SYSTEM_OWNERSHIP = "/namespace/pulsar/system"


#: This broker's LOOKUP of a topic (``BrokerService.lookup``).
Lookup = Callable[[str], Awaitable[LookupAnswer]]
#: ``(broker URL, topic, authoritative) -> owner URL``: a lookup at another broker, redirects
#: followed.
FollowRedirect = Callable[[str, str, bool], Awaitable[str]]


def partition_of(tc_id: int) -> str:
    """The assign topic's partition naming coordinator ``tc_id``."""
    return f"{ASSIGN_TOPIC}-partition-{tc_id}"


class BundleCoordinatorPlacement:
    """Coordinator *n* is served here while this broker owns assign partition *n*'s bundle."""

    def __init__(
        self,
        ownership: BundleOwnership,
        registry: BrokerRegistry,
        lookup: Lookup,
        follow: FollowRedirect,
    ) -> None:
        """``lookup``: this broker's LOOKUP of a topic; ``follow(url, topic, authoritative)``:
        the same lookup at the broker a redirect names, redirects followed (:func:`.peers.
        find_owner`)."""
        self._ownership = ownership
        self._lookup = lookup
        self._follow = follow
        self._registry = registry
        #: Coordinator -> the bundle of its assign partition (learnt on first use).
        self._bundles: dict[int, NamespaceBundle] = {}

    def serves(self, tc_id: int) -> bool:
        bundle = self._bundles.get(tc_id)
        return bundle is not None and self._ownership.owns(bundle)

    async def bundle(self, tc_id: int) -> NamespaceBundle:
        bundle = await self._ownership.bundle_of(TopicName.parse(partition_of(tc_id)))
        self._bundles[tc_id] = bundle
        return bundle

    def coordinators_in(self, bundle: NamespaceBundle) -> list[int]:
        """The coordinators whose assign partition is in ``bundle``."""
        return [tc_id for tc_id, b in self._bundles.items() if b == bundle]

    async def claim(self, tc_id: int) -> bool:
        bundle = await self.bundle(tc_id)
        try:
            await self._ownership.try_acquire(bundle)
        except ServiceNotReady:
            return False
        return self._ownership.owns(bundle)

    async def place(self, tc_id: int) -> bool:
        """Whether this broker serves ``tc_id``, after giving it an owner if it has none - by
        looking its assign partition up as a client would, redirects followed, so the cluster's
        own placement (the load manager's, else rendezvous hashing) picks the broker, which takes
        the bundle. A coordinator whose owner is handing it over is left to that hand-over."""
        bundle = await self.bundle(tc_id)
        if self._ownership.owns(bundle):
            return True
        if await self._ownership.owner(bundle) is not None:
            return False
        partition = partition_of(tc_id)
        answer = await self._lookup(partition)
        if answer.redirect:
            await self._follow(answer.service_url, partition, answer.authoritative)
        return self._ownership.owns(bundle)

    async def owner(self, tc_id: int) -> tuple[str, str] | None:
        """``(service URL, TLS service URL or "")`` of coordinator ``tc_id``'s broker, or ``None``
        while it has none (mid-election: unowned, or its owner is handing it over)."""
        found: OwnerData | None = await self._ownership.owner(await self.bundle(tc_id))
        if found is None or found.disabled:
            return None
        info = await self._registry.get(broker_id(found.native_url))
        tls = info.service_url_tls if info is not None and info.service_url_tls else ""
        return found.native_url, tls

    async def web_url(self, tc_id: int, https: bool) -> str | None:
        """The admin (web service) URL of coordinator ``tc_id``'s broker - its HTTPS one for a
        request that came in over HTTPS (``https``), never a downgrade - or ``None`` while it has
        none."""
        found: OwnerData | None = await self._ownership.owner(await self.bundle(tc_id))
        if found is None or found.disabled:
            return None
        return client_web_url(found.http_url, found.http_url_tls, https) or None


class CoordinatorKeeper:
    """Loads the coordinators this broker gains, fences those it loses (module docstring)."""

    def __init__(
        self,
        coordinators: TransactionCoordinators,
        placement: BundleCoordinatorPlacement,
        store: MetadataStore,
        clock: Clock,
        *,
        interval_s: float = KEEP_INTERVAL_S,
    ) -> None:
        self._coordinators = coordinators
        self._placement = placement
        self._clock = clock
        self._interval_s = interval_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] = store.register_listener(self._on_notification)
        #: Called after each pass that may have seen an ownership change (assignment watches).
        self.on_pass: list[Callable[[], None]] = []

    def start(self) -> None:
        self._wake.set()
        self._task = asyncio.ensure_future(self._run())

    def _on_notification(self, event: Notification) -> None:
        if event.path.startswith(SYSTEM_OWNERSHIP + "/"):
            self._wake.set()

    def bundle_lost(self, bundle: NamespaceBundle) -> None:
        """This broker lost ``bundle``: fence its coordinators now."""
        for tc_id in self._placement.coordinators_in(bundle):
            self._coordinators.lose(tc_id)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._next_wake()
            self._wake.clear()
            await self.keep()
            for listener in list(self.on_pass):
                listener()

    async def _next_wake(self) -> None:
        if self._wake.is_set():
            return
        waiter = asyncio.ensure_future(self._wake.wait())
        sleeper = asyncio.ensure_future(self._clock.sleep(self._interval_s))
        try:
            await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            sleeper.cancel()

    async def keep(self) -> None:
        """One pass over every coordinator."""
        for tc_id in range(self._coordinators.count):
            try:
                if await self._placement.place(tc_id):
                    await self._coordinators.adopt(tc_id)
                elif tc_id in self._coordinators.loaded():
                    self._coordinators.lose(tc_id)
            except Exception as exc:  # the next pass tries again
                log.warning("placing transaction coordinator %d failed: %s", tc_id, exc)

    async def close(self) -> None:
        self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
