"""The start-up guard of brokers with process-local storage (issue 22, ADR 0040), on real SQLite
sessions of one file: each :class:`StoreGuard` below stands for one broker process.

Pinned: a second claim is refused naming the first broker, on shared bookies too; a store stays
bound to the data directory whose bookies hold its ledgers, even when nobody holds the claim (and
is not bound when the bookies are shared); a restart on the same
data directory waits for its previous session instead of refusing, but not forever; a moved data
directory keeps its store; the storage id survives and is never rewritten.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from braid.broker.store_guard import (
    BROKER_CLAIM_PATH,
    STORAGE_BINDING_PATH,
    STORAGE_ID_FILE,
    BrokerClaim,
    MetadataStoreInUse,
    StorageMismatch,
    StoreGuard,
    storage_id_of,
)
from braid.clock import Clock, ManualClock, SystemClock
from braid.metadata import MetadataStore, open_store
from tests.support.polling import eventually

Opener = Callable[[], Awaitable[MetadataStore]]


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens SQLite sessions on one file (closed at the end)."""
    url = f"sqlite://{tmp_path / 'shared.db'}"
    opened: list[MetadataStore] = []

    async def open_session() -> MetadataStore:
        store = await open_store(url)
        opened.append(store)
        return store

    yield open_session
    for store in opened:
        await store.close()


def guard(
    store: MetadataStore,
    data_dir: Path,
    port: int,
    *,
    clock: Clock | None = None,
    process_local: bool = True,
) -> StoreGuard:
    data_dir.mkdir(parents=True, exist_ok=True)
    return StoreGuard(
        store,
        "sqlite:///shared.db",
        data_dir,
        service_url=f"pulsar://127.0.0.1:{port}",
        web_service_url=f"http://127.0.0.1:{port + 1}",
        clock=clock or SystemClock(),
        session_timeout_s=10.0,
        storage_is_process_local=process_local,
    )


async def test_a_second_broker_is_refused_with_the_first_ones_address_and_data_dir(
    sessions: Opener, tmp_path: Path
) -> None:
    first = guard(await sessions(), tmp_path / "a", 6650)
    await first.acquire()
    await first.announce("pulsar://10.0.0.1:6650", "http://10.0.0.1:8080")

    second = guard(await sessions(), tmp_path / "b", 7650)
    with pytest.raises(MetadataStoreInUse) as refused:
        await second.acquire()
    message = str(refused.value)
    assert "pulsar://10.0.0.1:6650" in message
    assert "http://10.0.0.1:8080" in message
    assert str(tmp_path / "a") in message
    assert "sqlite:///shared.db" in message


async def test_the_claim_is_ephemeral_and_names_the_live_broker(
    sessions: Opener, tmp_path: Path
) -> None:
    store = await sessions()
    first = guard(store, tmp_path / "a", 6650)
    await first.acquire()
    found = await store.get(BROKER_CLAIM_PATH)
    assert found is not None and found[1].ephemeral
    claim = BrokerClaim.decode(found[0])
    assert claim is not None and claim.data_dir == str(tmp_path / "a")
    assert claim.storage_id == (tmp_path / "a" / STORAGE_ID_FILE).read_text().strip()

    await store.close()  # the broker's process ends (its session with it)
    observer = await sessions()
    assert await observer.get(BROKER_CLAIM_PATH) is None
    binding = await observer.get(STORAGE_BINDING_PATH)
    assert binding is not None and not binding[1].ephemeral


async def test_another_data_dir_is_refused_even_when_nobody_holds_the_claim(
    sessions: Opener, tmp_path: Path
) -> None:
    first = guard(await sessions(), tmp_path / "a", 6650)
    await first.acquire()
    await first.release()

    stranger_store = await sessions()
    stranger = guard(stranger_store, tmp_path / "b", 7650)
    with pytest.raises(StorageMismatch) as refused:
        await stranger.acquire()
    assert str(tmp_path / "a") in str(refused.value)
    assert str(tmp_path / "b") in str(refused.value)
    # A refused broker leaves nothing behind: its claim is gone at once.
    assert await stranger_store.get(BROKER_CLAIM_PATH) is None

    again = guard(await sessions(), tmp_path / "a", 6650)
    await again.acquire()


async def test_a_restart_waits_for_its_previous_session_instead_of_refusing(
    sessions: Opener, tmp_path: Path
) -> None:
    old_store = await sessions()
    await guard(old_store, tmp_path / "a", 6650).acquire()

    # The same data directory again while the old session lingers (a ZooKeeper session that
    # has not expired yet): it waits, and takes the claim as soon as the old session ends.
    restart = guard(await sessions(), tmp_path / "a", 6650)
    waiting = asyncio.ensure_future(restart.acquire())
    await eventually(lambda: restart.claim.storage_id != "", message="the restart to start")
    await asyncio.sleep(0.05)  # it is really waiting, not refused
    assert not waiting.done()
    await old_store.close()
    await asyncio.wait_for(waiting, 10)


async def test_a_restart_whose_previous_session_never_ends_is_refused_after_the_wait(
    sessions: Opener, tmp_path: Path
) -> None:
    await guard(await sessions(), tmp_path / "a", 6650).acquire()
    clock = ManualClock()
    restart = guard(await sessions(), tmp_path / "a", 6650, clock=clock)
    waiting = asyncio.ensure_future(restart.acquire())
    await eventually(lambda: restart.claim.storage_id != "", message="the restart to start")
    await asyncio.sleep(0.05)
    clock.advance(20.0)  # twice the session timeout
    with pytest.raises(MetadataStoreInUse):
        await asyncio.wait_for(waiting, 10)


async def test_a_moved_data_dir_keeps_its_store(sessions: Opener, tmp_path: Path) -> None:
    first = guard(await sessions(), tmp_path / "a", 6650)
    await first.acquire()
    await first.release()
    (tmp_path / "a").rename(tmp_path / "moved")

    store = await sessions()
    await guard(store, tmp_path / "moved", 6650).acquire()
    found = await store.get(STORAGE_BINDING_PATH)
    assert found is not None
    assert json.loads(found[0])["dataDir"] == str(tmp_path / "moved")


def test_the_storage_id_is_made_once_and_kept(tmp_path: Path) -> None:
    made = storage_id_of(tmp_path)
    assert len(made) == 32
    assert storage_id_of(tmp_path) == made
    assert (tmp_path / STORAGE_ID_FILE).read_text() == made + "\n"
    assert not (tmp_path / (STORAGE_ID_FILE + ".tmp")).exists()


async def test_on_shared_bookies_a_second_broker_is_refused_but_the_store_is_not_bound(
    sessions: Opener, tmp_path: Path
) -> None:
    store = await sessions()
    first = guard(store, tmp_path / "a", 6650, process_local=False)
    await first.acquire()
    with pytest.raises(MetadataStoreInUse, match="standalone brokers do not own topics"):
        await guard(await sessions(), tmp_path / "b", 7650, process_local=False).acquire()
    assert await store.get(STORAGE_BINDING_PATH) is None
    await first.release()
    # The ledgers are on the shared bookies: another data directory may serve the store now.
    await guard(await sessions(), tmp_path / "b", 7650, process_local=False).acquire()
