"""The recorded migration of a classic topic to a scalable topic and its step function (ADR 0063).

The executor is the caller's; here a small in-memory *world* stands for the effects a step has
(segment topics with cursors, terminated partitions, the published layout), each idempotent as the
real ones must be, and a record kept with compare-and-swap. A run killed after any number of
steps - before or after the step's effect, before its record is written - resumes from the
decoded record to exactly the world and record of an uninterrupted run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import ConflictError, IllegalStateError, InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.migration import (
    MigrationPastNoReturn,
    MigrationPhase,
    MigrationState,
    MigrationStepOutOfOrder,
    Position,
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
from braid.core.names import TopicName

STREAM, QUEUE = SubscriptionMode.STREAM, SubscriptionMode.QUEUE


@pytest.mark.parametrize(
    ("sub_type", "mode"),
    [
        ("Exclusive", STREAM),
        ("Failover", STREAM),
        ("Key_Shared", STREAM),
        ("Shared", QUEUE),
        (None, STREAM),
    ],
)
def test_a_partition_subscription_type_maps_to_the_scalable_mode(
    sub_type: str | None, mode: SubscriptionMode
) -> None:
    assert mode_of(sub_type) is mode


def test_an_explicit_mode_wins_and_a_bad_one_is_refused() -> None:
    assert mode_of("Failover", "queue") is QUEUE
    assert mode_of(None, "STREAM") is STREAM
    with pytest.raises(InvalidInputError, match="unknown subscription mode 'fast'"):
        mode_of("Shared", "fast")
    with pytest.raises(InvalidInputError, match="unknown subscription type 'Broadcast'"):
        mode_of("Broadcast")


def test_a_request_defaults_the_target_name_and_one_segment_per_partition() -> None:
    state = new_migration("t/ns/orders", 4, now_ms=5)
    assert state.source == "persistent://t/ns/orders"
    assert state.target == "topic://t/ns/orders"
    assert state.segments == 4
    assert state.phase is MigrationPhase.RECORDED
    assert state.legacy_topics == tuple(f"persistent://t/ns/orders-partition-{i}" for i in range(4))
    assert record_path(state.source) == "/admin/scalable-migrations/t/ns/orders"
    single = new_migration("persistent://t/ns/one", 0, now_ms=5, segments=3)
    assert single.legacy_topics == ("persistent://t/ns/one",)
    assert single.layout() == SegmentLayout.migrated(["persistent://t/ns/one"], 3, 5)


@pytest.mark.parametrize(
    ("source", "kwargs", "message"),
    [
        ("topic://t/ns/orders", {}, "only a persistent:// topic"),
        ("non-persistent://t/ns/orders", {}, "only a persistent:// topic"),
        ("t/ns/orders", {"target": "persistent://t/ns/x"}, "must be a topic:// name"),
        ("t/ns/orders", {"target": "topic://t/other/orders"}, "must be in the namespace"),
        ("t/ns/orders", {"segments": 0}, "segments must be an integer in 1..65536"),
    ],
)
def test_a_bad_request_is_refused_with_a_clear_error(
    source: str, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        new_migration(source, 4, 0, **kwargs)  # type: ignore[arg-type]


def test_a_record_contradicting_its_phase_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="is RECORDED but lists terminated partitions"):
        MigrationState(
            "persistent://t/ns/o", "topic://t/ns/o", 2, 2, 0, terminated={0: Position(1, 2)}
        )
    with pytest.raises(InvalidInputError, match=r"partitions \[1\] are not terminated"):
        MigrationState(
            "persistent://t/ns/o",
            "topic://t/ns/o",
            2,
            2,
            0,
            MigrationPhase.PARTITIONS_TERMINATED,
            terminated={0: Position(1, 2)},
        )
    with pytest.raises(InvalidInputError, match="terminated partition 2 is not a partition"):
        MigrationState(
            "persistent://t/ns/o",
            "topic://t/ns/o",
            2,
            2,
            0,
            MigrationPhase.TERMINATING,
            terminated={2: Position(1, 2)},
        )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[]", "must be a JSON object"),
        ("{", "is not JSON"),
        ('{"source": 1, "extra": 2}', r"unknown field\(s\) \['extra'\]"),
        ('{"source": "persistent://t/ns/o"}', "malformed migration record"),
    ],
)
def test_a_malformed_record_is_refused(raw: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        MigrationState.decode(raw)


def test_a_bad_phase_or_position_in_a_record_is_refused() -> None:
    doc = json.loads(new_migration("t/ns/o", 2, 0).encode())
    with pytest.raises(InvalidInputError, match="malformed migration record"):
        MigrationState.decode(json.dumps({**doc, "phase": "HALFWAY"}))
    terminating = {**doc, "phase": "TERMINATING", "terminated": {"0": [1]}}
    with pytest.raises(InvalidInputError, match=r"a terminated position is \[ledgerId, entryId\]"):
        MigrationState.decode(json.dumps(terminating))


def test_a_transition_from_the_wrong_phase_is_refused_as_out_of_order() -> None:
    state = new_migration("t/ns/o", 2, 0)
    with pytest.raises(MigrationStepOutOfOrder, match="is RECORDED, not SEGMENTS_CREATED"):
        with_termination_begun(state)
    with pytest.raises(MigrationStepOutOfOrder, match="is RECORDED, not TERMINATING"):
        with_partition_terminated(state, 0, 1, 1)
    assert isinstance(MigrationStepOutOfOrder("x"), IllegalStateError)


def test_a_partition_reported_terminated_at_another_position_is_refused() -> None:
    state = with_termination_begun(with_segments_created(new_migration("t/ns/o", 2, 0)))
    state = with_partition_terminated(state, 0, 7, 9)
    assert with_partition_terminated(state, 0, 7, 9) is state
    with pytest.raises(MigrationStepOutOfOrder, match="recorded terminated at 7:9, now"):
        with_partition_terminated(state, 0, 7, 10)


def test_rollback_is_possible_until_termination_begins_and_never_after() -> None:
    recorded = new_migration("t/ns/o", 2, 0)
    created = with_segments_created(recorded)
    for state in (recorded, created):
        rolling = with_rollback_requested(state)
        assert rolling.phase is MigrationPhase.ROLLING_BACK
        assert with_rollback_requested(rolling) is rolling
        assert next_step(rolling).kind is StepKind.DELETE_SEGMENTS
        done = with_rolled_back(rolling)
        assert done.terminal and next_step(done).kind is StepKind.IDLE
    terminating = with_termination_begun(created)
    with pytest.raises(MigrationPastNoReturn, match="can only go forward"):
        with_rollback_requested(terminating)
    assert isinstance(MigrationPastNoReturn("x"), ConflictError)


# ------------------------------------------------------------------------------ the world


@dataclass
class World:
    """The effects of the steps, each idempotent like the broker's operations."""

    partitions: int
    last_positions: dict[int, Position]
    subscriptions: dict[str, str | None]  # on the partitions: name -> Pulsar type (None: idle)
    segments: dict[int, set[str]] = field(default_factory=dict)  # segment id -> its cursors
    terminated: set[int] = field(default_factory=set)
    layout: SegmentLayout | None = None
    scalable_subscriptions: dict[str, SubscriptionMode] = field(default_factory=dict)
    controller_started: bool = False
    effects: int = 0

    def discover(self) -> dict[str, SubscriptionMode]:
        return {name: mode_of(t) for name, t in self.subscriptions.items()}

    def create_segments(self, state: MigrationState) -> None:
        for info in state.layout().active_segments:
            cursors = self.segments.setdefault(info.segment_id, set())
            cursors.update(state.subscriptions)
        self.effects += 1

    def terminate(self, partition: int) -> Position:
        self.terminated.add(partition)
        self.effects += 1
        return self.last_positions[partition]

    def sync(self, state: MigrationState) -> dict[str, SubscriptionMode]:
        found = self.discover()
        for cursors in self.segments.values():
            cursors.update(found)
        self.effects += 1
        return found

    def publish(self, state: MigrationState) -> None:
        layout = state.layout()
        if self.layout is None:  # a create with CAS -1
            self.layout = layout
        assert self.layout == layout, "a resumed run publishes the very same layout"
        self.scalable_subscriptions.update(state.subscriptions)
        self.effects += 1

    def delete_segments(self) -> None:
        self.segments.clear()
        self.effects += 1


