"""Migrating a classic (partitioned) topic to a scalable topic, the pure part (ADR 0063).

Nothing here does I/O or reads a clock: the executor reads the recorded :class:`MigrationState`
(``/admin/scalable-migrations/<source>``), asks :func:`next_step` what to do, does it, records
the outcome with the matching ``with_*`` transition and writes the new state with
compare-and-swap on the version it read. Every step is idempotent, so a run killed between any two
steps resumes from the record to the same result.

Phases (:class:`MigrationPhase`)::

    RECORDED -> SEGMENTS_CREATED -> TERMINATING -> PARTITIONS_TERMINATED -> LAYOUT_PUBLISHED -> DONE
    RECORDED | SEGMENTS_CREATED -> ROLLING_BACK -> ROLLED_BACK

* ``RECORDED``: the request, with every subscription of the partitions and its mode.
* ``SEGMENTS_CREATED``: the new segment topics exist, each with a cursor at earliest for every
  recorded subscription; nothing is visible to a client yet.
* ``TERMINATING``: the point of no return, recorded *before* the first partition is terminated
  (a managed ledger cannot be un-terminated), so a rollback request - also a CAS on the record -
  and the first termination can never both win. ``terminated`` lists the partitions done, with
  each one's last position.
* ``PARTITIONS_TERMINATED``: every partition terminated, subscriptions synchronised (one created
  on a partition meanwhile got its segment cursors too).
* ``LAYOUT_PUBLISHED``: the scalable topic's layout (:meth:`SegmentLayout.migrated`, stamped with
  ``now_ms``) and its subscriptions' metadata exist; clients see the topic.
* ``DONE``: the controller runs; the record stays as the old name's redirect.

Invariants of a record: ``terminated`` is empty before ``TERMINATING`` and complete from
``PARTITIONS_TERMINATED`` on; a rollback is only ever recorded before ``TERMINATING``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from braid.core.errors import ConflictError, IllegalStateError, InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import (
    MAX_PARTITIONS,
    partition_index,
    partition_name,
    partitioned_topic_of,
)
from braid.core.ranges import RING_SIZE

#: Where migration records live in the metadata store, one child per source topic.
MIGRATIONS_ROOT = "/admin/scalable-migrations"


class MigrationPhase(StrEnum):
    """Where a migration stands; the spelling is the recorded one."""

    RECORDED = "RECORDED"
    SEGMENTS_CREATED = "SEGMENTS_CREATED"
    TERMINATING = "TERMINATING"
    PARTITIONS_TERMINATED = "PARTITIONS_TERMINATED"
    LAYOUT_PUBLISHED = "LAYOUT_PUBLISHED"
    DONE = "DONE"
    ROLLING_BACK = "ROLLING_BACK"
    ROLLED_BACK = "ROLLED_BACK"


#: The phases a rollback may still be requested from (nothing terminated yet).
ROLLBACK_PHASES = frozenset({MigrationPhase.RECORDED, MigrationPhase.SEGMENTS_CREATED})
TERMINAL_PHASES = frozenset({MigrationPhase.DONE, MigrationPhase.ROLLED_BACK})


class SubscriptionMode(StrEnum):
    """The scalable subscription a partition subscription becomes (same spelling as
    ``braid.scalable.resources.SubscriptionType``)."""

    STREAM = "STREAM"
    QUEUE = "QUEUE"


#: Pulsar subscription type -> scalable mode: Exclusive/Failover/Key_Shared promised per-key
#: order, so they become Stream; Shared promised none, so it becomes Queue.
_MODE_OF_TYPE = {
    "Exclusive": SubscriptionMode.STREAM,
    "Failover": SubscriptionMode.STREAM,
    "Key_Shared": SubscriptionMode.STREAM,
    "Shared": SubscriptionMode.QUEUE,
}


def mode_of(sub_type: str | None, override: str | None = None) -> SubscriptionMode:
    """The scalable mode of a partition subscription of Pulsar type ``sub_type`` (``None``: no
    consumer connected, so unknown). An explicit ``override`` (``STREAM``/``QUEUE``) wins; an
    unknown type is a Stream, the mode that never reorders a key.

    Raises:
        InvalidInputError: ``override`` or ``sub_type`` is not a known name.
    """
    if override is not None:
        try:
            return SubscriptionMode(override.upper())
        except ValueError:
            raise InvalidInputError(
                f"unknown subscription mode {override!r} (expected STREAM or QUEUE)"
            ) from None
    if sub_type is None:
        return SubscriptionMode.STREAM
    mode = _MODE_OF_TYPE.get(sub_type)
    if mode is None:
        raise InvalidInputError(
            f"unknown subscription type {sub_type!r} (expected one of {sorted(_MODE_OF_TYPE)})"
        )
    return mode


class MigrationPastNoReturn(ConflictError):
    """A rollback was asked for after a partition may have been terminated."""


class MigrationStepOutOfOrder(IllegalStateError):
    """A transition was applied to a record in another phase (a stale executor)."""


@dataclass(frozen=True, slots=True)
class Position:
    """A partition's last position when it was terminated."""

    ledger_id: int
    entry_id: int

    def to_json(self) -> list[int]:
        return [self.ledger_id, self.entry_id]


