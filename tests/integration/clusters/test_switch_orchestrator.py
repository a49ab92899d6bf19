"""PIP-470 end to end on real components (SQLite metadata roots, in-process bookies, managed
ledgers, schema storage): register -> precheck -> switch -> BUILD -> PROMOTE -> CLEANUP, rollback,
and PIP-470's failure table (unreadable source ledger, CAS conflicts, a cursor owner that wrote
or restarted, the orchestrator killed mid-BUILD)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from braid.broker.schemas.storage import SCHEMAS_ROOT
from braid.clock import ManualClock
from braid.clusters.errors import ClusterUriCollision, IdgenPrecheckFailed, SwitchRejected
from braid.core.storage_switch import ItemKind, ItemStatus, Step, StepKind
from braid.ledger.api import EARLIEST, Position
from braid.ledger.codec import decode_cursor_info
from braid.ledger.cursor import ManagedCursorImpl
from braid.ledger.managed_ledger import ManagedLedgerImpl
from braid.ledger.names import cursor_path
from braid.metadata.api import BadVersion
from braid.storage.api import LedgerState
from tests.support.switch_stack import SwitchStack, open_switch_stack, small_ledgers

ML = "public/default/persistent/orders"


async def _switch_to_new(stack: SwitchStack) -> None:
    await stack.service.register("new", stack.new_uri, "STANDBY")
    await stack.service.advance_idgen("new", 1000)
    await stack.service.switch("new")


async def _ml_with_cursor(
    stack: SwitchStack, entries: int = 6
) -> tuple[ManagedLedgerImpl, ManagedCursorImpl]:
    ml = await stack.ml_factory.open_impl(ML, small_ledgers())
    cursor = await ml.open_cursor("sub", EARLIEST)  # before the appends: nothing is trimmed
    assert isinstance(cursor, ManagedCursorImpl)
    for i in range(entries):
        await ml.append(f"m{i}".encode())
    await cursor.mark_delete(Position(ml.ledgers[0].ledger_id, 0))
    return ml, cursor


async def _read_all(ml: ManagedLedgerImpl) -> list[bytes]:
    out: list[bytes] = []
    position = Position(ml.ledgers[0].ledger_id, 0)
    while True:
        entries = await ml.read(position, 100)
        if not entries:
            return out
        out.extend(e.data for e in entries)
        position = ml.next_position(entries[-1].position)


async def _locator(stack: SwitchStack, schema_id: str) -> dict[str, object]:
    got = await stack.metadata.get(f"{SCHEMAS_ROOT}/{schema_id}")
    assert got is not None
    doc: dict[str, object] = json.loads(got[0])
    return doc


def _without_cluster(doc: dict[str, object]) -> list[dict[str, object]]:
    index = doc["index"]
    assert isinstance(index, list)
    return [{k: v for k, v in e.items() if k != "storageCluster"} for e in index]


@pytest.fixture
async def stack(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = await open_switch_stack(tmp_path / "broker")
    try:
        yield s
    finally:
        await s.close()


async def test_register_refuses_a_colliding_uri_and_keeps_one_active(stack: SwitchStack) -> None:
    await stack.service.register("new", stack.new_uri, "STANDBY")
    with pytest.raises(ClusterUriCollision):
        await stack.service.register(
            "alias", stack.new_uri.replace("sqlite:///", "sqlite:////"), "STANDBY"
        )
    with pytest.raises(ClusterUriCollision):
        await stack.service.register(
            "home-alias", f"sqlite:///{stack.root / 'metadata.db'}", "STANDBY"
        )
    with pytest.raises(SwitchRejected):
        await stack.service.register("new", stack.new_uri, "ACTIVE")
    statuses = {c["name"]: c["status"] for c in await stack.service.list()}
    assert statuses == {"old": "ACTIVE", "new": "STANDBY"}


async def test_precheck_refuses_the_switch_until_the_idgen_is_advanced(stack: SwitchStack) -> None:
    await stack.add_schema("public/default/orders")
    await stack.service.register("new", stack.new_uri, "STANDBY")
    result = await stack.service.precheck("new")
    assert result["ready"] is False and result["sourceClusterName"] == "old"
    with pytest.raises(IdgenPrecheckFailed, match="advance-idgen"):
        await stack.service.switch("new")
    assert stack.router.active_name == "old"
    assert stack.service.metrics.switch_failure == 1
    ready = await stack.service.advance_idgen("new", 10)
    assert ready["ready"] is True
    assert ready["targetMaxHighOrderBit"] > ready["sourceMaxHighOrderBit"]


async def test_switch_is_rejected_when_the_client_cannot_be_created(stack: SwitchStack) -> None:
    blocker = stack.root / "not-a-directory"
    blocker.write_text("x")
    await stack.service.register("broken", f"sqlite:///{blocker}/md.db", "STANDBY")
    with pytest.raises(SwitchRejected, match="old stays active"):
        await stack.service.switch("broken")
    assert stack.router.active_name == "old"
    assert await stack.service.registry.switch_target() is None


async def test_switch_copies_schema_and_cursor_ledgers_with_the_same_ids_and_entries(
    stack: SwitchStack,
) -> None:
    await stack.add_schema("public/default/orders", b"v0")
    await stack.add_schema("public/default/orders", b"v1")
    await stack.add_schema("acme/ns/other", b"x")
    ml, cursor = await _ml_with_cursor(stack)
    before = {sid: await _locator(stack, sid) for sid in ("public/default/orders", "acme/ns/other")}
    path = cursor_path(stack.ml_factory.root, ML, "sub")
    node_before = decode_cursor_info((await stack.metadata.get(path))[0])  # type: ignore[index]
    assert node_before.bookie_cluster_name == "old"

    await _switch_to_new(stack)
    state = await stack.wait_phase("CLEANUP")

    assert stack.router.active_name == "new"
    kinds = sorted(i.kind.value for i in state.items)
    assert kinds == ["CURSOR", "SCHEMA", "SCHEMA", "SCHEMA"]
    assert {i.status for i in state.items} == {ItemStatus.PROMOTED}
    for item in state.items:  # I10: same ledger id, same entry ids, same bytes
        assert await stack.entries("new", item.ledger_id) == await stack.entries(
            "old", item.ledger_id
        )
    for sid, doc in before.items():  # I9: only storageCluster changed
        after = await _locator(stack, sid)
        assert _without_cluster(after) == _without_cluster(doc)
        assert {e["storageCluster"] for e in after["index"]} == {"new"}  # type: ignore[union-attr]
    node_after = decode_cursor_info((await stack.metadata.get(path))[0])  # type: ignore[index]
    assert node_after == dataclasses.replace(node_before, bookie_cluster_name="new")

    # New ledgers go to the new cluster; old topic data is still read from the old one.
    for i in range(6):
        await ml.append(f"after{i}".encode())
    assert ml.ledgers[-1].bookie_cluster_name == "new"
    assert ml.ledgers[0].bookie_cluster_name == "old"
    assert ml.ledgers[-1].ledger_id >= state.boundary_ledger_id
    assert await _read_all(ml) == [f"m{i}".encode() for i in range(6)] + [
        f"after{i}".encode() for i in range(6)
    ]
    # The cursor keeps working, and its state survives a restart of its log.
    await cursor.mark_delete(ml.last_confirmed_position)
    acked = cursor.mark_delete_position
    await ml.close()
    reopened = await stack.ml_factory.open_impl(ML, small_ledgers())
    again = await reopened.open_cursor("sub")
    assert again.mark_delete_position == acked
    schema = await stack.schemas.read_all(await stack.schemas.locator("public/default/orders"))
    assert [s.schema.data for s in schema] == [b"v0", b"v1"]


async def test_cleanup_deletes_old_copies_and_flips_statuses(tmp_path: Path) -> None:
    clock = ManualClock()
    stack = await open_switch_stack(tmp_path / "b", clock=clock, window_days=15)
    try:
        await stack.add_schema("public/default/a")
        await stack.add_schema("public/default/b")
        await _switch_to_new(stack)
        state = await stack.wait_phase("CLEANUP")
        ids = sorted(i.ledger_id for i in state.items)
        preview = await stack.service.cleanup()
        assert (
            preview["dryRun"] is True and sorted(r["ledgerId"] for r in preview["ledgers"]) == ids
        )
        assert await stack.client("old").list_ledgers() == ids  # a dry run deletes nothing
        with pytest.raises(SwitchRejected, match="window"):
            await stack.service.cleanup(dry_run=False)
        await stack.service.cleanup(dry_run=False, force=True, max_deletions=1)

        async def one_cleaned() -> bool:
            return (await stack.state()).count(ItemStatus.CLEANED) == 1

        from tests.support.polling import eventually

        await eventually(one_cleaned, message="one old copy deleted")
        assert (await stack.state()).phase.value == "CLEANUP"
        # The window closes: CLEANUP runs on its own.
        clock.advance(15 * 24 * 3600 + 1)
        done = await stack.wait_phase("DONE")
        assert done.count(ItemStatus.CLEANED) == 2
        assert await stack.client("old").list_ledgers() == []
        statuses = {c["name"]: c["status"] for c in await stack.service.list()}
        assert statuses == {"old": "DEPRECATED", "new": "ACTIVE"}
        assert stack.service.metrics.cleaned == 2
        await stack.service.close_client("old")
        assert not stack.router.has("old")
        with pytest.raises(SwitchRejected):
            await stack.service.close_client("new")
    finally:
        await stack.close()


async def test_unreadable_source_ledger_is_recorded_and_stays_on_the_old_cluster(
    stack: SwitchStack,
) -> None:
    await stack.add_schema("public/default/ok")
    await stack.add_schema("public/default/lost")
    lost = (await stack.schemas.locator("public/default/lost")).index[0].ledger_id
    await stack.client("old").delete_ledger(lost)
    await _switch_to_new(stack)
    state = await stack.wait_phase("CLEANUP")
    failed = state.failed()
    assert [i.ledger_id for i in failed] == [lost] and "unreadable" in failed[0].reason
    doc = await _locator(stack, "public/default/lost")
    assert doc["index"][0]["storageCluster"] == "old"  # type: ignore[index]
    await stack.service.cleanup(dry_run=False, force=True)
    done = await stack.wait_phase("DONE_WITH_FAILURES")
    assert done.count(ItemStatus.CLEANED) == 1
    status = await stack.service.status()
    assert status["switch"]["failedLedgers"][0]["ledgerId"] == lost


async def test_locator_cas_conflicts_are_retried_then_deferred_to_the_next_switch(
    stack: SwitchStack,
) -> None:
    await stack.add_schema("public/default/busy")
    path = f"{SCHEMAS_ROOT}/public/default/busy"
    stack.metadata.fail("put", path, BadVersion("injected"), times=2)
    await stack.add_schema("public/default/calm")
    await _switch_to_new(stack)
    state = await stack.wait_phase("CLEANUP")
    assert {i.status for i in state.items} == {ItemStatus.PROMOTED}
    assert stack.service.metrics.promote_cas_retries >= 2


async def test_exhausted_promote_retries_are_deferred_and_retried(stack: SwitchStack) -> None:
    await stack.add_schema("public/default/busy")
    path = f"{SCHEMAS_ROOT}/public/default/busy"
    fault = stack.metadata.fail("put", path, BadVersion("injected"), times=None)
    await _switch_to_new(stack)
    state = await stack.wait_phase("CLEANUP")
    assert [i.status for i in state.items] == [ItemStatus.DEFERRED]
    assert not state.failed()  # PIP-470: not counted in failedLedgers
    stack.metadata.remove(fault)
    await stack.service.cleanup(dry_run=False, force=True)
    await stack.wait_phase("DONE")
    await stack.service.switch("new")  # the same target again: retries the deferred item
    # A retried switch rediscovers nothing on the old cluster but promotes the deferred item.
    again = await stack.wait_phase("CLEANUP", "DONE")
    assert [i.status for i in again.items] in ([ItemStatus.PROMOTED], [ItemStatus.CLEANED])
    doc = await _locator(stack, "public/default/busy")
    assert doc["index"][0]["storageCluster"] == "new"  # type: ignore[index]


async def test_put_schema_during_promote_is_left_alone(tmp_path: Path) -> None:
    holder: list[SwitchStack] = []

    async def hook(step: Step) -> None:
        if step.kind is StepKind.PROMOTE and holder:
            await holder[0].add_schema("public/default/evolving", b"v1")

    stack = await open_switch_stack(tmp_path / "b", step_hook=hook)
    holder.append(stack)
    try:
        await stack.add_schema("public/default/evolving", b"v0")
        await _switch_to_new(stack)
        await stack.wait_phase("CLEANUP")
        doc = await _locator(stack, "public/default/evolving")
        assert [e["storageCluster"] for e in doc["index"]] == ["new", "new"]  # type: ignore[union-attr]
        versions = await stack.schemas.read_all(
            await stack.schemas.locator("public/default/evolving")
        )
        assert [v.schema.data for v in versions] == [b"v0", b"v1"]
    finally:
        await stack.close()


async def test_a_cursor_that_wrote_since_build_is_promoted_via_rollover(tmp_path: Path) -> None:
    holder: list[ManagedCursorImpl] = []
    ml_holder: list[ManagedLedgerImpl] = []

    async def hook(step: Step) -> None:
        if step.kind is StepKind.PROMOTE and holder:
            await holder[0].mark_delete(ml_holder[0].last_confirmed_position)

    stack = await open_switch_stack(tmp_path / "b", step_hook=hook)
    try:
        ml, cursor = await _ml_with_cursor(stack)
        holder.append(cursor)
        ml_holder.append(ml)
        await _switch_to_new(stack)
        state = await stack.wait_phase("CLEANUP")
        (item,) = [i for i in state.items if i.kind is ItemKind.CURSOR]
        assert item.status is ItemStatus.ROLLED_OVER
        assert stack.service.metrics.promoted_via_rollover == 1
        node = decode_cursor_info(
            (await stack.metadata.get(cursor_path(stack.ml_factory.root, ML, "sub")))[0]  # type: ignore[index]
        )
        assert node.bookie_cluster_name == "new" and node.cursors_ledger_id != item.ledger_id
        assert item.ledger_id not in await stack.client("new").list_ledgers()  # copy dropped
        assert cursor.backlog() == 0  # everything acknowledged in the hook is kept
    finally:
        await stack.close()


async def test_owner_restart_between_build_and_promote(tmp_path: Path) -> None:
    ml_holder: list[ManagedLedgerImpl] = []

    async def hook(step: Step) -> None:
        if step.kind is StepKind.PROMOTE and ml_holder:
            await ml_holder[0].close()  # the owner goes away: the node holds the whole state

    stack = await open_switch_stack(tmp_path / "b", step_hook=hook)
    try:
        ml, cursor = await _ml_with_cursor(stack)
        position = cursor.mark_delete_position
        ml_holder.append(ml)
        await _switch_to_new(stack)
        state = await stack.wait_phase("CLEANUP")
        (item,) = [i for i in state.items if i.kind is ItemKind.CURSOR]
        assert item.status is ItemStatus.ROLLED_OVER  # the old cursor ledger ages out
        reopened = await stack.ml_factory.open_impl(ML, small_ledgers())
        again = await reopened.open_cursor("sub")
        assert again.mark_delete_position == position
    finally:
        await stack.close()


async def test_orchestrator_killed_mid_build_resumes_after_restart(tmp_path: Path) -> None:
    builds = {"count": 0}
    blocked = asyncio.Event()
    holder: list[SwitchStack] = []

    async def hook(step: Step) -> None:
        if step.kind is not StepKind.BUILD:
            return
        builds["count"] += 1
        if builds["count"] == 2:
            # Die half-way through a copy: the target holds an open, partial ledger.
            (item,) = step.items
            partial = await holder[0].client("new").create_ledger_adv(item.ledger_id)
            await partial.add_entry_with_id(0, b"partial")
            blocked.set()
            await asyncio.Event().wait()

    root = tmp_path / "b"
    stack = await open_switch_stack(root, step_hook=hook, concurrency=1)
    holder.append(stack)
    for name in ("a", "b", "c"):
        await stack.add_schema(f"public/default/{name}", name.encode())
    await _switch_to_new(stack)
    await asyncio.wait_for(blocked.wait(), 30)
    await stack.close()  # the process is gone

    restarted = await open_switch_stack(root, concurrency=1)
    try:
        assert restarted.router.active_name == "new"
        state = await restarted.wait_phase("CLEANUP")
        assert {i.status for i in state.items} == {ItemStatus.PROMOTED}
        for item in state.items:
            md = await restarted.client("new").get_ledger_metadata(item.ledger_id)
            assert md.state is LedgerState.CLOSED
            assert await restarted.entries("new", item.ledger_id) == await restarted.entries(
                "old", item.ledger_id
            )
    finally:
        await restarted.close()


async def test_pip470_phase7_rollback_reverts_and_keeps_new_copies_for_delayed_deletion(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    stack = await open_switch_stack(tmp_path / "b", clock=clock, rollback_deletion_delay_s=600)
    try:
        await stack.add_schema("public/default/orders", b"v0")
        ml, cursor = await _ml_with_cursor(stack)
        before = await _locator(stack, "public/default/orders")
        await _switch_to_new(stack)
        await stack.wait_phase("CLEANUP")
        for i in range(5):
            await ml.append(f"during{i}".encode())
        new_ids = await stack.client("new").list_ledgers()

        await stack.service.rollback()

        async def reverted() -> bool:
            return (await stack.state()).reverted_ms >= 0

        from tests.support.polling import eventually

        await eventually(reverted, message="every attribution back on the old cluster")
        state = await stack.state()
        assert state.phase.value == "ROLLBACK" and not state.terminal
        assert stack.router.active_name == "old"
        assert {i.status for i in state.items} == {ItemStatus.REVERTED}
        assert await _locator(stack, "public/default/orders") == before
        node = decode_cursor_info(
            (await stack.metadata.get(cursor_path(stack.ml_factory.root, ML, "sub")))[0]  # type: ignore[index]
        )
        assert node.bookie_cluster_name == "old"
        kept = {i.ledger_id for i in state.items}
        assert kept <= set(await stack.client("new").list_ledgers())  # scheduled, not deleted
        status = await stack.service.status()
        assert status["state"] == "ROLLBACK"
        assert status["switch"]["newCopiesDeletionAtMillis"] == state.reverted_ms + 600_000
        with pytest.raises(SwitchRejected, match="kept copies"):
            await stack.service.switch("new")
        preview = await stack.service.cleanup()
        assert {r["ledgerId"] for r in preview["ledgers"]} == kept
        assert {r["cluster"] for r in preview["ledgers"]} == {"new"}
        with pytest.raises(SwitchRejected, match="deletion delay"):
            await stack.service.cleanup(dry_run=False)

        for i in range(5):
            await ml.append(f"after{i}".encode())
        assert ml.ledgers[-1].bookie_cluster_name == "old"
        assert ml.ledgers[-1].ledger_id > max(new_ids)

        clock.advance(601)  # the delay passes: the kept copies go
        done = await stack.wait_phase("ROLLBACK", finished=True)
        assert {i.status for i in done.items} == {ItemStatus.DISCARDED}
        assert not kept & set(await stack.client("new").list_ledgers())
        assert len(await _read_all(ml)) == 16
        await cursor.mark_delete(ml.last_confirmed_position)
        assert stack.service.metrics.rollbacks == 1
        assert stack.service.metrics.discarded == len(kept)
    finally:
        await stack.close()


async def test_pip470_phase7_a_forced_cleanup_deletes_a_rollbacks_kept_copies_now(
    stack: SwitchStack,
) -> None:
    await stack.add_schema("public/default/orders", b"v0")
    await _switch_to_new(stack)
    await stack.wait_phase("CLEANUP")
    await stack.service.rollback()
    state = await stack.wait_phase("ROLLBACK")

    async def reverted() -> bool:
        return (await stack.state()).reverted_ms >= 0

    from tests.support.polling import eventually

    await eventually(reverted, message="attributions back")
    await stack.service.cleanup(dry_run=False, force=True)
    done = await stack.wait_phase("ROLLBACK", finished=True)
    ids = {i.ledger_id for i in state.items}
    assert not ids & set(await stack.client("new").list_ledgers())
    assert {i.status for i in done.items} == {ItemStatus.DISCARDED}
    await stack.service.advance_idgen("new", 1000)
    await stack.service.switch("new")  # a finished rollback lets a new switch start afresh
    again = await stack.wait_phase("CLEANUP")
    assert {i.status for i in again.items} == {ItemStatus.PROMOTED}


async def test_pip470_failure_table_ledger_exists_with_lac_mismatch_is_failed_not_promoted(
    tmp_path: Path,
) -> None:
    """PIP-470's failure table, BUILD row "LedgerExistException + LAC mismatch": record in
    failedLedgers, do not PROMOTE (the attribution stays on the old cluster), the operator can
    retry the switch."""
    clock = ManualClock()
    stack = await open_switch_stack(tmp_path / "b", clock=clock, window_days=1)
    try:
        await stack.add_schema("public/default/orders", b"v0")
        await stack.add_schema("public/default/other", b"x")
        before = await _locator(stack, "public/default/orders")
        index = before["index"]
        assert isinstance(index, list) and len(index) == 1
        clash = int(index[0]["ledgerId"])
        original = await stack.entries("old", clash)
        await stack.service.register("new", stack.new_uri, "STANDBY")
        await stack.service.advance_idgen("new", 1000)
        # A closed ledger with the same id and other entries already sits on the target.
        source_md = await stack.client("old").get_ledger_metadata(clash)
        squatter = await stack.client("new").create_ledger_adv(
            clash, ensemble=1, write_quorum=1, ack_quorum=1
        )
        for entry_id in range(source_md.last_entry_id + 2):
            await squatter.add_entry_with_id(entry_id, b"not the schema")
        await squatter.close()
        await stack.service.switch("new")

        state = await stack.wait_phase("CLEANUP")
        by_id = {i.ledger_id: i for i in state.items}
        assert by_id[clash].status is ItemStatus.FAILED
        assert "exists on new" in by_id[clash].reason
        assert {i.status for i in state.items if i.ledger_id != clash} == {ItemStatus.PROMOTED}
        assert await _locator(stack, "public/default/orders") == before  # not promoted
        status = await stack.service.status()
        assert [f["ledgerId"] for f in status["switch"]["failedLedgers"]] == [clash]
        assert stack.service.metrics.id_conflicts == 1
        assert stack.service.metrics.failed == {"SCHEMA": 1}
        locator = await stack.schemas.locator("public/default/orders")  # still read from old
        assert [s.schema.data for s in await stack.schemas.read_all(locator)] == [b"v0"]

        clock.advance(24 * 3600 + 1)
        await stack.wait_phase("DONE_WITH_FAILURES")
        # The operator removes the squatter and retries: `switch --target new` again.
        await stack.client("new").delete_ledger(clash)
        await stack.service.switch("new")
        done = await stack.wait_phase("DONE")
        assert {i.status for i in done.items} == {ItemStatus.CLEANED}
        after = await _locator(stack, "public/default/orders")
        assert after["index"][0]["storageCluster"] == "new"  # type: ignore[index]
        assert await stack.entries("new", clash) == original
    finally:
        await stack.close()


async def test_pip470_bookie_cluster_config_path_moves_the_registry(tmp_path: Path) -> None:
    root = "/braid/storage-clusters"
    stack = await open_switch_stack(tmp_path / "b", config_path=root)
    try:
        await stack.add_schema("public/default/orders")
        await _switch_to_new(stack)
        await stack.wait_phase("CLEANUP")
        assert set(await stack.metadata.children(root)) >= {
            "old",
            "new",
            "switch-target",
            "switch-state",
            "brokers",
        }
        assert await stack.metadata.get("/admin/bookie-clusters/switch-state") is None
        assert (await stack.service.status())["state"] == "CLEANUP"
    finally:
        await stack.close()
    # A restart with the same path finds the registry and the switch where they were.
    again = await open_switch_stack(tmp_path / "b", config_path=root)
    try:
        assert again.router.active_name == "new"
        assert (await again.state()).phase.value == "CLEANUP"
    finally:
        await again.close()
