"""Managed ledgers on a replicated storage cluster: their ledgers (and their cursors' ledgers)
take the configured ensemble and quorums, survive a bookie's death mid-stream, and an ensemble
the cluster cannot provide is a typed error naming the settings."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.ledger import DefaultManagedLedgerFactory
from braid.ledger.api import ManagedLedgerConfig, Position
from braid.metadata import open_store
from braid.storage import BookKeeperClient, LedgerState, StorageRouter
from braid.storage.autorecovery.replicator import ReplicationStats, replicate_ledger
from braid.storage.bookie_client import LocalBookieClient
from braid.storage.local import LocalBookieSet, open_local_bookies
from braid.storage.placement import NotEnoughBookies

pytestmark = pytest.mark.timeout(60)
REPLICATED = ManagedLedgerConfig(ensemble=3, write_quorum=2, ack_quorum=2)


class Replicated:
    def __init__(self, client: BookKeeperClient, bookies: LocalBookieSet) -> None:
        self.client = client
        self.bookies = bookies
        self.factory = DefaultManagedLedgerFactory(
            client.metadata_store, StorageRouter([client]), clock=ManualClock()
        )


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Replicated]:
    store = await open_store(f"sqlite:///{tmp_path}/metadata.db")
    bookies = await open_local_bookies(tmp_path / "bookies", 4)
    client = BookKeeperClient(store, "repl", bookies, rng=random.Random(3))
    env = Replicated(client, bookies)
    try:
        yield env
    finally:
        await env.factory.close()
        await client.close()
        await store.close()


async def test_a_managed_ledgers_ledgers_and_cursor_ledgers_use_its_ensemble_and_quorums(
    cluster: Replicated,
) -> None:
    ml = await cluster.factory.open("acme/orders", REPLICATED)
    cursor = await ml.open_cursor("sub", initial_position=Position(-1, -1))
    positions = [await ml.append(b"m%d" % i) for i in range(5)]
    await cursor.mark_delete(positions[2])
    for ledger_id in await cluster.client.list_ledgers():
        md = await cluster.client.get_ledger_metadata(ledger_id)
        assert (md.ensemble_size, md.write_quorum, md.ack_quorum) == (3, 2, 2)


async def test_appends_go_on_in_order_when_a_bookie_of_the_current_ledger_dies(
    cluster: Replicated,
) -> None:
    ml = await cluster.factory.open("acme/keys", REPLICATED)
    positions = [await ml.append(b"before-%d" % i) for i in range(20)]
    ledger_id = positions[-1].ledger_id
    md = await cluster.client.get_ledger_metadata(ledger_id)
    victim = cluster.bookies.leave(md.ensemble[0])
    assert isinstance(victim, LocalBookieClient)
    await victim.bookie.close()
    positions += await asyncio.gather(*(ml.append(b"after-%d" % i) for i in range(30)))
    assert positions == sorted(positions) and len(set(positions)) == 50
    assert {p.ledger_id for p in positions} == {ledger_id}  # no rollover: an ensemble change
    md = await cluster.client.get_ledger_metadata(ledger_id)
    assert md.state is LedgerState.OPEN and len(md.ensembles) == 2
    cursor = await ml.open_cursor("reader", initial_position=Position(-1, -1))
    entries = await cursor.read_entries(50)
    assert [e.data for e in entries] == [b"before-%d" % i for i in range(20)] + [
        b"after-%d" % i for i in range(30)
    ]


async def test_an_ensemble_larger_than_the_cluster_is_refused_naming_the_settings(
    cluster: Replicated,
) -> None:
    with pytest.raises(NotEnoughBookies, match="managedLedgerDefaultEnsembleSize"):
        await cluster.factory.open(
            "acme/wide", ManagedLedgerConfig(ensemble=5, write_quorum=2, ack_quorum=2)
        )


async def test_a_closed_ledger_whose_copies_moved_is_read_through_fresh_metadata(
    cluster: Replicated,
) -> None:
    # The log reads a ledger it closed itself through the closed writer (no metadata read);
    # when auto-recovery has moved the copies since, a failed read reopens it once.
    config = ManagedLedgerConfig(ensemble=2, write_quorum=2, ack_quorum=2)
    ml = await cluster.factory.open("acme/moved", config)
    positions = [await ml.append(b"m%d" % i) for i in range(5)]
    await ml.terminate()
    ledger_id = positions[0].ledger_id
    old = (await cluster.client.get_ledger_metadata(ledger_id)).ensemble
    # Auto-recovery copies both bookies' share elsewhere (e.g. both are being decommissioned),
    # then both go.
    assert await replicate_ledger(cluster.client, ledger_id, old, ReplicationStats())
    moved = (await cluster.client.get_ledger_metadata(ledger_id)).ensemble
    assert not set(moved) & set(old)
    for bookie_id in old:
        gone = cluster.bookies.leave(bookie_id)
        assert isinstance(gone, LocalBookieClient)
        await gone.bookie.close()
    entries = await ml.read(positions[0], 10)
    assert [e.data for e in entries] == [b"m%d" % i for i in range(5)]
