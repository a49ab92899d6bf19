"""The broker's DAG-watch and namespace-watch sessions (commands 70-72 and 76-78), and the one
metadata listener of the scalable-topic layer.

One :class:`WatchHub` per broker owns

* every open :class:`~braid.scalable.dag_watch.DagWatchSession` and
  :class:`~braid.scalable.dag_watch.NamespaceWatchSession`, by topic or namespace and by
  connection, and ends a connection's sessions when it closes;
* the listener on the metadata store: a change of a topic's layout node refreshes the topic's
  local follower controller (a leader writes the layout itself), pushes the new DAG to the topic's
  watchers and republishes its namespace's watches; a change of a namespace's children republishes
  the namespace's watches; a change of a topic's controller election node, or of a bundle
  ownership node of its namespace (``/namespace/...``: a segment may have a new owner), re-sends
  the topic's DAG under the same epoch when its placement changed (ADR 0051);
* the refresh scheduling: at most one reload in flight per topic, plus one more when notifications
  arrived meanwhile (coalesced, so a burst of changes costs two reads, and the last change is never
  missed).

What it needs of the registry of controllers (the service) is the narrow :class:`TopicControllers`.
Sessions only push epochs newer than the ones they sent (:mod:`braid.scalable.dag_watch`), so a
refresh that raced a newer one never sends a client backwards.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Protocol

from braid.broker.ownership import OWNERSHIP_ROOT
from braid.core.errors import InvalidInputError
from braid.core.names import InvalidTopicName, SegmentTopicName, TopicDomain, TopicName
from braid.metadata.api import MetadataStore, Notification, NotificationType
from braid.metadata.election import read_leader
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.background import BackgroundTasks
from braid.scalable.controller import ScalableTopicController
from braid.scalable.dag_watch import (
    DagWatchSession,
    DagWatchTransport,
    NamespaceWatchSession,
    layout_to_dag,
    legacy_dag,
)
from braid.scalable.resources import (
    TOPICS_ROOT,
    ScalableTopicNotFound,
    ScalableTopicResources,
    decode_name,
)
from braid.scalable.segment_brokers import SegmentBrokers

log = logging.getLogger(__name__)


class TopicControllers(Protocol):
    """What the watch hub may ask of the registry of controllers."""

    def check_enabled(self) -> None:
        """Raise ``ScalableTopicsDisabled`` when the layer is switched off."""
        ...

    def local_controller(self, topic: TopicName) -> ScalableTopicController | None:
        """This broker's controller of ``topic`` if it runs one (no start)."""
        ...

    async def watched_controller(self, topic: TopicName) -> ScalableTopicController:
        """This broker's controller of ``topic``, ready; the topic is created first when it does
        not exist and its namespace allows auto-creation.

        Raises:
            ScalableTopicNotFound: no such topic (and no auto-creation), or no such namespace.
        """
        ...

    async def namespace_exists(self, tenant: str, namespace: str) -> bool: ...

    async def migrated_target(self, source: TopicName) -> TopicName | None:
        """The scalable topic a ``persistent://`` topic was migrated to, once published
        (ADR 0063); ``None`` otherwise."""
        ...


