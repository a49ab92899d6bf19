"""PIP-468 ``ScalableTopicService``: the per-broker entry point of the scalable-topic layer.

One per broker. It

* creates and deletes scalable topics (metadata first, then the segment topics; a crash in
  between is healed by the controller's take-over),
* holds the controllers of the topics this broker touches, keyed by topic, created on demand and
  released on delete and shutdown; it delegates split, merge, subscription and consumer
  operations to them and forwards to the leader when the local controller is a follower
  (:mod:`braid.scalable.forwarding`),
* serves DAG-watch and namespace-watch sessions from the metadata store
  (:mod:`braid.scalable.dag_watch`): one metadata listener for the whole broker, dispatching by
  path to the sessions and controllers of the topic that changed,
* turns the broker's "subscription drained a sealed segment" events into rebalances,
* resumes, at start, any split or merge a crashed leader left recorded,
* runs PIP-483's auto split/merge (:mod:`braid.scalable.autoscale_service`): the broker's load
  reporter and an auto-scaler per controller.

Client-facing protocol handlers (commands 70-82) live in :mod:`braid.scalable.handlers`; the admin
REST API in :mod:`braid.admin.scalable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from braid.broker.service import managed_ledger_name
from braid.clock import Clock
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.errors import IllegalStateError, InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_from_metadata
from braid.core.names import (
    MAX_SEGMENT_ID,
    InvalidTopicName,
    SegmentTopicName,
    TopicDomain,
    TopicName,
)
from braid.core.ranges import HashRange
from braid.ledger.names import MAX_NAME_LENGTH
from braid.metadata.api import MetadataStore, Notification, NotificationType
from braid.metadata.election import read_leader
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.autoscale_policies import AutoScalePolicies
from braid.scalable.autoscale_service import AutoScaleService
from braid.scalable.controller import ScalableTopicController, StepHook
from braid.scalable.coordinator import AssignmentTransport, ConsumerAssignmentView
from braid.scalable.dag_watch import (
    DagWatchSession,
    DagWatchTransport,
    NamespaceWatchSession,
    layout_to_dag,
    legacy_dag,
)
from braid.scalable.errors import NotLeader, ScalableTopicsDisabled
from braid.scalable.forwarding import BrokerRegistry, LeaderForwarder
from braid.scalable.load_reporter import SegmentLoadReporter
from braid.scalable.resources import (
    TOPICS_ROOT,
    ScalableTopicAlreadyExists,
    ScalableTopicNotFound,
    ScalableTopicResources,
    SubscriptionType,
    check_scalable_topic,
    decode_name,
)
from braid.scalable.segments import SegmentAdmin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScalableTopicSettings:
    """The knobs of the scalable-topic layer (``broker.conf`` keys in comments)."""

    enabled: bool = True  # scalableTopicEnabled
    consumer_session_grace_s: float = 60.0  # scalableTopicConsumerSessionGraceSeconds
    gc_interval_s: float = 60.0  # scalableTopicGcIntervalSeconds
    allow_auto_topic_creation: bool = True  # allowAutoTopicCreation (broker default)
    default_retention_minutes: int = 0  # defaultRetentionTimeInMinutes
    max_initial_segments: int = 64  # scalableTopicMaxSegments (PIP-483's cap)
    auto_scale: AutoScalePolicy = field(default_factory=AutoScalePolicy)  # PIP-483's keys


class NamespacePolicySource:
    """What the service needs to know about namespaces (the broker's resources provide it)."""

    async def namespace_exists(self, tenant: str, namespace: str) -> bool:
        raise NotImplementedError

    async def auto_topic_creation_allowed(self, tenant: str, namespace: str) -> bool:
        raise NotImplementedError

    async def retention_minutes(self, tenant: str, namespace: str) -> int | None:
        """The namespace's retention override in minutes, or ``None`` for the broker default."""
        raise NotImplementedError

    async def auto_scale_override(self, tenant: str, namespace: str) -> Mapping[str, Any] | None:
        """The namespace's ``scalableTopicAutoScalePolicy`` document, or ``None``."""
        return None


class ScalableTopicService:
    """Scalable topics on one broker."""

    def __init__(
        self,
        *,
        store: MetadataStore,
        segments: SegmentAdmin,
        namespaces: NamespacePolicySource,
        broker_url: str,
        clock: Clock,
        settings: ScalableTopicSettings | None = None,
        step_hook: StepHook | None = None,
        load_reporter: SegmentLoadReporter | None = None,
    ) -> None:
        self.resources = ScalableTopicResources(store)
        self.settings = settings or ScalableTopicSettings()
        self._store = store
        self._segments = segments
        self._namespaces = namespaces
        self._broker_url = broker_url
        self._clock = clock
        self._step_hook = step_hook
        self.registry = BrokerRegistry(store)
        self._forwarder = LeaderForwarder(self.registry)
        self._controllers: dict[str, ScalableTopicController] = {}
        self._starting: dict[str, asyncio.Task[ScalableTopicController]] = {}
        self._watches: dict[str, set[DagWatchSession]] = defaultdict(set)
        self._sessions_by_transport: dict[int, dict[int, DagWatchSession]] = defaultdict(dict)
        self._ns_watches: dict[tuple[str, str], set[NamespaceWatchSession]] = defaultdict(set)
        self._ns_by_transport: dict[int, dict[int, NamespaceWatchSession]] = defaultdict(dict)
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._unregister_listener: Any = None
        self._closed = False
        self.auto_scale = AutoScaleService(
            store=store,
            resources=self.resources,
            policies=AutoScalePolicies(self.settings.auto_scale, namespaces.auto_scale_override),
            clock=clock,
            reporter=load_reporter,
        )

    @property
    def broker_url(self) -> str:
        return self._broker_url

    @property
    def segments(self) -> SegmentAdmin:
        """The Segments admin seam this service uses (also served over REST)."""
        return self._segments

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, web_service_url: str | None = None) -> None:
        """Register in the broker registry, listen to the store and resume pending operations."""
        await self.registry.register(self._broker_url, web_service_url)
        self._unregister_listener = self._store.register_listener(self._on_notification)
        if self.settings.enabled:
            await self._resume_pending_operations()
            self.auto_scale.start()

    async def _resume_pending_operations(self) -> None:
        """Start the controller of every topic whose last split or merge did not finish."""
        for tenant, namespace in await self.resources.list_namespaces():
            for topic in await self.resources.list_topics(tenant, namespace):
                if await self.resources.get_operation(topic) is None:
                    continue
                log.warning("scalable topic %s has an unfinished split or merge; resuming", topic)
                try:
                    controller = await self.controller(topic)
                    await controller.wait_ready()
                except Exception:
                    log.exception("resuming the operation of %s failed", topic)

    async def close(self) -> None:
        """Release every controller (leaders resign) and end every session. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._unregister_listener is not None:
            self._unregister_listener()
        for task in list(self._refreshing.values()) + list(self._background):
            task.cancel()
        for task in list(self._starting.values()):
            task.cancel()
        await self.auto_scale.close()
        for controller in list(self._controllers.values()):
            with contextlib.suppress(Exception):
                await controller.close()
        self._controllers.clear()
        for sessions in self._watches.values():
            for session in sessions:
                session.close()
        self._watches.clear()
        with contextlib.suppress(Exception):
            await self.registry.unregister()

    def _check_enabled(self) -> None:
        if not self.settings.enabled:
            raise ScalableTopicsDisabled(
                "scalable topics are disabled on this broker (scalableTopicEnabled=false)"
            )

    # -- controllers ---------------------------------------------------------------------------

    async def controller(self, topic: TopicName) -> ScalableTopicController:
        """This broker's controller of ``topic``, started (and, if elected, taken over).

        Raises:
            ScalableTopicNotFound: the topic does not exist.
        """
        self._check_enabled()
        check_scalable_topic(topic)
        key = str(topic)
        existing = self._controllers.get(key)
        if existing is not None:
            return existing
        task = self._starting.get(key)
        if task is None:
            task = asyncio.ensure_future(self._start_controller(topic))
            self._starting[key] = task
            task.add_done_callback(lambda _: self._starting.pop(key, None))
        return await asyncio.shield(task)

    async def _start_controller(self, topic: TopicName) -> ScalableTopicController:
        controller = ScalableTopicController(
            topic,
            store=self._store,
            resources=self.resources,
            segments=self._segments,
            broker_url=self._broker_url,
            clock=self._clock,
            grace_period_s=self.settings.consumer_session_grace_s,
            retention_ms=lambda: self._retention_ms(topic),
            gc_interval_s=self.settings.gc_interval_s,
            step_hook=self._step_hook,
        )
        self.auto_scale.attach(controller)
        try:
            await controller.start()
        except BaseException:
            await controller.close()
            self.auto_scale.detach(topic)
            raise
        if self._closed:
            await controller.close()
            raise NotLeader("the broker is shutting down")
        self._controllers[str(topic)] = controller
        return controller

    async def release_controller(self, topic: TopicName) -> None:
        controller = self._controllers.pop(str(topic), None)
        if controller is not None:
            await controller.close()
            self.auto_scale.detach(topic)

    def local_controller(self, topic: TopicName) -> ScalableTopicController | None:
        return self._controllers.get(str(topic))

    async def _retention_ms(self, topic: TopicName) -> int | None:
        minutes = await self._namespaces.retention_minutes(topic.tenant, topic.namespace)
        if minutes is None:
            minutes = self.settings.default_retention_minutes
        return None if minutes < 0 else minutes * 60_000

    async def _leader(self, topic: TopicName) -> tuple[ScalableTopicController, str | None]:
        """The local controller and, when it is a follower, the leader's URL to forward to."""
        controller = await self.controller(topic)
        if controller.is_leader:
            return controller, None
        leader = await controller.read_leader_url()
        if leader is None or leader == self._broker_url:
            raise NotLeader(f"the controller of {topic} is electing a leader; retry shortly")
        return controller, leader

    # -- topic lifecycle -----------------------------------------------------------------------

    async def create_topic(
        self,
        topic: TopicName,
        num_segments: int = 1,
        properties: Mapping[str, str] | None = None,
    ) -> SegmentLayout:
        """Create a scalable topic with ``num_segments`` equal initial segments.

        Raises:
            ScalableTopicAlreadyExists, NotFoundError (namespace), InvalidInputError.
        """
        self._check_enabled()
        check_scalable_topic(topic)
        check_segment_names_fit(topic)
        limit = self.settings.max_initial_segments
        if isinstance(num_segments, int) and num_segments > limit:
            raise InvalidInputError(
                f"a scalable topic starts with at most {limit} segments "
                f"(scalableTopicMaxSegments), got {num_segments}; it splits by itself as load "
                "grows"
            )
        if not await self._namespaces.namespace_exists(topic.tenant, topic.namespace):
            raise ScalableTopicNotFound(f"namespace {topic.namespace_name} does not exist")
        layout = SegmentLayout.initial(num_segments, self._clock.now_ms(), properties or {})
        await self.resources.create_layout(topic, layout)
        try:
            for segment in layout.active_segments:
                await self._segments.create_segment(
                    SegmentTopicName.of(topic, segment.hash_range, segment.segment_id), ()
                )
        except InvalidInputError:
            # A refusal that no retry can fix: leave nothing behind. (Any other failure is healed
            # by the controller's take-over, which recreates missing active segments.)
            await self._delete_segments(topic, layout)
            await self.resources.delete_topic(topic)
            raise
        log.info("created scalable topic %s with %d segment(s)", topic, num_segments)
        return layout

    async def delete_topic(self, topic: TopicName, *, force: bool = False) -> None:
        """Delete the topic, its segment topics and all its metadata.

        Without ``force`` the delete is refused while a segment has producers or consumers.

        Raises:
            ScalableTopicNotFound, IllegalStateError (in use).
        """
        self._check_enabled()
        layout = (await self.resources.require_layout(topic)).layout
        if not force:
            await self._refuse_if_in_use(topic, layout)
        await self.release_controller(topic)
        self.auto_scale.detach(topic, deleted=True)
        await self._delete_segments(topic, layout)
        await self.resources.delete_topic(topic)
        log.info("deleted scalable topic %s", topic)

    async def _delete_segments(self, topic: TopicName, layout: SegmentLayout) -> None:
        for segment in layout.segments.values():
            name = SegmentTopicName.of(topic, segment.hash_range, segment.segment_id)
            try:
                await self._segments.delete_segment(name)
            except Exception:
                log.exception("deleting segment topic %s failed; continuing", name)

    async def _refuse_if_in_use(self, topic: TopicName, layout: SegmentLayout) -> None:
        for segment in layout.segments.values():
            name = SegmentTopicName.of(topic, segment.hash_range, segment.segment_id)
            stats = await self._segments.stats(name)
            if not stats:
                continue
            subscriptions = stats.get("subscriptions")
            consumers = 0
            if isinstance(subscriptions, Mapping):
                for sub in subscriptions.values():
                    if isinstance(sub, Mapping):
                        listed = sub.get("consumers")
                        consumers += len(listed) if isinstance(listed, list) else 0
            publishers = stats.get("publishers")
            if publishers or consumers:
                raise IllegalStateError(
                    f"scalable topic {topic} is in use (segment {segment.segment_id} has "
                    "connected producers or consumers); delete with force to disconnect them"
                )

    async def get_layout(self, topic: TopicName) -> SegmentLayout:
        return (await self.resources.require_layout(topic)).layout

    async def list_topics(self, tenant: str, namespace: str) -> list[str]:
        return [str(t) for t in await self.resources.list_topics(tenant, namespace)]

    async def set_properties(
        self, topic: TopicName, properties: Mapping[str, str]
    ) -> SegmentLayout:
        updated = await self.resources.update_layout(
            topic, lambda layout: layout.with_properties(properties)
        )
        return updated.layout

    # -- delegated to the leader ---------------------------------------------------------------

    async def split(
        self,
        topic: TopicName,
        segment_id: int,
        split_hash: int | None = None,
        *,
        forwarded: bool = False,
    ) -> SegmentLayout:
        """Split on the leader (forwarding if needed); returns the new layout."""
        controller, leader = await self._leader_or_refuse(topic, forwarded)
        if leader is None:
            return await controller.split(segment_id, split_hash)
        body = {} if split_hash is None else {"splitHash": split_hash}
        doc = await self._forwarder.call(leader, "POST", topic, f"/split/{segment_id}", body)
        return layout_from_metadata(doc)

    async def merge(
        self, topic: TopicName, segment_ids: Sequence[int], *, forwarded: bool = False
    ) -> SegmentLayout:
        """Merge on the leader (forwarding if needed); returns the new layout."""
        controller, leader = await self._leader_or_refuse(topic, forwarded)
        if leader is None:
            return await controller.merge(segment_ids)
        doc = await self._forwarder.call(
            leader, "POST", topic, "/merge", {"segmentIds": list(segment_ids)}
        )
        return layout_from_metadata(doc)

    async def create_subscription(
        self,
        topic: TopicName,
        subscription: str,
        sub_type: SubscriptionType,
        *,
        earliest: bool = False,
        forwarded: bool = False,
    ) -> None:
        controller, leader = await self._leader_or_refuse(topic, forwarded)
        if leader is None:
            await controller.create_subscription(subscription, sub_type, earliest=earliest)
            return
        await self._forwarder.call(
            leader,
            "PUT",
            topic,
            f"/subscriptions/{_quote(subscription)}",
            {"type": sub_type.value, "initialPosition": "Earliest" if earliest else "Latest"},
        )

    async def delete_subscription(
        self, topic: TopicName, subscription: str, *, forwarded: bool = False
    ) -> None:
        controller, leader = await self._leader_or_refuse(topic, forwarded)
        if leader is None:
            await controller.delete_subscription(subscription)
            return
        await self._forwarder.call(
            leader, "DELETE", topic, f"/subscriptions/{_quote(subscription)}"
        )

    async def seek_subscription(
        self, topic: TopicName, subscription: str, timestamp_ms: int, *, forwarded: bool = False
    ) -> None:
        controller, leader = await self._leader_or_refuse(topic, forwarded)
        if leader is None:
            await controller.seek_subscription(subscription, timestamp_ms)
            return
        await self._forwarder.call(
            leader,
            "POST",
            topic,
            f"/subscriptions/{_quote(subscription)}/seek",
            {"timestamp": timestamp_ms},
        )

    async def stats(self, topic: TopicName, *, forwarded: bool = False) -> dict[str, Any]:
        """Topic stats from the leader (its coordinators know the live sessions)."""
        controller = await self.controller(topic)
        if controller.is_leader or forwarded:
            return await self.auto_scale.describe(topic, await controller.stats())
        leader = await controller.read_leader_url()
        if leader is None or leader == self._broker_url:
            return await self.auto_scale.describe(topic, await controller.stats())
        try:
            result: dict[str, Any] = await self._forwarder.call(leader, "GET", topic, "/stats")
            return result
        except NotLeader:
            return await self.auto_scale.describe(topic, await controller.stats())

    async def _leader_or_refuse(
        self, topic: TopicName, forwarded: bool
    ) -> tuple[ScalableTopicController, str | None]:
        controller, leader = await self._leader(topic)
        if leader is not None and forwarded:
            raise NotLeader(
                f"this broker is not the controller leader of {topic} (the leader is {leader})"
            )
        return controller, leader

    # -- consumer sessions (commands 73-75, 82) ------------------------------------------------

    async def register_consumer(
        self,
        topic_name: str,
        subscription: str,
        consumer_name: str,
        consumer_id: int,
        sub_type: SubscriptionType,
        transport: AssignmentTransport,
        *,
        earliest: bool = False,
    ) -> ConsumerAssignmentView:
        """Register a STREAM/CHECKPOINT consumer with this broker's controller, which must lead.

        Raises:
            NotLeader (the client looks the topic up again and reconnects to the leader),
            ScalableTopicNotFound, InvalidInputError.
        """
        if not subscription:
            raise InvalidInputError("a subscription name is required")
        if not consumer_name:
            raise InvalidInputError("a consumer name is required")
        topic = self.parse_scalable(topic_name)
        controller = await self.controller(topic)
        return await controller.register_consumer(
            subscription, consumer_name, consumer_id, sub_type, transport, earliest=earliest
        )

    async def unregister_consumer(self, transport: AssignmentTransport, consumer_id: int) -> None:
        """Clean leave of whichever registration uses ``consumer_id`` on ``transport``."""
        for controller in list(self._controllers.values()):
            for subscription in list(controller.coordinator_names()):
                coordinator = controller.coordinator(subscription)
                if coordinator is None:
                    continue
                name = coordinator.find_by_consumer_id(transport, consumer_id)
                if name is not None:
                    await coordinator.unregister(name)
                    return

    # -- drain events --------------------------------------------------------------------------

    def on_subscription_drained(self, segment_topic: str, subscription: str) -> None:
        """The broker saw ``subscription`` reach the end of a terminated segment topic."""
        try:
            segment = SegmentTopicName.parse(segment_topic)
        except InvalidTopicName:
            return
        controller = self._controllers.get(str(segment.parent))
        if controller is None or not controller.is_leader:
            return
        self._spawn(controller.on_segment_drained(subscription))

    # -- DAG watch sessions (commands 70-72) ---------------------------------------------------

    def parse_scalable(self, name: str) -> TopicName:
        topic = TopicName.parse(name, default_domain=TopicDomain.TOPIC)
        if topic.domain is not TopicDomain.TOPIC:
            raise InvalidTopicName(f"{name} is not a scalable topic name (topic://...)")
        return topic

    async def open_dag_watch(
        self, session_id: int, name: str, transport: DagWatchTransport
    ) -> DagWatchSession:
        """Resolve ``name`` and send the first update; the session then receives every layout
        change. A ``persistent://`` name gets its synthetic one-segment DAG (no pushes).

        Raises:
            InvalidTopicName, ScalableTopicNotFound (auto-creation not allowed), NotFoundError.
        """
        self._check_enabled()
        topic = TopicName.parse(name, default_domain=TopicDomain.TOPIC)
        if topic.domain is TopicDomain.SEGMENT:
            raise InvalidTopicName(f"{name}: segment topics are not looked up as scalable topics")
        if topic.domain is TopicDomain.PERSISTENT:
            session = DagWatchSession(session_id, topic, str(topic), transport)
            self._sessions_by_transport[id(transport)][session_id] = session
            session.push(legacy_dag(str(topic), await self._legacy_broker_url(topic)))
            return session
        found = await self.resources.get_layout(topic)
        if found is None:
            await self._auto_create(topic)
        controller = await self.controller(topic)
        await controller.wait_ready()
        session = DagWatchSession(session_id, topic, str(topic), transport)
        self._watches[str(topic)].add(session)
        self._sessions_by_transport[id(transport)][session_id] = session
        session.push(await self._dag_of(topic, controller))
        return session

    async def _legacy_broker_url(self, topic: TopicName) -> str:
        # A persistent:// topic is served where its lookup says; one broker today.
        return self._broker_url

    async def _auto_create(self, topic: TopicName) -> None:
        if not await self._namespaces.namespace_exists(topic.tenant, topic.namespace):
            raise ScalableTopicNotFound(f"namespace {topic.namespace_name} does not exist")
        if not await self._namespaces.auto_topic_creation_allowed(topic.tenant, topic.namespace):
            raise ScalableTopicNotFound(
                f"scalable topic {topic} does not exist and auto topic creation is disabled for "
                f"namespace {topic.namespace_name}"
            )
        with contextlib.suppress(ScalableTopicAlreadyExists):
            await self.create_topic(topic, 1)

    async def _dag_of(
        self, topic: TopicName, controller: ScalableTopicController | None = None
    ) -> pb.ScalableTopicDAG:
        found = await self.resources.require_layout(topic)
        layout = found.layout
        brokers = {}
        for segment in layout.active_segments:
            name = SegmentTopicName.of(topic, segment.hash_range, segment.segment_id)
            brokers[segment.segment_id] = await self._segments.broker_url(name)
        if controller is None:
            controller = self._controllers.get(str(topic))
        value = await read_leader(self._store, self.resources.controller_path(topic))
        leader = None if value is None else value.decode()
        return layout_to_dag(layout, brokers, leader)

    def close_dag_watch(self, transport: DagWatchTransport, session_id: int) -> None:
        session = self._sessions_by_transport.get(id(transport), {}).pop(session_id, None)
        if session is None:
            return
        session.close()
        self._watches.get(str(session.topic), set()).discard(session)

    # -- namespace watches (commands 76-78) ----------------------------------------------------

    async def open_namespace_watch(
        self,
        watch_id: int,
        namespace: str,
        property_filters: Mapping[str, str],
        current_hash: str | None,
        transport: DagWatchTransport,
    ) -> NamespaceWatchSession:
        self._check_enabled()
        parts = namespace.split("/")
        if len(parts) != 2 or not all(parts):
            raise InvalidInputError(f"namespace {namespace!r} must be 'tenant/namespace'")
        tenant, ns = parts
        if not await self._namespaces.namespace_exists(tenant, ns):
            raise ScalableTopicNotFound(f"namespace {namespace} does not exist")
        session = NamespaceWatchSession(watch_id, tenant, ns, property_filters, transport)
        self._ns_watches[(tenant, ns)].add(session)
        self._ns_by_transport[id(transport)][watch_id] = session
        session.publish(await self._matching_topics(session), current_hash)
        return session

    async def _matching_topics(self, session: NamespaceWatchSession) -> set[str]:
        names = set()
        for topic in await self.resources.list_topics(session.tenant, session.namespace):
            if session.property_filters:
                found = await self.resources.get_layout(topic)
                if found is None or not session.matches(found.layout):
                    continue
            names.add(str(topic))
        return names

    def close_namespace_watch(self, transport: DagWatchTransport, watch_id: int) -> None:
        session = self._ns_by_transport.get(id(transport), {}).pop(watch_id, None)
        if session is None:
            return
        session.close()
        self._ns_watches.get((session.tenant, session.namespace), set()).discard(session)

    # -- connections ---------------------------------------------------------------------------

    def on_connection_closed(self, transport: object) -> None:
        """End the connection's watches; its registered consumers enter their grace periods."""
        for session_id in list(self._sessions_by_transport.get(id(transport), {})):
            self.close_dag_watch(transport, session_id)  # type: ignore[arg-type]
        self._sessions_by_transport.pop(id(transport), None)
        for watch_id in list(self._ns_by_transport.get(id(transport), {})):
            self.close_namespace_watch(transport, watch_id)  # type: ignore[arg-type]
        self._ns_by_transport.pop(id(transport), None)
        for controller in self._controllers.values():
            controller.on_transport_closed(transport)  # type: ignore[arg-type]

    # -- metadata notifications ----------------------------------------------------------------

    def _on_notification(self, notification: Notification) -> None:
        path = notification.path
        if not path.startswith(TOPICS_ROOT + "/"):
            return
        topic = ScalableTopicResources.topic_of_path(path)
        if topic is not None:
            if notification.type in (NotificationType.CREATED, NotificationType.MODIFIED):
                self._schedule_refresh(topic)
            return
        parts = path.split("/")
        if len(parts) == 4 and notification.type is NotificationType.CHILDREN_CHANGED:
            key = (decode_name(parts[2]), decode_name(parts[3]))
            if self._ns_watches.get(key):
                self._spawn(self._publish_namespace(key))

    def _schedule_refresh(self, topic: TopicName) -> None:
        """Coalesce notifications: one reload in flight per topic, plus one more if needed."""
        key = str(topic)
        if key in self._refreshing:
            self._dirty.add(key)
            return
        if not self._watches.get(key) and key not in self._controllers:
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
            controller = self._controllers.get(str(topic))
            if controller is not None and not controller.is_leader:
                await controller.refresh_layout()
            sessions = [s for s in self._watches.get(str(topic), ()) if not s.closed]
            if sessions:
                dag = await self._dag_of(topic, controller)
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

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("scalable-topic background task failed: %r", t.exception())

        task.add_done_callback(done)


def check_segment_names_fit(topic: TopicName) -> None:
    """Refuse a topic name whose segment topics could outgrow a managed-ledger name.

    Every split and merge creates segments with new ids, so their names grow with the topic's
    history. A name that fits today but not at some later id would let a split record itself,
    fail to create its children and leave the topic's operation stuck; so the longest name a
    segment can ever have (the full range, the largest id) must fit from the start.

    Raises:
        InvalidTopicName: the name is too long.
    """
    longest = SegmentTopicName.of(topic, HashRange.full(), MAX_SEGMENT_ID).topic_name
    excess = len(managed_ledger_name(longest)) - MAX_NAME_LENGTH
    if excess > 0:
        raise InvalidTopicName(
            f"the name of scalable topic {str(topic)[:120]}... is {excess} character(s) too long: "
            f"its segment topics' storage names must stay within {MAX_NAME_LENGTH} characters"
        )


def _quote(name: str) -> str:
    return quote(name, safe="")


__all__ = ["NamespacePolicySource", "ScalableTopicService", "ScalableTopicSettings"]
