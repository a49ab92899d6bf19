"""Running a migration of a classic topic to a scalable topic (ADR 0063): the I/O part.

:class:`MigrationExecutor` owns the record ``/admin/scalable-migrations/<tenant>/<ns>/<topic>``
(:func:`braid.core.migration.record_path`). It creates it with CAS ``-1`` (one migration per
source; a ``ROLLED_BACK`` record may be replaced, also by CAS), then loops: read the record, ask
:func:`~braid.core.migration.next_step`, do the step through the broker (classic topics) and the
:class:`~braid.scalable.segments.SegmentAdmin` (segment topics), and CAS the transition on the
version read. Every step is idempotent, so a run that dies anywhere - or loses a CAS to a
rollback request - is resumed by running again from the record. A failed step is recorded in
the record's ``failure`` for ``status`` and re-raised; nothing is retried behind the caller's
back.

The partitions are reached through the in-process broker (``braid standalone``,
:class:`LocalClassicTopics`) or, with ``braid broker``, on the brokers owning them through the
routed segments admin, which addresses a legacy root by its partition
(:class:`RoutedClassicTopics`). An executor built without ``legacy_roots_servable`` refuses
``BEGIN_TERMINATION`` - the point of no return - with :class:`MigrationNotServable`: the
partitions keep serving and a rollback stays possible. At start-up :meth:`resume_pending`
finishes what a crash left past the point of no return.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from braid.broker.consumer import SubType
from braid.broker.errors import TopicNotFound, TopicTerminated
from braid.broker.schemas.model import SchemaCompatibilityStrategy, schema_id_of
from braid.core.errors import (
    ConflictError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
)
from braid.core.migration import (
    MIGRATIONS_ROOT,
    MigrationPhase,
    MigrationState,
    Step,
    StepKind,
    SubscriptionMode,
    mode_of,
    new_migration,
    next_step,
    record_path,
    source_of,
    with_done,
    with_failure,
    with_layout_published,
    with_partition_terminated,
    with_rollback_requested,
    with_rolled_back,
    with_segments_created,
    with_subscriptions_synced,
    with_termination_begun,
)
from braid.core.names import SegmentTopicName, TopicName
from braid.metadata.api import BadVersion, MetadataStore
from braid.scalable.resources import (
    ScalableTopicAlreadyExists,
    ScalableTopicResources,
    SubscriptionMetadata,
    SubscriptionType,
    check_initial_segments,
)
from braid.scalable.segments import SegmentAdmin

if TYPE_CHECKING:
    from braid.broker.service import BrokerService
    from braid.clock import Clock

log = logging.getLogger(__name__)

#: Phases in which a migration no longer reserves its target's name (published or abandoned).
_TARGET_FREE = frozenset(
    {MigrationPhase.LAYOUT_PUBLISHED, MigrationPhase.DONE, MigrationPhase.ROLLED_BACK}
)

#: How many times a step's record is re-read after losing its CAS before giving up.
CAS_ATTEMPTS = 8


class MigrationExists(ConflictError):
    """The source already has a migration that is not rolled back."""


class MigrationTargetExists(ConflictError):
    """The scalable topic a migration would create exists already."""


class MigrationNotFound(NotFoundError):
    """The source has no migration record."""


class MigrationNotServable(IllegalStateError):
    """Publishing the layout would hand legacy roots to a controller that cannot serve them."""


class MigrationInProgress(ServiceUnavailableError):
    """The scalable topic is the target of a migration not published yet: retry once it is."""


class MigrationTargetReserved(ConflictError):
    """An operator asked to create the scalable topic a migration not published yet creates:
    that migration owns the name until it is published or rolled back."""


class ClassicTopics(Protocol):
    """What a migration asks of the classic (``persistent://``) side."""

    async def partition_count(self, source: str) -> int:
        """The partition count (0: a non-partitioned topic that exists).

        Raises:
            NotFoundError: no such topic.
        """
        ...

    async def subscriptions(self, topic: str) -> dict[str, str | None]:
        """The durable subscriptions of one topic with their Pulsar type (``None``: no consumer
        connected, so unknown)."""
        ...

    async def terminate(self, topic: str) -> tuple[int, int]:
        """Terminate the topic (idempotent); its last position ``(ledgerId, entryId)``."""
        ...

    async def copy_schema(self, source: str, target: str) -> int:
        """Register ``source``'s schema versions for ``target`` (idempotent; nothing when both
        share a schema id); how many versions ``source`` has."""
        ...


class LocalClassicTopics:
    """:class:`ClassicTopics` over the broker running in this process."""

    def __init__(self, broker: BrokerService) -> None:
        self._broker = broker

    async def partition_count(self, source: str) -> int:
        count = await self._broker.partitioned.partitions(TopicName.parse(source))
        if count:
            return count
        await self._broker.get_or_create_topic(source, create=False)  # TopicNotFound if absent
        return 0

    async def subscriptions(self, topic: str) -> dict[str, str | None]:
        try:
            loaded = await self._broker.get_or_create_topic(topic, create=False)
        except TopicNotFound:
            return {}  # a partition never written to has no subscription either
        found: dict[str, str | None] = {}
        for name, sub in loaded.subscriptions.items():
            sub_type = sub.sub_type
            found[name] = None if sub_type is None else SubType.Name(sub_type)
        return found

    async def terminate(self, topic: str) -> tuple[int, int]:
        # A partition never written to is created first: the root then exists, empty and sealed.
        await self._broker.get_or_create_topic(topic, create=True)
        position = await self._broker.terminate_topic(topic)
        return position.ledger_id, position.entry_id

    async def copy_schema(self, source: str, target: str) -> int:
        source_id = schema_id_of(TopicName.parse(source))
        target_id = schema_id_of(TopicName.parse(target))
        registry = self._broker.schemas.registry
        versions = await registry.get_all(source_id)
        if source_id != target_id:
            for stored in versions:  # in order, as the source accepted them
                await registry.put_if_absent(
                    target_id, stored.schema, SchemaCompatibilityStrategy.ALWAYS_COMPATIBLE
                )
        return len(versions)


class RoutedClassicTopics:
    """:class:`ClassicTopics` among several brokers (``braid broker``): a partition is reached
    on the broker that owns it through the controller's routed
    :class:`~braid.scalable.segments.SegmentAdmin` (which addresses a legacy root by its
    partition); the partition count and the schemas are read from the cluster's shared metadata.
    """

    def __init__(self, broker: BrokerService, segments: SegmentAdmin) -> None:
        self._broker = broker
        self._local = LocalClassicTopics(broker)
        self._segments = segments

    async def partition_count(self, source: str) -> int:
        name = TopicName.parse(source)
        count = await self._broker.partitioned.partitions(name)
        if count:
            return count
        if not await self._segments.segment_exists(name):
            raise TopicNotFound(f"topic {source} does not exist")
        return 0

    async def subscriptions(self, topic: str) -> dict[str, str | None]:
        name = TopicName.parse(topic)
        durable = await self._segments.list_subscriptions(name)
        if not durable:
            return {}
        stats = await self._segments.stats(name) or {}
        described = stats.get("subscriptions")
        types = described if isinstance(described, dict) else {}
        found: dict[str, str | None] = {}
        for sub in durable:
            entry = types.get(sub)
            sub_type = entry.get("type") if isinstance(entry, dict) else None
            found[sub] = sub_type if isinstance(sub_type, str) else None
        return found

    async def terminate(self, topic: str) -> tuple[int, int]:
        name = TopicName.parse(topic)
        # A partition never written to is created first: the root then exists, empty and sealed.
        await self._segments.create_segment(name, ())
        await self._segments.terminate_segment(name)
        stats = await self._segments.stats(name) or {}
        last = str(stats.get("lastConfirmedEntry", ""))
        ledger_id, _, entry_id = last.partition(":")
        if stats.get("terminated") is not True or not entry_id:
            raise IllegalStateError(f"{topic} did not report its termination: {last!r}")
        return int(ledger_id), int(entry_id)

    async def copy_schema(self, source: str, target: str) -> int:
        return await self._local.copy_schema(source, target)


@dataclass(frozen=True)
class RecordedMigration:
    state: MigrationState
    version: int


class MigrationExecutor:
    """Starts, runs, rolls back and reports migrations (one record per source)."""

    def __init__(
        self,
        store: MetadataStore,
        resources: ScalableTopicResources,
        segments: SegmentAdmin,
        classic: ClassicTopics,
        clock: Clock,
        *,
        legacy_roots_servable: bool = False,
        phase_hook: Callable[[str], Awaitable[None]] | None = None,
        max_segments: int | None = None,
    ) -> None:
        self._store = store
        self._resources = resources
        self._segments = segments
        self._classic = classic
        self._clock = clock
        self._servable = legacy_roots_servable
        self._phase_hook = phase_hook  # a test's fault point (faults.MIGRATION_FAULT_ENV)
        self._max_segments = max_segments  # scalableTopicMaxSegments, as a create's

    # ------------------------------------------------------------------------------- requests

    async def request(
        self,
        source: str,
        *,
        segments: int | None = None,
        target: str | None = None,
        modes: Mapping[str, str] | None = None,
    ) -> MigrationState:
        """Record a new migration of ``source`` (not run yet: :meth:`run` does).

        ``modes`` overrides the scalable mode of named subscriptions (``STREAM``/``QUEUE``).

        Raises:
            NotFoundError: no such topic. MigrationExists: a migration is recorded already.
            InvalidInputError: a bad name, count (``segments`` above ``max_segments``) or mode.
        """
        name = str(TopicName.parse(source))
        if self._max_segments is not None:
            check_initial_segments(segments, self._max_segments)
        existing = await self._read(name)
        expected = -1
        if existing is not None:
            if existing.state.phase is not MigrationPhase.ROLLED_BACK:
                raise MigrationExists(
                    f"{name} already has a migration to {existing.state.target} "
                    f"({existing.state.phase.value})"
                )
            expected = existing.version
        partitions = await self._classic.partition_count(name)
        draft = new_migration(
            name, partitions, self._clock.now_ms(), segments=segments, target=target
        )
        subscriptions = await self._discover(draft, modes or {})
        state = new_migration(
            name,
            partitions,
            draft.now_ms,
            segments=segments,
            target=target,
            subscriptions=subscriptions,
        )
        if await self._resources.get_layout(TopicName.parse(state.target)) is not None:
            raise MigrationTargetExists(f"the scalable topic {state.target} exists already")
        try:
            await self._store.put(record_path(name), state.encode(), expected)
        except BadVersion:
            raise MigrationExists(f"{name}: another migration was recorded meanwhile") from None
        log.info("recorded the migration of %s to %s", name, state.target)
        return state

    async def rollback(self, source: str) -> MigrationState:
        """Ask for a rollback (CAS) and run it to ``ROLLED_BACK``.

        Raises:
            MigrationNotFound. MigrationPastNoReturn: a partition may be terminated already.
        """
        name = str(TopicName.parse(source))
        for _ in range(CAS_ATTEMPTS):
            recorded = await self._require(name)
            wanted = with_rollback_requested(recorded.state)
            if wanted is recorded.state or await self._cas(name, wanted, recorded.version):
                return await self.run(name)
        raise ConflictError(f"{name}: the rollback request kept losing to other writers")

    async def published_target(self, source: str) -> str | None:
        """The target of ``source``'s migration once its layout is published, else ``None``."""
        found = await self._read(str(TopicName.parse(source)))
        if found is None or found.state.phase not in (
            MigrationPhase.LAYOUT_PUBLISHED,
            MigrationPhase.DONE,
        ):
            return None
        return found.state.target

    async def pending_to(self, target: TopicName) -> str | None:
        """The source of an unfinished migration whose scalable topic is ``target`` and whose
        layout is not published yet, else ``None``.

        The target's name is reserved meanwhile: a client looking it up must not auto-create a
        one-segment topic there (the migration's publication would then fail while its
        partitions are terminated already), and an operator must not create it either.
        """
        for state in await self._records_in(
            f"{MIGRATIONS_ROOT}/{target.tenant}/{target.namespace}"
        ):
            if state.target == str(target) and state.phase not in _TARGET_FREE:
                return state.source
        return None

    async def refuse_recreating(self, topic: TopicName) -> None:
        """A broker's creation guard: refuse to auto-create a partition (or the name) of a
        source migrated past its point of no return. Once its drained partitions are collected
        (ADR 0063), an official client still using the old name would otherwise write to a new,
        empty topic that nobody reads; it gets ``TopicTerminated`` naming the scalable topic.

        Raises:
            TopicTerminated: ``topic`` belongs to a migrated source.
        """
        found = await self._read(str(source_of(topic)))
        if found is None:
            return
        state = found.state
        if state.can_roll_back or state.phase in (
            MigrationPhase.ROLLING_BACK,
            MigrationPhase.ROLLED_BACK,
        ):
            return
        raise TopicTerminated(
            f"{topic} was migrated to the scalable topic {state.target} (its partitions are "
            "terminated and may be collected): produce to and consume from that topic"
        )

    async def status(self, source: str) -> dict[str, object]:
        """The record's ``status`` (phase, what is done and what is left).

        Raises:
            MigrationNotFound.
        """
        return (await self._require(str(TopicName.parse(source)))).state.status()

    async def resume_pending(self) -> list[str]:
        """Finish every migration a crash left past its point of no return (``TERMINATING`` and
        later: producers of its partitions wait for it) or rolling back; return their sources.

        A migration stopped earlier - prepared, or refused - is left for its operator: resuming
        it would terminate partitions nobody asked to terminate yet. A failure is logged and
        recorded; the others still run.
        """
        resumed: list[str] = []
        for tenant in await self._store.children(MIGRATIONS_ROOT):
            for namespace in await self._store.children(f"{MIGRATIONS_ROOT}/{tenant}"):
                base = f"{MIGRATIONS_ROOT}/{tenant}/{namespace}"
                for state in await self._records_in(base):
                    if state.terminal or state.can_roll_back:
                        continue
                    log.warning("resuming the migration of %s (%s)", state.source, state.phase)
                    try:
                        await self.run(state.source)
                    except Exception:
                        log.exception("resuming the migration of %s failed", state.source)
                        continue
                    resumed.append(state.source)
        return resumed

    # ------------------------------------------------------------------------------- running

    async def run(self, source: str, *, until: MigrationPhase | None = None) -> MigrationState:
        """Run the recorded migration of ``source`` until it ends (``DONE`` or ``ROLLED_BACK``),
        or until the record reaches ``until`` (``SEGMENTS_CREATED``: prepared, still possible to
        roll back).

        Raises:
            MigrationNotFound. Whatever a step raised (recorded as the record's ``failure``).
        """
        name = str(TopicName.parse(source))
        conflicts = 0
        while True:
            recorded = await self._require(name)
            step = next_step(recorded.state)
            if step.kind is StepKind.IDLE or recorded.state.phase is until:
                return recorded.state
            try:
                updated = await self._do(recorded.state, step)
            except Exception as exc:
                log.warning("migration of %s: %s failed: %r", name, step.kind.value, exc)
                await self._cas(name, with_failure(recorded.state, repr(exc)), recorded.version)
                raise
            if await self._cas(name, updated, recorded.version):
                conflicts = 0
                log.info("migration of %s: %s -> %s", name, step.kind.value, updated.phase.value)
                if updated.phase is not recorded.state.phase:
                    await self._fault_point(updated.phase.value)
                elif step.kind is StepKind.TERMINATE_PARTITION:
                    await self._fault_point(f"TERMINATING+{len(updated.terminated)}")
                continue
            conflicts += 1  # a rollback request or another executor wrote first: re-read
            if conflicts >= CAS_ATTEMPTS:
                raise ConflictError(f"{name}: gave up after {conflicts} lost writes of its record")

    async def _do(self, state: MigrationState, step: Step) -> MigrationState:
        kind = step.kind
        if kind is StepKind.CREATE_SEGMENTS:
            for name in self._segment_names(state):
                await self._segments.create_segment(name, state.subscriptions)
            return with_segments_created(state)
        if kind is StepKind.BEGIN_TERMINATION:
            if not self._servable:
                # Refused before the point of no return: the partitions keep serving and the
                # migration can still be rolled back.
                raise MigrationNotServable(
                    f"the layout of {state.target} would have legacy roots, which this broker's "
                    "controller does not serve yet; the partitions of "
                    f"{state.source} are left untouched (ADR 0063)"
                )
            return with_termination_begun(state)
        if kind is StepKind.TERMINATE_PARTITION:
            assert step.partition is not None
            ledger_id, entry_id = await self._classic.terminate(state.legacy_topics[step.partition])
            await self._fault_point(f"UNRECORDED+{len(state.terminated) + 1}")
            return with_partition_terminated(state, step.partition, ledger_id, entry_id)
        if kind is StepKind.SYNC_SUBSCRIPTIONS:
            found = await self._discover(state, {})
            for name in self._segment_names(state):
                await self._segments.create_segment(name, found)
            return with_subscriptions_synced(state, found)
        if kind is StepKind.PUBLISH_LAYOUT:
            await self._publish(state)
            return with_layout_published(state)
        if kind is StepKind.FINISH:
            return with_done(state)
        for name in self._segment_names(state):  # DELETE_SEGMENTS
            await self._segments.delete_segment(name)
        return with_rolled_back(state)

    async def _publish(self, state: MigrationState) -> None:
        """Register the source's schema for the target (when their names differ), create the
        layout (CAS ``-1``; a resumed run finds its own) and the subscriptions' metadata, each
        cursor starting at the earliest position of every new segment."""
        target = TopicName.parse(state.target)
        layout = state.layout()
        await self._classic.copy_schema(state.source, state.target)
        try:
            await self._resources.create_layout(target, layout)
        except ScalableTopicAlreadyExists:
            found = (await self._resources.require_layout(target)).layout
            ours = set(state.legacy_topics)
            if found != layout and not any(
                s.legacy_topic_name in ours for s in found.legacy_segments
            ):
                raise MigrationExists(
                    f"{target} was created meanwhile with another layout; the migration of "
                    f"{state.source} cannot publish"
                ) from None
            # Our own layout, or one evolved from it by a split or merge: published before.
        for name, mode in state.subscriptions.items():
            metadata = SubscriptionMetadata(SubscriptionType(mode.value), True)
            await self._resources.create_subscription(target, name, metadata)

    # ------------------------------------------------------------------------------- helpers

    async def _records_in(self, base: str) -> list[MigrationState]:
        """The migration records of one namespace (an unreadable one is logged and skipped)."""
        states: list[MigrationState] = []
        for local in await self._store.children(base):
            found = await self._store.get(f"{base}/{local}")
            if found is None:
                continue
            try:
                states.append(MigrationState.decode(found[0]))
            except InvalidInputError as exc:
                log.warning("unreadable migration record %s/%s: %s", base, local, exc)
        return states

    async def _fault_point(self, point: str) -> None:
        if self._phase_hook is not None:
            await self._phase_hook(point)

    async def _discover(
        self, state: MigrationState, modes: Mapping[str, str]
    ) -> dict[str, SubscriptionMode]:
        """Every subscription of every partition, with its mode (a type seen on any partition
        decides; an override wins)."""
        types: dict[str, str | None] = {}
        for topic in state.legacy_topics:
            for name, sub_type in (await self._classic.subscriptions(topic)).items():
                if types.get(name) is None:
                    types[name] = sub_type
        return {name: mode_of(sub_type, modes.get(name)) for name, sub_type in types.items()}

    @staticmethod
    def _segment_names(state: MigrationState) -> list[SegmentTopicName]:
        target = TopicName.parse(state.target)
        return [
            SegmentTopicName.of(target, info.hash_range, info.segment_id)
            for info in state.layout().active_segments
        ]

    async def _read(self, source: str) -> RecordedMigration | None:
        found = await self._store.get(record_path(source))
        if found is None:
            return None
        data, stat = found
        return RecordedMigration(MigrationState.decode(data), stat.version)

    async def _require(self, source: str) -> RecordedMigration:
        found = await self._read(source)
        if found is None:
            raise MigrationNotFound(f"{source} has no migration to a scalable topic")
        return found

    async def _cas(self, source: str, state: MigrationState, version: int) -> bool:
        try:
            await self._store.put(record_path(source), state.encode(), version)
        except BadVersion:
            return False
        return True


__all__ = [
    "ClassicTopics",
    "LocalClassicTopics",
    "MigrationExecutor",
    "MigrationExists",
    "MigrationInProgress",
    "MigrationNotFound",
    "MigrationNotServable",
    "MigrationTargetExists",
    "MigrationTargetReserved",
    "RoutedClassicTopics",
]