class Store:
    """One record with a version, written with compare-and-swap."""

    def __init__(self, state: MigrationState) -> None:
        self.raw = state.encode()
        self.version = 0

    def read(self) -> tuple[MigrationState, int]:
        return MigrationState.decode(self.raw), self.version

    def cas(self, state: MigrationState, expected: int) -> bool:
        if expected != self.version:
            return False
        self.raw, self.version = state.encode(), self.version + 1
        return True


class Killed(Exception):
    pass


def run(world: World, store: Store, *, kill_at: int | None = None, before_cas: bool = False) -> int:
    """Drive the migration to a terminal phase; raise :class:`Killed` at step ``kill_at``
    (before its effect, or after the effect and before the CAS with ``before_cas``)."""
    steps = 0
    while steps < 100:  # a step function that never ends fails here rather than hanging
        state, version = store.read()
        step = next_step(state)
        if step.kind is StepKind.IDLE:
            return steps
        if kill_at == steps and not before_cas:
            raise Killed
        new = apply(world, state, step)
        if kill_at == steps:
            raise Killed
        assert store.cas(new, version)
        steps += 1
    raise AssertionError("the migration did not end within 100 steps")


def apply(world: World, state: MigrationState, step: Step) -> MigrationState:
    kind = step.kind
    if kind is StepKind.CREATE_SEGMENTS:
        world.create_segments(state)
        return with_segments_created(state)
    if kind is StepKind.BEGIN_TERMINATION:
        return with_termination_begun(state)
    if kind is StepKind.TERMINATE_PARTITION:
        index = step.partition
        assert index is not None
        pos = world.terminate(index)
        return with_partition_terminated(state, index, pos.ledger_id, pos.entry_id)
    if kind is StepKind.SYNC_SUBSCRIPTIONS:
        return with_subscriptions_synced(state, world.sync(state))
    if kind is StepKind.PUBLISH_LAYOUT:
        world.publish(state)
        return with_layout_published(state)
    if kind is StepKind.FINISH:
        world.controller_started = True
        return with_done(state)
    assert kind is StepKind.DELETE_SEGMENTS
    world.delete_segments()
    return with_rolled_back(state)


