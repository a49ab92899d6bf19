"""Bookie registration, cookies and the registration-watching bookie set, on a real metadata
store (in memory) and real bookie services on 127.0.0.1."""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.metadata import MetadataStore, open_store
from braid.storage import BookKeeperClient
from braid.storage.api import BookieUnavailable, StorageReadOnly
from braid.storage.bookie.config import BookieConfig
from braid.storage.bookie.cookie import CookieMismatch, check_cookie
from braid.storage.bookie.registration import BookieAlreadyRegistered, BookieRegistrar
from braid.storage.bookie.service import BookieService
from braid.storage.bookie_registry import (
    BookieRegistration,
    BookieState,
    decode_registration,
    registration_path,
)
from braid.storage.remote import RegisteredBookieSet, load_rack_mapping, open_remote_cluster
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store("memory://")
    yield s
    await s.close()


def _config(tmp_path: Path, bookie_id: str, **kw: object) -> BookieConfig:
    return BookieConfig(
        bookie_port=0,
        bookie_id=bookie_id,
        journal_directories=tmp_path / bookie_id,
        ledger_directories=tmp_path / bookie_id,
        metadata_service_uri="memory://",
        http_server_port=0,
        **kw,  # type: ignore[arg-type]
    )


async def test_a_bookie_service_registers_and_the_set_sees_it_come_and_go(
    store: MetadataStore, tmp_path: Path
) -> None:
    members = await RegisteredBookieSet.open(store, "standalone")
    changes: list[int] = []
    members.add_listener(lambda: changes.append(len(members.writable())))
    service = BookieService(_config(tmp_path, "b1", bookie_rack="/eu/r1"), metadata=store)
    await service.start()
    try:
        await eventually(lambda: members.writable() == ["b1"])
        assert members.rack_of("b1") == "/eu/r1"
        client = members.client("b1")
        await client.add_entry(1, 0, b"hi", last_add_confirmed=-1, length=2)
        assert (await client.read_entry(1, 0)).data == b"hi"
        status, doc = service.health()
        assert status == 200 and doc["state"] == "read-write"
    finally:
        await service.close()
    await eventually(lambda: members.writable() == [])
    assert changes[0] == 1 and changes[-1] == 0
    with pytest.raises(BookieUnavailable):
        members.client("never-registered")
    await members.close()


async def test_a_full_disk_moves_the_bookie_to_the_read_only_list_and_back(
    store: MetadataStore, tmp_path: Path
) -> None:
    service = BookieService(_config(tmp_path, "b1"), metadata=store)
    await service.start()
    members = await RegisteredBookieSet.open(store, "standalone")
    try:
        client = members.client("b1")
        assert service.bookie is not None
        service.bookie._disk_full(OSError(errno.ENOSPC, "No space left on device"))
        await eventually(lambda: members.readonly() == ["b1"] and members.writable() == [])
        assert client.read_only_reason is not None
        with pytest.raises(StorageReadOnly):
            client.send_add(1, 0, b"x", lambda _e, _err: None, -1, 1)
        assert service.health()[0] == 503
        await service.bookie.check_disk()  # the real disk has room: writable again
        await eventually(lambda: members.writable() == ["b1"] and members.readonly() == [])
        assert client.read_only_reason is None
        await client.add_entry(1, 0, b"x", last_add_confirmed=-1, length=1)
    finally:
        await members.close()
        await service.close()


async def test_a_second_bookie_with_the_same_id_is_refused(
    store: MetadataStore, tmp_path: Path
) -> None:
    first = BookieRegistrar(store, "c", BookieRegistration("dup", "127.0.0.1", 3181))
    await first.register()
    stat = await store.exists(registration_path("c", "dup", BookieState.WRITABLE))
    assert stat is not None and stat.ephemeral
    # A second process's registrar: the same tree, another session.
    second = BookieRegistrar(
        _OtherSession(store), "c", BookieRegistration("dup", "127.0.0.1", 3182)
    )
    with pytest.raises(BookieAlreadyRegistered):
        await second.register(wait_s=0.2, poll_s=0.05)
    await first.unregister()
    await second.register(wait_s=0.2, poll_s=0.05)  # the first one is gone: now it may


