"""The pure part of PIP-470 switching: documents, the directive, and the orchestrator's next step.

Property tests drive :func:`next_step` with an executor model whose every step may fail in the
ways PIP-470's failure table lists, and check that a run always ends in a terminal phase, never
promotes what BUILD did not copy, never deletes a source copy that is not promoted, and flips the
registry statuses only once nothing promoted is left on the old cluster.
"""

from __future__ import annotations

import dataclasses

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
    StepKind,
    SwitchPhase,
    SwitchState,
    SwitchTarget,
    can_roll_back,
    final_phase,
    new_switch_state,
    next_step,
    validate_registry_name,
    with_cleanup_done,
    with_discovered,
    with_items,
    with_phase,
)

DAY_MS = 24 * 3600 * 1000
WINDOW = 15 * DAY_MS


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


def test_phases_in_order() -> None:
    state = _state()
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
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.AWAIT_CLEANUP
    state = with_phase(state, SwitchPhase.AWAIT_CLEANUP, 0)
    wait = next_step(state, 2000, WINDOW, 16)
    assert wait.kind is StepKind.WAIT and wait.until_ms == 1000 + WINDOW
    assert next_step(state, 1000 + WINDOW, WINDOW, 16).phase is SwitchPhase.CLEANUP
    state = with_phase(state, SwitchPhase.CLEANUP, 0)
    step = next_step(state, 0, WINDOW, 16)
    assert step.kind is StepKind.CLEANUP and len(step.items) == 40
    state = with_cleanup_done(
        state, [dataclasses.replace(i, status=ItemStatus.CLEANED) for i in step.items]
    )
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.FLIP_STATUS
    assert final_phase(state) is SwitchPhase.DONE
    done = with_phase(state, SwitchPhase.DONE, 7)
    assert done.finished_ms == 7 and next_step(done, 0, WINDOW, 16).kind is StepKind.IDLE


def test_forced_bounded_and_filtered_cleanup() -> None:
    items = [
        _item(1, ItemStatus.PROMOTED),
        _item(2, ItemStatus.PROMOTED, source="older"),
        _item(3, ItemStatus.PROMOTED),
    ]
    state = _state(
        phase=SwitchPhase.AWAIT_CLEANUP,
        discovered=True,
        items=tuple(items),
        cleanup=CleanupRequest(force=True, max_deletions=1),
    )
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.CLEANUP
    state = dataclasses.replace(state, phase=SwitchPhase.CLEANUP)
    step = next_step(state, 0, WINDOW, 16)
    assert [i.ledger_id for i in step.items] == [1]
    after = with_cleanup_done(
        state, [dataclasses.replace(step.items[0], status=ItemStatus.CLEANED)]
    )
    assert after.phase is SwitchPhase.AWAIT_CLEANUP and after.cleanup is None  # bound used up
    filtered = dataclasses.replace(
        after,
        phase=SwitchPhase.CLEANUP,
        cleanup=CleanupRequest(src_cluster_filter="older", force=True),
    )
    step = next_step(filtered, 0, WINDOW, 16)
    assert [i.ledger_id for i in step.items] == [2]
    rest = with_cleanup_done(
        filtered, [dataclasses.replace(step.items[0], status=ItemStatus.CLEANED)]
    )
    assert next_step(rest, 0, WINDOW, 16).phase is SwitchPhase.AWAIT_CLEANUP


def test_rollback_wins_and_reverts_only_promoted_items() -> None:
    state = _state(
        phase=SwitchPhase.AWAIT_CLEANUP,
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
    assert next_step(state, 0, WINDOW, 16).phase is SwitchPhase.ROLLED_BACK


def test_a_rollback_request_after_a_deletion_is_ignored() -> None:
    state = _state(
        phase=SwitchPhase.AWAIT_CLEANUP,
        discovered=True,
        rollback_requested=True,
        items=(_item(1, ItemStatus.CLEANED), _item(2, ItemStatus.PROMOTED)),
    )
    assert not can_roll_back(state)
    assert next_step(state, 0, WINDOW, 16).kind is StepKind.WAIT
    assert not can_roll_back(dataclasses.replace(state, phase=SwitchPhase.CLEANUP, items=()))


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
        if rollback_at is not None and turn == rollback_at and not state.phase.terminal:
            # At any time, even after a bounded cleanup deleted copies: then it is ignored.
            state = dataclasses.replace(state, rollback_requested=True)
        step = next_step(state, now, WINDOW, concurrency)
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
        else:
            assert step.kind is StepKind.FINISH and step.phase is not None
            state = with_phase(state, step.phase, now)
    else:
        raise AssertionError(f"no terminal phase after 1000 steps: {state.phase}")
    assert state.phase.terminal
    if state.phase is SwitchPhase.ROLLED_BACK:
        assert state.count(ItemStatus.PROMOTED) == 0
    else:
        assert state.phase is (
            SwitchPhase.DONE_WITH_FAILURES if state.failed() or flip_fails else SwitchPhase.DONE
        )
    assert SwitchState.decode(state.encode()) == state