def fresh(partitions: int, subscriptions: Mapping[str, str | None]) -> tuple[World, Store]:
    world = World(
        partitions=partitions,
        last_positions={i: Position(10 + i, 100 * i) for i in range(max(partitions, 1))},
        subscriptions=dict(subscriptions),
    )
    state = new_migration(
        "t/ns/orders", partitions, 1234, segments=3, subscriptions=world.discover()
    )
    return world, Store(state)


SUBS = {"failover-sub": "Failover", "shared-sub": "Shared", "idle-sub": None}


def test_an_uninterrupted_run_terminates_every_partition_then_publishes_the_layout() -> None:
    world, store = fresh(4, SUBS)
    steps = run(world, store)
    final, _ = store.read()
    # create, begin, 4 terminations, sync, publish, finish
    assert steps == 9
    assert final.phase is MigrationPhase.DONE
    assert dict(final.terminated) == {i: Position(10 + i, 100 * i) for i in range(4)}
    assert world.terminated == {0, 1, 2, 3}
    assert world.layout == SegmentLayout.migrated(final.legacy_topics, 3, 1234)
    assert world.scalable_subscriptions == {
        "failover-sub": STREAM,
        "shared-sub": QUEUE,
        "idle-sub": STREAM,
    }
    assert all(cursors == set(SUBS) for cursors in world.segments.values())
    assert world.controller_started
    assert final.status()["partitionsLeft"] == []


@pytest.mark.parametrize("before_cas", [False, True], ids=["before-effect", "after-effect"])
@pytest.mark.parametrize("kill_at", range(9))
def test_a_run_killed_at_any_step_resumes_to_the_same_result(
    kill_at: int, before_cas: bool
) -> None:
    reference_world, reference_store = fresh(4, SUBS)
    run(reference_world, reference_store)
    world, store = fresh(4, SUBS)
    with pytest.raises(Killed):
        run(world, store, kill_at=kill_at, before_cas=before_cas)
    run(world, store)  # the next broker resumes from the record
    assert store.raw == reference_store.raw
    assert world.layout == reference_world.layout
    assert world.terminated == reference_world.terminated
    assert world.segments == reference_world.segments
    assert world.scalable_subscriptions == reference_world.scalable_subscriptions


def test_a_subscription_created_on_a_partition_before_termination_gets_its_segment_cursors() -> (
    None
):
    world, store = fresh(2, {"a": "Failover"})
    with pytest.raises(Killed):
        run(world, store, kill_at=2)  # segments created, termination begun
    world.subscriptions["late"] = "Shared"
    run(world, store)
    final, _ = store.read()
    assert dict(final.subscriptions) == {"a": STREAM, "late": QUEUE}
    assert all(cursors == {"a", "late"} for cursors in world.segments.values())
    assert world.scalable_subscriptions == {"a": STREAM, "late": QUEUE}


def test_a_rollback_racing_the_first_termination_lets_exactly_one_win() -> None:
    world, store = fresh(2, SUBS)
    with pytest.raises(Killed):
        run(world, store, kill_at=1)  # segments created; about to begin termination
    state, version = store.read()
    # The operator's rollback and the executor's BEGIN_TERMINATION read the same version.
    assert store.cas(with_rollback_requested(state), version)
    assert not store.cas(with_termination_begun(state), version)
    run(world, store)  # the executor re-reads: the rollback won
    final, _ = store.read()
    assert final.phase is MigrationPhase.ROLLED_BACK
    assert world.terminated == set() and world.segments == {} and world.layout is None

    world, store = fresh(2, SUBS)
    with pytest.raises(Killed):
        run(world, store, kill_at=2)  # termination begun
    state, _ = store.read()
    with pytest.raises(MigrationPastNoReturn):
        with_rollback_requested(state)