class _OtherSession:
    """The same store seen from another session id (a second bookie process)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    @property
    def session_id(self) -> str:
        return "another-session"


async def test_cookies_refuse_wiped_directories_until_formatted(
    store: MetadataStore, tmp_path: Path
) -> None:
    d = tmp_path / "b"
    cookie = await check_cookie(store, "c", "b", d, d)
    assert (d / "COOKIE").exists()
    assert await check_cookie(store, "c", "b", d, d) == cookie  # a restart: same cookie
    (d / "COOKIE").unlink()  # the directory was wiped
    with pytest.raises(CookieMismatch, match="data was lost"):
        await check_cookie(store, "c", "b", d, d)
    fresh = await check_cookie(store, "c", "b", d, d, new_bookie=True)
    assert fresh.bookie_id == "b" and (d / "COOKIE").exists()
    with pytest.raises(CookieMismatch, match="--format refused"):
        await check_cookie(store, "c", "b", d, d, new_bookie=True)
    with pytest.raises(CookieMismatch, match="does not match"):
        await check_cookie(store, "c", "b", d, tmp_path / "elsewhere")


async def test_open_remote_cluster_waits_for_enough_bookies(
    store: MetadataStore, tmp_path: Path
) -> None:
    with pytest.raises(BookieUnavailable, match="1 needed"):
        await open_remote_cluster(store, "standalone", min_bookies=1, wait_s=0.2)
    service = BookieService(_config(tmp_path, "b1"), metadata=store)
    await service.start()
    try:
        client = await open_remote_cluster(store, "standalone", min_bookies=1, wait_s=5)
        writer = await client.create_ledger()
        await writer.add_entry(b"over tcp")
        await writer.close()
        reader = await client.open_ledger(writer.ledger_id)
        assert (await reader.read_entries(0, 0))[0].data == b"over tcp"
        await client.close()
    finally:
        await service.close()


def test_registrations_decode_what_they_encode() -> None:
    from braid.storage.bookie_registry import encode_registration

    reg = BookieRegistration("h:1", "h", 1, BookieState.READ_ONLY, "/r", "full", 8000)
    assert decode_registration(encode_registration(reg)) == reg


def test_a_rack_mapping_file_is_key_value_lines(tmp_path: Path) -> None:
    path = tmp_path / "racks"
    path.write_text("# racks\nb1=/eu/r1\n\nb2 = /us/r2\n")
    assert load_rack_mapping(path) == {"b1": "/eu/r1", "b2": "/us/r2"}
    path.write_text("b1 eu\n")
    with pytest.raises(Exception, match="expected bookieId=/region/rack"):
        load_rack_mapping(path)


async def test_a_bookie_registering_after_the_client_opened_joins_the_cluster(
    store: MetadataStore, tmp_path: Path
) -> None:
    first = BookieService(_config(tmp_path, "b1"), metadata=store)
    await first.start()
    second = BookieService(_config(tmp_path, "b2"), metadata=store)
    client = await open_remote_cluster(store, "standalone", min_bookies=1, wait_s=5)
    try:
        with pytest.raises(BookieUnavailable):
            await client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
        await second.start()
        await eventually(lambda: _knows(client, "b2"))
        writer = await client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
        await writer.add_entry(b"on two bookies")
        await writer.close()
        for bookie_id in ("b1", "b2"):
            stored = await client.bookie(bookie_id).read_entry(writer.ledger_id, 0)
            assert stored.data == b"on two bookies"
    finally:
        await client.close()
        await second.close()
        await first.close()


def _knows(client: BookKeeperClient, bookie_id: str) -> bool:
    return bookie_id in client.bookie_set.writable()
