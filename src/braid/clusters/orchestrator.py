"""The switch orchestrator's executor (PIP-470's ``BookieClusterSwitchOrchestrator``):
SWITCH_TRIGGERED -> LIVE_DUAL_READ -> BUILD -> PROMOTE -> CLEANUP, and ROLLBACK, driven by
:func:`braid.core.storage_switch.next_step`.

Each turn reads the persisted :class:`SwitchState`, asks the pure decision for the next step,
executes it, and CAS-writes the state with the step's outcome applied (re-applied to a fresher
state when an operator's ``cleanup`` / ``rollback`` request changed it meanwhile). Every step is
idempotent, so a process killed mid-step redoes at most that step after a restart: a copy that
already exists is verified (``LedgerExists``), a CAS that already happened is recognised, a
deleted ledger is not missing.

* DISCOVER / BUILD: schema locators under ``/schemas`` and cursor nodes under the managed-ledger
  root name the ledgers stamped with the source cluster; each is copied with the same ledger id
  and entry ids (:mod:`braid.clusters.ledger_copy`), ``concurrency`` at a time.
* PROMOTE: a schema locator is CAS-rewritten changing only ``storageCluster`` of the built
  entries (I9/I10), up to 5 attempts; a cursor is re-attributed where it lives
  (:mod:`braid.clusters.cursor_promotion`, ADR 0061): under its lock when this broker has it
  open, by its owner's internal listener when another broker owns its topic, by a CAS of its
  node changing only ``bookieClusterName`` when no live cursor writes it. A cursor that wrote
  since BUILD rolls over to the active cluster (promoted via rollover) and its unneeded copy is
  deleted. BUILD fences (recovers) a source cursor ledger only when no other broker owns it.
* CLEANUP: the source copies of promoted ledgers are deleted; then the registry's statuses flip
  (source DEPRECATED, target ACTIVE: two CAS, I12).
* ROLLBACK: the attributions are CAS'd back; the target copies are kept, scheduled for delayed
  deletion (PIP-470): they are deleted once ``rollback_deletion_delay_ms`` has passed since the
  last attribution came back (or at a forced ``cleanup``), then the run ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from braid.broker.schemas.storage import SCHEMAS_ROOT
from braid.clock import Clock
from braid.clusters.cursor_promotion import CursorPromotion
from braid.clusters.ledger_copy import copy_ledger_preserving_ids
from braid.clusters.metrics import SwitchMetrics
from braid.clusters.registry import BookieClusterRegistry
from braid.core.errors import BraidError
from braid.core.storage_switch import (
    MAX_PROMOTE_RETRIES,
    ClusterStatus,
    ItemKind,
    ItemStatus,
    MigrationItem,
    Step,
    StepKind,
    SwitchPhase,
    SwitchState,
    final_phase,
    next_step,
    with_cleanup_done,
    with_cleanup_started,
    with_discovered,
    with_items,
    with_phase,
    with_reverted,
    with_rollback_ended,
)
from braid.ledger.codec import decode_cursor_info
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.ledger.names import decode_segment, encode_segment
from braid.metadata.api import BadVersion, MetadataStore
from braid.storage.api import NoSuchLedger, StorageError
from braid.storage.router import StorageRouter

log = logging.getLogger(__name__)

Transform = Callable[[SwitchState], SwitchState]
#: Called before each step is executed (tests inject faults and crashes here).
StepHook = Callable[[Step], object]


class SwitchOrchestrator:
    """Runs one switch's state machine to a terminal phase (see the module docstring)."""

    def __init__(
        self,
        registry: BookieClusterRegistry,
        router: StorageRouter,
        ml_factory: DefaultManagedLedgerFactory,
        clock: Clock,
        metrics: SwitchMetrics,
        *,
        window_ms: int,
        concurrency: int,
        rollback_deletion_delay_ms: int,
        step_hook: StepHook | None = None,
    ) -> None:
        self._registry = registry
        #: Where each cursor's PROMOTE runs (its owner); brokers set its routing.
        self.cursors = CursorPromotion(registry.metadata, ml_factory, router, metrics)
        self._cursors = self.cursors
        self._metadata: MetadataStore = registry.metadata
        self._router = router
        self._ml_factory = ml_factory
        self._clock = clock
        self._metrics = metrics
        self._window_ms = window_ms
        self._concurrency = concurrency
        self._delay_ms = rollback_deletion_delay_ms
        self._step_hook = step_hook
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Run in the background (no-op when already running)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run_forever())

    def wake(self) -> None:
        """Look at the state again now (an operator request arrived)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def wait_idle(self) -> None:
        """Wait until the run in progress stops (terminal phase or closed)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run_forever(self) -> None:
        while True:
            try:
                if not await self.run_once():
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("switch orchestrator step failed, retrying: %r", exc, exc_info=exc)
                await self._sleep_or_wake(1.0)

    # -- one turn ---------------------------------------------------------------------------------

    async def run_once(self) -> bool:
        """Execute one step; ``False`` once there is nothing left (terminal or no switch)."""
        got = await self._registry.state()
        if got is None:
            return False
        state, _ = got
        if state.target != self._router.active_name and not (
            state.rollback_requested or state.phase is SwitchPhase.ROLLBACK
        ):
            log.warning(
                "switch state names %s but %s is active: waiting for the switch directive",
                state.target,
                self._router.active_name,
            )
            return False
        now = self._clock.now_ms()
        step = next_step(state, now, self._window_ms, self._concurrency, self._delay_ms)
        if step.kind is StepKind.IDLE:
            return False
        if self._step_hook is not None:
            result = self._step_hook(step)
            if asyncio.iscoroutine(result):
                await result
        if step.kind is StepKind.WAIT:
            await self._sleep_or_wake(max(0.0, (step.until_ms - now) / 1000.0))
            return True
        transform = await self._execute(state, step)
        await self._update(transform)
        return True

    async def _sleep_or_wake(self, seconds: float) -> None:
        self._wake.clear()
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    async def _update(self, transform: Transform) -> SwitchState:
        """CAS ``transform(state)``, re-reading and re-applying on a conflict."""
        while True:
            got = await self._registry.state()
            if got is None:
                raise BraidError("the switch state disappeared")
            state, version = got
            updated = transform(state)
            try:
                await self._registry.write_state(updated, version)
            except BadVersion:
                continue
            return updated

    async def _execute(self, state: SwitchState, step: Step) -> Transform:
        now = self._clock.now_ms()
        if step.kind is StepKind.DISCOVER:
            items = await self._discover(state.source)
            log.info("switch %s -> %s: %d ledgers to copy", state.source, state.target, len(items))
            return lambda s: with_discovered(s, items)
        if step.kind is StepKind.BUILD:
            built, conflicts = await self._build(state, step.items)
            return lambda s: dataclasses.replace(
                with_items(s, built), id_conflicts=s.id_conflicts + conflicts
            )
        if step.kind is StepKind.PROMOTE:
            promoted = await self._promote(state, step.items)
            return lambda s: with_items(s, promoted)
        if step.kind is StepKind.CLEANUP:
            cleaned = await self._cleanup(step.items)
            return lambda s: with_cleanup_done(s, cleaned)
        if step.kind is StepKind.FLIP_STATUS:
            failed = await self._flip_status(state)
            return lambda s: with_phase(
                dataclasses.replace(s, cleanup_status_failed=failed),
                final_phase(dataclasses.replace(s, cleanup_status_failed=failed)),
                now,
            )
        if step.kind is StepKind.ROLLBACK:
            reverted = await self._rollback(state, step.items)
            return lambda s: with_items(s, reverted)
        if step.kind is StepKind.REVERTED:
            self._metrics.rollbacks += 1
            log.info(
                "switch %s -> %s rolled back: %d copies on %s kept for delayed deletion",
                state.source,
                state.target,
                len(state.kept_target_copies()),
                state.target,
            )
            return lambda s: with_reverted(s, now)
        if step.kind is StepKind.DISCARD:
            discarded = await self._discard(state.target, step.items)
            return lambda s: with_cleanup_done(s, discarded)
        if step.kind is StepKind.START_CLEANUP:
            return with_cleanup_started
        if step.kind is StepKind.END:
            return lambda s: with_rollback_ended(s, now)
        assert step.kind is StepKind.FINISH and step.phase is not None
        phase = step.phase
        log.info("switch %s -> %s: entering %s", state.source, state.target, phase.value)
        return lambda s: with_phase(s, phase, now)

    # -- DISCOVER ---------------------------------------------------------------------------------

    async def _discover(self, source: str) -> list[MigrationItem]:
        items = [
            *(await self._schema_items(source)),
            *(await self._cursor_items(source)),
        ]
        return items

    async def _schema_items(self, source: str) -> list[MigrationItem]:
        items: list[MigrationItem] = []
        for tenant in await self._metadata.children(SCHEMAS_ROOT):
            for namespace in await self._metadata.children(f"{SCHEMAS_ROOT}/{tenant}"):
                base = f"{SCHEMAS_ROOT}/{tenant}/{namespace}"
                for topic in await self._metadata.children(base):
                    got = await self._metadata.get(f"{base}/{topic}")
                    if got is None:
                        continue
                    schema_id = f"{tenant}/{namespace}/{topic}"
                    for entry in _locator_index(got[0], schema_id):
                        if entry.get("storageCluster") == source:
                            items.append(
                                MigrationItem(
                                    ItemKind.SCHEMA, schema_id, "", int(entry["ledgerId"]), source
                                )
                            )
        return items

    async def _cursor_items(self, source: str) -> list[MigrationItem]:
        root = self._ml_factory.root
        items: list[MigrationItem] = []
        for encoded_ml in await self._metadata.children(root):
            ml_path = f"{root}/{encoded_ml}"
            for encoded_cursor in await self._metadata.children(ml_path):
                got = await self._metadata.get(f"{ml_path}/{encoded_cursor}")
                if got is None:
                    continue
                try:
                    node = decode_cursor_info(got[0])
                except BraidError as exc:
                    log.warning("cursor node %s/%s unreadable: %s", ml_path, encoded_cursor, exc)
                    continue
                if node.cursors_ledger_id >= 0 and node.bookie_cluster_name == source:
                    items.append(
                        MigrationItem(
                            ItemKind.CURSOR,
                            decode_segment(encoded_ml),
                            decode_segment(encoded_cursor),
                            node.cursors_ledger_id,
                            source,
                        )
                    )
        return items

    # -- BUILD ------------------------------------------------------------------------------------

    async def _build(
        self, state: SwitchState, items: Sequence[MigrationItem]
    ) -> tuple[list[MigrationItem], int]:
        target = self._router.client_for(state.target)

        async def build_one(item: MigrationItem) -> tuple[MigrationItem, bool]:
            source = self._router.client_for(item.source)
            # A cursor ledger nobody here writes can be recovered (fenced) to copy its last
            # entry; a live one is copied up to its last add confirmed (PROMOTE compares).
            # Never while another broker may be writing it (ADR 0061).
            recover = item.kind is ItemKind.SCHEMA or await self._cursors.may_recover(item.owner)
            result = await copy_ledger_preserving_ids(
                item.ledger_id, source, target, recover=recover
            )
            kind = item.kind.value
            if result.conflict:
                self._metrics.id_conflicts += 1
            if result.ok:
                self._metrics.bump(self._metrics.built, kind)
                return (
                    dataclasses.replace(
                        item,
                        status=ItemStatus.BUILT,
                        copied_last_entry=result.copied_last_entry,
                        reason="",
                    ),
                    result.conflict,
                )
            if item.kind is ItemKind.CURSOR and await self._cursor_moved_on(item):
                # The cursor rolled over (and dropped this ledger) after DISCOVER: its new
                # ledger is on the active cluster already. Not a failure.
                await _delete_quietly(self._router, state.target, item.ledger_id)
                self._metrics.promoted_via_rollover += 1
                return dataclasses.replace(item, status=ItemStatus.ROLLED_OVER), False
            self._metrics.bump(self._metrics.failed, kind)
            log.warning("BUILD of %s ledger %d failed: %s", kind, item.ledger_id, result.reason)
            return dataclasses.replace(item, status=ItemStatus.FAILED, reason=result.reason), False

        results = await asyncio.gather(*(build_one(i) for i in items))
        return [r[0] for r in results], sum(1 for r in results if r[1])

    async def _cursor_moved_on(self, item: MigrationItem) -> bool:
        root = self._ml_factory.root
        path = f"{root}/{encode_segment(item.owner)}/{encode_segment(item.cursor)}"
        got = await self._metadata.get(path)
        if got is None:
            return True
        node = decode_cursor_info(got[0])
        return node.cursors_ledger_id != item.ledger_id or node.bookie_cluster_name != item.source

    # -- PROMOTE / ROLLBACK -----------------------------------------------------------------------

    async def _promote(
        self, state: SwitchState, items: Sequence[MigrationItem]
    ) -> list[MigrationItem]:
        out: list[MigrationItem] = []
        for schema_id, group in _schema_groups(items).items():
            out.extend(await self._reattribute_schema(schema_id, group, state.source, state.target))
        for item in items:
            if item.kind is ItemKind.CURSOR:
                out.append(await self._reattribute_cursor(item, item.source, state.target))
        for item in out:
            if item.status is ItemStatus.PROMOTED:
                self._metrics.bump(self._metrics.promoted, item.kind.value)
            elif item.status is ItemStatus.ROLLED_OVER:
                self._metrics.promoted_via_rollover += 1
                await _delete_quietly(self._router, state.target, item.ledger_id)
            elif item.status is ItemStatus.DEFERRED:
                self._metrics.promote_deferred += 1
        return out

    async def _rollback(
        self, state: SwitchState, items: Sequence[MigrationItem]
    ) -> list[MigrationItem]:
        out: list[MigrationItem] = []
        for schema_id, group in _schema_groups(items).items():
            done = await self._reattribute_schema(
                schema_id, group, state.target, item_source(group)
            )
            out.extend(
                # Done (or the schema is gone): reverted. Deferred: stays PROMOTED, retried.
                dataclasses.replace(i, status=ItemStatus.REVERTED)
                if i.status in (ItemStatus.PROMOTED, ItemStatus.ROLLED_OVER)
                else dataclasses.replace(i, status=ItemStatus.PROMOTED)
                for i in done
            )
        for item in items:
            if item.kind is ItemKind.CURSOR:
                done_item = await self._reattribute_cursor(item, state.target, item.source)
                if done_item.status is ItemStatus.DEFERRED:
                    out.append(dataclasses.replace(item, reason=done_item.reason))
                else:
                    # Reverted, or the cursor moved on to a new ledger (still readable by stamp).
                    out.append(dataclasses.replace(item, status=ItemStatus.REVERTED, reason=""))
        self._metrics.reverted += sum(1 for i in out if i.status is ItemStatus.REVERTED)
        return out

    async def _reattribute_schema(
        self, schema_id: str, items: Sequence[MigrationItem], from_cluster: str, to_cluster: str
    ) -> list[MigrationItem]:
        """CAS the locator, changing only ``storageCluster`` of these items' entries.

        Returns the items as PROMOTED (done or already done) or DEFERRED (CAS kept losing)."""
        ledger_ids = {i.ledger_id for i in items}
        path = f"{SCHEMAS_ROOT}/{schema_id}"
        for attempt in range(MAX_PROMOTE_RETRIES):
            got = await self._metadata.get(path)
            if got is None:
                # The schema was deleted with its ledgers: nothing left to re-point.
                return [dataclasses.replace(i, status=ItemStatus.ROLLED_OVER) for i in items]
            doc = json.loads(got[0].decode("utf-8"))
            changed = False
            for entry in doc.get("index", []):
                if int(entry["ledgerId"]) in ledger_ids and entry["storageCluster"] == from_cluster:
                    entry["storageCluster"] = to_cluster  # the only field changed (I9)
                    changed = True
            if not changed:
                break
            raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
            try:
                await self._metadata.put(path, raw, got[1].version)
            except BadVersion:
                self._metrics.promote_cas_retries += 1
                log.info("schema %s: locator changed (attempt %d), retrying", schema_id, attempt)
                continue
            break
        else:
            reason = f"locator CAS lost {MAX_PROMOTE_RETRIES} times"
            log.warning("schema %s: %s; deferred to the next switch", schema_id, reason)
            return [
                dataclasses.replace(i, status=ItemStatus.DEFERRED, reason=reason) for i in items
            ]
        return [dataclasses.replace(i, status=ItemStatus.PROMOTED, reason="") for i in items]

    async def _reattribute_cursor(
        self, item: MigrationItem, from_cluster: str, to_cluster: str
    ) -> MigrationItem:
        """Re-point one cursor where it lives (:mod:`braid.clusters.cursor_promotion`)."""
        return await self._cursors.reattribute(item, from_cluster, to_cluster)

    # -- CLEANUP ----------------------------------------------------------------------------------

    async def _cleanup(self, items: Sequence[MigrationItem]) -> list[MigrationItem]:
        out = []
        for item in items:
            await _delete_quietly(self._router, item.source, item.ledger_id)
            self._metrics.cleaned += 1
            out.append(dataclasses.replace(item, status=ItemStatus.CLEANED))
        return out

    async def _flip_status(self, state: SwitchState) -> bool:
        """source -> DEPRECATED, target -> ACTIVE (two CAS, I12); ``True`` if one failed."""
        try:
            await self._registry.set_status(state.source, ClusterStatus.DEPRECATED)
            await self._registry.set_status(state.target, ClusterStatus.ACTIVE)
        except BraidError as exc:
            log.warning(
                "switch %s -> %s: registry status flip failed (%s); run `register --status "
                "ACTIVE` to reconcile",
                state.source,
                state.target,
                exc,
            )
            return True
        return False

    async def _discard(self, target: str, items: Sequence[MigrationItem]) -> list[MigrationItem]:
        """After a rollback's delay nothing points at the target copies: delete them."""
        out = []
        for item in items:
            await _delete_quietly(self._router, target, item.ledger_id)
            self._metrics.discarded += 1
            out.append(dataclasses.replace(item, status=ItemStatus.DISCARDED))
        return out


def item_source(items: Sequence[MigrationItem]) -> str:
    """The source cluster of a group of items of one schema (they share it)."""
    return items[0].source


def _locator_index(raw: bytes, schema_id: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(raw.decode("utf-8"))
        index = doc["index"]
        if not isinstance(index, list):
            raise TypeError("index is not a list")
        return [e for e in index if isinstance(e, dict)]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        log.warning("schema locator %s unreadable: %s", schema_id, exc)
        return []


def _schema_groups(items: Sequence[MigrationItem]) -> dict[str, list[MigrationItem]]:
    """The schema items by schema id (one locator CAS re-points each group)."""
    groups: dict[str, list[MigrationItem]] = {}
    for item in items:
        if item.kind is ItemKind.SCHEMA:
            groups.setdefault(item.owner, []).append(item)
    return groups


async def _delete_quietly(router: StorageRouter, cluster: str, ledger_id: int) -> None:
    try:
        await router.client_for(cluster).delete_ledger(ledger_id)
    except NoSuchLedger:
        pass
    except StorageError as exc:
        log.warning("ledger %d of %s was not deleted: %s", ledger_id, cluster, exc)


__all__ = ["StepHook", "SwitchOrchestrator"]
