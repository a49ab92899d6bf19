"""The auto-recovery scenarios on a real ZooKeeper (marks, ephemeral copy locks and the auditor
election in ZooKeeper; bookies in process)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.metadata import MetadataStore, open_store
from tests.support.replicated_storage import (
    Env,
    close_env,
    open_env,
    scenario_a_bookie_back_within_the_delay_is_not_re_replicated,
    scenario_a_bookie_lost_for_good_gets_every_copy_back,
    scenario_an_idle_open_ledger_is_moved_off_a_lost_bookie,
)
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]
pytestmark = pytest.mark.timeout(120)
_CHROOTS = itertools.count()


@pytest.fixture
async def env(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> AsyncIterator[Env]:
    chroot = f"/autorecovery-{next(_CHROOTS)}"
    setup = await open_store(zookeeper_server.url("/"))
    await setup.put(chroot, b"")
    await setup.close()

    async def zookeeper(_root: Path) -> MetadataStore:
        return await open_store(zookeeper_server.url(chroot))

    environment = await open_env(tmp_path, zookeeper)
    try:
        yield environment
    finally:
        await close_env(environment)


async def test_a_bookie_lost_for_good_gets_every_copy_back_on_zookeeper(env: Env) -> None:
    await scenario_a_bookie_lost_for_good_gets_every_copy_back(env)


async def test_an_idle_open_ledger_is_moved_off_a_lost_bookie_on_zookeeper(env: Env) -> None:
    await scenario_an_idle_open_ledger_is_moved_off_a_lost_bookie(env)


async def test_a_bookie_back_within_the_delay_is_not_re_replicated_on_zookeeper(env: Env) -> None:
    await scenario_a_bookie_back_within_the_delay_is_not_re_replicated(env)