class WatchHub:
    """DAG-watch and namespace-watch sessions, and the metadata listener, of one broker."""

    def __init__(
        self,
        *,
        store: MetadataStore,
        resources: ScalableTopicResources,
        brokers: SegmentBrokers,
        broker_url: str,
        topics: TopicControllers,
    ) -> None:
        self._store = store
        self._resources = resources
        self._brokers = brokers
        self._broker_url = broker_url
        self._topics = topics
        self._watches: dict[str, set[DagWatchSession]] = defaultdict(set)
        self._sessions_by_transport: dict[int, dict[int, DagWatchSession]] = defaultdict(dict)
        self._ns_watches: dict[tuple[str, str], set[NamespaceWatchSession]] = defaultdict(set)
        self._ns_by_transport: dict[int, dict[int, NamespaceWatchSession]] = defaultdict(dict)
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._background = BackgroundTasks()
        self._unregister_listener: Callable[[], None] | None = None
        self._closed = False

    def start(self) -> None:
        """Listen to the metadata store."""
        self._unregister_listener = self._store.register_listener(self._on_notification)

    def close(self) -> None:
        """Stop listening, cancel pending refreshes and end every session. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._unregister_listener is not None:
            self._unregister_listener()
        for task in list(self._refreshing.values()):
            task.cancel()
        self._background.cancel()
        for sessions in self._watches.values():
            for session in sessions:
                session.close()
        self._watches.clear()

    # -- DAG watch sessions (commands 70-72) ---------------------------------------------------

    async def open_dag_watch(
        self, session_id: int, name: str, transport: DagWatchTransport
    ) -> DagWatchSession:
        """Resolve ``name`` and send the first update; the session then receives every layout
        change. A ``persistent://`` name gets its synthetic one-segment DAG (no pushes), or, once
        it was migrated to a scalable topic (ADR 0063), that topic's DAG and name: Braid's client
        given the old name follows the migration.

        Raises:
            InvalidTopicName, ScalableTopicNotFound (auto-creation not allowed), NotFoundError.
        """
        self._topics.check_enabled()
        topic = TopicName.parse(name, default_domain=TopicDomain.TOPIC)
        if topic.domain is TopicDomain.SEGMENT:
            raise InvalidTopicName(f"{name}: segment topics are not looked up as scalable topics")
        if topic.domain is TopicDomain.NON_PERSISTENT:
            raise InvalidTopicName(
                f"{name}: non-persistent topics are served to Pulsar clients only, not through "
                "the scalable-topic lookup"
            )
        # A session id this connection reuses replaces its session (never two under one id:
        # the first would go on receiving pushes, and outlive the connection).
        self.close_dag_watch(transport, session_id)
        if topic.domain is TopicDomain.PERSISTENT:
            target = await self._topics.migrated_target(topic)
            if target is not None:
                return await self._open_scalable(session_id, target, transport)
            session = DagWatchSession(session_id, topic, str(topic), transport)
            self._sessions_by_transport[id(transport)][session_id] = session
            url = await self._legacy_broker_url(topic)
            session.push(legacy_dag(str(topic), url, broker_url_tls=await self._tls_url(url)))
            return session
        return await self._open_scalable(session_id, topic, transport)

    async def _open_scalable(
        self, session_id: int, topic: TopicName, transport: DagWatchTransport
    ) -> DagWatchSession:
        await self._topics.watched_controller(topic)
        session = DagWatchSession(session_id, topic, str(topic), transport)
        self._watches[str(topic)].add(session)
        self._sessions_by_transport[id(transport)][session_id] = session
        session.push(await self._dag_of(topic))
        return session

    async def _legacy_broker_url(self, topic: TopicName) -> str:
        # A persistent:// topic is served where its lookup says; one broker today.
        return self._broker_url

    async def _dag_of(self, topic: TopicName) -> pb.ScalableTopicDAG:
        layout = (await self._resources.require_layout(topic)).layout
        active = {
            segment.segment_id: SegmentTopicName.of(topic, segment.hash_range, segment.segment_id)
            for segment in layout.active_segments
        }
        brokers = await self._brokers.of(active)
        value = await read_leader(self._store, self._resources.controller_path(topic))
        leader = None if value is None else value.decode()
        return layout_to_dag(
            layout,
            {sid: broker.url for sid, broker in brokers.items()},
            leader,
            segment_brokers_tls={sid: b.url_tls for sid, b in brokers.items() if b.url_tls},
            controller_url_tls=await self._tls_url(leader) if leader else None,
        )

    async def _tls_url(self, url: str) -> str | None:
        """The ``pulsar+ssl://`` URL of the broker at ``url`` (the broker registry's)."""
        return await self._brokers.tls_url(url)

    def close_dag_watch(self, transport: DagWatchTransport, session_id: int) -> None:
        session = self._sessions_by_transport.get(id(transport), {}).pop(session_id, None)
        if session is None:
            return
        session.close()
        watchers = self._watches.get(str(session.topic))
        if watchers is not None:
            watchers.discard(session)
            if not watchers:
                del self._watches[str(session.topic)]

    # -- namespace watches (commands 76-78) ----------------------------------------------------

    async def open_namespace_watch(
        self,
        watch_id: int,
        namespace: str,
        property_filters: Mapping[str, str],
        current_hash: str | None,
        transport: DagWatchTransport,
    ) -> NamespaceWatchSession:
        """Send the namespace's matching topics (unless ``current_hash`` shows the client has
        them); the session then receives every change of the set.

        Raises:
            InvalidInputError (not ``tenant/namespace``), ScalableTopicNotFound (no namespace).
        """
        self._topics.check_enabled()
        parts = namespace.split("/")
        if len(parts) != 2 or not all(parts):
            raise InvalidInputError(f"namespace {namespace!r} must be 'tenant/namespace'")
        tenant, ns = parts
        if not await self._topics.namespace_exists(tenant, ns):
            raise ScalableTopicNotFound(f"namespace {namespace} does not exist")
        self.close_namespace_watch(transport, watch_id)  # a reused id replaces its session
        session = NamespaceWatchSession(watch_id, tenant, ns, property_filters, transport)
        self._ns_watches[(tenant, ns)].add(session)
        self._ns_by_transport[id(transport)][watch_id] = session
        session.publish(await self._matching_topics(session), current_hash)
        return session

    async def _matching_topics(self, session: NamespaceWatchSession) -> set[str]:
        names = set()
        for topic in await self._resources.list_topics(session.tenant, session.namespace):
            if session.property_filters:
                found = await self._resources.get_layout(topic)
                if found is None or not session.matches(found.layout):
                    continue
            names.add(str(topic))
        return names

    def close_namespace_watch(self, transport: DagWatchTransport, watch_id: int) -> None:
        session = self._ns_by_transport.get(id(transport), {}).pop(watch_id, None)
        if session is None:
            return
        session.close()
        key = (session.tenant, session.namespace)
        watchers = self._ns_watches.get(key)
        if watchers is not None:
            watchers.discard(session)
            if not watchers:
                del self._ns_watches[key]

    # -- connections ---------------------------------------------------------------------------

    def on_connection_closed(self, transport: DagWatchTransport) -> None:
        """End every DAG and namespace watch of the connection."""
        for session_id in list(self._sessions_by_transport.get(id(transport), {})):
            self.close_dag_watch(transport, session_id)
        self._sessions_by_transport.pop(id(transport), None)
        for watch_id in list(self._ns_by_transport.get(id(transport), {})):
            self.close_namespace_watch(transport, watch_id)
        self._ns_by_transport.pop(id(transport), None)

    # -- metadata notifications ----------------------------------------------------------------

    def _on_notification(self, notification: Notification) -> None:
        path = notification.path
        if path.startswith(OWNERSHIP_ROOT + "/"):
            self._placement_changed(path)
            return
        if not path.startswith(TOPICS_ROOT + "/"):
            return
        topic = ScalableTopicResources.topic_of_path(path)
        if topic is not None:
            if notification.type in (NotificationType.CREATED, NotificationType.MODIFIED):
                self._schedule_refresh(topic)
            return
        leader_of = ScalableTopicResources.topic_of_path(path.rpartition("/")[0])
        if leader_of is not None and path == ScalableTopicResources.controller_path(leader_of):
            self._schedule_refresh(leader_of)  # the controller leader changed: re-advertise it
        parts = path.split("/")
        if len(parts) == 4 and notification.type is NotificationType.CHILDREN_CHANGED:
            key = (decode_name(parts[2]), decode_name(parts[3]))
            if self._ns_watches.get(key):
                self._background.spawn(self._publish_namespace(key))

    def _placement_changed(self, path: str) -> None:
        """A bundle of a namespace changed hands: its segments may have a new owner, so every
        watched topic of the namespace is re-sent (sessions skip an unchanged DAG)."""
        parts = path.split("/")  # "", "namespace", tenant, namespace, range
        if len(parts) != 5:
            return
        for sessions in list(self._watches.values()):
            if not sessions:
                continue
            topic = next(iter(sessions)).topic
            if topic.tenant == parts[2] and topic.namespace == parts[3]:
                self._schedule_refresh(topic)

    def _schedule_refresh(self, topic: TopicName) -> None:
        """Coalesce notifications: one reload in flight per topic, plus one more if needed."""
        key = str(topic)
        if key in self._refreshing:
            self._dirty.add(key)
            return
        if not self._watches.get(key) and self._topics.local_controller(topic) is None:
            return
        task = asyncio.ensure_future(self._refresh(topic))
        self._refreshing[key] = task

        def done(_: asyncio.Task[None]) -> None:
            self._refreshing.pop(key, None)
            if key in self._dirty and not self._closed:
                self._dirty.discard(key)
                self._schedule_refresh(topic)

        task.add_done_callback(done)

    async def _refresh(self, topic: TopicName) -> None:
        try:
            controller = self._topics.local_controller(topic)
            if controller is not None and not controller.is_leader:
                await controller.refresh_layout()
            sessions = [s for s in self._watches.get(str(topic), ()) if not s.closed]
            if sessions:
                dag = await self._dag_of(topic)
                for session in sessions:
                    session.push(dag)
            for (tenant, ns), watches in list(self._ns_watches.items()):
                if watches and tenant == topic.tenant and ns == topic.namespace:
                    await self._publish_namespace((tenant, ns))
        except ScalableTopicNotFound:
            pass
        except Exception:
            log.exception("refreshing the watchers of %s failed", topic)

    async def _publish_namespace(self, key: tuple[str, str]) -> None:
        for session in list(self._ns_watches.get(key, ())):
            session.publish(await self._matching_topics(session))


__all__ = ["TopicControllers", "WatchHub"]
