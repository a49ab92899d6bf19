"""SIGKILL of ``braid standalone`` at each recorded phase of a migration (issue 33, ADR 0063).

The fault point ``BRAID_MIGRATION_FAULT_PAUSE_AT`` stops the executor right after it recorded a
phase (or, inside ``TERMINATING``, after some partitions were terminated and before the others);
the test SIGKILLs the process and restarts it on the same data without the fault. A migration cut
past its point of no return (``TERMINATING`` and later: its partitions' producers wait) is
finished by the restarted broker by itself; one cut before is left as it was - nothing
terminated - and finishes when the command is run again. Either way every message the official
client wrote is then read by Braid's Stream subscription exactly once, with each key in order into
the messages written after the migration.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

import braid
from braid.cli.process import StandaloneProcess
from braid.scalable.faults import MIGRATION_FAULT_ENV
from tests.support.keyed_order import assert_each_key_in_order, drain_braid, payload
from tests.support.polling import wait_for
from tests.support.standalone import official_client

pytestmark = pytest.mark.timeout(300)

SOURCE = "persistent://public/default/orders"
TARGET = "topic://public/default/orders"
MIGRATE = "/admin/v2/persistent/public/default/orders/migrateToScalable"
KEYS = [f"key-{i}" for i in range(6)]
OLD, NEW = 6, 3
#: Every recorded phase, and two cuts inside TERMINATING: after the second of the four partitions'
#: terminations was recorded, and after the third partition was terminated but before the record
#: said so (the resumed run terminates it again and gets the same last position).
PHASES = [
    "SEGMENTS_CREATED",
    "TERMINATING",
    "TERMINATING+2",
    "UNRECORDED+3",
    "PARTITIONS_TERMINATED",
    "LAYOUT_PUBLISHED",
]


@pytest.fixture
def crashing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[StandaloneProcess, str]]:
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data",
        env={**os.environ, MIGRATION_FAULT_ENV: request.param},
        log_path=tmp_path / "sa.log",
    )
    try:
        yield process, request.param
    finally:
        if process.running:
            process.stop()


@pytest.mark.parametrize("crashing", PHASES, indirect=True)
def test_sigkill_at_a_migration_phase_then_restart_finishes_it(
    crashing: tuple[StandaloneProcess, str],
) -> None:
    process, phase = crashing
    http = httpx.Client(base_url=process.web_url, timeout=30)
    try:
        put = http.put("/admin/v2/persistent/public/default/orders/partitions", json=4)
        assert put.status_code == 204, put.text
        official = official_client(process)
        try:
            official.subscribe(
                SOURCE, "ordered", initial_position=pulsar.InitialPosition.Earliest
            ).close()
            producer = official.create_producer(SOURCE, batching_enabled=False)
            for seq in range(OLD):
                for key in KEYS:
                    producer.send(payload(key, seq), partition_key=key)
        finally:
            official.close()

        def migrate() -> None:
            # Blocks: the executor pauses at the fault point until the process is killed.
            try:
                httpx.post(process.web_url + MIGRATE, json={"segments": 2}, timeout=60)
            except httpx.HTTPError:
                pass

        caller = threading.Thread(target=migrate, daemon=True)
        caller.start()
        wait_for(
            lambda: "migration fault point" in process.output(),
            within=60,
            message=lambda: f"the fault point; log:\n{process.output()[-3000:]}",
        )
        if "+" in phase:  # cut inside TERMINATING: two partitions recorded, two to go
            status = http.get(MIGRATE).json()
            assert status["phase"] == "TERMINATING" and status["canRollBack"] is False
            assert status["partitionsTerminated"] == 2
        process.kill()
        caller.join(timeout=30)
        process.env.pop(MIGRATION_FAULT_ENV)
        process.start()

        if phase == "SEGMENTS_CREATED":  # before the point of no return: left as it was
            status = http.get(MIGRATE).json()
            assert status["phase"] == "SEGMENTS_CREATED" and status["canRollBack"] is True
            assert status["partitionsTerminated"] == 0
            assert http.post(MIGRATE, json={}).json()["phase"] == "DONE"
        wait_for(
            lambda: http.get(MIGRATE).json()["phase"] == "DONE",
            within=60,
            message=lambda: f"the restarted broker to finish: {http.get(MIGRATE).text}",
        )
    finally:
        http.close()

    with braid.Client(process.service_url, operation_timeout=15) as client:
        new_producer = client.create_producer(TARGET)
        for seq in range(OLD, OLD + NEW):
            for key in KEYS:
                new_producer.send(payload(key, seq), key=key)
        stream = client.subscribe_stream(TARGET, "ordered")
        expected = {payload(k, s) for k in KEYS for s in range(OLD + NEW)}
        got = drain_braid(stream, len(expected))
    assert len(got) == len(set(got)) and set(got) == expected
    assert_each_key_in_order(got)
