"""A split that fails on the leader of a real ``braid standalone`` recovers by itself, and after a
SIGKILL in the middle of its recovery, by the restarted process (issue 22, ADR 0040).

``BRAID_FAULT_FAIL_AT`` makes the first pass through a step fail, as the reported split did on the
leader it was forwarded to; ``BRAID_FAULT_PAUSE_AT`` on the same step stops the recovery's pass
there, so the test can SIGKILL the process in the middle of it. Checked through the admin API, as
an operator would: ``stats`` shows the operation in flight only while the recovery runs it, the
split completes, and every message acknowledged before it is still there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from braid.cli.process import StandaloneProcess
from braid.scalable.faults import FAIL_ENV, FAULT_ENV
from tests.support.polling import wait_for
from tests.support.raw_client import RawClient
from tests.support.segment_io import drain, produce

#: The admin API takes a POST only as JSON (its cross-site guard).
JSON = {"Content-Type": "application/json"}

BASE = "/admin/v2/scalable/public/default/orders"
STEP = "parents-terminated"  # after the parent is sealed: the recovery rolls forward


def segment(layout: dict[str, Any], segment_id: int) -> str:
    info = layout["segments"][str(segment_id)]
    start, end = info["hashRange"]["start"], info["hashRange"]["end"]
    return f"segment://public/default/orders/{start:04x}-{end:04x}-{segment_id}"


@pytest.fixture
def faults(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(request.param)


@pytest.fixture
def process(tmp_path: Path, faults: dict[str, str]) -> Iterator[StandaloneProcess]:
    started = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", env={**os.environ, **faults}, log_path=tmp_path / "sa.log"
    )
    try:
        yield started
    finally:
        if started.running:
            started.stop()


def _fill_and_fail_a_split(process: StandaloneProcess, http: httpx.Client) -> dict[str, Any]:
    assert http.put(BASE, json={"numInitialSegments": 2}).status_code == 204
    subscription = http.put(f"{BASE}/subscriptions/s", json={"initialPosition": "Earliest"})
    assert subscription.status_code == 204
    layout: dict[str, Any] = http.get(BASE).json()

    async def fill() -> None:
        raw = await RawClient.open(process.host, process.port)
        try:
            await produce(raw, segment(layout, 0), [b"a0", b"a1"])
        finally:
            await raw.close()

    asyncio.run(fill())
    failed = http.post(f"{BASE}/split/0", headers=JSON, timeout=60)
    assert failed.status_code == 503, failed.text
    assert "fault injected" in failed.json()["reason"]
    return layout


def _finished(http: httpx.Client) -> bool:
    response = http.get(f"{BASE}/stats")
    if response.status_code != 200:
        return False
    stats = response.json()
    controller = stats["controller"]
    return (
        stats["epoch"] == 1
        and controller["operationInFlight"] is None
        and controller["operationRecovery"] is None
    )


def _check_messages(process: StandaloneProcess, layout: dict[str, Any]) -> None:
    async def check() -> None:
        raw = await RawClient.open(process.host, process.port)
        try:
            assert await drain(raw, segment(layout, 0), "s", 2) == [b"a0", b"a1"]
        finally:
            await raw.close()

    asyncio.run(check())


@pytest.mark.parametrize("faults", [{FAIL_ENV: STEP}], indirect=True)
def test_a_split_failing_on_the_leader_is_finished_by_its_recovery(
    process: StandaloneProcess,
) -> None:
    with httpx.Client(base_url=process.web_url, timeout=30) as http:
        layout = _fill_and_fail_a_split(process, http)
        recovery = http.get(f"{BASE}/stats").json()["controller"]["operationRecovery"]
        assert recovery is None or recovery["action"] == "roll-forward"  # it may be done already
        wait_for(lambda: _finished(http), within=30, message="the recovery to finish the split")
        _check_messages(process, layout)


@pytest.mark.parametrize("faults", [{FAIL_ENV: STEP, FAULT_ENV: STEP}], indirect=True)
def test_a_recovery_cut_by_sigkill_is_finished_by_the_restarted_broker(
    process: StandaloneProcess,
) -> None:
    with httpx.Client(base_url=process.web_url, timeout=30) as http:
        layout = _fill_and_fail_a_split(process, http)
        wait_for(
            lambda: "pausing until the process is killed" in process.output(),
            within=30,
            message=lambda: f"the recovery's pass to pause; log:\n{process.output()[-3000:]}",
        )
        process.kill()
        for variable in (FAIL_ENV, FAULT_ENV):
            process.env.pop(variable)
        process.start()
        wait_for(lambda: _finished(http), within=30, message="the restart to finish the split")
        _check_messages(process, layout)
