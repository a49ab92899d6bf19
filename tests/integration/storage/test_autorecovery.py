"""Auto-recovery over several in-process bookies on a real metadata store (SQLite here; the same
scenarios run on ZooKeeper in ``tests/cluster/storage/test_autorecovery_zookeeper.py``): a bookie
lost for good has its replicas copied elsewhere, a bookie back within ``lostBookieRecoveryDelay``
is left alone, decommission moves a live bookie's data, the periodic check finds a lost copy,
and one auditor is elected among several services."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.storage import BookKeeperClient
from braid.storage.autorecovery import AutoRecoveryService, BookieAdmin
from tests.support.polling import eventually
from tests.support.replicated_storage import (
    Env,
    close_env,
    live_copies,
    open_env,
    open_sqlite,
    scenario_a_bookie_back_within_the_delay_is_not_re_replicated,
    scenario_a_bookie_lost_for_good_gets_every_copy_back,
    scenario_an_idle_open_ledger_is_moved_off_a_lost_bookie,
    until_recovered,
    write_entries,
)

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    environment = await open_env(tmp_path, open_sqlite)
    try:
        yield environment
    finally:
        await close_env(environment)


async def test_a_bookie_lost_for_good_gets_every_copy_back(env: Env) -> None:
    await scenario_a_bookie_lost_for_good_gets_every_copy_back(env)


async def test_an_idle_open_ledger_is_moved_off_a_lost_bookie(env: Env) -> None:
    await scenario_an_idle_open_ledger_is_moved_off_a_lost_bookie(env)


async def test_a_bookie_back_within_the_delay_is_not_re_replicated(env: Env) -> None:
    await scenario_a_bookie_back_within_the_delay_is_not_re_replicated(env)


async def test_decommission_moves_a_live_bookies_fragments_and_reports_progress(env: Env) -> None:
    writers = []
    for _ in range(2):
        writer = await env.client.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2)
        await write_entries(writer, 20)
        await writer.close()
        writers.append(writer)
    target = writers[0].metadata.ensemble[0]
    service = env.service("node-a")
    admin = BookieAdmin(env.client, service.manager)
    assert {b["bookieId"] for b in admin.list_bookies()} == {f"bookie-{i}" for i in range(4)}
    status = await admin.decommission(target)
    assert not status.done and status.ledgers_remaining
    await service.start()
    try:
        await until_recovered(env, service, target)
        assert (await admin.status(target)).done
        for writer in writers:
            assert set((await live_copies(env, writer.ledger_id)).values()) == {3}
    finally:
        await service.close()


async def test_the_periodic_check_finds_a_copy_a_bookie_lost(env: Env) -> None:
    writer = await env.client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
    await write_entries(writer, 10)
    await writer.close()
    damaged = writer.metadata.ensemble[1]
    await env.client.bookie(damaged).delete_ledger(writer.ledger_id)  # its copies are gone
    service = env.service("node-a", check_s=3600)
    await service.start()
    try:
        await eventually(lambda: service.auditor is not None, message="an auditor")
        env.clock.advance(3600)
        await until_recovered(env, service, damaged)
        assert set((await live_copies(env, writer.ledger_id)).values()) == {2}
    finally:
        await service.close()


async def test_one_auditor_is_elected_and_another_takes_over(env: Env) -> None:
    # A second process: its own metadata session, the same bookies.
    other_store = await open_sqlite(env.root)
    other = BookKeeperClient(other_store, "repl", env.bookies, clock=env.clock, owns_bookies=False)
    first = env.service("node-a")
    second = AutoRecoveryService(other, clock=env.clock, node_id="node-b")
    await first.start()
    await second.start()
    try:
        await eventually(lambda: first.is_auditor != second.is_auditor, message="one auditor")
        leader, follower = (first, second) if first.is_auditor else (second, first)
        await leader.close()
        await eventually(lambda: follower.is_auditor, message="the follower to take over")
    finally:
        await first.close()
        await second.close()
        await other.close()
        await other_store.close()
