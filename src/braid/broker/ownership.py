"""Bundle ownership: each namespace bundle is served by exactly one broker (Pulsar's
``OwnershipCache`` and the lookup half of its ``NamespaceService``).

**The lock.** A broker owns a bundle while it holds the **ephemeral** node
``/namespace/{tenant}/{namespace}/{0xLOWER_0xUPPER}`` (Pulsar's path), created with
compare-and-swap (``expected_version=-1``), whose value is Pulsar's ``NamespaceEphemeralData``
(``nativeUrl``, ``httpUrl``, ``disabled``, ...). Two brokers racing for a bundle: one create
wins, the other reads the winner. The node lives as long as the owner's metadata session.

**Serving.** A broker loads a topic only while it owns the topic's bundle
(:meth:`BundleOwnership.check_serving`): a bundle nobody owns is taken on the spot; one owned
elsewhere is refused with :class:`NotOwner` (``ServiceNotReady`` on the wire: the client looks
the topic up again). When the broker learns that it lost a bundle - its ownership node deleted,
or its session lost - it drops the bundle and calls ``on_lost`` so the broker closes the
bundle's topics at once (their clients reconnect and look up the new owner); after the session
is lost every bundle goes. A broker that cannot tell (cut off from ZooKeeper) keeps serving until
its session ends; the ledgers' fencing (a new owner fences the old owner's ledger on the bookies,
and a deleted ledger's fence outlives it) refuses the old owner's writes meanwhile (ADR 0046).

**Lookup** (:meth:`BundleOwnership.lookup`) answers as Pulsar's binary and HTTP lookups do:

* the bundle has an owner: *Connect* to the owner (authoritative) - unless that owner is dead
  (with an :class:`~braid.broker.owner_probe.OwnerProbe`, ADR 0067): another broker whose
  service address refuses connections, or this broker's own previous incarnation; then the
  lookup waits (bounded, one wait per bundle shared by concurrent lookups) for the node to go
  with the dead owner's session and answers as for an unowned bundle;
* it has none (or its owner is unloading it) and the request is not authoritative: the broker
  asks its :class:`Placement` for a candidate - the load manager's (the leader's assignment, or
  a redirect to the leader; :mod:`braid.broker.load_manager`), else the registered broker with
  the highest rendezvous hash of (bundle, broker id) - and, when the candidate is another broker,
  answers *Redirect* to it (``authoritative`` as the placement says);
* it has none and the request is authoritative (a redirect brought the client here), or this
  broker is the candidate: it takes the bundle and answers *Connect* to itself (or to whoever
  won the race).

**Unloading** (ADR 0050): the owner marks its node ``disabled`` (:meth:`begin_unload`) - it stops
serving the bundle's topics at once and lookups stop sending clients to it - closes the topics,
then deletes the node (:meth:`release`); that deletion's notification, when it comes after the
broker took the bundle again, is not mistaken for the loss of the new node. A broker asked to
serve a topic whose bundle's owner is unloading waits (bounded) for the node to go rather than
refusing the client at once. A topic is
served only if its bundle, re-read after the lock is taken, is still the one locked: a bundle
split meanwhile is released again (the split's CAS on the namespace policies comes before the
parent's node is deleted, so a lock taken after that sees the new boundaries).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

from braid.broker.broker_registry import (
    BrokerInfo,
    BrokerRegistry,
    Listeners,
    decode_listeners,
    encode_listeners,
    listener_url,
)
from braid.broker.bundles import NamespaceBundle, NamespaceBundles
from braid.broker.errors import ServiceNotReady, UnknownListener
from braid.broker.owner_probe import OwnerProbe
from braid.core.names import TopicName
from braid.metadata.api import (
    BadVersion,
    MetadataStore,
    NodeNotFound,
    Notification,
    NotificationType,
    SessionEvent,
)

log = logging.getLogger(__name__)

#: Root of the ownership nodes (``/namespace/{tenant}/{ns}/{range}``).
OWNERSHIP_ROOT = "/namespace"


class NotOwner(ServiceNotReady):
    """The topic's bundle is owned by another broker (the client looks the topic up again)."""


