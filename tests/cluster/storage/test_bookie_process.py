"""``braid bookie`` processes against a real ZooKeeper: registration, the network path of the
ledger client, crashes, clean stops and cookies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from braid.metadata import MetadataStore, open_store
from braid.storage.api import BookieUnavailable, LedgerFenced, StorageError
from braid.storage.bookie_net_client import NetBookieClient
from braid.storage.remote import RegisteredBookieSet, open_remote_cluster
from tests.support.bookie_process import BookieProcess
from tests.support.polling import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

MakeBookie = Callable[..., BookieProcess]


@pytest.fixture
async def store(zk_url: str) -> AsyncIterator[MetadataStore]:
    s = await open_store(zk_url)
    yield s
    await s.close()


async def _started(*bookies: BookieProcess) -> None:
    await asyncio.gather(*(asyncio.to_thread(b.start) for b in bookies))


async def test_a_bookie_registers_serves_the_network_path_and_leaves_on_sigterm(
    bookies: MakeBookie, store: MetadataStore
) -> None:
    bookie = bookies("bk-1")
    await _started(bookie)
    members = await RegisteredBookieSet.open(store, "standalone")
    try:
        assert members.writable() == ["bk-1"]
        client = members.client("bk-1")
        await client.add_entry(7, 0, b"first", last_add_confirmed=-1, length=5)
        await client.add_entry(7, 1, b"second", last_add_confirmed=0, length=11)
        entries = await client.read_entries(7, 0, 1)
        assert [e.data for e in entries] == [b"first", b"second"]
        assert (await client.read_lac(7)).last_entry_id == 1
        fenced = await client.fence(7)
        assert (fenced.last_add_confirmed, fenced.last_entry_id) == (0, 1)
        with pytest.raises(LedgerFenced):
            await client.add_entry(7, 2, b"late", last_add_confirmed=1, length=15)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bookie.http_port}") as http:
            health = await http.get("/health")
            assert health.status_code == 200 and health.json()["state"] == "read-write"
            metrics = (await http.get("/metrics")).text
            assert 'braid_bookie_add_requests_total{bookie="bk-1"} 3.0' in metrics
            assert 'braid_bookie_ledgers{bookie="bk-1"} 1.0' in metrics
            assert (await http.get("/nope")).status_code == 404
        code = await asyncio.to_thread(bookie.terminate)
        assert code == 0, bookie.log_tail()
        await eventually(lambda: members.writable() == [], message="the bookie to unregister")
    finally:
        await members.close()


async def test_sigkill_of_a_bookie_fails_its_pending_adds_promptly_and_it_rejoins(
    bookies: MakeBookie, store: MetadataStore
) -> None:
    bookie = bookies("bk-kill")
    await _started(bookie)
    members = await RegisteredBookieSet.open(store, "standalone")
    try:
        client = members.client("bk-kill")
        assert isinstance(client, NetBookieClient)
        await client.add_entry(1, 0, b"x", last_add_confirmed=-1, length=1)
        outcomes: list[StorageError | None] = []
        failed = asyncio.Event()

        def done(_entry: int, error: StorageError | None) -> None:
            outcomes.append(error)
            if error is not None:
                failed.set()

        stop = time.monotonic() + 20
        entry = 1
        killed_at = 0.0
        while not failed.is_set() and time.monotonic() < stop:
            try:
                client.send_add(1, entry, b"y" * 1024, done, entry - 1, entry * 1024)
            except BookieUnavailable:
                break
            entry += 1
            if entry == 200:
                killed_at = time.monotonic()
                await asyncio.to_thread(bookie.kill)
            await asyncio.sleep(0)
        await asyncio.wait_for(failed.wait(), 5)
        assert killed_at and time.monotonic() - killed_at < 5
        assert all(isinstance(e, BookieUnavailable) for e in outcomes if e is not None)
        # The process comes back on a new port under the same id: the set follows it there.
        await asyncio.to_thread(bookie.start)
        await eventually(
            lambda: (
                members.registration("bk-kill") is not None
                and members.registration("bk-kill").port == bookie.port
            ),  # type: ignore[union-attr]
            within=60,
            message="the restarted bookie's registration",
        )
        acked = [i for i, e in enumerate(outcomes, start=1) if e is None]
        got = await _read_with_retry(client, 1, 0)
        assert got == b"x"
        for entry_id in acked[-5:]:
            assert await _read_with_retry(client, 1, entry_id) == b"y" * 1024
    finally:
        await members.close()


async def _read_with_retry(client: NetBookieClient, ledger: int, entry: int) -> bytes:
    deadline = time.monotonic() + 30
    while True:
        try:
            return (await client.read_entry(ledger, entry)).data
        except BookieUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_bookie_whose_directories_were_wiped_refuses_to_rejoin_until_formatted(
    bookies: MakeBookie, store: MetadataStore
) -> None:
    bookie = bookies("bk-wiped")
    await _started(bookie)
    assert await asyncio.to_thread(bookie.terminate) == 0
    bookie.wipe()
    await asyncio.to_thread(bookie.start, wait=False)
    code = await asyncio.to_thread(bookie.wait_exit)
    assert code == 1
    assert "data was lost" in bookie.log_tail(), bookie.log_tail()
    members = await RegisteredBookieSet.open(store, "standalone")
    try:
        assert members.writable() == []
        await asyncio.to_thread(bookie.start, format_=True)
        await eventually(lambda: members.writable() == ["bk-wiped"], within=30)
    finally:
        await members.close()


async def test_a_ledger_striped_over_three_bookie_processes_survives_losing_one(
    bookies: MakeBookie, store: MetadataStore
) -> None:
    three = [bookies(f"bk-{i}") for i in range(3)]
    await _started(*three)
    client = await open_remote_cluster(store, "standalone", min_bookies=3, wait_s=30)
    try:
        writer = await client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
        payloads = [f"entry-{i}".encode() * 50 for i in range(300)]
        for data in payloads:
            await writer.add_entry(data)
        await writer.close()
        await asyncio.to_thread(three[1].kill)
        reader = await client.open_ledger(writer.ledger_id, recovery=False)
        entries = await reader.read_entries(0, len(payloads) - 1)
        assert [e.data for e in entries] == payloads
    finally:
        await client.close()
