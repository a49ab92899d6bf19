"""The pure part of PIP-470 switching: documents, the directive, and the orchestrator's next step.

Property tests drive :func:`next_step` with an executor model whose every step may fail in the
ways PIP-470's failure table lists, and check that a run always ends in a terminal phase, never
promotes what BUILD did not copy, never deletes a source copy that is not promoted, and flips the
registry statuses only once nothing promoted is left on the old cluster.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.storage_switch import (
    BookieClusterInfo,
    CleanupRequest,
    ClusterStatus,
    InvalidClusterDocument,
    ItemKind,
    ItemStatus,
    MigrationItem,
    RegistryPaths,
    StepKind,
    SwitchPhase,
    SwitchState,
    SwitchTarget,
    can_roll_back,
    discard_deadline_ms,
    final_phase,
    new_switch_state,
    next_step,
    validate_registry_name,
    with_cleanup_done,
    with_cleanup_started,
    with_discovered,
    with_items,
    with_phase,
    with_reverted,
    with_rollback_ended,
)

DAY_MS = 24 * 3600 * 1000
WINDOW = 15 * DAY_MS
DELAY = 3600 * 1000


def _state(**changes: object) -> SwitchState:
    base = new_switch_state("old", "new", "http://b:8080", 1000, 5000, "old")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _item(
    ledger_id: int,
    status: ItemStatus = ItemStatus.PENDING,
    kind: ItemKind = ItemKind.SCHEMA,
    source: str = "old",
) -> MigrationItem:
    return MigrationItem(kind, f"t/ns/s{ledger_id}", "", ledger_id, source, status)


def test_cluster_document_round_trips_and_rejects_garbage() -> None:
    info = BookieClusterInfo("new", "zk://h:2181/ledgers-v2", ClusterStatus.STANDBY)
    assert BookieClusterInfo.decode(info.encode()) == info
    assert info.to_json() == {
        "name": "new",
        "metadataServiceUri": "zk://h:2181/ledgers-v2",
        "status": "STANDBY",
    }
    for raw in (
        b"",
        b"{}",
        b"[]",
        b'{"name":"x","metadataServiceUri":1,"status":"ACTIVE"}',
        b'{"name":"switch-target","metadataServiceUri":"m","status":"ACTIVE"}',
        b'{"name":"x","metadataServiceUri":"m","status":"BOGUS"}',
        b"\xff",
    ):
        with pytest.raises(InvalidClusterDocument):
            BookieClusterInfo.decode(raw)


def test_switch_target_is_the_seeds_two_lines() -> None:
    target = SwitchTarget("new-cluster", "https://broker-1:8080")
    assert target.encode() == b"new-cluster\norigin=https://broker-1:8080"
    assert SwitchTarget.decode(target.encode()) == target
    assert SwitchTarget.decode(b"new-cluster") == SwitchTarget("new-cluster", None)  # election
    for raw in (b"", b"\n", b"bad name\norigin=x", b"\xfe"):
        with pytest.raises(InvalidClusterDocument):
            SwitchTarget.decode(raw)


@pytest.mark.parametrize("name", ["", "a/b", "switch-target", "status", "-x", "x" * 200, None])
def test_reserved_and_malformed_names_are_refused(name: object) -> None:
    with pytest.raises(InvalidInputError):
        validate_registry_name(name)


def test_status_parse_is_case_insensitive() -> None:
    assert ClusterStatus.parse("standby") is ClusterStatus.STANDBY
    with pytest.raises(InvalidInputError):
        ClusterStatus.parse("LIVE")


@given(st.binary(max_size=200))
def test_state_decoder_never_raises_anything_but_its_error(raw: bytes) -> None:
    try:
        SwitchState.decode(raw)
    except InvalidClusterDocument:
        pass


def test_pip470_switch_states_named_and_ordered_as_pip470() -> None:
    state = _state()
    assert state.phase is SwitchPhase.SWITCH_TRIGGERED
    step = next_step(state, 0, WINDOW, 16)
    assert step.kind is StepKind.FINISH and step.phase is SwitchPhase.LIVE_DUAL_READ
    state = with_phase(state, SwitchPhase.LIVE_DUAL_READ, 0)
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.BUILD
    state = with_phase(state, SwitchPhase.BUILD, 0)
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.DISCOVER
    state = with_discovered(state, [_item(i) for i in range(40)])
    step = next_step(state, 0, WINDOW, 16)
    assert step.kind is StepKind.BUILD and len(step.items) == 16  # bounded concurrency
    state = with_items(
        state, [dataclasses.replace(i, status=ItemStatus.BUILT) for i in state.items]
    )
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.PROMOTE
    state = with_phase(state, SwitchPhase.PROMOTE, 0)
    step = next_step(state, 0, WINDOW, 16)
    assert step.kind is StepKind.PROMOTE and len(step.items) == 40
    state = with_items(
        state, [dataclasses.replace(i, status=ItemStatus.PROMOTED) for i in state.items]
    )
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.CLEANUP
    state = with_phase(state, SwitchPhase.CLEANUP, 0)
    assert can_roll_back(state)  # waiting for the window: nothing deleted yet
    wait = next_step(state, 2000, WINDOW, 16)
    assert wait.kind is StepKind.WAIT and wait.until_ms == 1000 + WINDOW
    assert next_step(state, 1000 + WINDOW, WINDOW, 16).kind is StepKind.START_CLEANUP
    state = with_cleanup_started(state)
    assert not can_roll_back(state)
    step = next_step(state, 0, WINDOW, 16)
    assert step.kind is StepKind.CLEANUP and len(step.items) == 40
    state = with_cleanup_done(
        state, [dataclasses.replace(i, status=ItemStatus.CLEANED) for i in step.items]
    )
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.FLIP_STATUS
    assert final_phase(state) is SwitchPhase.DONE
    done = with_phase(state, SwitchPhase.DONE, 7)
    assert done.finished_ms == 7 and next_step(done, 0, WINDOW, 16).kind is StepKind.IDLE
    assert [p.value for p in SwitchPhase] == [
        "NOT_REGISTERED",
        "STANDBY",
        "SWITCH_TRIGGERED",
        "LIVE_DUAL_READ",
        "BUILD",
        "PROMOTE",
        "CLEANUP",
        "DONE",
        "DONE_WITH_FAILURES",
        "ROLLBACK",
    ]


def test_forced_bounded_and_filtered_cleanup() -> None:
    items = [
        _item(1, ItemStatus.PROMOTED),
        _item(2, ItemStatus.PROMOTED, source="older"),
        _item(3, ItemStatus.PROMOTED),
    ]
    state = _state(
        phase=SwitchPhase.CLEANUP,
        discovered=True,
        items=tuple(items),
        cleanup=CleanupRequest(force=True, max_deletions=1),
    )
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.START_CLEANUP
    state = with_cleanup_started(state)
    step = next_step(state, 0, WINDOW, 16)
    assert [i.ledger_id for i in step.items] == [1]
    after = with_cleanup_done(
        state, [dataclasses.replace(step.items[0], status=ItemStatus.CLEANED)]
    )
    assert after.phase is SwitchPhase.CLEANUP and after.cleanup is None  # bound used up
    assert not after.cleanup_started  # waits again for the window or the next request
    filtered = dataclasses.replace(
        after,
        cleanup_started=True,
        cleanup=CleanupRequest(src_cluster_filter="older", force=True),
    )
    step = next_step(filtered, 0, WINDOW, 16)
    assert [i.ledger_id for i in step.items] == [2]
    rest = with_cleanup_done(
        filtered, [dataclasses.replace(step.items[0], status=ItemStatus.CLEANED)]
    )
    assert next_step(rest, 0, WINDOW, 16).phase is SwitchPhase.CLEANUP


def test_rollback_wins_and_reverts_only_promoted_items() -> None:
    state = _state(
        phase=SwitchPhase.CLEANUP,
        discovered=True,
        rollback_requested=True,
        items=(
            _item(1, ItemStatus.PROMOTED),
            _item(2, ItemStatus.FAILED),
            _item(3, ItemStatus.ROLLED_OVER),
        ),
    )
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.ROLLBACK
    state = dataclasses.replace(state, phase=SwitchPhase.ROLLBACK)
    step = next_step(state, 0, WINDOW, 16)
    assert step.kind is StepKind.ROLLBACK and [i.ledger_id for i in step.items] == [1]
    state = with_items(state, [dataclasses.replace(step.items[0], status=ItemStatus.REVERTED)])
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.REVERTED


def test_pip470_phase7_rollback_keeps_new_copies_for_delayed_deletion() -> None:
    delay = 60_000
    state = _state(
        phase=SwitchPhase.ROLLBACK,
        discovered=True,
        items=(
            _item(1, ItemStatus.REVERTED),
            _item(2, ItemStatus.BUILT),
            _item(3, ItemStatus.FAILED),
            _item(4, ItemStatus.ROLLED_OVER),
        ),
    )
    assert next_step(state, 500, WINDOW, 16, delay).kind is StepKind.REVERTED
    state = with_reverted(state, 500)
    assert discard_deadline_ms(state, delay) == 500 + delay
    wait = next_step(state, 600, WINDOW, 16, delay)
    assert wait.kind is StepKind.WAIT and wait.until_ms == 500 + delay  # copies kept
    assert not state.terminal and not can_roll_back(state)
    step = next_step(state, 500 + delay, WINDOW, 16, delay)
    assert step.kind is StepKind.DISCARD and [i.ledger_id for i in step.items] == [1, 2]
    # A forced cleanup deletes them before the delay, bounded by maxDeletions.
    forced = dataclasses.replace(state, cleanup=CleanupRequest(force=True, max_deletions=1))
    step = next_step(forced, 600, WINDOW, 16, delay)
    assert step.kind is StepKind.DISCARD and [i.ledger_id for i in step.items] == [1]
    after = with_cleanup_done(
        forced, [dataclasses.replace(step.items[0], status=ItemStatus.DISCARDED)]
    )
    assert after.cleanup is None and next_step(after, 600, WINDOW, 16, delay).kind is StepKind.WAIT
    after = with_items(after, [dataclasses.replace(after.items[1], status=ItemStatus.DISCARDED)])
    assert next_step(after, 600, WINDOW, 16, delay).kind is StepKind.END
    ended = with_rollback_ended(after, 700)
    assert ended.terminal and ended.phase is SwitchPhase.ROLLBACK
    assert next_step(ended, 700, WINDOW, 16, delay).kind is StepKind.IDLE
    # A new switch to the same target after a rollback starts afresh.
    fresh = new_switch_state("old", "new", "o", 9, 5000, "old", ended)
    assert fresh.items == () and fresh.phase is SwitchPhase.SWITCH_TRIGGERED


def _legacy(phase: str, items: list[MigrationItem]) -> bytes:
    doc = _state(items=tuple(items), finished_ms=77).to_json()
    for key in ("formatVersion", "cleanupStarted", "revertedMillis", "finished"):
        del doc[key]
    doc["phase"] = phase
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("old", "phase", "started", "finished"),
    [
        ("BUILD", SwitchPhase.BUILD, False, False),
        ("PROMOTE", SwitchPhase.PROMOTE, False, False),
        ("AWAIT_CLEANUP", SwitchPhase.CLEANUP, False, False),
        ("CLEANUP", SwitchPhase.CLEANUP, True, False),
        ("DONE", SwitchPhase.DONE, False, True),
        ("DONE_WITH_FAILURES", SwitchPhase.DONE_WITH_FAILURES, False, True),
        ("ROLLBACK", SwitchPhase.ROLLBACK, False, False),
        ("ROLLED_BACK", SwitchPhase.ROLLBACK, False, True),
    ],
)
def test_a_state_recorded_under_the_old_phase_names_is_migrated_on_read(
    old: str, phase: SwitchPhase, started: bool, finished: bool
) -> None:
    items = [_item(1, ItemStatus.REVERTED), _item(2, ItemStatus.PROMOTED)]
    state = SwitchState.decode(_legacy(old, items))
    assert (state.phase, state.cleanup_started, state.terminal) == (phase, started, finished)
    reverted = state.items[0].status
    # The old ROLLED_BACK had deleted the target copies; an old ROLLBACK had not yet.
    assert reverted is (ItemStatus.DISCARDED if old == "ROLLED_BACK" else ItemStatus.REVERTED)
    again = SwitchState.decode(state.encode())
    assert again == state and json.loads(state.encode())["formatVersion"] == 2


def test_an_in_flight_old_await_cleanup_resumes_and_can_still_roll_back() -> None:
    state = SwitchState.decode(_legacy("AWAIT_CLEANUP", [_item(1, ItemStatus.PROMOTED)]))
    assert can_roll_back(state)
    assert next_step(state, 1000 + WINDOW, WINDOW, 16).kind is StepKind.START_CLEANUP
    old_rollback = SwitchState.decode(_legacy("ROLLBACK", [_item(1, ItemStatus.REVERTED)]))
    assert next_step(old_rollback, 0, WINDOW, 16).kind is StepKind.REVERTED


def test_registry_paths_follow_the_configured_root() -> None:
    paths = RegistryPaths("/braid/storage-clusters")
    assert paths.switch_target == "/braid/storage-clusters/switch-target"
    assert paths.switch_state == "/braid/storage-clusters/switch-state"
    assert paths.cluster("new") == "/braid/storage-clusters/new"
    assert RegistryPaths().root == "/admin/bookie-clusters"
    for bad in ("", "/", "relative", "/trailing/", "/a//b"):
        with pytest.raises(InvalidInputError):
            RegistryPaths(bad)


def test_a_rollback_request_after_a_deletion_is_ignored() -> None:
    state = _state(
        phase=SwitchPhase.CLEANUP,
        discovered=True,
        rollback_requested=True,
        items=(_item(1, ItemStatus.CLEANED), _item(2, ItemStatus.PROMOTED)),
    )
    assert not can_roll_back(state)
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.WAIT
    assert not can_roll_back(dataclasses.replace(state, cleanup_started=True, items=()))


def test_a_switch_to_the_same_target_retries_failed_and_deferred_items() -> None:
    previous = _state(
        phase=SwitchPhase.DONE_WITH_FAILURES,
        discovered=True,
        items=(
            _item(1, ItemStatus.FAILED),
            _item(2, ItemStatus.DEFERRED),
            _item(3, ItemStatus.CLEANED),
        ),
    )
    retry = new_switch_state("old", "new", "o", 9, 5000, "old", previous)
    assert [i.status for i in retry.items] == [
        ItemStatus.PENDING,
        ItemStatus.BUILT,
        ItemStatus.CLEANED,
    ]
    assert retry.phase is SwitchPhase.BUILD and not retry.discovered
    assert retry.switched_ms == previous.switched_ms  # the window is the first switch's
    fresh = new_switch_state("old", "other", "o", 9, 5000, "old", previous)
    assert fresh.items == () and fresh.switched_ms == 9


def test_rediscovery_keeps_known_statuses() -> None:
    state = with_discovered(_state(), [_item(1), _item(2)])
    state = with_items(state, [dataclasses.replace(state.items[0], status=ItemStatus.PROMOTED)])
    again = with_discovered(dataclasses.replace(state, discovered=False), [_item(2), _item(4)])
    assert {(i.ledger_id, i.status) for i in again.items} == {
        (1, ItemStatus.PROMOTED),
        (2, ItemStatus.PENDING),
        (4, ItemStatus.PENDING),
    }


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(InvalidInputError):
        next_step(_state(), 0, WINDOW, 0)


# --- the executor model -----------------------------------------------------------------------

_BUILD = st.sampled_from([ItemStatus.BUILT, ItemStatus.BUILT, ItemStatus.FAILED])
_PROMOTE = st.sampled_from(
    [ItemStatus.PROMOTED, ItemStatus.PROMOTED, ItemStatus.ROLLED_OVER, ItemStatus.DEFERRED]
)


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 30),
    concurrency=st.integers(1, 20),
    outcomes=st.data(),
    rollback_at=st.one_of(st.none(), st.integers(0, 40)),
    max_deletions=st.integers(0, 5),
    flip_fails=st.booleans(),
)
def test_every_run_ends_in_a_terminal_phase_and_keeps_the_invariants(
    count: int,
    concurrency: int,
    outcomes: st.DataObject,
    rollback_at: int | None,
    max_deletions: int,
    flip_fails: bool,
) -> None:
    state = _state()
    now = 1000
    built_ever: set[int] = set()
    for turn in range(1000):
        if rollback_at is not None and turn == rollback_at and not state.terminal:
            # At any time, even after a bounded cleanup deleted copies: then it is ignored.
            state = dataclasses.replace(state, rollback_requested=True)
        step = next_step(state, now, WINDOW, concurrency, DELAY)
        if step.kind is StepKind.IDLE:
            break
        if step.kind is StepKind.DISCOVER:
            state = with_discovered(state, [_item(i) for i in range(count)])
        elif step.kind is StepKind.BUILD:
            assert len(step.items) <= concurrency
            assert all(i.status is ItemStatus.PENDING for i in step.items)
            done = [dataclasses.replace(i, status=outcomes.draw(_BUILD)) for i in step.items]
            built_ever |= {i.ledger_id for i in done if i.status is ItemStatus.BUILT}
            state = with_items(state, done)
        elif step.kind is StepKind.PROMOTE:
            assert all(i.ledger_id in built_ever for i in step.items)  # never promote uncopied
            state = with_items(
                state, [dataclasses.replace(i, status=outcomes.draw(_PROMOTE)) for i in step.items]
            )
            # Deferred items stay deferred until a later switch retries them.
        elif step.kind is StepKind.WAIT:
            if state.cleanup is None and max_deletions:
                state = dataclasses.replace(
                    state, cleanup=CleanupRequest(max_deletions=max_deletions, force=True)
                )
            else:
                now = step.until_ms
        elif step.kind is StepKind.CLEANUP:
            assert all(i.status is ItemStatus.PROMOTED for i in step.items)
            assert not max_deletions or state.cleanup is None or len(step.items) <= max_deletions
            state = with_cleanup_done(
                state, [dataclasses.replace(i, status=ItemStatus.CLEANED) for i in step.items]
            )
        elif step.kind is StepKind.FLIP_STATUS:
            assert state.count(ItemStatus.PROMOTED) == 0  # I12 only after every deletion
            state = dataclasses.replace(state, cleanup_status_failed=flip_fails)
            state = with_phase(state, final_phase(state), now)
        elif step.kind is StepKind.ROLLBACK:
            assert not state.count(ItemStatus.CLEANED)
            state = with_items(
                state, [dataclasses.replace(i, status=ItemStatus.REVERTED) for i in step.items]
            )
        elif step.kind is StepKind.START_CLEANUP:
            state = with_cleanup_started(state)
        elif step.kind is StepKind.REVERTED:
            assert state.count(ItemStatus.PROMOTED) == 0
            state = with_reverted(state, now)
        elif step.kind is StepKind.DISCARD:
            # Never before the delay unless forced; never a copy something still points at.
            assert now >= state.reverted_ms + DELAY or (state.cleanup and state.cleanup.force)
            assert all(i.status is not ItemStatus.PROMOTED for i in step.items)
            state = with_cleanup_done(
                state, [dataclasses.replace(i, status=ItemStatus.DISCARDED) for i in step.items]
            )
        elif step.kind is StepKind.END:
            state = with_rollback_ended(state, now)
        else:
            assert step.kind is StepKind.FINISH and step.phase is not None
            state = with_phase(state, step.phase, now)
    else:
        raise AssertionError(f"no terminal phase after 1000 steps: {state.phase}")
    assert state.terminal
    if state.phase is SwitchPhase.ROLLBACK:
        assert state.count(ItemStatus.PROMOTED) == 0 and not state.kept_target_copies()
    else:
        assert state.phase is (
            SwitchPhase.DONE_WITH_FAILURES if state.failed() or flip_fails else SwitchPhase.DONE
        )
    assert SwitchState.decode(state.encode()) == state
