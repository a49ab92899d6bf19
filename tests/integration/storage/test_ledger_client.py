"""The ledger API (``BookKeeperClient``) over in-process bookies and a real metadata store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.metadata import MetadataStore, open_store
from braid.storage import (
    BookieUnavailable,
    BookKeeperClient,
    InvalidClusterName,
    InvalidEntryId,
    InvalidLedgerId,
    InvalidLedgerMetadata,
    InvalidQuorum,
    LedgerClosed,
    LedgerExists,
    LedgerFenced,
    LedgerState,
    LocalBookieClient,
    NoSuchEntry,
    NoSuchLedger,
    StorageClosed,
    open_local_cluster,
)
from tests.integration.storage.conftest import engine_of


async def test_entries_get_ids_in_order_and_read_back(cluster: BookKeeperClient) -> None:
    writer = await cluster.create_ledger()
    ids = [await writer.add_entry(b"m%d" % i) for i in range(5)]
    assert ids == [0, 1, 2, 3, 4]
    assert writer.last_add_confirmed == 4
    assert writer.length == 10
    entries = await writer.read_entries(1, 3)
    assert [(e.entry_id, e.data) for e in entries] == [(1, b"m1"), (2, b"m2"), (3, b"m3")]
    with pytest.raises(NoSuchEntry):
        await writer.read_entries(4, 5)
    with pytest.raises(InvalidEntryId):
        await writer.read_entries(3, 1)


async def test_concurrent_adds_are_confirmed_in_id_order(cluster3: BookKeeperClient) -> None:
    writer = await cluster3.create_ledger(3, 2, 2)
    ids = await asyncio.gather(*(writer.add_entry(b"%d" % i) for i in range(100)))
    assert ids == list(range(100))
    entries = await writer.read_entries(0, 99)
    assert [e.data for e in entries] == [b"%d" % i for i in range(100)]


async def test_close_records_last_entry_and_length_and_is_idempotent(
    cluster: BookKeeperClient, clock: ManualClock
) -> None:
    writer = await cluster.create_ledger(custom_metadata={"topic": b"t1"})
    for _ in range(3):
        await writer.add_entry(b"abcd")
    closed = await writer.close()
    assert (closed.state, closed.last_entry_id, closed.length) == (LedgerState.CLOSED, 2, 12)
    assert closed.created_ms == clock.now_ms()
    assert closed.custom_metadata == {"topic": b"t1"}
    assert await writer.close() == closed
    assert await cluster.get_ledger_metadata(writer.ledger_id) == closed
    with pytest.raises(LedgerClosed):
        await writer.add_entry(b"late")
    # A closed write handle reads its ledger on (the managed ledger keeps it as its reader).
    assert [e.data for e in await writer.read_entries(0, 2)] == [b"abcd"] * 3


async def test_every_ledger_is_stamped_with_its_cluster_name(
    store: MetadataStore, tmp_path: Path
) -> None:
    east = await open_local_cluster(store, tmp_path / "east", "east")
    try:
        writer = await east.create_ledger()
        md = await east.get_ledger_metadata(writer.ledger_id)
        assert md.cluster_name == "east" == writer.cluster_name
        raw = await store.get(f"/storage/east/ledgers/{writer.ledger_id}")
        assert raw is not None
        assert json.loads(raw[0])["clusterName"] == "east"
    finally:
        await east.close()


async def test_recovery_open_fences_the_old_writer_and_keeps_every_acked_entry(
    cluster: BookKeeperClient,
) -> None:
    writer = await cluster.create_ledger()
    for i in range(10):
        await writer.add_entry(b"e%d" % i)
    reader = await cluster.open_ledger(writer.ledger_id, recovery=True)
    assert reader.metadata.state is LedgerState.CLOSED
    assert reader.last_add_confirmed == 9
    assert reader.metadata.length == sum(len(b"e%d" % i) for i in range(10))
    with pytest.raises(LedgerFenced):
        await writer.add_entry(b"after the fence")
    with pytest.raises(LedgerFenced):
        await writer.add_entry(b"and again")
    entries = await reader.read_entries(0, 9)
    assert [e.data for e in entries] == [b"e%d" % i for i in range(10)]
    # The old writer's close sees the recovered, closed ledger.
    assert (await writer.close()).last_entry_id == 9


async def test_recovery_keeps_entries_durable_past_the_piggybacked_lac(
    cluster: BookKeeperClient,
) -> None:
    writer = await cluster.create_ledger()
    for _ in range(3):
        await writer.add_entry(b"x")
    # Entry 3 reached the bookie but the writer died before confirming it (a crash mid-add).
    bookie = cluster.bookie("bookie-0")
    await bookie.add_entry(writer.ledger_id, 3, b"tail", last_add_confirmed=2, length=7)
    reader = await cluster.open_ledger(writer.ledger_id, recovery=True)
    assert reader.last_add_confirmed == 3
    assert reader.metadata.length == 7
    assert (await reader.read_entries(3, 3))[0].data == b"tail"


async def test_recovery_of_an_empty_ledger_closes_it_empty(cluster: BookKeeperClient) -> None:
    writer = await cluster.create_ledger()
    reader = await cluster.open_ledger(writer.ledger_id)
    assert (reader.last_add_confirmed, reader.metadata.length) == (-1, 0)
    with pytest.raises(LedgerFenced):
        await writer.add_entry(b"x")


async def test_recovery_with_three_bookies_rereplicates_a_partial_tail(
    cluster3: BookKeeperClient,
) -> None:
    writer = await cluster3.create_ledger(3, 3, 2)
    for i in range(5):
        await writer.add_entry(b"v%d" % i)
    md = await cluster3.get_ledger_metadata(writer.ledger_id)
    # Entry 5 landed on one bookie only before the writer vanished.
    await cluster3.bookie(md.ensemble[0]).add_entry(
        writer.ledger_id, 5, b"v5", last_add_confirmed=4, length=12
    )
    reader = await cluster3.open_ledger(writer.ledger_id)
    assert reader.last_add_confirmed == 5
    for bookie_id in md.ensemble:
        stored = await cluster3.bookie(bookie_id).read_entry(writer.ledger_id, 5)
        assert stored.data == b"v5"
    with pytest.raises(LedgerFenced):
        await writer.add_entry(b"v6")


async def test_tailing_reader_follows_an_open_ledger(cluster: BookKeeperClient) -> None:
    writer = await cluster.create_ledger()
    await writer.add_entry(b"a")
    reader = await cluster.open_ledger(writer.ledger_id, recovery=False)
    assert reader.last_add_confirmed == 0
    await writer.add_entry(b"b")
    await writer.add_entry(b"c")
    assert await reader.refresh_last_add_confirmed() == 2
    assert [e.data for e in await reader.read_entries(0, 2)] == [b"a", b"b", b"c"]
    await writer.close()
    assert await reader.refresh_last_add_confirmed() == 2
    assert reader.metadata.state is LedgerState.CLOSED
    # A non-recovery open does not fence: the writer was never disturbed.
    await reader.close()


async def test_fence_survives_a_restart_of_the_cluster(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'meta.db'}")
    try:
        cluster = await open_local_cluster(store, tmp_path / "data")
        writer = await cluster.create_ledger()
        for i in range(4):
            await writer.add_entry(b"%d" % i)
        await cluster.open_ledger(writer.ledger_id, recovery=True)
        await cluster.close()
        restarted = await open_local_cluster(store, tmp_path / "data")
        try:
            bookie = restarted.bookie("bookie-0")
            assert isinstance(bookie, LocalBookieClient)
            assert bookie.bookie.is_fenced(writer.ledger_id)
            with pytest.raises(LedgerFenced):
                await bookie.add_entry(
                    writer.ledger_id, 4, b"old writer", last_add_confirmed=3, length=5
                )
            reader = await restarted.open_ledger(writer.ledger_id)
            assert [e.data for e in await reader.read_entries(0, 3)] == [b"0", b"1", b"2", b"3"]
        finally:
            await restarted.close()
    finally:
        await store.close()


async def test_create_ledger_adv_rejects_a_taken_id(cluster: BookKeeperClient) -> None:
    await cluster.create_ledger_adv(42)
    with pytest.raises(LedgerExists):
        await cluster.create_ledger_adv(42)
    auto = await cluster.create_ledger()
    with pytest.raises(LedgerExists):
        await cluster.create_ledger_adv(auto.ledger_id)


async def test_id_generator_never_hands_out_an_adv_id(
    cluster: BookKeeperClient, store: MetadataStore
) -> None:
    first = await cluster.create_ledger()
    await cluster.create_ledger_adv(first.ledger_id + 1)
    await cluster.create_ledger_adv(first.ledger_id + 3)
    await cluster.create_ledger_adv(first.ledger_id + 10)
    # As if the process crashed between create_ledger_adv's two steps (create the ledger, raise
    # the generator's floor): the id is taken but the generator still points at it.
    await store.put("/storage/standalone/idgen", b"%d" % (first.ledger_id + 10))
    taken = {first.ledger_id, first.ledger_id + 1, first.ledger_id + 3, first.ledger_id + 10}
    new_ids = [(await cluster.create_ledger()).ledger_id for _ in range(3)]
    assert not taken & set(new_ids)
    assert len(set(new_ids)) == 3
    assert min(new_ids) > first.ledger_id + 10


async def test_copy_to_another_cluster_keeps_ledger_and_entry_ids(
    store: MetadataStore, tmp_path: Path
) -> None:
    old = await open_local_cluster(store, tmp_path / "old", "old")
    new = await open_local_cluster(store, tmp_path / "new", "new")
    try:
        src = await old.create_ledger(custom_metadata={"kind": b"cursor"})
        for i in range(6):
            await src.add_entry(b"entry-%d" % i)
        await src.close()
        # PIP-470 BUILD: same ledger id, same entry ids, on the new cluster.
        source = await old.open_ledger(src.ledger_id, recovery=False)
        src_md = source.metadata
        copy = await new.create_ledger_adv(src.ledger_id, custom_metadata=src_md.custom_metadata)
        for entry in await source.read_entries(0, source.last_add_confirmed):
            assert await copy.add_entry_with_id(entry.entry_id, entry.data) == entry.entry_id
        copied = await copy.close()
        assert (copied.ledger_id, copied.last_entry_id, copied.length) == (
            src_md.ledger_id,
            src_md.last_entry_id,
            src_md.length,
        )
        assert copied.cluster_name == "new"
        reread = await new.open_ledger(src.ledger_id, recovery=False)
        assert [e.data for e in await reread.read_entries(0, 5)] == [
            b"entry-%d" % i for i in range(6)
        ]
        # A retried BUILD finds the copy already there.
        with pytest.raises(LedgerExists):
            await new.create_ledger_adv(src.ledger_id)
    finally:
        await old.close()
        await new.close()


async def test_explicit_entry_ids_must_come_in_order(cluster: BookKeeperClient) -> None:
    explicit = await cluster.create_ledger_adv(7)
    with pytest.raises(InvalidEntryId):
        await explicit.add_entry_with_id(1, b"skip")
    await explicit.add_entry_with_id(0, b"zero")
    with pytest.raises(InvalidEntryId):
        await explicit.add_entry_with_id(0, b"again")
    plain = await cluster.create_ledger()
    with pytest.raises(InvalidEntryId):
        await plain.add_entry_with_id(0, b"not explicit")


async def test_deleting_a_ledger_removes_it_and_reclaims_disk(
    cluster: BookKeeperClient, tmp_path: Path
) -> None:
    big = await cluster.create_ledger()
    await asyncio.gather(*(big.add_entry(bytes(8192)) for _ in range(128)))
    small = await cluster.create_ledger()
    await small.add_entry(b"keep")
    engine = engine_of(cluster, "bookie-0")
    await engine.checkpoint()
    before = engine.disk_usage()
    await cluster.delete_ledger(big.ledger_id)
    await engine.checkpoint()
    after = engine.disk_usage()
    assert before - after >= 128 * 8192
    assert await cluster.list_ledgers() == [small.ledger_id]
    with pytest.raises(NoSuchLedger):
        await cluster.open_ledger(big.ledger_id)
    with pytest.raises(NoSuchLedger):
        await cluster.delete_ledger(big.ledger_id)
    assert (await (await cluster.open_ledger(small.ledger_id)).read_entries(0, 0))[
        0
    ].data == b"keep"


async def test_list_ledgers_is_numeric_order(cluster: BookKeeperClient) -> None:
    ids = [(await cluster.create_ledger()).ledger_id for _ in range(3)]
    await cluster.create_ledger_adv(100)
    await cluster.create_ledger_adv(20)
    assert await cluster.list_ledgers() == sorted([*ids, 20, 100])


async def test_impossible_quorums_are_rejected(cluster3: BookKeeperClient) -> None:
    with pytest.raises(InvalidQuorum):
        await cluster3.create_ledger(2, 3, 1)
    with pytest.raises(InvalidQuorum):
        await cluster3.create_ledger(3, 2, 3)
    with pytest.raises(InvalidQuorum):
        await cluster3.create_ledger(1, 1, 0)
    with pytest.raises(BookieUnavailable):
        await cluster3.create_ledger(4, 2, 2)
    assert await cluster3.list_ledgers() == []


async def test_bad_arguments_get_typed_errors(
    cluster: BookKeeperClient, store: MetadataStore, tmp_path: Path
) -> None:
    with pytest.raises(InvalidLedgerId):
        await cluster.create_ledger_adv(-1)
    with pytest.raises(InvalidLedgerId):
        await cluster.open_ledger(2**64)
    with pytest.raises(NoSuchLedger):
        await cluster.open_ledger(12345)
    with pytest.raises(InvalidLedgerMetadata):
        await cluster.create_ledger(custom_metadata={"k": "not bytes"})  # type: ignore[dict-item]
    with pytest.raises(InvalidClusterName):
        await open_local_cluster(store, tmp_path / "x", "bad/name")
    with pytest.raises(InvalidQuorum):
        await open_local_cluster(store, tmp_path / "x", bookies=0)
    await store.put("/storage/standalone/ledgers/99", b"{broken")
    with pytest.raises(InvalidLedgerMetadata):
        await cluster.open_ledger(99)


async def test_closed_client_refuses_work(store: MetadataStore, tmp_path: Path) -> None:
    client = await open_local_cluster(store, tmp_path / "c")
    await client.close()
    await client.close()
    with pytest.raises(StorageClosed):
        await client.create_ledger()


async def test_a_cancelled_add_does_not_stall_later_adds(cluster: BookKeeperClient) -> None:
    writer = await cluster.create_ledger()
    first = asyncio.ensure_future(writer.add_entry(b"a"))
    second = asyncio.ensure_future(writer.add_entry(b"b"))

    async def cancel_first() -> None:
        first.cancel()

    # Tasks start in creation order: both adds are in flight before the cancel runs.
    await asyncio.ensure_future(cancel_first())
    assert await second == 1
    assert first.cancelled()
    assert writer.last_add_confirmed == 1
    assert [e.data for e in await writer.read_entries(0, 1)] == [b"a", b"b"]


async def test_adds_racing_a_recovery_are_either_kept_or_fenced(
    cluster3: BookKeeperClient,
) -> None:
    writer = await cluster3.create_ledger(3, 2, 2)
    started = asyncio.Event()
    next_id = 0
    acked: list[int] = []

    async def keep_adding() -> BaseException:
        nonlocal next_id
        while True:
            data = b"entry-%d" % next_id  # ids are assigned in call order
            next_id += 1
            try:
                acked.append(await writer.add_entry(data))
            except LedgerFenced as exc:
                return exc
            if len(acked) >= 30:
                started.set()

    producers = [asyncio.ensure_future(keep_adding()) for _ in range(4)]
    await started.wait()
    reader = await cluster3.open_ledger(writer.ledger_id, recovery=True)
    outcomes = await asyncio.gather(*producers)
    assert all(isinstance(o, LedgerFenced) for o in outcomes)
    assert max(acked) <= reader.last_add_confirmed
    entries = await reader.read_entries(0, reader.last_add_confirmed)
    assert [e.data for e in entries] == [b"entry-%d" % i for i in range(len(entries))]
    assert reader.metadata.length == sum(len(e.data) for e in entries)
