"""The broker registry: which brokers are alive, where to reach them, and which one leads.

Every broker (``braid broker``, and ``braid standalone`` as a cluster of one) announces itself in
an **ephemeral** node ``/loadbalance/brokers/{host:port}`` (Pulsar's path; ``host:port`` of its
broker service URL) holding ``{"pulsarServiceUrl", "webServiceUrl", "brokerId", "cluster"}`` (and
``pulsarServiceUrlTls``/``webServiceUrlTls`` when it has TLS ports, ``internalUrl``): it
exists exactly as long as the broker's metadata session, so a SIGKILLed broker leaves the list
when its session expires. The node is created with compare-and-swap through the
:class:`~braid.metadata.lock.Lock` recipe: a broker restarted on the address of a dead
incarnation waits (bounded) for that session's node to go instead of writing into a node that
would vanish with the old session.

The **leader broker** (Pulsar's ``/loadbalance/leader``, value ``{"brokerId", "serviceUrl"}``
with the leader's web service URL, as ``/admin/v2/brokers/leaderBroker`` answers) is elected
among the registered brokers through :class:`~braid.metadata.election.LeaderElection`. This slice
gives the leader the load manager's duties (:mod:`braid.broker.load_manager`): placing unowned
bundles, shedding and splitting. Each broker's node also carries its load report
(:meth:`BrokerRegistry.publish_load`).

This module is the one registry: the scalable-topic layer finds other brokers' admin URLs here.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from braid.core.errors import IllegalStateError
from braid.metadata.api import MetadataStore, Notification, SessionEvent
from braid.metadata.election import LeaderElection, LeaderElectionState, read_leader
from braid.metadata.lock import Lock

log = logging.getLogger(__name__)

#: Root of the broker registry (one ephemeral child per live broker).
BROKERS_ROOT = "/loadbalance/brokers"
#: The leader broker's election node.
LEADER_PATH = "/loadbalance/leader"


class BrokerAddressInUse(IllegalStateError):
    """Another live broker is registered under this broker's address."""


#: ``advertisedListeners`` of a broker: (listener name, ``pulsar://`` URL, ``pulsar+ssl://`` URL).
Listeners = tuple[tuple[str, str, str | None], ...]


def encode_listeners(listeners: Listeners) -> dict[str, dict[str, str | None]]:
    """Pulsar's ``advertisedListeners``: name -> ``{brokerServiceUrl, brokerServiceUrlTls}``."""
    return {n: {"brokerServiceUrl": u, "brokerServiceUrlTls": t} for n, u, t in listeners}


def decode_listeners(doc: object) -> Listeners:
    """The listeners in a node's ``advertisedListeners`` (unreadable entries skipped)."""
    if not isinstance(doc, dict):
        return ()
    found: list[tuple[str, str, str | None]] = []
    for name, entry in doc.items():
        if isinstance(entry, dict) and isinstance(entry.get("brokerServiceUrl"), str):
            tls = entry.get("brokerServiceUrlTls")
            found.append(
                (str(name), entry["brokerServiceUrl"], tls if isinstance(tls, str) else None)
            )
    return tuple(found)


def listener_url(listeners: Listeners, name: str, tls: bool = False) -> str | None:
    """The ``pulsar://`` (or ``pulsar+ssl://``) URL of listener ``name``, if the broker has it."""
    for n, url, tls_url in listeners:
        if n == name:
            return tls_url if tls else url
    return None


def broker_id(service_url: str) -> str:
    """``host:port`` of a ``pulsar://host:port`` URL: the broker's registry name."""
    parts = urlsplit(service_url)
    return parts.netloc or service_url


