"""SIGKILL of ``braid standalone`` at each cut point of a split and a merge (ADR 0021).

The fault point ``BRAID_FAULT_PAUSE_AT`` stops the controller right after one step; the test then
SIGKILLs the process, restarts it on the same data directory without the fault, and checks that
the operation finished by itself, that every message acknowledged before the crash is still
there for the subscription, and (deduplication on) that every child knows its parents' last
sequence ids (PIP-460 "Exactly-once", ADR 0055).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from braid.cli.process import StandaloneProcess
from braid.scalable.controller import STEPS
from braid.scalable.faults import FAULT_ENV
from tests.support.polling import wait_for
from tests.support.raw_client import RawClient
from tests.support.segment_io import drain, last_sequence_id, produce

BASE = "/admin/v2/scalable/public/default/orders"


@pytest.fixture
def crashing(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StandaloneProcess]:
    step = request.param
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", env={**_env(), FAULT_ENV: step}, log_path=tmp_path / "sa.log"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


def _env() -> dict[str, str]:
    return {**os.environ, "BRAID_brokerDeduplicationEnabled": "true"}


def segment(layout: dict[str, object], segment_id: int) -> str:
    info = layout["segments"][str(segment_id)]  # type: ignore[index]
    start, end = info["hashRange"]["start"], info["hashRange"]["end"]
    return f"segment://public/default/orders/{start:04x}-{end:04x}-{segment_id}"


async def raw_for(process: StandaloneProcess) -> RawClient:
    return await RawClient.open(process.host, process.port)


@pytest.mark.parametrize("kind", ["split", "merge"])
@pytest.mark.parametrize("crashing", STEPS, indirect=True)
def test_sigkill_at_a_cut_point_then_restart_completes_the_operation(
    crashing: StandaloneProcess, kind: str
) -> None:
    process = crashing
    http = httpx.Client(base_url=process.web_url, timeout=30)
    try:
        assert http.put(BASE, json={"numInitialSegments": 2}).status_code == 204
        assert (
            http.put(f"{BASE}/subscriptions/s", json={"initialPosition": "Earliest"}).status_code
            == 204
        )
        layout = http.get(BASE).json()

        async def fill() -> None:
            raw = await raw_for(process)
            try:
                await produce(raw, segment(layout, 0), [b"a0", b"a1"], producer_name="pa")
                await produce(raw, segment(layout, 1), [b"b0"], producer_name="pb")
            finally:
                await raw.close()

        asyncio.run(fill())

        def request_operation() -> None:
            # Blocks: the controller pauses at the fault point until the process is killed.
            body = None if kind == "split" else {"segmentIds": [0, 1]}
            path = f"{BASE}/split/0" if kind == "split" else f"{BASE}/merge"
            try:
                # JSON even without a body: the admin API takes no other POST (ADR 0044).
                headers = {"Content-Type": "application/json"}
                httpx.post(process.web_url + path, json=body, headers=headers, timeout=60)
            except httpx.HTTPError:
                pass

        caller = threading.Thread(target=request_operation, daemon=True)
        caller.start()
        wait_for(
            lambda: "fault point" in process.output(),
            within=30,
            message=lambda: f"the fault point; log:\n{process.output()[-3000:]}",
        )
        process.kill()
        caller.join(timeout=30)
        process.env.pop(FAULT_ENV)
        process.start()

        def finished() -> bool:
            stats = http.get(f"{BASE}/stats")
            return (
                stats.status_code == 200
                and stats.json()["controller"]["operationInFlight"] is None
                and stats.json()["epoch"] == 1
            )

        wait_for(finished, within=30, message="the restarted broker to finish the operation")
        after = http.get(BASE).json()
        active = sorted(int(k) for k, v in after["segments"].items() if v["state"] == "ACTIVE")
        assert active == ([1, 2, 3] if kind == "split" else [2])

        async def check() -> None:
            raw = await raw_for(process)
            try:
                assert await drain(raw, segment(after, 0), "s", 2) == [b"a0", b"a1"]
                assert await drain(raw, segment(after, 1), "s", 1) == [b"b0"]
                # The children inherited the sealed parents' sequence ids (a resend is a dup).
                for child in active:
                    if child == 1:
                        continue
                    assert await last_sequence_id(raw, segment(after, child), "pa") == 1
                    if kind == "merge":
                        assert await last_sequence_id(raw, segment(after, child), "pb") == 0
            finally:
                await raw.close()

        asyncio.run(check())
    finally:
        http.close()