@dataclass(frozen=True)
class OwnerData:
    """Pulsar's ``NamespaceEphemeralData``: how clients reach a bundle's owner."""

    native_url: str
    http_url: str
    disabled: bool = False
    #: The owner's ``advertisedListeners`` (a lookup naming a listener gets its URL).
    listeners: Listeners = ()
    #: The owner's HTTPS admin URL (``webServiceUrlTls``; empty: none): what brokers with TLS
    #: configured call (ADR 0066).
    http_url_tls: str = ""

    def encode(self) -> bytes:
        doc = {
            "nativeUrl": self.native_url,
            "nativeUrlTls": "",
            "httpUrl": self.http_url,
            "httpUrlTls": self.http_url_tls,
            "disabled": self.disabled,
            "advertisedListeners": encode_listeners(self.listeners),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> OwnerData | None:
        try:
            doc = json.loads(raw)
            return cls(
                str(doc["nativeUrl"]),
                str(doc.get("httpUrl") or ""),
                bool(doc["disabled"]),
                decode_listeners(doc.get("advertisedListeners")),
                str(doc.get("httpUrlTls") or ""),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class AssignedBroker:
    """Where the clients of an unloaded bundle should go next: the new owner's service URLs,
    sent in CLOSE_PRODUCER / CLOSE_CONSUMER (``assignedBrokerServiceUrl[Tls]``)."""

    service_url: str
    service_url_tls: str | None = None


@dataclass(frozen=True)
class LookupAnswer:
    """Where a client should go for a topic: *Connect* there, or *Redirect* (ask there)."""

    service_url: str
    http_url: str
    redirect: bool
    authoritative: bool
    #: The answer names this broker.
    local: bool
    #: The same broker's HTTPS web service URL ("" when it has none): where a request that
    #: came in over HTTPS is redirected, so a redirect never downgrades it to plain HTTP.
    http_url_tls: str = ""

    def web_url(self, https: bool) -> str:
        """The web URL to send a client to: the HTTPS one when it came in over HTTPS."""
        return client_web_url(self.http_url, self.http_url_tls, https)


def client_web_url(http_url: str, http_url_tls: str, https: bool) -> str:
    """Where to send a client that came in over HTTPS (``https``) or not: a broker's HTTPS web
    URL when it has one and the client used HTTPS - a redirect never downgrades a request."""
    return http_url_tls if https and http_url_tls else http_url


def ownership_path(bundle: NamespaceBundle) -> str:
    return f"{OWNERSHIP_ROOT}/{bundle.namespace}/{bundle.range_name}"


def rendezvous_score(bundle: NamespaceBundle, broker: str) -> int:
    """Highest-random-weight score of ``broker`` for ``bundle`` (deterministic on every broker)."""
    digest = hashlib.blake2b(f"{bundle}|{broker}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _url(service_url: str, listeners: Listeners, listener: str | None) -> str:
    """``service_url``, or the URL of ``listener`` when one is named.

    Raises:
        UnknownListener: the broker has no such listener.
    """
    if not listener:
        return service_url
    url = listener_url(listeners, listener)
    if url is None:
        known = ", ".join(n for n, _, _ in listeners) or "none configured"
        raise UnknownListener(
            f"broker {service_url} does not have listener {listener!r} (its advertisedListeners: "
            f"{known})"
        )
    return url


BundlesOf = Callable[[TopicName], Awaitable[NamespaceBundles]]
LostListener = Callable[[NamespaceBundle], object]

#: How long a broker asked for a topic waits for the bundle's unloading owner to let go.
UNLOAD_WAIT_S = 10.0
#: A wait for an ownership node to change wakes on the store's notification for the node; it
#: also reads the node again this often, in case a notification was lost with a reconnection.
_NODE_RECHECK_S = 1.0
#: Beyond the metadata session timeout, how long a lookup waits for a dead owner's node to go
#: (ZooKeeper expires sessions on its tick: up to one tick late).
DEAD_OWNER_MARGIN_S = 2.0


@dataclass(frozen=True)
class Candidate:
    """The broker a lookup for an unowned bundle sends the client to; ``authoritative=False``
    when that broker is only asked to decide (the leader)."""

    broker: BrokerInfo
    authoritative: bool = True


class Placement(Protocol):
    """Who should take an unowned bundle (the load manager, or rendezvous hashing)."""

    async def candidate(self, bundle: NamespaceBundle) -> Candidate | None: ...


class RendezvousPlacement:
    """The registered broker with the highest rendezvous score (no load information)."""

    def __init__(self, registry: BrokerRegistry) -> None:
        self._registry = registry

    async def candidate(self, bundle: NamespaceBundle) -> Candidate | None:
        brokers = await self._registry.brokers()
        if not brokers:
            return None
        return Candidate(max(brokers, key=lambda b: rendezvous_score(bundle, b.broker_id)))


class BundleOwnership:
    """The bundles this broker owns, taken and checked through the metadata store."""

    def __init__(
        self,
        store: MetadataStore,
        registry: BrokerRegistry,
        bundles_of: BundlesOf,
        *,
        on_lost: LostListener,
        on_session_lost: Callable[[], None],
        placement: Placement | None = None,
        probe: OwnerProbe | None = None,
        dead_owner_wait_s: float = 0.0,
    ) -> None:
        """``probe`` and ``dead_owner_wait_s`` (ADR 0067): a lookup naming another owner that
        does not accept connections (or this broker's own previous incarnation) waits up to
        ``dead_owner_wait_s`` (about the metadata session timeout) for the ownership to change;
        without a probe, lookups answer with the recorded owner at once."""
        self._store = store
        self._probe = probe
        self.dead_owner_wait_s = dead_owner_wait_s
        #: Bundle -> the wait for its dead owner's node to go, shared by concurrent lookups.
        self._dead_waits: dict[NamespaceBundle, asyncio.Future[OwnerData | None]] = {}
        #: Ownership node path -> futures resolved by the next notification about that node.
        self._node_waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._registry = registry
        #: Who takes unowned bundles (the load manager sets its own).
        self.placement: Placement = placement or RendezvousPlacement(registry)
        #: Called with each bundle this broker takes.
        self.on_acquired: Callable[[NamespaceBundle], None] | None = None
        #: Bundles being unloaded (their node is ``disabled``): not served any more.
        self._unloading: set[NamespaceBundle] = set()
        #: Set once the broker hands its bundles over to stop: it takes no new one.
        self._stopping = False
        self._me: OwnerData | None = None
        self._bundles_of = bundles_of
        self._on_lost = on_lost
        self._on_session_lost = on_session_lost
        #: Owned bundles -> version of the ownership node this broker created.
        self._owned: dict[NamespaceBundle, int] = {}
        #: Ownership nodes this broker deleted itself (:meth:`release`) whose DELETED notification
        #: has not arrived yet: that notification is about the released node, not about one this
        #: broker may have taken again meanwhile.
        self._released: dict[str, int] = {}
        self._session_lost = False
        self._unsubscribe = [
            store.register_listener(self._on_notification),
            store.register_session_listener(self._on_session),
        ]

    @property
    def me(self) -> OwnerData:
        """How clients reach this broker; :class:`ServiceNotReady` until :meth:`announce`."""
        if self._me is None:
            raise ServiceNotReady("the broker is starting: it owns no bundle yet")
        return self._me

    def announce(self, me: OwnerData) -> None:
        """Start taking bundles, as ``me`` (the broker's real URLs, once its ports are bound)."""
        self._me = me

    @property
    def owned(self) -> list[NamespaceBundle]:
        """The bundles this broker owns now, in order."""
        return sorted(self._owned)

    async def bundle_of(self, topic: TopicName) -> NamespaceBundle:
        return (await self._bundles_of(topic)).find(topic)

    async def owner(self, bundle: NamespaceBundle) -> OwnerData | None:
        """The bundle's owner as the store says, or ``None``."""
        got = await self._store.get(ownership_path(bundle))
        return None if got is None else OwnerData.decode(got[0])

    def owns(self, bundle: NamespaceBundle) -> bool:
        return not self._session_lost and bundle in self._owned and bundle not in self._unloading

    def holds(self, bundle: NamespaceBundle) -> bool:
        """This broker holds the bundle's ownership node: it owns the bundle or is unloading it
        (no other broker can serve it meanwhile)."""
        return not self._session_lost and bundle in self._owned

    def stop_acquiring(self) -> None:
        """Take no new bundle from now on (the broker is handing its bundles over to stop)."""
        self._stopping = True

    async def try_acquire(self, bundle: NamespaceBundle) -> OwnerData:
        """Take the bundle if nobody owns it; returns its owner (this broker or the winner)."""
        me = self.me
        if self.owns(bundle):
            return me
        if self._session_lost:
            raise ServiceNotReady("this broker lost its metadata session and serves nothing")
        if self._stopping:
            raise ServiceNotReady("this broker is shutting down and takes no new bundle")
        path = ownership_path(bundle)
        try:
            stat = await self._store.put(path, me.encode(), -1, ephemeral=True)
        except BadVersion:
            owner = await self.owner(bundle)
            if owner is None:  # released between our put and our read: try once more
                return await self.try_acquire(bundle)
            return owner
        self._owned[bundle] = stat.version
        log.info("took ownership of bundle %s", bundle)
        if self.on_acquired is not None:
            self.on_acquired(bundle)
        return me

    async def check_serving(self, topic: TopicName) -> NamespaceBundle:
        """Make sure this broker may serve ``topic`` (taking its bundle if nobody owns it).

        Raises:
            NotOwner: another broker owns the bundle.
        """
        bundle = await self.bundle_of(topic)
        owner = await self.try_acquire(bundle)
        if owner.disabled and owner.native_url != self.me.native_url:
            owner = await self._await_release(bundle, owner)
        if self.owns(bundle) and await self.bundle_of(topic) != bundle:
            # Split while we took it: the range is gone; give the stale lock back.
            await self.release(bundle)
            raise NotOwner(f"namespace bundle {bundle} of {topic} was split; look it up again")
        if not self.owns(bundle):
            # Owned by another session (maybe one under this broker's own address: a previous
            # incarnation whose session has not ended yet).
            raise NotOwner(
                f"namespace bundle {bundle} of {topic} is served by {owner.native_url}, not by "
                f"this broker ({self.me.native_url}); look the topic up again"
            )
        return bundle

    async def lookup(
        self, topic: TopicName, *, authoritative: bool, listener: str | None = None
    ) -> LookupAnswer:
        """Where ``topic`` is served (see the module docstring); another broker is named by its
        ``listener`` URL when the lookup names one (Pulsar's ``advertisedListeners``)."""
        me = self.me
        bundle = await self.bundle_of(topic)
        owner = await self.owner(bundle)
        if owner is not None and not owner.disabled:
            owner = await self._unless_dead(bundle, owner)
        moving = owner is not None and owner.disabled
        if (owner is None or moving) and not authoritative:
            candidate = await self.placement.candidate(bundle)
            if candidate is not None and candidate.broker.service_url != me.native_url:
                return LookupAnswer(
                    _url(candidate.broker.service_url, candidate.broker.listeners, listener),
                    candidate.broker.web_service_url or "",
                    redirect=True,
                    authoritative=candidate.authoritative,
                    local=False,
                    http_url_tls=candidate.broker.web_service_url_tls or "",
                )
        if owner is not None and moving and owner.native_url != me.native_url:
            # Its owner is handing it over, and this broker is the next one: the client's
            # producer/consumer waits here for the release (check_serving).
            return LookupAnswer(
                me.native_url, me.http_url, False, True, local=True, http_url_tls=me.http_url_tls
            )
        if owner is None:
            owner = await self.try_acquire(bundle)
        local = owner == me and self.owns(bundle)
        url = owner.native_url if local else _url(owner.native_url, owner.listeners, listener)
        return LookupAnswer(url, owner.http_url, False, True, local, owner.http_url_tls)

    async def _unless_dead(self, bundle: NamespaceBundle, owner: OwnerData) -> OwnerData | None:
        """``owner``, or - when it is dead (a previous incarnation of this broker, or another
        broker refusing connections) - the bundle's owner once its node changed or
        :attr:`dead_owner_wait_s` passed (ADR 0067)."""
        if self._probe is None or self.dead_owner_wait_s <= 0:
            return owner
        if owner.native_url == self.me.native_url:
            if self.holds(bundle):
                return owner
        elif await self._probe.reachable(owner.native_url):
            return owner
        waiting = self._dead_waits.get(bundle)
        if waiting is None:
            log.info(
                "bundle %s: its owner %s is gone; lookups wait up to %.1fs for its session to end",
                bundle,
                owner.native_url,
                self.dead_owner_wait_s,
            )
            waiting = asyncio.ensure_future(self._await_owner_change(bundle, owner))
            self._dead_waits[bundle] = waiting
            waiting.add_done_callback(lambda _: self._dead_waits.pop(bundle, None))
        return await asyncio.shield(waiting)

    async def _await_owner_change(
        self, bundle: NamespaceBundle, owner: OwnerData
    ) -> OwnerData | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.dead_owner_wait_s
        current: OwnerData | None = owner
        # Ends too when the node turns out to be this broker's own (taken by a concurrent
        # lookup whose write had not returned yet when this one read it).
        while current == owner and not self.holds(bundle) and loop.time() < deadline:
            current = await self._next_owner(bundle, deadline, lambda now: now == owner)
        return current

    async def _await_release(self, bundle: NamespaceBundle, owner: OwnerData) -> OwnerData:
        """Wait (at most :data:`UNLOAD_WAIT_S`) for an unloading owner to delete its node, then
        take the bundle; returns the owner then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + UNLOAD_WAIT_S
        while owner.disabled and loop.time() < deadline:
            await self._next_owner(bundle, deadline, lambda now: now is not None and now.disabled)
            owner = await self.try_acquire(bundle)
        return owner

    async def _next_owner(
        self,
        bundle: NamespaceBundle,
        deadline: float,
        unchanged: Callable[[OwnerData | None], bool],
    ) -> OwnerData | None:
        """The bundle's owner: at once when it no longer satisfies ``unchanged``, else after its
        ownership node next changes (a store notification), or as read again after
        :data:`_NODE_RECHECK_S` or at ``deadline``, whichever comes first. The waiter is
        registered before the node is read, so a change in between is not lost."""
        loop = asyncio.get_running_loop()
        path = ownership_path(bundle)
        changed: asyncio.Future[None] = loop.create_future()
        self._node_waiters.setdefault(path, []).append(changed)
        try:
            before = await self.owner(bundle)
            if not unchanged(before):
                return before
            timeout = min(_NODE_RECHECK_S, max(0.0, deadline - loop.time()))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.shield(changed)
            return before if not changed.done() else await self.owner(bundle)
        finally:
            waiters = self._node_waiters.get(path)
            if waiters is not None and changed in waiters:
                waiters.remove(changed)
                if not waiters:
                    del self._node_waiters[path]

    async def begin_unload(self, bundle: NamespaceBundle) -> bool:
        """Stop serving ``bundle`` and mark its node ``disabled`` (lookups then send clients to
        the next owner); ``False`` when this broker does not own it."""
        version = self._owned.get(bundle)
        if version is None or self._session_lost:
            return False
        self._unloading.add(bundle)
        disabled = replace(self.me, disabled=True)
        try:
            stat = await self._store.put(ownership_path(bundle), disabled.encode(), version)
        except (BadVersion, NodeNotFound):
            self._unloading.discard(bundle)
            return False
        if bundle in self._owned:
            self._owned[bundle] = stat.version
        return True

    async def release(self, bundle: NamespaceBundle) -> None:
        """Give ``bundle`` up: delete its ownership node (the end of an unload)."""
        version = self._owned.pop(bundle, None)
        self._unloading.discard(bundle)
        if version is not None and not self._session_lost:
            path = ownership_path(bundle)
            self._released[path] = self._released.get(path, 0) + 1
            try:
                await self._store.delete(path, version)
            except (NodeNotFound, BadVersion):
                self._forget_release(path)  # not ours to delete: no notification of ours
            log.info("released bundle %s", bundle)

    def _forget_release(self, path: str) -> bool:
        """Consume one pending release of ``path``; ``False`` when there was none."""
        pending = self._released.get(path, 0)
        if pending == 0:
            return False
        if pending == 1:
            del self._released[path]
        else:
            self._released[path] = pending - 1
        return True

    async def acquire_new(self, bundle: NamespaceBundle) -> bool:
        """Take ``bundle`` (a split's child) if nobody holds its node; ``True`` when taken."""
        try:
            stat = await self._store.put(
                ownership_path(bundle), self.me.encode(), -1, ephemeral=True
            )
        except BadVersion:
            return False
        self._owned[bundle] = stat.version
        return True

    async def release_all(self) -> None:
        """Give every bundle up (a clean stop). Idempotent."""
        owned, self._owned = self._owned, {}
        for bundle, version in owned.items():
            with contextlib.suppress(NodeNotFound, BadVersion):
                await self._store.delete(ownership_path(bundle), version)

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _on_notification(self, event: Notification) -> None:
        if not event.path.startswith(OWNERSHIP_ROOT + "/"):
            return
        for waiter in self._node_waiters.pop(event.path, ()):
            if not waiter.done():
                waiter.set_result(None)
        if event.type is not NotificationType.DELETED:
            return
        if self._forget_release(event.path) or not self._owned:
            return  # the node this broker released, even if it took the bundle again since
        for bundle in list(self._owned):
            if ownership_path(bundle) == event.path:
                # Our node is gone (deleted by an operator, or the session behind it ended).
                del self._owned[bundle]
                self._unloading.discard(bundle)
                log.warning("lost ownership of bundle %s", bundle)
                self._on_lost(bundle)

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.RECONNECTED:
            self._released.clear()  # notifications of the time apart are not replayed
            return
        if event is not SessionEvent.SESSION_LOST or self._session_lost:
            return
        self._session_lost = True
        lost, self._owned = list(self._owned), {}
        log.error(
            "metadata session lost: every bundle of this broker is gone (%d owned)", len(lost)
        )
        for bundle in lost:
            self._on_lost(bundle)
        self._on_session_lost()


__all__ = [
    "DEAD_OWNER_MARGIN_S",
    "OWNERSHIP_ROOT",
    "UNLOAD_WAIT_S",
    "AssignedBroker",
    "BundleOwnership",
    "Candidate",
    "LookupAnswer",
    "NotOwner",
    "OwnerData",
    "Placement",
    "RendezvousPlacement",
    "client_web_url",
    "ownership_path",
    "rendezvous_score",
]
