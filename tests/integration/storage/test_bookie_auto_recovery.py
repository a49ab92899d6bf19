"""Auto-recovery hosted by bookies (``autoRecoveryDaemonEnabled`` in ``bookkeeper.conf``): every
bookie contends for the cluster's one auditor election, runs a replication worker, and shows the
auto-recovery metrics on its ``/metrics``; a bookie that leaves has its fragments copied to the
others; when the auditor's bookie stops, another bookie takes over. Real bookie services on
127.0.0.1 and a real (in-memory) metadata store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from braid.metadata import MetadataStore, open_store
from braid.metadata.election import read_leader
from braid.storage.autorecovery.underreplication import auditor_election_path
from braid.storage.bookie.config import BookieConfig
from braid.storage.bookie.service import BookieService
from braid.storage.remote import open_remote_cluster
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store("memory://")
    yield s
    await s.close()


def _config(tmp_path: Path, bookie_id: str) -> BookieConfig:
    return BookieConfig(
        bookie_port=0,
        bookie_id=bookie_id,
        journal_directories=tmp_path / bookie_id,
        ledger_directories=tmp_path / bookie_id,
        metadata_service_uri="memory://",
        http_server_port=0,
        auto_recovery_daemon_enabled=True,
        lost_bookie_recovery_delay=0,
    )


async def _auditor(store: MetadataStore) -> str | None:
    value = await read_leader(store, auditor_election_path("standalone"))
    return None if value is None else value.decode()


async def test_bookies_host_one_auditor_and_copy_the_fragments_of_a_bookie_that_left(
    store: MetadataStore, tmp_path: Path
) -> None:
    services = {b: BookieService(_config(tmp_path, b), metadata=store) for b in ("b1", "b2", "b3")}
    for service in services.values():
        await service.start()
    client = await open_remote_cluster(store, "standalone", min_bookies=3, wait_s=10)
    try:
        await eventually(lambda: _is_set(store), within=10)
        auditor = await _auditor(store)
        assert auditor in services
        hosting = [b for b, s in services.items() if s.auto_recovery and s.auto_recovery.is_auditor]
        assert hosting == [auditor]  # one auditor for the cluster, whichever bookies host it
        http = services[auditor].http
        assert http is not None
        async with httpx.AsyncClient() as web:
            metrics = (await web.get(f"http://127.0.0.1:{http.port}/metrics")).text
        assert "braid_autorecovery_auditor 1.0" in metrics
        assert "braid_bookie_add_requests" in metrics

        writer = await client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
        for i in range(20):
            await writer.add_entry(b"entry-%d" % i)
        await writer.close()
        md = await client.get_ledger_metadata(writer.ledger_id)
        # The auditor's own bookie leaves if it holds the ledger: the election moves too.
        leaving = auditor if auditor in md.ensemble else md.ensemble[0]
        await services.pop(leaving).close()
        staying = sorted(services)

        async def moved() -> bool:
            now = await client.get_ledger_metadata(writer.ledger_id)
            return leaving not in now.bookies()

        await eventually(moved, within=30, message=f"ledger copied off {leaving}")
        assert await _auditor(store) in staying
        now = await client.get_ledger_metadata(writer.ledger_id)
        assert sorted(now.ensemble) == staying
        for bookie in staying:
            entries = await client.bookie(bookie).read_entries(writer.ledger_id, 0, 19)
            assert [e.data for e in entries] == [b"entry-%d" % i for i in range(20)]
    finally:
        await client.close()
        for service in services.values():
            await service.close()


async def _is_set(store: MetadataStore) -> bool:
    return await _auditor(store) is not None
