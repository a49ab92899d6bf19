"""PIP-468 ``ScalableTopicService``: the per-broker entry point of the scalable-topic layer.

One per broker: the registry of this broker's controllers and the life cycle of topics. It

* creates and deletes scalable topics (metadata first, then the segment topics; a crash in
  between is healed by the controller's take-over),
* holds the controllers of the topics this broker touches, keyed by topic, created on demand
  (one start at a time per topic) and released on delete and shutdown,
* runs every leader-only operation (split, merge, subscription changes, stats) through its
  :class:`~braid.scalable.leader_router.LeaderRouter`, which decides local or forwarded,
* registers STREAM/CHECKPOINT consumers with the local controller (which must lead),
* turns the broker's "subscription drained a sealed segment" events into rebalances,
* resumes, at start, any split or merge a crashed leader left recorded,
* runs PIP-483's auto split/merge (:mod:`braid.scalable.autoscale_service`): the broker's load
  reporter and an auto-scaler per controller.

DAG-watch and namespace-watch sessions and the metadata listener are its
:class:`~braid.scalable.watch_hub.WatchHub`'s (:attr:`ScalableTopicService.watches`), which asks
the service only what :class:`~braid.scalable.watch_hub.TopicControllers` lists. Client-facing
protocol handlers (commands 70-82) live in :mod:`braid.scalable.handlers`; the admin REST API in
:mod:`braid.admin.scalable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from braid.broker.broker_registry import BrokerAddressInUse, BrokerRegistry
from braid.broker.cluster_tls import PeerTls
from braid.broker.errors import TopicBusy
from braid.broker.topic_names import managed_ledger_name
from braid.broker.topic_policies import TopicPolicies
from braid.clock import Clock
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.migration import source_of
from braid.core.names import (
    MAX_SEGMENT_ID,
    InvalidTopicName,
    SegmentTopicName,
    TopicDomain,
    TopicName,
)
from braid.core.ranges import HashRange
from braid.ledger.names import MAX_NAME_LENGTH
from braid.metadata.api import MetadataStore
from braid.scalable.autoscale_policies import AutoScalePolicies
from braid.scalable.autoscale_service import AutoScaleService
from braid.scalable.background import BackgroundTasks
from braid.scalable.controller import ScalableTopicController, StepHook
from braid.scalable.coordinator import (
    AssignmentTransport,
    ConsumerAssignmentView,
    segment_topic_name,
)
from braid.scalable.errors import NotLeader, ScalableTopicsDisabled
from braid.scalable.forwarding import LeaderForwarder
from braid.scalable.leader_operations import (
    CreateSubscription,
    DeleteSubscription,
    Merge,
    SeekSubscription,
    Split,
    Stats,
)
from braid.scalable.leader_router import LeaderRouter
from braid.scalable.load_reporter import SegmentLoadReporter
from braid.scalable.migration import (
    MigrationExecutor,
    MigrationInProgress,
    MigrationTargetReserved,
)
from braid.scalable.read_snapshot import read_snapshot
from braid.scalable.resources import (
    ScalableTopicAlreadyExists,
    ScalableTopicNotFound,
    ScalableTopicResources,
    SubscriptionType,
    check_initial_segments,
    check_scalable_topic,
)
from braid.scalable.segment_brokers import SegmentBrokers
from braid.scalable.segment_routing import DrainRelay
from braid.scalable.segments import SegmentAdmin
from braid.scalable.watch_hub import WatchHub
from braid.security.credentials import ClientCredentials

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
    max_sessions_per_connection: int = 1_000  # scalableTopicMaxSessionsPerConnection
    entry_buckets: int = 1  # scalableTopicEntryBuckets (PIP-486 buckets per segment, Braid)


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
        broker_url_tls: str | None = None,
        broker_client_credentials: ClientCredentials | None = None,
        settings: ScalableTopicSettings | None = None,
        step_hook: StepHook | None = None,
        load_reporter: SegmentLoadReporter | None = None,
        registry: BrokerRegistry | None = None,
        drain_relay: DrainRelay | None = None,
        peer_tls: PeerTls | None = None,
    ) -> None:
        """``registry``: the broker's registry entry, registered by the broker's process; without
        it the service registers the broker itself (on :meth:`start`). ``drain_relay``: how a
        drain seen here reaches a controller leader on another broker (``braid broker``)."""
        self.resources = ScalableTopicResources(store)
        self.settings = settings or ScalableTopicSettings()
        self._store = store
        self._segments = segments
        self._namespaces = namespaces
        self._broker_url = broker_url
        self._broker_url_tls = broker_url_tls
        self._clock = clock
        self._step_hook = step_hook
        self._drain_relay = drain_relay
        self._owns_registration = registry is None
        self.registry = registry or BrokerRegistry(store)
        #: Decides where every leader-only operation runs (here, or forwarded to the leader).
        self.router = LeaderRouter(
            broker_url=broker_url,
            controllers=self.controller,
            forwarder=LeaderForwarder(
                self.registry, credentials=broker_client_credentials, tls=peer_tls
            ),
        )
        #: Where segments are served, as DAG watchers and consumers' assignments name it.
        self.segment_brokers = SegmentBrokers(segments, self.registry.service_url_tls)
        #: The DAG-watch and namespace-watch sessions and the metadata listener.
        self.watches = WatchHub(
            store=store,
            resources=self.resources,
            brokers=self.segment_brokers,
            broker_url=broker_url,
            topics=self,
        )
        #: Migrations of classic topics to scalable topics (ADR 0063); set by the installer.
        self.migrations: MigrationExecutor | None = None
        self._controllers: dict[str, ScalableTopicController] = {}
        self._starting: dict[str, asyncio.Task[ScalableTopicController]] = {}
        self._background = BackgroundTasks()
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
        if self._owns_registration:
            try:
                await self.registry.register(
                    self._broker_url, web_service_url, self._broker_url_tls
                )
            except BrokerAddressInUse as exc:
                # A previous incarnation's entry lingers until its session ends; the leader's
                # admin URL is read from it meanwhile (the same address serves the same API).
                log.warning("not registered in the broker registry: %s", exc)
        self.watches.start()
        if self.settings.enabled:
            await self._resume_pending_operations()
            if self.migrations is not None:
                await self.migrations.resume_pending()
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
        self.watches.close()
        self._background.cancel()
        for task in list(self._starting.values()):
            task.cancel()
        await self.auto_scale.close()
        for controller in list(self._controllers.values()):
            with contextlib.suppress(Exception):
                await controller.close()
        self._controllers.clear()
        if self._owns_registration:
            with contextlib.suppress(Exception):
                await self.registry.unregister()

    def check_enabled(self) -> None:
        """Raise :class:`ScalableTopicsDisabled` when the layer is switched off."""
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
        self.check_enabled()
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
            segment_brokers=self.segment_brokers,
            broker_url=self._broker_url,
            clock=self._clock,
            grace_period_s=self.settings.consumer_session_grace_s,
            retention_ms=lambda: self._retention_ms(topic),
            gc_interval_s=self.settings.gc_interval_s,
            step_hook=self._step_hook,
            max_segments=lambda layout: self._max_segments(topic, layout),
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

    async def _max_segments(self, topic: TopicName, layout: SegmentLayout) -> int:
        return (await self.auto_scale.policies.resolve(topic, layout)).max_segments

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

    async def watched_controller(self, topic: TopicName) -> ScalableTopicController:
        """The controller of a topic a client looks up, ready; a missing topic is created when
        its namespace allows auto-creation.

        Raises:
            ScalableTopicNotFound: no such topic (and no auto-creation), or no such namespace.
        """
        if await self.resources.get_layout(topic) is None:
            await self._auto_create(topic)
        controller = await self.controller(topic)
        await controller.wait_ready()
        return controller

    async def _refuse_if_migrating(self, topic: TopicName) -> None:
        """The name is reserved until a migration to it publishes its layout (ADR 0063): a
        retriable refusal, so a client switching to it waits for the layout."""
        if self.migrations is not None and (source := await self.migrations.pending_to(topic)):
            raise MigrationInProgress(
                f"{topic} is being created by the migration of {source}; retry once it is published"
            )

    async def _refuse_creating_a_migration_target(self, topic: TopicName) -> None:
        """An operator's create of a name a migration reserved conflicts with that migration:
        a retry cannot succeed while the migration is merely prepared (it waits for its
        operator), and once it is published the topic exists."""
        if self.migrations is not None and (source := await self.migrations.pending_to(topic)):
            raise MigrationTargetReserved(
                f"{topic} is reserved by the migration of {source}, which creates it: see "
                f"`braid admin topics migrate-to-scalable {source} --status`, or roll that "
                "migration back (--rollback) to free the name"
            )

    async def _auto_create(self, topic: TopicName) -> None:
        await self._refuse_if_migrating(topic)  # even where auto-creation is off: retry
        if not await self._namespaces.namespace_exists(topic.tenant, topic.namespace):
            raise ScalableTopicNotFound(f"namespace {topic.namespace_name} does not exist")
        if not await self._namespaces.auto_topic_creation_allowed(topic.tenant, topic.namespace):
            raise ScalableTopicNotFound(
                f"scalable topic {topic} does not exist and auto topic creation is disabled for "
                f"namespace {topic.namespace_name}"
            )
        with contextlib.suppress(ScalableTopicAlreadyExists):
            await self.create_topic(topic, 1)

    async def namespace_exists(self, tenant: str, namespace: str) -> bool:
        return await self._namespaces.namespace_exists(tenant, namespace)

    # -- topic lifecycle -----------------------------------------------------------------------

    async def create_topic(
        self,
        topic: TopicName,
        num_segments: int = 1,
        properties: Mapping[str, str] | None = None,
    ) -> SegmentLayout:
        """Create a scalable topic with ``num_segments`` equal initial segments.

        Raises:
            ScalableTopicAlreadyExists, NotFoundError (namespace), InvalidInputError,
            MigrationTargetReserved (the name is an unpublished migration's target).
        """
        self.check_enabled()
        check_scalable_topic(topic)
        check_segment_names_fit(topic)
        check_initial_segments(num_segments, self.settings.max_initial_segments)
        if not await self._namespaces.namespace_exists(topic.tenant, topic.namespace):
            raise ScalableTopicNotFound(f"namespace {topic.namespace_name} does not exist")
        await self._refuse_creating_a_migration_target(topic)
        layout = SegmentLayout.initial(
            num_segments,
            self._clock.now_ms(),
            properties or {},
            entry_buckets=self.settings.entry_buckets,
        )
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
        """Delete the topic, its segment topics and all its metadata (topic policies too).

        Without ``force`` the delete is refused while a segment has producers or consumers.

        Raises:
            ScalableTopicNotFound, TopicBusy (in use; the admin API answers 412 as for any
            topic).
        """
        self.check_enabled()
        layout = (await self.resources.require_layout(topic)).layout
        if not force:
            await self._refuse_if_in_use(topic, layout)
        await self.release_controller(topic)
        self.auto_scale.detach(topic, deleted=True)
        await self._delete_segments(topic, layout)
        await self.resources.delete_topic(topic)
        await TopicPolicies(self._store).delete(topic)
        log.info("deleted scalable topic %s", topic)

    async def _delete_segments(self, topic: TopicName, layout: SegmentLayout) -> None:
        for segment in layout.segments.values():
            name = segment_topic_name(topic, segment)  # a migrated topic's partitions too
            try:
                await self._segments.delete_segment(name)
            except Exception:
                log.exception("deleting segment topic %s failed; continuing", name)

    async def _refuse_if_in_use(self, topic: TopicName, layout: SegmentLayout) -> None:
        for segment in layout.segments.values():
            name = segment_topic_name(topic, segment)
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
                raise TopicBusy(
                    f"scalable topic {topic} is in use (segment {segment.segment_id} has "
                    f"{len(publishers) if isinstance(publishers, list) else 0} connected "
                    f"producer(s) and {consumers} connected consumer(s)); delete with "
                    "force=true to disconnect them"
                )

    async def get_layout(self, topic: TopicName) -> SegmentLayout:
        return (await self.resources.require_layout(topic)).layout

    async def read_snapshot(self, topic: TopicName) -> dict[str, Any]:
        """The DAG and each active segment's last stored entry, of one epoch
        (:mod:`braid.scalable.read_snapshot`)."""
        return await read_snapshot(self.resources, self._segments, topic)

    async def list_topics(self, tenant: str, namespace: str) -> list[str]:
        return [str(t) for t in await self.resources.list_topics(tenant, namespace)]

    async def set_properties(
        self, topic: TopicName, properties: Mapping[str, str]
    ) -> SegmentLayout:
        updated = await self.resources.update_layout(
            topic, lambda layout: layout.with_properties(properties)
        )
        return updated.layout

    # -- leader-only operations (routed: here, or forwarded to the leader) ---------------------

    async def split(
        self,
        topic: TopicName,
        segment_id: int,
        split_hash: int | None = None,
        *,
        forwarded: bool = False,
    ) -> SegmentLayout:
        """Split on the leader (forwarding if needed); returns the new layout."""
        return await self.router.run(topic, Split(segment_id, split_hash), forwarded=forwarded)

    async def merge(
        self, topic: TopicName, segment_ids: Sequence[int], *, forwarded: bool = False
    ) -> SegmentLayout:
        """Merge on the leader (forwarding if needed); returns the new layout."""
        return await self.router.run(topic, Merge(segment_ids), forwarded=forwarded)

    async def create_subscription(
        self,
        topic: TopicName,
        subscription: str,
        sub_type: SubscriptionType,
        *,
        earliest: bool = False,
        forwarded: bool = False,
    ) -> None:
        operation = CreateSubscription(subscription, sub_type, earliest)
        await self.router.run(topic, operation, forwarded=forwarded)

    async def delete_subscription(
        self, topic: TopicName, subscription: str, *, forwarded: bool = False
    ) -> None:
        await self.router.run(topic, DeleteSubscription(subscription), forwarded=forwarded)

    async def seek_subscription(
        self, topic: TopicName, subscription: str, timestamp_ms: int, *, forwarded: bool = False
    ) -> None:
        operation = SeekSubscription(subscription, timestamp_ms)
        await self.router.run(topic, operation, forwarded=forwarded)

    async def stats(self, topic: TopicName, *, forwarded: bool = False) -> dict[str, Any]:
        """Topic stats from the leader (its coordinators know the live sessions); this broker's
        own when the leader cannot be reached."""
        return await self.router.run(topic, Stats(self.auto_scale.describe), forwarded=forwarded)

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
        attach_ahead: bool = False,
        drained: tuple[int, ...] = (),
    ) -> ConsumerAssignmentView:
        """Register a STREAM/CHECKPOINT consumer with this broker's controller, which must lead
        (``drained``: a CHECKPOINT member's report, see the coordinator).

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
            subscription,
            consumer_name,
            consumer_id,
            sub_type,
            transport,
            earliest=earliest,
            attach_ahead=attach_ahead,
            drained=drained,
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

    def on_subscription_drained(
        self, segment_topic: str, subscription: str, *, relay: bool = True
    ) -> None:
        """The broker saw ``subscription`` reach the end of a terminated segment topic (or, with
        ``relay=False``, the segment's owner told this broker so). A leader elsewhere is told
        through the drain relay."""
        try:
            segment = SegmentTopicName.parse(segment_topic)
        except InvalidTopicName:
            if not self._legacy_root_drained(segment_topic, subscription) and relay:
                self._relay_legacy_root_drained(segment_topic, subscription)
            return
        controller = self._controllers.get(str(segment.parent))
        if controller is not None and controller.is_leader:
            controller.on_segment_drained(subscription, segment.segment_id)
        elif relay and self._drain_relay is not None and not self._closed:
            self._background.spawn(
                self._drain_relay.relay(segment.parent, segment_topic, subscription)
            )

    def _legacy_root_drained(self, topic: str, subscription: str) -> bool:
        """A classic topic was drained: if it is a legacy root of a migrated topic (ADR 0063)
        whose controller leads here, that controller hears it as a segment drained; whether one
        did."""
        heard = False
        for controller in list(self._controllers.values()):
            if not controller.is_leader:
                continue
            try:
                layout = controller.layout
            except NotLeader:
                continue
            for info in layout.legacy_segments:
                if info.legacy_topic_name == topic:
                    controller.on_segment_drained(subscription, info.segment_id)
                    heard = True
        return heard

    def _relay_legacy_root_drained(self, topic: str, subscription: str) -> None:
        """Tell the leader on another broker, found through the migration of ``topic``'s
        source (``braid broker``: a partition and its topic's leader may be apart)."""
        if self._drain_relay is None or self._closed or self.migrations is None:
            return
        relay = self._drain_relay

        async def run() -> None:
            target = await self.migrated_target(source_of(TopicName.parse(topic)))
            if target is not None:
                await relay.relay(target, topic, subscription)

        self._background.spawn(run())

    async def migrated_target(self, source: TopicName) -> TopicName | None:
        """The scalable topic ``source`` was migrated to, once its layout is published."""
        if self.migrations is None:
            return None
        target = await self.migrations.published_target(str(source))
        return None if target is None else TopicName.parse(target)

    def parse_scalable(self, name: str) -> TopicName:
        topic = TopicName.parse(name, default_domain=TopicDomain.TOPIC)
        if topic.domain is not TopicDomain.TOPIC:
            raise InvalidTopicName(f"{name} is not a scalable topic name (topic://...)")
        return topic

    # -- connections ---------------------------------------------------------------------------

    def on_connection_closed(self, transport: object) -> None:
        """End the connection's watches; its registered consumers enter their grace periods."""
        self.watches.on_connection_closed(transport)  # type: ignore[arg-type]
        for controller in self._controllers.values():
            controller.on_transport_closed(transport)  # type: ignore[arg-type]


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


__all__ = ["NamespacePolicySource", "ScalableTopicService", "ScalableTopicSettings"]
