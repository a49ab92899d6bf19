"""The records a PIP-470 switch keeps: a migration item's JSON and the state a switch starts or
resumes with - field by field, so a renamed key or a changed default cannot pass unnoticed."""

from __future__ import annotations

from dataclasses import replace

from braid.core.storage_switch import (
    CleanupRequest,
    ItemKind,
    ItemStatus,
    MigrationItem,
    SwitchPhase,
    SwitchState,
    new_switch_state,
)

CURSOR = MigrationItem(
    ItemKind.CURSOR,
    "t/ns/persistent/orders",
    "audit",
    41,
    "old",
    ItemStatus.FAILED,
    copied_last_entry=17,
    reason="bookie gone",
)


def test_a_migration_item_keeps_every_field_through_json() -> None:
    doc = CURSOR.to_json()
    assert doc == {
        "kind": "CURSOR",
        "owner": "t/ns/persistent/orders",
        "cursor": "audit",
        "ledgerId": 41,
        "source": "old",
        "status": "FAILED",
        "copiedLastEntry": 17,
        "reason": "bookie gone",
    }
    assert MigrationItem.from_json(doc) == CURSOR


def test_a_migration_item_without_its_optional_fields_gets_their_defaults() -> None:
    item = MigrationItem.from_json(
        {"kind": "SCHEMA", "owner": "7", "ledgerId": 3, "source": "old", "status": "PENDING"}
    )
    assert (item.cursor, item.copied_last_entry, item.reason) == ("", -1, "")


def test_a_cleanup_request_keeps_its_fields_through_json() -> None:
    request = CleanupRequest("old", 5, True)
    assert request.to_json() == {"srcClusterFilter": "old", "maxDeletions": 5, "force": True}
    assert CleanupRequest.from_json(request.to_json()) == request
    assert CleanupRequest.from_json({"maxDeletions": 0, "force": False}) == CleanupRequest()


def test_a_fresh_switch_starts_triggered_with_nothing_done() -> None:
    state = new_switch_state("old", "new", "http://o", 1_000, 77, "old")
    assert state == SwitchState(
        source="old",
        target="new",
        origin="http://o",
        phase=SwitchPhase.SWITCH_TRIGGERED,
        switched_ms=1_000,
        boundary_ledger_id=77,
        initial_cluster="old",
    )
    assert state.discovered is False and state.items == () and state.finished is False


def test_switching_again_to_the_same_target_resumes_build_and_retries_what_failed() -> None:
    deferred = replace(CURSOR, cursor="billing", status=ItemStatus.DEFERRED, reason="in use")
    promoted = replace(CURSOR, cursor="ops", status=ItemStatus.PROMOTED, reason="")
    previous = SwitchState(
        source="old",
        target="new",
        origin="http://first",
        phase=SwitchPhase.DONE_WITH_FAILURES,
        switched_ms=1_000,
        boundary_ledger_id=77,
        initial_cluster="old",
        discovered=True,
        items=(CURSOR, deferred, promoted),
        id_conflicts=2,
        cleanup=CleanupRequest("old", 1, False),
        rollback_requested=True,
        finished_ms=9_000,
        cleanup_started=True,
        finished=True,
    )
    resumed = new_switch_state("old", "new", "http://second", 20_000, 99, "other", previous)
    assert resumed.phase is SwitchPhase.BUILD
    assert resumed.origin == "http://second"
    assert resumed.discovered is False
    assert resumed.rollback_requested is False
    assert resumed.cleanup is None
    assert resumed.finished_ms == 0
    assert resumed.finished is False
    assert resumed.cleanup_started is False
    # Kept from the run it resumes: when it switched, the boundary, the conflicts seen.
    assert (resumed.switched_ms, resumed.boundary_ledger_id, resumed.initial_cluster) == (
        1_000,
        77,
        "old",
    )
    assert resumed.id_conflicts == 2
    failed, was_deferred, done = resumed.items
    assert (failed.status, failed.reason) == (ItemStatus.PENDING, "")
    assert (was_deferred.status, was_deferred.reason) == (ItemStatus.BUILT, "")
    assert done == promoted


def test_switching_to_another_target_or_after_a_rollback_starts_afresh() -> None:
    previous = new_switch_state("old", "new", None, 1_000, 77, "old")
    elsewhere = new_switch_state("old", "third", None, 5_000, 80, "old", previous)
    assert elsewhere.phase is SwitchPhase.SWITCH_TRIGGERED and elsewhere.switched_ms == 5_000
    rolled_back = replace(previous, phase=SwitchPhase.ROLLBACK)
    again = new_switch_state("old", "new", None, 6_000, 81, "old", rolled_back)
    assert again.phase is SwitchPhase.SWITCH_TRIGGERED and again.boundary_ledger_id == 81
