"""A bookie process on a small real file system: a full disk turns it read-only (it moves to
the read-only list, writers are refused up front and go elsewhere), freed space turns it back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from braid.metadata import open_store
from braid.storage.api import StorageReadOnly
from braid.storage.remote import RegisteredBookieSet, open_remote_cluster
from tests.support.bookie_process import BookieProcess
from tests.support.polling import eventually
from tests.support.small_fs import Ballast, small_filesystem

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


async def test_a_full_disk_makes_a_bookie_read_only_and_writers_move_off_it(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    with small_filesystem(tmp_path, 64) as fs:
        small = BookieProcess(
            "bk-small",
            fs / "bk-small",
            zk_url,
            extra={"diskCheckInterval": "200", "journalMaxSizeMB": "4"},
        )
        roomy = bookies("bk-roomy")
        try:
            await asyncio.gather(asyncio.to_thread(small.start), asyncio.to_thread(roomy.start))
            store = await open_store(zk_url)
            client = await open_remote_cluster(store, "standalone", min_bookies=2, wait_s=30)
            members = client.bookie_set
            assert isinstance(members, RegisteredBookieSet)
            try:
                assert members.writable() == ["bk-roomy", "bk-small"]
                ballast = Ballast(fs)
                ballast.fill(leave_free=0)
                await eventually(
                    lambda: members.readonly() == ["bk-small"], within=30, message="read-only"
                )
                assert members.writable() == ["bk-roomy"]
                # A writer needing both bookies is refused before anything is sent...
                with pytest.raises(StorageReadOnly):
                    writer = await client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
                    await writer.add_entry(b"x")
                # ...one that fits on the writable bookie goes on (until ensemble placement
                # skips read-only bookies by itself, a one-bookie ledger on bk-roomy).
                small_client = client.bookie("bk-small")
                assert small_client.read_only_reason is not None
                ballast.release()
                await eventually(
                    lambda: members.writable() == ["bk-roomy", "bk-small"],
                    within=30,
                    message="writable again",
                )
                assert small_client.read_only_reason is None
                writer = await client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
                await writer.add_entry(b"back")
                await writer.close()
            finally:
                await client.close()
                await store.close()
        finally:
            small.stop()
