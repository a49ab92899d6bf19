"""``braid standalone --bookies N``: N bookies in the process, reached over loopback TCP; the
official client produces and consumes through them, and every acknowledged message survives a
SIGKILL of the process (the bookies replay their journals, re-register, and their cookies
match)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pulsar
import pytest

from tests.support.standalone import StandaloneProcess, official_client

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


def test_standalone_with_three_loopback_bookies_keeps_acked_messages_across_a_sigkill(
    tmp_path: Path,
) -> None:
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", extra_args=["--bookies", "3"], log_path=tmp_path / "standalone.log"
    )
    try:
        client = official_client(process)
        try:
            producer = client.create_producer("persistent://public/default/three-bookies")
            for i in range(50):
                producer.send(f"m-{i}".encode(), partition_key=f"k{i % 5}")
            producer.close()
        finally:
            client.close()
        for i in range(3):
            assert (tmp_path / "data" / f"bookie-{i}" / "COOKIE").exists()
        health = httpx.get(f"{process.web_url}/admin/v2/brokers/health", timeout=10)
        assert health.status_code == 200
        process.kill()
        process.start(timeout=60)
        client = official_client(process)
        try:
            consumer = client.subscribe(
                "persistent://public/default/three-bookies",
                "sub",
                initial_position=pulsar.InitialPosition.Earliest,
            )
            got = [consumer.receive(timeout_millis=10_000).data().decode() for _ in range(50)]
            assert got == [f"m-{i}" for i in range(50)]
        finally:
            client.close()
    finally:
        process.stop()
