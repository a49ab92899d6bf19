"""PIP-468 ``ScalableTopicController``: the per-topic coordinator, leader-elected across brokers.

Every broker that touches a scalable topic's control plane holds a controller instance; exactly one
of them — the one holding the ephemeral node ``/topics/{t}/{ns}/{topic}/controller`` (value: its
broker service URL) — is the **leader**. Only the leader

* splits and merges segments (:mod:`braid.scalable.operations`, one at a time, resumable; one
  that fails while this broker leads is rolled back or retried in the background:
  :mod:`braid.scalable.operation_recovery`),
* creates and deletes subscriptions on every segment,
* registers STREAM/CHECKPOINT consumers and assigns them segments
  (:class:`~braid.scalable.coordinator.SubscriptionCoordinator`, one per subscription),
* garbage-collects sealed segments once retention has passed and every subscription drained them.

Everything else refuses with :class:`~braid.scalable.errors.NotLeader` naming the leader. On
winning the election the new leader *takes over*: it finishes an operation the previous leader left
half done, recreates missing active segment topics, and restores every persisted consumer
registration with a fresh grace period. Losing leadership stops its timers; registrations stay in
the metadata store for the next leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from braid.broker.errors import SubscriptionNotFound
from braid.clock import Clock
from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.core.segment_info import SegmentInfo
from braid.metadata.api import BadVersion, MetadataStore
from braid.metadata.election import LeaderElection, LeaderElectionState, read_leader
from braid.scalable.coordinator import (
    AssignmentTransport,
    ConsumerAssignmentView,
    SubscriptionCoordinator,
    segment_topic_name,
)
from braid.scalable.errors import MaxSegmentsReached, NotLeader, OperationInProgress
from braid.scalable.operation_recovery import OperationRecovery
from braid.scalable.operations import MERGE, SPLIT, StructuralOperation
from braid.scalable.resources import (
    ScalableTopicResources,
    SubscriptionMetadata,
    SubscriptionType,
    SubscriptionTypeMismatch,
)
from braid.scalable.segment_brokers import SegmentBrokers
from braid.scalable.segments import SegmentAdmin
from braid.scalable.sequence_carry import carry_sequence_ids

log = logging.getLogger(__name__)

#: Called with a step name between the steps of a split or merge; tests use it to kill the
#: controller at each cut point (see :mod:`braid.scalable.faults`).
StepHook = Callable[[str], Awaitable[None]]

#: The cut points of a structural operation, in order.
STEPS = ("recorded", "children-created", "parents-terminated", "metadata-updated")


class ScalableTopicController:
    """The controller of one scalable topic on this broker (leader or follower)."""

    def __init__(
        self,
        topic: TopicName,
        *,
        store: MetadataStore,
        resources: ScalableTopicResources,
        segments: SegmentAdmin,
        broker_url: str,
        clock: Clock,
        segment_brokers: SegmentBrokers | None = None,
        grace_period_s: float = 60.0,
        retention_ms: Callable[[], Awaitable[int | None]] | None = None,
        gc_interval_s: float = 60.0,
        step_hook: StepHook | None = None,
        max_segments: Callable[[SegmentLayout], Awaitable[int]] | None = None,
    ) -> None:
        self.topic = topic
        #: The effective ``scalableTopicMaxSegments`` for a layout (every split checks it).
        self._max_segments = max_segments
        self._store = store
        self._resources = resources
        self._segments = segments
        self._segment_brokers = segment_brokers
        self._broker_url = broker_url
        self._clock = clock
        self._grace_s = grace_period_s
        self._retention_ms = retention_ms
        self._gc_interval_s = gc_interval_s
        self._step_hook = step_hook
        self._layout: SegmentLayout | None = None
        self._coordinators: dict[str, SubscriptionCoordinator] = {}
        self._election = LeaderElection(
            store,
            resources.controller_path(topic),
            broker_url.encode(),
            on_state_change=self._on_leader_state,
        )
        self._op_lock = asyncio.Lock()
        # Set by _execute once it starts sealing parents (nothing to roll back after that).
        self._sealing = False
        self._recovery = OperationRecovery(str(topic), self, clock)
        self._takeover: asyncio.Task[None] | None = None
        self._taken_over = asyncio.Event()
        self._gc_task: asyncio.Task[None] | None = None
        self._closed = False
        self.last_split_at_ms: int | None = None
        self.last_merge_at_ms: int | None = None
        self.membership_listeners: list[Callable[[], None]] = []
        #: Called with True once a take-over finished (leader duties begin) and with False when
        #: they stop (leadership lost, or close); the auto-scaler follows them.
        self.leadership_listeners: list[Callable[[bool], None]] = []

    # -- state ---------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._election.is_leader and not self._closed

    @property
    def layout(self) -> SegmentLayout:
        if self._layout is None:
            raise NotLeader(f"the controller of {self.topic} has not loaded its layout yet")
        return self._layout

    @property
    def operation_running(self) -> bool:
        """A split, merge, subscription change or GC prune holds the operation lock, or a failed
        split or merge is being recovered."""
        return self._op_lock.locked() or self._recovery.active

    @property
    def operation_lock(self) -> asyncio.Lock:
        """Held by whatever changes the topic's structure (one thing at a time)."""
        return self._op_lock

    @property
    def leader_url(self) -> str | None:
        value = self._election.cached_leader_value
        return None if value is None else value.decode()

    async def read_leader_url(self) -> str | None:
        value = await read_leader(self._store, self._resources.controller_path(self.topic))
        return None if value is None else value.decode()

    def coordinator(self, subscription: str) -> SubscriptionCoordinator | None:
        return self._coordinators.get(subscription)

    def coordinator_names(self) -> list[str]:
        """The subscriptions with a live coordinator (leader only)."""
        return sorted(self._coordinators)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the layout and join the election; as leader, take over before returning.

        Raises:
            ScalableTopicNotFound: the topic has no metadata.
        """
        self._layout = (await self._resources.require_layout(self.topic)).layout
        await self._election.start()
        if self._takeover is not None:
            await asyncio.shield(self._takeover)

    async def wait_ready(self) -> None:
        """Wait until a leader's take-over finished (returns at once on a follower)."""
        if self._takeover is not None:
            await asyncio.shield(self._takeover)

    async def _on_leader_state(self, state: LeaderElectionState) -> None:
        if state is LeaderElectionState.LEADING and not self._closed:
            log.info(
                "controller of %s: this broker (%s) is the leader", self.topic, self._broker_url
            )
            self._takeover = asyncio.ensure_future(self._take_over())
            return
        self._stop_leader_duties()

    def _stop_leader_duties(self) -> None:
        if self._gc_task is not None:
            self._gc_task.cancel()
            self._gc_task = None
        for coordinator in self._coordinators.values():
            coordinator.close()
        self._coordinators.clear()
        self._leadership_changed(False)

    def _leadership_changed(self, leading: bool) -> None:
        for listener in list(self.leadership_listeners):
            try:
                listener(leading)
            except Exception:
                log.exception("controller of %s: leadership listener failed", self.topic)

    async def _take_over(self) -> None:
        """Finish what a previous leader left, then restore every consumer session."""
        try:
            async with self._op_lock:
                self._layout = (await self._resources.require_layout(self.topic)).layout
                pending = await self._resources.get_operation(self.topic)
                if pending is not None:
                    operation = StructuralOperation.from_json(pending[0])
                    log.warning(
                        "controller of %s: resuming the %s left in flight by a previous leader",
                        self.topic,
                        operation.describe(),
                    )
                    try:
                        await self._execute(operation)
                    except Exception as exc:
                        self._recover_later(operation, exc)
                await self._ensure_active_segments()
                await self._restore_sessions()
            if self._gc_interval_s > 0 and self._retention_ms is not None:
                self._gc_task = asyncio.ensure_future(self._gc_loop())
            if self.is_leader:
                self._leadership_changed(True)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("controller of %s: take-over failed", self.topic)

    async def _ensure_active_segments(self) -> None:
        """Recreate missing active segment topics (a create interrupted before the topic was
        materialised, or a topic deleted by hand), with every known subscription's cursor."""
        layout = self.layout
        subscriptions: list[str] | None = None
        for segment in layout.active_segments:
            name = segment_topic_name(self.topic, segment)
            if await self._segments.segment_exists(name):
                if await self._segments.is_terminated(name):
                    log.error(
                        "controller of %s: active segment %d is terminated but no split or "
                        "merge is recorded (terminated by hand?); producers to its range will "
                        "wait until an operator splits or merges it",
                        self.topic,
                        segment.segment_id,
                    )
                continue
            if subscriptions is None:
                subscriptions = sorted(await self._resources.list_subscriptions(self.topic))
            log.warning("controller of %s: recreating missing active segment %s", self.topic, name)
            await self._segments.create_segment(name, subscriptions)

    async def _restore_sessions(self) -> None:
        for name, metadata in (await self._resources.list_subscriptions(self.topic)).items():
            if metadata.type is SubscriptionType.QUEUE:
                continue
            registrations = await self._resources.list_registrations(self.topic, name)
            coordinator = self._coordinator_for(name, metadata.type)
            coordinator.restore(registrations)
            # The drained set is not persisted and no drain event replays for a segment
            # consumed before this leader took over: read it from the cursors now, so the
            # children of such a segment are handed out when their consumers come back.
            await coordinator.refresh()

    async def close(self) -> None:
        """Leave the election (a leader resigns) and stop every timer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._takeover is not None:
            self._takeover.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._takeover
        await self._recovery.close()
        self._stop_leader_duties()
        await self._election.close()

    def _check_leader(self) -> None:
        if self._closed:
            raise NotLeader(f"the controller of {self.topic} on this broker is closed")
        if not self._election.is_leader:
            leader = self.leader_url
            where = f"the leader is {leader}" if leader else "there is no leader right now"
            raise NotLeader(
                f"this broker ({self._broker_url}) is not the controller leader of "
                f"{self.topic}; {where}"
            )

    async def _step(self, name: str) -> None:
        if self._step_hook is not None:
            await self._step_hook(name)

    # -- layout refresh ------------------------------------------------------------------------

    async def refresh_layout(self) -> SegmentLayout:
        """Re-read the layout (after a metadata notification) and tell the coordinators."""
        found = await self._resources.get_layout(self.topic)
        if found is None:
            return self.layout
        previous = self._layout
        self._layout = found.layout
        if previous is None or found.layout.epoch != previous.epoch:
            await self._notify_coordinators()
        return found.layout

    # -- split and merge -----------------------------------------------------------------------

    async def split(self, segment_id: int, split_hash: int | None = None) -> SegmentLayout:
        """Split an active segment at its midpoint, or so that ``split_hash`` starts the upper
        child; returns the new layout.

        Raises:
            NotLeader, OperationInProgress, SegmentNotFound, InvalidLayoutOperation.
        """
        return await self._run(SPLIT, (segment_id,), split_hash)

    async def merge(self, segment_ids: Sequence[int]) -> SegmentLayout:
        """Merge two or more hash-adjacent active segments into one; returns the new layout.

        Raises:
            NotLeader, OperationInProgress, SegmentNotFound, InvalidLayoutOperation.
        """
        return await self._run(MERGE, tuple(segment_ids), None)

    async def _run(
        self, kind: str, segment_ids: tuple[int, ...], split_hash: int | None
    ) -> SegmentLayout:
        self._check_leader()
        await self.wait_ready()
        if self._recovery.active:
            raise OperationInProgress(
                f"a failed split or merge of {self.topic} is being recovered: "
                f"{self._recovery.describe()}"
            )
        if self._op_lock.locked():
            raise OperationInProgress(f"another split or merge of {self.topic} is running")
        async with self._op_lock:
            self._check_leader()
            layout = (await self._resources.require_layout(self.topic)).layout
            if kind == SPLIT and self._max_segments is not None:
                cap = await self._max_segments(layout)
                if len(layout.active_segments) >= cap:
                    raise MaxSegmentsReached(
                        f"{self.topic} has {len(layout.active_segments)} active segments, the "
                        f"most its scalableTopicMaxSegments ({cap}) allows; a split is refused"
                    )
            if kind == MERGE:
                # Record the parents in hash order, as the merged child lists them.
                segment_ids = tuple(
                    s.segment_id
                    for s in sorted(
                        (layout.segment(i) for i in segment_ids), key=lambda s: s.hash_range
                    )
                )
            operation = StructuralOperation(
                kind, segment_ids, self._clock.now_ms(), split_hash, layout.epoch
            )
            operation.apply(layout)  # validate before any side effect
            try:
                await self._resources.begin_operation(self.topic, operation.to_json())
            except BadVersion:
                raise OperationInProgress(
                    f"another split or merge of {self.topic} is recorded and not finished"
                ) from None
            log.info(
                "controller of %s: starting the %s (epoch %d)",
                self.topic,
                operation.describe(),
                layout.epoch,
            )
            try:
                await self._step("recorded")
                return await self._execute(operation)
            except asyncio.CancelledError as exc:
                self._recover_later(operation, exc)
                raise
            except Exception as exc:
                # A failed step leaves the record (unless the operation was abandoned): recover
                # it rather than leave it in flight with nothing running it.
                if await self._still_recorded(operation):
                    self._recover_later(operation, exc)
                raise

    async def _execute(self, operation: StructuralOperation) -> SegmentLayout:
        """Run (or resume) ``operation`` from step 2; every step is idempotent."""
        self._sealing = False
        layout = (await self._resources.require_layout(self.topic)).layout
        try:
            target = layout if operation.is_applied(layout) else operation.apply(layout)
        except Exception as exc:
            log.error(
                "controller of %s: abandoning the %s: %s", self.topic, operation.describe(), exc
            )
            await self._resources.end_operation(self.topic)
            raise
        parents = operation.parents(target)
        children = operation.children(target)
        subscriptions = await self._discover_subscriptions(parents)
        try:
            for child in children:
                await self._segments.create_segment(
                    segment_topic_name(self.topic, child), subscriptions
                )
        except InvalidInputError as exc:
            # Refused for good (a name the storage cannot hold, ...): no parent is terminated
            # yet, so give up cleanly instead of leaving a record every retry trips over.
            log.error(
                "controller of %s: abandoning the %s: %s", self.topic, operation.describe(), exc
            )
            for child in children:
                await self._segments.delete_segment(segment_topic_name(self.topic, child))
            await self._resources.end_operation(self.topic)
            raise
        await self._step("children-created")
        self._sealing = True
        for parent in parents:
            # Sequentially: a producer of one parent cannot keep writing while the other is
            # already sealed and its keys moved on.
            await self._segments.terminate_segment(segment_topic_name(self.topic, parent))
        await self._step("parents-terminated")
        await carry_sequence_ids(self._segments, self.topic, parents, children)
        self._check_leader()
        updated = await self._resources.update_layout(
            self.topic,
            lambda current: current if operation.is_applied(current) else operation.apply(current),
        )
        await self._step("metadata-updated")
        await self._resources.end_operation(self.topic)
        self._layout = updated.layout
        if operation.kind == SPLIT:
            self.last_split_at_ms = operation.now_ms
        else:
            self.last_merge_at_ms = operation.now_ms
        log.info(
            "controller of %s: %s done: epoch %d, active %s",
            self.topic,
            operation.describe(),
            updated.layout.epoch,
            [s.segment_id for s in updated.layout.active_segments],
        )
        await self._notify_coordinators()
        return updated.layout

    # -- recovering a failed split or merge (operation_recovery.RecoveryHost) -------------------

    def _recover_later(self, operation: StructuralOperation, error: BaseException) -> None:
        if self.is_leader:
            self._recovery.schedule(operation, error, may_roll_back=not self._sealing)

    async def _still_recorded(self, operation: StructuralOperation) -> bool:
        try:
            return await self.recorded_operation() == operation
        except Exception:
            return True  # cannot tell: the recovery looks again before it acts

    async def recorded_operation(self) -> StructuralOperation | None:
        """The split or merge recorded for the topic, if any."""
        pending = await self._resources.get_operation(self.topic)
        return None if pending is None else StructuralOperation.from_json(pending[0])

    async def any_parent_sealed(self, operation: StructuralOperation) -> bool:
        """Whether a parent of ``operation`` is (or may be) terminated already."""
        layout = (await self._resources.require_layout(self.topic)).layout
        if operation.is_applied(layout):
            return True
        for parent in operation.parents(layout):
            if await self._segments.is_terminated(segment_topic_name(self.topic, parent)):
                return True
        return False

    async def roll_back(self, operation: StructuralOperation) -> None:
        """Undo a split or merge that sealed no parent (operation lock held): delete the
        children created so far and drop the record; the layout never changed."""
        self._check_leader()
        layout = (await self._resources.require_layout(self.topic)).layout
        for child in operation.children(operation.apply(layout)):
            await self._segments.delete_segment(segment_topic_name(self.topic, child))
        await self._resources.end_operation(self.topic)

    async def roll_forward(self, operation: StructuralOperation) -> None:
        """Run a recorded split or merge again from step 2 (operation lock held)."""
        self._check_leader()
        await self._execute(operation)

    async def _discover_subscriptions(self, parents: Sequence[SegmentInfo]) -> list[str]:
        """Step 2: every subscription the children need a cursor for."""
        names = set(await self._resources.list_subscriptions(self.topic))
        for parent in parents:
            names.update(
                await self._segments.list_subscriptions(segment_topic_name(self.topic, parent))
            )
        return sorted(names)

    async def _notify_coordinators(self) -> None:
        layout = self.layout
        for coordinator in list(self._coordinators.values()):
            try:
                await coordinator.on_layout_change(layout)
            except Exception:
                log.exception(
                    "controller of %s: rebalance of %s failed", self.topic, coordinator.subscription
                )

    # -- subscriptions -------------------------------------------------------------------------

    def _coordinator_for(self, name: str, sub_type: SubscriptionType) -> SubscriptionCoordinator:
        coordinator = self._coordinators.get(name)
        if coordinator is None:
            coordinator = SubscriptionCoordinator(
                self.topic,
                name,
                sub_type,
                self.layout,
                resources=self._resources,
                segments=self._segments,
                brokers=self._segment_brokers,
                clock=self._clock,
                grace_period_s=self._grace_s,
                on_membership_change=self._membership_changed,
            )
            self._coordinators[name] = coordinator
        return coordinator

    def _membership_changed(self) -> None:
        for listener in list(self.membership_listeners):
            try:
                listener()
            except Exception:
                log.exception("controller of %s: membership listener failed", self.topic)

    async def create_subscription(
        self, subscription: str, sub_type: SubscriptionType, *, earliest: bool = False
    ) -> SubscriptionMetadata:
        """Create ``subscription`` on the topic and its cursor on every segment (idempotent).

        Active segments get a cursor at their start (``earliest``) or end; sealed segments get
        one at their start (``earliest``) or end, so a subscription that starts now has nothing
        to drain. Serialised with splits and merges, so no segment is created without it.

        Raises:
            NotLeader, SubscriptionTypeMismatch.
        """
        self._check_leader()
        await self.wait_ready()
        async with self._op_lock:
            self._check_leader()
            existing = await self._resources.get_subscription(self.topic, subscription)
            metadata = await self._resources.create_subscription(
                self.topic, subscription, SubscriptionMetadata(sub_type, earliest)
            )
            if existing is None:
                for segment in self.layout.segments.values():
                    await self._segments.create_subscription(
                        segment_topic_name(self.topic, segment), subscription, earliest=earliest
                    )
            return metadata

    async def _require_subscription(self, subscription: str) -> None:
        if await self._resources.get_subscription(self.topic, subscription) is not None:
            return
        for segment in self.layout.segments.values():
            names = await self._segments.list_subscriptions(segment_topic_name(self.topic, segment))
            if subscription in names:
                return
        raise SubscriptionNotFound(f"subscription {subscription!r} does not exist on {self.topic}")

    async def delete_subscription(self, subscription: str) -> None:
        """Unregister its consumers and delete it from the metadata and every segment.

        Raises:
            NotLeader, SubscriptionNotFound.
        """
        self._check_leader()
        await self.wait_ready()
        async with self._op_lock:
            await self._require_subscription(subscription)
            coordinator = self._coordinators.pop(subscription, None)
            if coordinator is not None:
                await coordinator.drop_all()
            await self._resources.delete_subscription(self.topic, subscription)
            for segment in self.layout.segments.values():
                await self._segments.delete_subscription(
                    segment_topic_name(self.topic, segment), subscription
                )

    async def seek_subscription(self, subscription: str, timestamp_ms: int) -> None:
        """Move the subscription on every segment to ``timestamp_ms`` (upstream's rules: a
        segment sealed before it is skipped entirely, one created after it is read from its
        start), then re-evaluate the drained state and assignments."""
        self._check_leader()
        await self.wait_ready()
        async with self._op_lock:
            await self._require_subscription(subscription)
            for segment in self.layout.segments.values():
                name = segment_topic_name(self.topic, segment)
                if not segment.is_active and 0 < segment.sealed_at_ms <= timestamp_ms:
                    effective = 2**63 - 1  # past everything: the cursor goes to the end
                elif segment.created_at_ms and segment.created_at_ms >= timestamp_ms:
                    effective = 0
                else:
                    effective = timestamp_ms
                await self._segments.seek_subscription(name, subscription, effective)
        coordinator = self._coordinators.get(subscription)
        if coordinator is not None:
            await coordinator.refresh()

    # -- consumers -----------------------------------------------------------------------------

    async def register_consumer(
        self,
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
        """Register a STREAM/CHECKPOINT consumer (or reconnect it, or take a CHECKPOINT
        member's ``drained`` report); returns its assignment.

        The first registration of a subscription creates it (cursors on every segment at the
        requested initial position).

        Raises:
            NotLeader, SubscriptionTypeMismatch, InvalidInputError (a QUEUE type).
        """
        self._check_leader()
        await self.wait_ready()
        if sub_type is SubscriptionType.QUEUE:
            raise InvalidInputError(
                "queue consumers attach to every segment directly; they do not register"
            )
        coordinator = self._coordinators.get(subscription)
        if coordinator is None:
            metadata = await self.create_subscription(subscription, sub_type, earliest=earliest)
            coordinator = self._coordinator_for(subscription, metadata.type)
        elif coordinator.sub_type is not sub_type:
            raise SubscriptionTypeMismatch(
                f"subscription {subscription!r} of {self.topic} is a {coordinator.sub_type} "
                f"subscription, not {sub_type}"
            )
        return await coordinator.register(
            consumer_name, consumer_id, transport, attach_ahead=attach_ahead, drained=drained
        )

    async def unregister_consumer(self, subscription: str, consumer_name: str) -> bool:
        """Clean leave: delete the registration and rebalance now."""
        coordinator = self._coordinators.get(subscription)
        if coordinator is None:
            return False
        return await coordinator.unregister(consumer_name)

    def on_transport_closed(self, transport: AssignmentTransport) -> None:
        for coordinator in self._coordinators.values():
            coordinator.on_transport_closed(transport)

    def on_segment_drained(self, subscription: str, segment_id: int) -> None:
        """A subscription consumed a sealed segment to its end: hand out what it unblocked (at
        once: the coordinator batches drains that arrive while it works)."""
        coordinator = self._coordinators.get(subscription)
        if coordinator is not None:
            coordinator.segment_drained(segment_id)

    # -- sealed-segment garbage collection -----------------------------------------------------

    async def _gc_loop(self) -> None:
        while not self._closed:
            await self._clock.sleep(self._gc_interval_s)
            try:
                await self.collect_garbage()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "controller of %s: sealed-segment GC failed; retrying next tick", self.topic
                )

    async def collect_garbage(self) -> list[int]:
        """Prune sealed segments past retention that every subscription drained, from the roots
        down, in one CAS; then delete their topics. Returns the pruned ids."""
        if not self.is_leader or self._retention_ms is None:
            return []
        retention = await self._retention_ms()
        if retention is None:
            return []  # retention -1: keep forever
        async with self._op_lock:
            if not self.is_leader or await self._resources.get_operation(self.topic) is not None:
                return []
            layout = (await self._resources.require_layout(self.topic)).layout
            now = self._clock.now_ms()
            subscriptions = set(await self._resources.list_subscriptions(self.topic))
            prunable: list[int] = []
            pruned: set[int] = set()
            # Parents are created in earlier epochs than children: creation order visits roots
            # first, and a segment qualifies only once all its parents are pruned too.
            for segment in sorted(
                layout.segments.values(), key=lambda s: (s.created_at_epoch, s.segment_id)
            ):
                if segment.is_active or now - segment.sealed_at_ms < retention:
                    continue
                if any(p not in pruned for p in segment.parent_ids):
                    continue
                name = segment_topic_name(self.topic, segment)
                subs = subscriptions | set(await self._segments.list_subscriptions(name))
                if not all([await self._segments.is_drained(name, s) for s in sorted(subs)]):
                    continue
                pruned.add(segment.segment_id)
                prunable.append(segment.segment_id)
            if not prunable:
                return []

            def prune(current: SegmentLayout) -> SegmentLayout:
                return current.prune_segments([sid for sid in prunable if sid in current.segments])

            updated = await self._resources.update_layout(self.topic, prune)
            self._layout = updated.layout
            for sid in prunable:
                info = layout.segments[sid]
                await self._segments.delete_segment(segment_topic_name(self.topic, info))
            await self._resources.delete_segment_records(self.topic, prunable)
            log.info(
                "controller of %s: pruned sealed segments %s (epoch %d)",
                self.topic,
                prunable,
                updated.layout.epoch,
            )
        await self._notify_coordinators()
        return prunable

    # -- stats ---------------------------------------------------------------------------------

    async def stats(self) -> dict[str, Any]:
        """Aggregated state: the DAG with per-segment stats, subscriptions, consumers, leader."""
        layout = (await self._resources.require_layout(self.topic)).layout
        segments: dict[str, Any] = {}
        for segment in layout.segments.values():
            name = segment_topic_name(self.topic, segment)
            entry: dict[str, Any] = {
                "segmentTopic": str(name),
                "state": segment.state.value,
                "hashRange": segment.hash_range.to_hex(),
                "parentIds": list(segment.parent_ids),
                "childIds": list(segment.child_ids),
                "createdAtEpoch": segment.created_at_epoch,
                "sealedAtEpoch": segment.sealed_at_epoch,
                "createdAtMs": segment.created_at_ms,
                "sealedAtMs": segment.sealed_at_ms,
            }
            topic_stats = await self._segments.stats(name)
            if topic_stats is not None:
                entry["topicStats"] = topic_stats
            segments[str(segment.segment_id)] = entry
        subscriptions: dict[str, Any] = {}
        for sub, metadata in (await self._resources.list_subscriptions(self.topic)).items():
            registrations = await self._resources.list_registrations(self.topic, sub)
            entry = {
                "type": metadata.type.value,
                "registeredConsumers": sorted(r.consumer_name for r in registrations),
            }
            coordinator = self._coordinators.get(sub)
            if coordinator is not None:
                entry["coordinator"] = coordinator.stats()
            subscriptions[sub] = entry
        pending = await self._resources.get_operation(self.topic)
        return {
            "topic": str(self.topic),
            "epoch": layout.epoch,
            "totalSegments": len(layout.segments),
            "activeSegments": len(layout.active_segments),
            "sealedSegments": len(layout.sealed_segments),
            "entryBuckets": layout.entry_buckets,
            "segments": segments,
            "subscriptions": subscriptions,
            "controller": {
                "leaderBrokerUrl": await self.read_leader_url(),
                "isLeader": self.is_leader,
                "operationInFlight": pending[0] if pending else None,
                "operationRecovery": self._recovery.stats(),
                "lastSplitAtMs": self.last_split_at_ms,
                "lastMergeAtMs": self.last_merge_at_ms,
            },
        }


__all__ = ["STEPS", "ScalableTopicController", "StepHook"]
