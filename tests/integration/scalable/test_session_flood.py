"""Issue 27, finding 2 on a real ``braid standalone``: one connection flooding
``SCALABLE_TOPIC_LOOKUP`` frames with distinct session ids gets at most
``scalableTopicMaxSessionsPerConnection`` sessions (the rest ``TooManyRequests`` naming the key), a
split pushes to those only, and the broker's RSS is back within 10 % of its baseline once the
socket closes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from braid.cli.process import StandaloneProcess
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.polling import eventually
from tests.support.raw_client import RawClient
from tests.support.session_flood import flood_lookups, rss_bytes

TOPIC = "topic://public/default/flooded"
FLOOD = 20_000
CAP = 1_000  # scalableTopicMaxSessionsPerConnection's default


@pytest.mark.timeout(300)
async def test_a_lookup_flood_on_one_connection_is_capped_and_its_memory_returns_on_close(
    tmp_path: Path,
) -> None:
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log"
    )
    try:
        assert process.pid is not None
        async with httpx.AsyncClient(base_url=process.web_url, timeout=60) as web:
            answer = await web.put(
                "/admin/v2/scalable/public/default/flooded", json={"numInitialSegments": 2}
            )
        assert answer.status_code == 204, answer.text
        # Warm the paths a lookup takes (imports, caches) before the baseline.
        warm = await RawClient.open("127.0.0.1", process.port)
        assert (await flood_lookups(warm, TOPIC, 50))["opened"] == 50
        await warm.close()
        baseline = rss_bytes(process.pid)

        raw = await RawClient.open("127.0.0.1", process.port)
        answers = await flood_lookups(raw, TOPIC, FLOOD)
        assert answers == {"opened": CAP, "TooManyRequests": FLOOD - CAP}
        refused = await _refusal_message(raw)
        assert "scalableTopicMaxSessionsPerConnection" in refused
        peak = rss_bytes(process.pid)

        # A split pushes the new DAG to the sessions that exist: CAP of them, not FLOOD.
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=process.web_url, timeout=60) as web:
            split = await web.post(
                "/admin/v2/scalable/public/default/flooded/split/0",
                headers={"Content-Type": "application/json"},
            )
        split_s = time.monotonic() - started
        assert split.status_code == 200, split.text
        pushed = set()
        while len(pushed) < CAP:
            cmd = await raw.next_command(_is_update, within=30)
            pushed.add(cmd.scalableTopicUpdate.session_id)
        assert pushed == set(range(1, CAP + 1))

        await raw.close()
        await eventually(
            lambda: rss_bytes(process.pid or 0) <= baseline * 1.10,
            within=30,
            interval=0.2,
            message=lambda: (
                f"RSS back within 10 % of its {baseline / 1e6:.1f} MB baseline (now "
                f"{rss_bytes(process.pid or 0) / 1e6:.1f} MB)"
            ),
        )
        after = rss_bytes(process.pid)
        print(
            f"\nRSS baseline {baseline / 1e6:.1f} MB, after {FLOOD} lookups {peak / 1e6:.1f} MB, "
            f"after close {after / 1e6:.1f} MB ({after / baseline:.3f}); split {split_s:.2f} s"
        )
    finally:
        process.stop()


def _is_update(cmd: pb.BaseCommand) -> bool:
    return cmd.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE


async def _refusal_message(raw: RawClient) -> str:
    """One more lookup over the cap: its refusal's message."""
    await raw.send(commands.scalable_topic_lookup(FLOOD + 1, TOPIC))
    cmd = await raw.next_command(
        lambda c: _is_update(c) and c.scalableTopicUpdate.session_id == FLOOD + 1
    )
    assert cmd.scalableTopicUpdate.error == pb.TooManyRequests
    return str(cmd.scalableTopicUpdate.message)
