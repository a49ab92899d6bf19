"""``/admin/v2/bookies`` and the auto-recovery metrics on a standalone broker running
auto-recovery (``autoRecoveryDaemonEnabled``): the bookie list, decommission progress, and
``braid admin bookies`` against a real ``braid standalone`` process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from braid.cli.main import main
from braid.cli.standalone import StandaloneServer
from tests.support.polling import eventually
from tests.support.standalone import StandaloneProcess, standalone_config

#: The admin API takes a POST only as JSON (its cross-site guard).
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def recovering(tmp_path: Path) -> AsyncIterator[StandaloneServer]:
    server = StandaloneServer(
        standalone_config(tmp_path / "data", auto_recovery_daemon_enabled=True)
    )
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def test_bookies_decommission_progress_and_auto_recovery_metrics(
    recovering: StandaloneServer,
) -> None:
    assert recovering.broker is not None and recovering.auto_recovery is not None
    await recovering.broker.get_or_create_topic("persistent://public/default/b", create=True)
    async with httpx.AsyncClient(base_url=recovering.web_service_url, timeout=10) as admin:
        bookies = (await admin.get("/admin/v2/bookies/all")).json()["bookies"]
        assert bookies == [{"bookieId": "bookie-0", "state": "writable", "rack": None}]
        status = (await admin.get("/admin/v2/bookies/bookie-0/decommission")).json()
        assert status["ledgersRemaining"] and not status["done"]
        # With one bookie there is nowhere to copy to: the ledgers stay marked, the data stays.
        started = (await admin.post("/admin/v2/bookies/bookie-0/decommission", headers=JSON)).json()
        assert started["underReplicatedLedgers"] == len(started["ledgersRemaining"])
        marked = (await admin.get("/admin/v2/bookies/underreplicated")).json()["ledgers"]
        assert marked == started["ledgersRemaining"]
        assert (await admin.get("/admin/v2/bookies/bad%2Fid/decommission")).status_code in (
            404,
            412,
        )
        await eventually(lambda: recovering.auto_recovery.is_auditor, message="the auditor")  # type: ignore[union-attr]

        async def counted() -> bool:
            text = (await admin.get("/metrics")).text
            return f"braid_autorecovery_under_replicated_ledgers {len(marked)}.0" in text

        await eventually(counted, message="the under-replicated gauge")
        text = (await admin.get("/metrics")).text
        assert "braid_autorecovery_rereplicated_bytes_total 0.0" in text
        assert "braid_autorecovery_auditor 1.0" in text


def test_the_bookies_cli_lists_and_reports(
    capsys: pytest.CaptureFixture[str], standalone_subprocess: StandaloneProcess
) -> None:
    url = standalone_subprocess.web_url
    assert main(["admin", "--url", url, "bookies", "list"]) == 0
    out = capsys.readouterr().out
    assert "bookie-0" in out and "writable" in out
    assert main(["admin", "--url", url, "bookies", "underreplicated"]) == 0
    assert "no ledger is under-replicated" in capsys.readouterr().out
    assert main(["admin", "--url", url, "bookies", "decommission-status", "bookie-9"]) == 0
    assert "decommissioned" in capsys.readouterr().out