@dataclass(frozen=True)
class BrokerInfo:
    """One registered broker: the JSON value of its registry node."""

    broker_id: str
    service_url: str
    web_service_url: str | None
    cluster: str = ""
    #: The ``pulsar+ssl://`` URL when the broker has a TLS listener (Pulsar's
    #: ``pulsarServiceUrlTls``).
    service_url_tls: str | None = None
    #: ``advertisedListeners``: what a lookup naming a listener is sent to.
    listeners: Listeners = ()
    #: ``braid broker``'s internal listener (the Segments API brokers call, ADR 0051).
    internal_url: str | None = None
    #: The ``https://`` admin URL when the broker has an HTTPS admin port (Pulsar's
    #: ``webServiceUrlTls``): what brokers with TLS configured call (ADR 0066).
    web_service_url_tls: str | None = None

    def encode(self) -> bytes:
        doc = {
            "brokerId": self.broker_id,
            "pulsarServiceUrl": self.service_url,
            "pulsarServiceUrlTls": self.service_url_tls,
            "webServiceUrl": self.web_service_url,
            "webServiceUrlTls": self.web_service_url_tls,
            "cluster": self.cluster,
            "advertisedListeners": encode_listeners(self.listeners),
        }
        if self.internal_url:
            doc["internalUrl"] = self.internal_url
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, name: str, raw: bytes) -> BrokerInfo | None:
        """The entry in ``raw`` (``None`` when unreadable: the caller skips it)."""
        try:
            doc = json.loads(raw)
            web = doc.get("webServiceUrl")
            web_tls = doc.get("webServiceUrlTls")
            tls = doc.get("pulsarServiceUrlTls")
            internal = doc.get("internalUrl")
            return cls(
                broker_id=str(doc.get("brokerId") or name),
                service_url=str(doc["pulsarServiceUrl"]),
                web_service_url=web if isinstance(web, str) and web else None,
                cluster=str(doc.get("cluster") or ""),
                service_url_tls=tls if isinstance(tls, str) and tls else None,
                listeners=decode_listeners(doc.get("advertisedListeners")),
                internal_url=internal if isinstance(internal, str) and internal else None,
                web_service_url_tls=web_tls if isinstance(web_tls, str) and web_tls else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class BrokerRegistry:
    """This broker's entry in ``/loadbalance/brokers`` and lookups of the others'."""

    def __init__(self, store: MetadataStore, *, cluster: str = "") -> None:
        self._store = store
        self._cluster = cluster
        self._lock: Lock | None = None
        self._info: BrokerInfo | None = None
        self._election: LeaderElection | None = None
        self._internal_url: str | None = None
        # service_url_tls answers by broker id, kept until a broker node changes (see there).
        self._tls_urls: dict[str, str | None] = {}
        self._tls_generation = 0
        self._unwatch: list[Callable[[], None]] = []

    def announce_internal_url(self, url: str) -> None:
        """The internal listener to register with (call before :meth:`register`)."""
        self._internal_url = url

    @property
    def me(self) -> BrokerInfo | None:
        """This broker's entry, once registered."""
        return self._info

    async def register(
        self,
        service_url: str,
        web_service_url: str | None,
        service_url_tls: str | None = None,
        *,
        wait_s: float = 0.0,
        listeners: Listeners = (),
        web_service_url_tls: str | None = None,
    ) -> None:
        """Announce this broker (ephemeral: it disappears with the broker's session).

        Raises:
            BrokerAddressInUse: another session holds the address for longer than ``wait_s``.
        """
        info = BrokerInfo(
            broker_id(service_url),
            service_url,
            web_service_url,
            self._cluster,
            service_url_tls,
            listeners=listeners,
            internal_url=self._internal_url,
            web_service_url_tls=web_service_url_tls,
        )
        lock = Lock(self._store, f"{BROKERS_ROOT}/{info.broker_id}", info.encode())
        if not await lock.try_acquire():
            try:
                async with asyncio.timeout(wait_s):
                    await lock.acquire()
            except TimeoutError:
                await lock.close()
                raise BrokerAddressInUse(
                    f"broker address {info.broker_id} is registered by another live broker "
                    f"(node {BROKERS_ROOT}/{info.broker_id})"
                ) from None
        self._lock, self._info = lock, info

    async def publish_load(self, report: dict[str, Any]) -> None:
        """Write this broker's load report (:mod:`braid.broker.load_data`) into its registry
        node, beside the registry fields (no-op before :meth:`register`)."""
        if self._lock is None or self._info is None or not self._lock.held:
            return
        doc = {**report, **json.loads(self._info.encode())}
        await self._lock.update(json.dumps(doc, separators=(",", ":")).encode())

    async def nodes(self) -> dict[str, tuple[BrokerInfo, bytes]]:
        """Every registered broker with its node's raw value (registry fields + load report)."""
        found: dict[str, tuple[BrokerInfo, bytes]] = {}
        for name in await self._store.children(BROKERS_ROOT):
            got = await self._store.get(f"{BROKERS_ROOT}/{name}")
            info = None if got is None else BrokerInfo.decode(name, got[0])
            if got is not None and info is not None:
                found[info.broker_id] = (info, got[0])
        return found

    async def elect_leader(self) -> None:
        """Stand for leader broker (after :meth:`register`)."""
        if self._info is None:
            raise IllegalStateError("register the broker before standing for leader")
        doc = {"brokerId": self._info.broker_id, "serviceUrl": self._info.web_service_url}
        self._election = LeaderElection(
            self._store, LEADER_PATH, json.dumps(doc, separators=(",", ":")).encode()
        )
        await self._election.start()

    @property
    def is_leader(self) -> bool:
        return self._election is not None and self._election.state is LeaderElectionState.LEADING

    async def leader(self) -> dict[str, str] | None:
        """The leader broker (``{"brokerId", "serviceUrl"}``), or ``None`` while there is none."""
        raw = await read_leader(self._store, LEADER_PATH)
        if raw is None:
            return None
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        return {k: str(v) for k, v in doc.items()} if isinstance(doc, dict) else None

    async def unregister(self) -> None:
        """Resign leadership and remove this broker's entry. Idempotent."""
        unwatch, self._unwatch = self._unwatch, []
        for stop in unwatch:
            stop()
        election, self._election = self._election, None
        if election is not None:
            await election.close()
        lock, self._lock = self._lock, None
        if lock is not None:
            await lock.close()

    async def brokers(self) -> list[BrokerInfo]:
        """Every registered broker, by id (unreadable entries skipped)."""
        found: list[BrokerInfo] = []
        for name in await self._store.children(BROKERS_ROOT):
            info = await self.get(name)
            if info is not None:
                found.append(info)
        return found

    async def get(self, name: str) -> BrokerInfo | None:
        """The broker registered as ``host:port``, or ``None``."""
        got = await self._store.get(f"{BROKERS_ROOT}/{name}")
        return None if got is None else BrokerInfo.decode(name, got[0])

    async def service_url_tls(self, service_url: str) -> str | None:
        """The ``pulsar+ssl://`` URL of the broker registered as ``service_url`` (``None``: it
        has no TLS listener, or is not registered).

        Answered from memory after the first read of each broker, until a broker node changes
        (a store notification) or the metadata session is interrupted: a consumer's assignment
        names the broker of every segment it lists (ADR 0073), and a walk through a long DAG
        would otherwise read the registry once per segment.
        """
        name = broker_id(service_url)
        if name in self._tls_urls:
            return self._tls_urls[name]
        if not self._unwatch:
            self._unwatch = [
                self._store.register_listener(self._broker_node_changed),
                self._store.register_session_listener(self._session_changed),
            ]
        generation = self._tls_generation
        info = await self.get(name)
        url = None if info is None else info.service_url_tls
        if generation == self._tls_generation:  # no change arrived while reading
            self._tls_urls[name] = url
        return url

    def _broker_node_changed(self, event: Notification) -> None:
        if event.path == BROKERS_ROOT or event.path.startswith(f"{BROKERS_ROOT}/"):
            self._forget_tls_urls()

    def _session_changed(self, event: SessionEvent) -> None:
        del event  # any interruption may have lost notifications
        self._forget_tls_urls()

    def _forget_tls_urls(self) -> None:
        self._tls_generation += 1
        self._tls_urls.clear()


__all__ = [
    "BROKERS_ROOT",
    "LEADER_PATH",
    "BrokerAddressInUse",
    "BrokerInfo",
    "BrokerRegistry",
    "Listeners",
    "broker_id",
    "decode_listeners",
    "encode_listeners",
    "listener_url",
]
