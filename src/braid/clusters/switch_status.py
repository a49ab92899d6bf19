"""What ``status`` and ``cleanup`` report about a storage-cluster switch (PIP-470), computed from
the persisted :class:`~braid.core.storage_switch.SwitchState` without I/O.

``switch_status`` is the ``switch`` object of ``GET /admin/v2/bookie-clusters/status``: the
phase under PIP-470's name, its sub-state (``awaitingRollbackWindow`` in CLEANUP,
``newCopiesDeletionAtMillis`` in ROLLBACK), progress counts and the failed or deferred ledgers.
``cleanup_preview`` lists what a ``cleanup`` request would delete now: the source copies of
promoted ledgers, or, after a rollback, the target copies kept for delayed deletion.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from braid.core.storage_switch import (
    CleanupRequest,
    ItemStatus,
    MigrationItem,
    StepKind,
    SwitchPhase,
    SwitchState,
    cleanup_deadline_ms,
    discard_deadline_ms,
    next_step,
)


def _rows(items: list[MigrationItem]) -> list[dict[str, Any]]:
    return [
        {
            "kind": i.kind.value,
            "owner": i.owner,
            "cursor": i.cursor,
            "ledgerId": i.ledger_id,
            "reason": i.reason,
        }
        for i in items
    ]


def switch_status(
    state: SwitchState, origin: str | None, window_ms: int, delay_ms: int
) -> dict[str, Any]:
    """The ``switch`` object of ``status`` (``origin``: who orchestrates now, from the
    directive)."""
    return {
        "source": state.source,
        "target": state.target,
        "origin": origin,
        "phase": state.phase.value,
        "finished": state.terminal,
        "awaitingRollbackWindow": state.phase is SwitchPhase.CLEANUP and not state.cleanup_started,
        "switchTimestampMillis": state.switched_ms,
        "windowClosesAtMillis": cleanup_deadline_ms(state, window_ms),
        "newCopiesDeletionAtMillis": discard_deadline_ms(state, delay_ms)
        if state.phase is SwitchPhase.ROLLBACK
        else None,
        "progress": state.progress(),
        "promotedViaRolloverFallback": state.count(ItemStatus.ROLLED_OVER),
        "failedLedgers": _rows(state.failed()),
        "deferredLedgers": _rows([i for i in state.items if i.status is ItemStatus.DEFERRED]),
        "rollbackRequested": state.rollback_requested,
        "finishedMillis": state.finished_ms,
    }


def cleanup_preview(
    state: SwitchState, request: CleanupRequest, window_ms: int, delay_ms: int
) -> tuple[list[dict[str, Any]], int]:
    """What ``request`` would delete if it ran now, and when the guard (the rollback window, or
    after a rollback the deletion delay) lets it run unforced."""
    if state.phase is SwitchPhase.ROLLBACK:
        deadline = discard_deadline_ms(state, delay_ms)
        if deadline is None:  # still reverting: nothing is scheduled for deletion yet
            return [], -1
        preview = dataclasses.replace(state, cleanup=dataclasses.replace(request, force=True))
        kind, cluster = StepKind.DISCARD, state.target
    else:
        deadline = cleanup_deadline_ms(state, window_ms)
        preview = dataclasses.replace(
            state, phase=SwitchPhase.CLEANUP, cleanup_started=True, cleanup=request
        )
        kind, cluster = StepKind.CLEANUP, ""
    step = next_step(preview, deadline, window_ms, 1, delay_ms)
    ledgers = [
        {
            "kind": i.kind.value,
            "owner": i.owner,
            "cursor": i.cursor,
            "ledgerId": i.ledger_id,
            "cluster": cluster or i.source,
        }
        for i in (step.items if step.kind is kind else ())
    ]
    return ledgers, deadline


__all__ = ["cleanup_preview", "switch_status"]