def test_a_failure_is_reported_until_the_next_step_succeeds() -> None:
    state = with_failure(new_migration("t/ns/o", 2, 0), "segment topic creation timed out")
    assert state.status()["failure"] == "segment topic creation timed out"
    assert MigrationState.decode(state.encode()) == state
    assert with_segments_created(state).failure is None


@settings(max_examples=100, deadline=None)
@given(
    partitions=st.integers(0, 8),
    segments=st.integers(1, 16),
    subs=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.sampled_from(["Exclusive", "Failover", "Shared", "Key_Shared", None]),
        max_size=4,
    ),
    kills=st.lists(st.integers(0, 14), max_size=4),
    before_cas=st.booleans(),
)
def test_any_sequence_of_kills_ends_in_the_same_record_and_layout(
    partitions: int,
    segments: int,
    subs: dict[str, str | None],
    kills: list[int],
    before_cas: bool,
) -> None:
    def start() -> tuple[World, Store]:
        world = World(
            partitions=partitions,
            last_positions={i: Position(i, i) for i in range(max(partitions, 1))},
            subscriptions=dict(subs),
        )
        state = new_migration(
            "t/ns/x", partitions, 9, segments=segments, subscriptions=world.discover()
        )
        return world, Store(state)

    reference_world, reference_store = start()
    run(reference_world, reference_store)
    world, store = start()
    for kill in kills:
        try:
            run(world, store, kill_at=kill, before_cas=before_cas)
        except Killed:
            pass
        # Whatever was cut, the record on the store is a valid one.
        MigrationState.decode(store.raw)
    run(world, store)
    assert store.raw == reference_store.raw
    assert world.layout == reference_world.layout
    assert world.layout is not None
    assert len(world.layout.legacy_segments) == max(partitions, 1)


def test_a_partition_belongs_to_its_partitioned_topic_and_a_plain_topic_to_itself() -> None:
    def source(name: str) -> str:
        return str(source_of(TopicName.parse(name)))

    assert source("persistent://t/ns/orders-partition-3") == "persistent://t/ns/orders"
    assert source("persistent://t/ns/orders") == "persistent://t/ns/orders"


def test_partition_zero_belongs_to_its_partitioned_topic_too() -> None:
    assert str(source_of(TopicName.parse("persistent://t/ns/o-partition-0"))) == (
        "persistent://t/ns/o"
    )


def test_a_record_path_keeps_the_characters_pulsar_allows_in_names_readable() -> None:
    assert record_path("persistent://t/ns/a@b:c=d,e+f~g") == (
        "/admin/scalable-migrations/t/ns/a@b:c=d,e+f~g"
    )
    assert record_path("persistent://t/ns/a%b") == "/admin/scalable-migrations/t/ns/a%25b"


def test_status_reports_the_phase_what_is_done_and_what_is_left() -> None:
    state = with_termination_begun(with_segments_created(new_migration("t/ns/o", 3, 0)))
    state = with_failure(with_partition_terminated(state, 1, 7, 9), "bookie gone")
    assert state.status() == {
        "source": "persistent://t/ns/o",
        "target": "topic://t/ns/o",
        "phase": "TERMINATING",
        "partitions": 3,
        "partitionsTerminated": 1,
        "partitionsLeft": [0, 2],
        "segments": 3,
        "subscriptions": {},
        "canRollBack": False,
        "failure": "bookie gone",
    }
    synced = with_subscriptions_synced(
        with_partition_terminated(with_partition_terminated(state, 0, 1, 1), 2, 1, 2),
        {"audit": QUEUE, "billing": STREAM},
    )
    report = synced.status()
    assert report["partitionsLeft"] == [] and report["partitionsTerminated"] == 3
    assert report["subscriptions"] == {"audit": QUEUE.value, "billing": STREAM.value}


def test_a_rollback_clears_the_failure_of_the_last_attempt() -> None:
    failed = with_failure(with_segments_created(new_migration("t/ns/o", 2, 0)), "timeout")
    rolling = with_rollback_requested(failed)
    assert rolling.failure is None
    assert with_rolled_back(with_failure(rolling, "again")).failure is None
    with pytest.raises(MigrationPastNoReturn) as late:
        with_rollback_requested(with_termination_begun(failed))
    assert str(late.value) == (
        "migration of persistent://t/ns/o is TERMINATING: partitions are being or have been "
        "terminated, so it can only go forward"
    )
