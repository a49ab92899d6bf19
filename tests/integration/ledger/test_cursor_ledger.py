"""Cursor snapshots in cursor ledgers: the node points at the ledger (stamped with its storage
cluster, PIP-470), a takeover restores from the ledger's last snapshot, old ledgers are
reclaimed, and a clean close leaves everything in the node."""

from __future__ import annotations

import dataclasses

from braid.ledger import EARLIEST, DefaultManagedLedgerFactory, ManagedLedgerConfig
from braid.ledger.codec import ManagedCursorInfo, decode_cursor_info
from braid.ledger.names import cursor_path
from braid.storage import StorageRouter, open_local_cluster
from tests.integration.ledger.conftest import LedgerEnv

TOPIC = "public/default/persistent/cursor-ledgers"
CONFIG = ManagedLedgerConfig(
    max_entries_per_cursor_ledger=3, retention_time_s=-1, retention_size_bytes=-1
)


async def _node(env: LedgerEnv, cursor: str = "sub") -> ManagedCursorInfo:
    assert env.metadata is not None
    got = await env.metadata.get(cursor_path("/managed-ledgers", TOPIC, cursor))
    assert got is not None
    return decode_cursor_info(got[0])


async def test_snapshots_go_to_a_cursor_ledger_stamped_with_its_cluster(env: LedgerEnv) -> None:
    assert env.factory is not None and env.storage is not None
    ml = await env.factory.open(TOPIC, CONFIG)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(4)]
    await cursor.mark_delete(positions[0])
    node = await _node(env)
    assert node.cursors_ledger_id >= 0
    assert node.bookie_cluster_name == "standalone"
    # Later acknowledgements only append to the cursor ledger; the node is not rewritten.
    await cursor.mark_delete(positions[1], {"seq": 7})
    assert (await _node(env)).mark_delete == positions[0]
    md = await env.storage.get_ledger_metadata(node.cursors_ledger_id)
    assert md.custom_metadata["component"] == b"managed-cursor"


async def test_a_cursor_configured_with_node_snapshots_starts_its_ledger_after_them(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None and env.storage is not None
    config = dataclasses.replace(CONFIG, cursor_node_snapshots=2)
    ml = await env.factory.open(TOPIC, config)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(4)]
    before = set(await env.storage.list_ledgers())
    for position in positions[:2]:
        await cursor.mark_delete(position)
        node = await _node(env)
        # One CAS of the node each and no ledger: a segment drained by its first
        # acknowledgments never pays for a cursor ledger (ADR 0043).
        assert node.mark_delete == position and node.cursors_ledger_id == -1
    assert set(await env.storage.list_ledgers()) == before
    await cursor.mark_delete(positions[2])
    node = await _node(env)
    assert node.cursors_ledger_id >= 0 and node.cursors_ledger_id not in before
    await cursor.mark_delete(positions[3])
    assert (await _node(env)).mark_delete == positions[2]  # the ledger has the newest

    other = env.new_factory()  # a takeover without a clean close
    try:
        taken = await other.open(TOPIC, config)
        assert taken.cursors["sub"].mark_delete_position == positions[3]
    finally:
        await other.close()


async def test_a_new_owner_restores_the_latest_snapshot_from_the_cursor_ledger(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, CONFIG)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(8)]
    await cursor.mark_delete(positions[0])
    await cursor.mark_delete(positions[2], {"seq": 3})
    await cursor.delete([positions[5]])
    assert (await _node(env)).mark_delete == positions[0]  # newer state is in the ledger only

    other = env.new_factory()  # a takeover without a clean close, as after a crash
    try:
        taken = await other.open(TOPIC, CONFIG)
        restored = taken.cursors["sub"]
        assert restored.mark_delete_position == positions[2]
        assert restored.properties == {"seq": 3}
        assert restored.individually_deleted == [(positions[5], positions[5])]
        assert restored.backlog() == 4
    finally:
        await other.close()


async def test_full_cursor_ledgers_are_replaced_and_deleted(env: LedgerEnv) -> None:
    assert env.factory is not None and env.storage is not None
    ml = await env.factory.open(TOPIC, CONFIG)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(12)]
    seen: set[int] = set()
    for position in positions:
        await cursor.mark_delete(position)
        seen.add((await _node(env)).cursors_ledger_id)
    assert len(seen) >= 4  # 12 snapshots, 3 per ledger
    live = set(await env.storage.list_ledgers())
    current = (await _node(env)).cursors_ledger_id
    assert current in live
    assert not (seen - {current}) & live


async def test_clean_close_writes_the_state_into_the_node_and_drops_the_ledger(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None and env.storage is not None
    ml = await env.factory.open(TOPIC, CONFIG)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(5)]
    await cursor.mark_delete(positions[0])
    await cursor.mark_delete(positions[3], {"seq": 4})
    ledger_id = (await _node(env)).cursors_ledger_id
    await ml.close()
    node = await _node(env)
    assert node.cursors_ledger_id == -1 and node.bookie_cluster_name is None
    assert node.mark_delete == positions[3] and node.properties == {"seq": 4}
    assert ledger_id not in await env.storage.list_ledgers()


async def test_cursor_ledgers_follow_the_active_cluster_and_restore_across_clusters(
    env: LedgerEnv,
) -> None:
    assert env.metadata is not None and env.storage is not None
    second = await open_local_cluster(env.metadata, env.root / "data-b", cluster_name="cluster-b")
    advanced = await second.create_ledger_adv(1000)  # PIP-470 I11: ids above the old cluster's
    await advanced.close()
    await second.delete_ledger(1000)
    router = StorageRouter([env.storage, second])
    factory = DefaultManagedLedgerFactory(env.metadata, router, clock=env.clock)
    other: DefaultManagedLedgerFactory | None = None
    try:
        ml = await factory.open(TOPIC, CONFIG)
        cursor = await ml.open_cursor("sub", EARLIEST)
        positions = [await ml.append(bytes([i])) for i in range(8)]
        await cursor.mark_delete(positions[0])
        assert (await _node(env)).bookie_cluster_name == "standalone"
        router.set_active("cluster-b")
        for position in positions[1:5]:
            await cursor.mark_delete(position)
        node = await _node(env)
        assert node.bookie_cluster_name == "cluster-b"
        assert node.cursors_ledger_id in await second.list_ledgers()
        other = DefaultManagedLedgerFactory(env.metadata, router, clock=env.clock)
        taken = await other.open(TOPIC, CONFIG)
        assert taken.cursors["sub"].mark_delete_position == positions[4]
    finally:
        if other is not None:
            await other.close()
        await factory.close()
        await second.close()


async def test_deleting_the_log_deletes_its_cursor_ledgers(env: LedgerEnv) -> None:
    assert env.factory is not None and env.storage is not None
    ml = await env.factory.open(TOPIC, CONFIG)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(3)]
    await cursor.mark_delete(positions[0])
    await cursor.mark_delete(positions[1])
    assert (await _node(env)).cursors_ledger_id in await env.storage.list_ledgers()
    await env.factory.delete(TOPIC)
    assert await env.storage.list_ledgers() == []