@dataclass(frozen=True)
class MigrationState:
    """The recorded state of one migration; immutable and validated on construction.

    Attributes:
        source: the canonical ``persistent://`` name of the classic topic.
        target: the canonical ``topic://`` name of the scalable topic.
        partitions: the source's partition count (0: not partitioned, one root wraps it).
        segments: how many active segments the new topic starts with.
        now_ms: the time stamped on the new layout (chosen once, at the request).
        phase: where the migration stands.
        subscriptions: every subscription carried over, with its scalable mode.
        terminated: the partitions terminated so far, with their last position.
        failure: the last step's error, for ``status`` (cleared by the next success).

    Raises:
        InvalidInputError: a field is malformed or the record contradicts its phase.
    """

    source: str
    target: str
    partitions: int
    segments: int
    now_ms: int
    phase: MigrationPhase = MigrationPhase.RECORDED
    subscriptions: Mapping[str, SubscriptionMode] = field(
        default_factory=lambda: MappingProxyType({})
    )
    terminated: Mapping[int, Position] = field(default_factory=lambda: MappingProxyType({}))
    failure: str | None = None

    def __post_init__(self) -> None:
        _check_name(self.source, TopicDomain.PERSISTENT, "source")
        _check_name(self.target, TopicDomain.TOPIC, "target")
        _check_int("partitions", self.partitions, 0, MAX_PARTITIONS)
        _check_int("segments", self.segments, 1, RING_SIZE)
        _check_int("nowMs", self.now_ms, 0, 2**63 - 1)
        if not isinstance(self.phase, MigrationPhase):
            raise InvalidInputError(f"phase must be a MigrationPhase, got {self.phase!r}")
        subs: dict[str, SubscriptionMode] = {}
        for name in sorted(self.subscriptions):
            mode = self.subscriptions[name]
            if not isinstance(name, str) or not name:
                raise InvalidInputError(f"a subscription name must be a non-empty string: {name!r}")
            if not isinstance(mode, SubscriptionMode):
                raise InvalidInputError(f"subscription {name!r}: mode {mode!r} is not STREAM/QUEUE")
            subs[name] = mode
        object.__setattr__(self, "subscriptions", MappingProxyType(subs))
        done: dict[int, Position] = {}
        for index in sorted(self.terminated):
            if not 0 <= index < self.partition_count:
                raise InvalidInputError(
                    f"terminated partition {index} is not a partition of {self.source} "
                    f"(0..{self.partition_count - 1})"
                )
            done[index] = self.terminated[index]
        object.__setattr__(self, "terminated", MappingProxyType(done))
        if done and self.phase in (*ROLLBACK_PHASES, MigrationPhase.ROLLING_BACK):
            raise InvalidInputError(
                f"migration of {self.source} is {self.phase} but lists terminated partitions "
                f"{sorted(done)}"
            )
        if self.phase_index >= _ORDER.index(MigrationPhase.PARTITIONS_TERMINATED) and len(done) != (
            self.partition_count
        ):
            missing = sorted(set(range(self.partition_count)) - set(done))
            raise InvalidInputError(
                f"migration of {self.source} is {self.phase} but partitions {missing} are not "
                "terminated"
            )
        if self.failure is not None and not isinstance(self.failure, str):
            raise InvalidInputError(f"failure must be a string, got {self.failure!r}")

    # ------------------------------------------------------------------------------- derived

    @property
    def partition_count(self) -> int:
        """How many legacy roots the new layout has (1 for a non-partitioned source)."""
        return max(self.partitions, 1)

    @property
    def phase_index(self) -> int:
        """The phase's rank on the forward path (rollback phases rank before ``TERMINATING``)."""
        if self.phase in (MigrationPhase.ROLLING_BACK, MigrationPhase.ROLLED_BACK):
            return -1
        return _ORDER.index(self.phase)

    @property
    def legacy_topics(self) -> tuple[str, ...]:
        """The classic topics that become the layout's roots, in segment-id order."""
        if self.partitions == 0:
            return (self.source,)
        name = TopicName.parse(self.source)
        base = f"{name.domain}://{name.tenant}/{name.namespace}"
        return tuple(f"{base}/{partition_name(name.local_name, i)}" for i in range(self.partitions))

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def can_roll_back(self) -> bool:
        """Whether no partition can have been terminated yet."""
        return self.phase in ROLLBACK_PHASES

    def layout(self) -> SegmentLayout:
        """The layout the migration publishes (the same for every run of the same record)."""
        return SegmentLayout.migrated(self.legacy_topics, self.segments, self.now_ms)

    def status(self) -> dict[str, Any]:
        """What ``status`` reports: the phase, what is done and what is left."""
        return {
            "source": self.source,
            "target": self.target,
            "phase": self.phase.value,
            "partitions": self.partition_count,
            "partitionsTerminated": len(self.terminated),
            "partitionsLeft": [i for i in range(self.partition_count) if i not in self.terminated],
            "segments": self.segments,
            "subscriptions": {name: mode.value for name, mode in self.subscriptions.items()},
            "canRollBack": self.can_roll_back,
            "failure": self.failure,
        }

    # ------------------------------------------------------------------------------- codec

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "source": self.source,
            "target": self.target,
            "partitions": self.partitions,
            "segments": self.segments,
            "nowMs": self.now_ms,
            "phase": self.phase.value,
            "subscriptions": {name: mode.value for name, mode in self.subscriptions.items()},
            "terminated": {str(i): p.to_json() for i, p in self.terminated.items()},
        }
        if self.failure is not None:
            doc["failure"] = self.failure
        return doc

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> MigrationState:
        """Parse a recorded state.

        Raises:
            InvalidInputError: not a record :meth:`encode` wrote (unknown keys are refused).
        """
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise InvalidInputError(f"migration record is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise InvalidInputError(f"migration record must be a JSON object, got {doc!r}")
        unknown = sorted(set(doc) - _KEYS)
        if unknown:
            raise InvalidInputError(f"migration record has unknown field(s) {unknown}")
        try:
            return cls(
                source=doc["source"],
                target=doc["target"],
                partitions=doc["partitions"],
                segments=doc["segments"],
                now_ms=doc["nowMs"],
                phase=MigrationPhase(doc["phase"]),
                subscriptions={
                    name: SubscriptionMode(mode) for name, mode in doc["subscriptions"].items()
                },
                terminated={int(i): Position(*_position(p)) for i, p in doc["terminated"].items()},
                failure=doc.get("failure"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, InvalidInputError):
                raise
            raise InvalidInputError(f"malformed migration record: {exc!r}") from exc


_ORDER = (
    MigrationPhase.RECORDED,
    MigrationPhase.SEGMENTS_CREATED,
    MigrationPhase.TERMINATING,
    MigrationPhase.PARTITIONS_TERMINATED,
    MigrationPhase.LAYOUT_PUBLISHED,
    MigrationPhase.DONE,
)
_KEYS = frozenset(
    {
        "source",
        "target",
        "partitions",
        "segments",
        "nowMs",
        "phase",
        "subscriptions",
        "terminated",
        "failure",
    }
)


def _position(value: object) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(type(v) is int and v >= -1 for v in value)
    ):
        raise InvalidInputError(f"a terminated position is [ledgerId, entryId], got {value!r}")
    return value[0], value[1]


def _check_name(value: object, domain: TopicDomain, what: str) -> None:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a topic name, got {value!r}")
    name = TopicName.parse(value)
    if name.domain is not domain or str(name) != value:
        raise InvalidInputError(f"{what} {value!r} is not a canonical {domain}:// topic name")


def _check_int(what: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInputError(f"{what} must be an integer in {low}..{high}, got {value!r}")


# ----------------------------------------------------------------------------------- requests


def new_migration(
    source: str,
    partitions: int,
    now_ms: int,
    *,
    segments: int | None = None,
    target: str | None = None,
    subscriptions: Mapping[str, SubscriptionMode] | None = None,
) -> MigrationState:
    """The first record of a migration request.

    ``source`` may be a short name; ``target`` defaults to ``topic://`` with the source's
    tenant, namespace and local name, ``segments`` to the partition count (1 for a
    non-partitioned topic). The target must be in the source's namespace (its policies,
    permissions and bundles are the ones the partitions had).

    Raises:
        InvalidInputError: a bad name, count or a target in another namespace.
    """
    src = TopicName.parse(source)
    if src.domain is not TopicDomain.PERSISTENT:
        raise InvalidInputError(f"only a persistent:// topic can be migrated, got {source!r}")
    dst = (
        TopicName(TopicDomain.TOPIC, src.tenant, src.namespace, src.local_name)
        if target is None
        else TopicName.parse(target, TopicDomain.TOPIC)
    )
    if dst.domain is not TopicDomain.TOPIC:
        raise InvalidInputError(f"the target must be a topic:// name, got {target!r}")
    if (dst.tenant, dst.namespace) != (src.tenant, src.namespace):
        raise InvalidInputError(
            f"the target {dst} must be in the namespace of {src} ({src.tenant}/{src.namespace})"
        )
    return MigrationState(
        source=str(src),
        target=str(dst),
        partitions=partitions,
        segments=max(partitions, 1) if segments is None else segments,
        now_ms=now_ms,
        subscriptions=subscriptions or {},
    )


def source_of(topic: TopicName) -> TopicName:
    """The migration source a ``persistent://`` topic belongs to: a partition's partitioned
    topic, or the topic itself (a non-partitioned source wraps itself)."""
    if partition_index(topic.local_name) < 0:
        return topic
    local = partitioned_topic_of(topic.local_name)
    return TopicName(topic.domain, topic.tenant, topic.namespace, local)


def record_path(source: str) -> str:
    """The metadata path of the migration record of ``source`` (a canonical name)."""
    name = TopicName.parse(source)
    local = quote(name.local_name, safe="-_~@:=,+")
    return f"{MIGRATIONS_ROOT}/{name.tenant}/{name.namespace}/{local}"


# ----------------------------------------------------------------------------------- steps


class StepKind(StrEnum):
    """What the executor does next."""

    CREATE_SEGMENTS = "CREATE_SEGMENTS"  # every segment topic, a cursor per subscription
    BEGIN_TERMINATION = "BEGIN_TERMINATION"  # record TERMINATING (no side effect)
    TERMINATE_PARTITION = "TERMINATE_PARTITION"  # terminate ``partition``, note its position
    SYNC_SUBSCRIPTIONS = "SYNC_SUBSCRIPTIONS"  # list subscriptions again, cursors for new ones
    PUBLISH_LAYOUT = "PUBLISH_LAYOUT"  # create the layout + subscriptions' metadata
    FINISH = "FINISH"  # start the controller, record DONE
    DELETE_SEGMENTS = "DELETE_SEGMENTS"  # rollback: delete the segment topics created
    IDLE = "IDLE"  # nothing left


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a migration; ``partition`` is set for ``TERMINATE_PARTITION``."""

    kind: StepKind
    partition: int | None = None


def next_step(state: MigrationState) -> Step:
    """What to do next for ``state`` (pure; the same record always gives the same step)."""
    phase = state.phase
    if state.terminal:
        return Step(StepKind.IDLE)
    if phase is MigrationPhase.ROLLING_BACK:
        return Step(StepKind.DELETE_SEGMENTS)
    if phase is MigrationPhase.RECORDED:
        return Step(StepKind.CREATE_SEGMENTS)
    if phase is MigrationPhase.SEGMENTS_CREATED:
        return Step(StepKind.BEGIN_TERMINATION)
    if phase is MigrationPhase.TERMINATING:
        for index in range(state.partition_count):
            if index not in state.terminated:
                return Step(StepKind.TERMINATE_PARTITION, partition=index)
        return Step(StepKind.SYNC_SUBSCRIPTIONS)
    if phase is MigrationPhase.PARTITIONS_TERMINATED:
        return Step(StepKind.PUBLISH_LAYOUT)
    return Step(StepKind.FINISH)  # LAYOUT_PUBLISHED


# ----------------------------------------------------------------------------------- transitions


def _expect(state: MigrationState, *phases: MigrationPhase) -> None:
    if state.phase not in phases:
        expected = " or ".join(p.value for p in phases)
        raise MigrationStepOutOfOrder(
            f"migration of {state.source} is {state.phase.value}, not {expected}"
        )


def with_segments_created(state: MigrationState) -> MigrationState:
    """RECORDED -> SEGMENTS_CREATED."""
    _expect(state, MigrationPhase.RECORDED)
    return replace(state, phase=MigrationPhase.SEGMENTS_CREATED, failure=None)


def with_termination_begun(state: MigrationState) -> MigrationState:
    """SEGMENTS_CREATED -> TERMINATING: from here on there is no rollback."""
    _expect(state, MigrationPhase.SEGMENTS_CREATED)
    return replace(state, phase=MigrationPhase.TERMINATING, failure=None)


def with_partition_terminated(
    state: MigrationState, partition: int, ledger_id: int, entry_id: int
) -> MigrationState:
    """Note that ``partition`` is terminated at ``ledger_id:entry_id`` (TERMINATING).

    Recording the same partition again with the same position is a no-op (a resumed run
    terminates an already terminated topic and gets the same last position).
    """
    _expect(state, MigrationPhase.TERMINATING)
    position = Position(ledger_id, entry_id)
    known = state.terminated.get(partition)
    if known == position:
        return state
    if known is not None:
        raise MigrationStepOutOfOrder(
            f"partition {partition} of {state.source} was recorded terminated at "
            f"{known.ledger_id}:{known.entry_id}, now reported at {ledger_id}:{entry_id}"
        )
    return replace(state, terminated={**state.terminated, partition: position}, failure=None)


def with_subscriptions_synced(
    state: MigrationState, subscriptions: Mapping[str, SubscriptionMode]
) -> MigrationState:
    """TERMINATING (every partition done) -> PARTITIONS_TERMINATED, with the subscriptions found
    now added (a recorded subscription keeps its mode: its segment cursors exist already)."""
    _expect(state, MigrationPhase.TERMINATING)
    merged = {**subscriptions, **state.subscriptions}
    return replace(
        state, phase=MigrationPhase.PARTITIONS_TERMINATED, subscriptions=merged, failure=None
    )


def with_layout_published(state: MigrationState) -> MigrationState:
    """PARTITIONS_TERMINATED -> LAYOUT_PUBLISHED."""
    _expect(state, MigrationPhase.PARTITIONS_TERMINATED)
    return replace(state, phase=MigrationPhase.LAYOUT_PUBLISHED, failure=None)


def with_done(state: MigrationState) -> MigrationState:
    """LAYOUT_PUBLISHED -> DONE."""
    _expect(state, MigrationPhase.LAYOUT_PUBLISHED)
    return replace(state, phase=MigrationPhase.DONE, failure=None)


def with_rollback_requested(state: MigrationState) -> MigrationState:
    """RECORDED | SEGMENTS_CREATED -> ROLLING_BACK (again from ROLLING_BACK: no change).

    Raises:
        MigrationPastNoReturn: a partition may be terminated already.
    """
    if state.phase is MigrationPhase.ROLLING_BACK:
        return state
    if not state.can_roll_back:
        raise MigrationPastNoReturn(
            f"migration of {state.source} is {state.phase.value}: partitions are being or have "
            "been terminated, so it can only go forward"
        )
    return replace(state, phase=MigrationPhase.ROLLING_BACK, failure=None)


def with_rolled_back(state: MigrationState) -> MigrationState:
    """ROLLING_BACK -> ROLLED_BACK (the segment topics are deleted)."""
    _expect(state, MigrationPhase.ROLLING_BACK)
    return replace(state, phase=MigrationPhase.ROLLED_BACK, failure=None)


def with_failure(state: MigrationState, message: str) -> MigrationState:
    """The same phase, with the error of the last attempt recorded for ``status``."""
    return replace(state, failure=message)


__all__ = [
    "MIGRATIONS_ROOT",
    "ROLLBACK_PHASES",
    "TERMINAL_PHASES",
    "MigrationPastNoReturn",
    "MigrationPhase",
    "MigrationState",
    "MigrationStepOutOfOrder",
    "Position",
    "Step",
    "StepKind",
    "SubscriptionMode",
    "mode_of",
    "new_migration",
    "next_step",
    "record_path",
    "source_of",
    "with_done",
    "with_failure",
    "with_layout_published",
    "with_partition_terminated",
    "with_rollback_requested",
    "with_rolled_back",
    "with_segments_created",
    "with_subscriptions_synced",
    "with_termination_begun",
]
