"""Issue 14, gap (a): the orchestrating ``braid standalone`` process is SIGKILLed mid-BUILD.

A real ``braid standalone`` child with two local storage clusters (its own, ``standalone``, and
``new`` over its own SQLite file and bookie directory, from ``BRAID_bookieClusters``) holds
several topics with a schema and a subscription that acknowledged part of its messages, so there
are schema and cursor ledgers to copy. A switch to ``new`` runs with
``bookieClusterSwitchConcurrency=2`` and the test-only fault point
``BRAID_SWITCH_FAULT_PAUSE_AT=BUILD:3`` (:mod:`braid.clusters.faults`): the orchestrator stops
before its third BUILD batch, with four ledgers copied and persisted. The test sees the fault
point in the log (polling, no sleeping), SIGKILLs the process, restarts it on the same data
directory and ports without the fault, and checks that:

* the orchestrator resumes from the persisted state and reaches CLEANUP (waiting for the
  window), then DONE;
* every copied ledger exists on ``new`` with the same id and identical entries (compared offline,
  with the process stopped, before CLEANUP deletes the source copies);
* no message acknowledged by the broker to the producer is lost for the subscription, and new
  messages are produced and consumed after the switch.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pulsar
from pulsar.schema import StringSchema

from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess
from braid.clusters.faults import SWITCH_FAULT_ENV
from braid.clusters.registry import BookieClusterRegistry
from braid.core.storage_switch import ItemKind, ItemStatus, SwitchState
from braid.metadata import open_store
from braid.storage.local import open_local_cluster
from tests.support.polling import wait_for
from tests.support.standalone import metadata_barrier, official_client
from tests.support.switch_stack import ledger_entries

TOPICS = 6
SENT = 20
ACKED = 8

Entries = list[tuple[int, bytes]]


def _topic(i: int) -> str:
    return f"persistent://public/default/kill-switch-{i}"


def _fill(process: StandaloneProcess) -> None:
    """Per topic: a String schema, ``SENT`` messages, the first ``ACKED`` acknowledged."""
    client = official_client(process)
    try:
        for i in range(TOPICS):
            consumer = client.subscribe(
                _topic(i),
                "sub",
                schema=StringSchema(),
                initial_position=pulsar.InitialPosition.Earliest,
            )
            producer = client.create_producer(_topic(i), schema=StringSchema())
            for n in range(SENT):
                producer.send(f"t{i}-m{n}")
            for _ in range(ACKED):
                message = consumer.receive(timeout_millis=10_000)
                consumer.acknowledge(message)
            producer.close()
            consumer.close()
    finally:
        client.close()
    metadata_barrier(process, "fill")


def _drain(process: StandaloneProcess, expected: set[str]) -> set[str]:
    """Receive on every topic's subscription until ``expected`` arrived (or 30 s went by)."""
    client = official_client(process)
    received: set[str] = set()
    try:
        consumers = [
            client.subscribe(_topic(i), "sub", schema=StringSchema()) for i in range(TOPICS)
        ]

        def more() -> bool:
            for consumer in consumers:
                try:
                    message = consumer.receive(timeout_millis=50)
                except pulsar.Timeout:
                    continue
                received.add(message.value())
                consumer.acknowledge(message)
            return received >= expected

        wait_for(more, within=30, message=lambda: f"missing {sorted(expected - received)}")
    finally:
        client.close()
    return received


async def _offline_copies(
    data_dir: Path, new_uri: str
) -> tuple[SwitchState, dict[int, tuple[Entries | None, Entries | None]]]:
    """With the process stopped: the switch state, and per item its entries on both clusters."""
    broker = await open_store(f"sqlite:///{data_dir / 'metadata' / 'metadata.db'}")
    new_store = await open_store(new_uri)
    try:
        got = await BookieClusterRegistry(broker).state()
        assert got is not None
        state = got[0]
        old = await open_local_cluster(broker, data_dir, "standalone")
        try:
            new = await open_local_cluster(new_store, data_dir / "storage" / "new", "new")
            try:
                copies = {
                    item.ledger_id: (
                        await ledger_entries(old, item.ledger_id),
                        await ledger_entries(new, item.ledger_id),
                    )
                    for item in state.items
                }
            finally:
                await new.close()
        finally:
            await old.close()
        return state, copies
    finally:
        await new_store.close()
        await broker.close()


def test_sigkill_mid_build_then_restart_resumes_the_switch(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    new_uri = f"sqlite:///{tmp_path / 'new-cluster' / 'metadata.db'}"
    (tmp_path / "new-cluster").mkdir()
    env = {
        **os.environ,
        "BRAID_bookieClusters": f"new={new_uri}",
        "BRAID_bookieClusterSwitchConcurrency": "2",
        SWITCH_FAULT_ENV: "BUILD:3",
    }
    process = StandaloneProcess.start_on_free_ports(
        data_dir, env=env, log_path=tmp_path / "standalone.log"
    )
    try:
        _fill(process)
        expected = {f"t{i}-m{n}" for i in range(TOPICS) for n in range(ACKED, SENT)}
        with AdminClient(process.web_url) as admin:
            assert admin.bookie_clusters.advance_idgen("new")["ready"] is True
            assert admin.bookie_clusters.switch("new")["activeCluster"] == "new"
            wait_for(
                lambda: "switch fault point BUILD:3 reached" in process.output(),
                within=30,
                message=lambda: f"the fault point; log:\n{process.output()[-3000:]}",
            )
            progress = admin.bookie_clusters.status()["switch"]["progress"]
            assert progress["BUILT"] == 4 and progress["PENDING"] >= 2, progress
            assert progress["total"] >= TOPICS + 2, progress
        assert process.kill() == -signal.SIGKILL

        process.env.pop(SWITCH_FAULT_ENV)
        process.start()
        with AdminClient(process.web_url) as admin:

            def phase() -> str:
                return str(admin.bookie_clusters.status()["switch"]["phase"])

            wait_for(lambda: phase() == "CLEANUP", within=60, message="resumed to PROMOTE")
            status = admin.bookie_clusters.status()
            assert status["activeCluster"] == "new"
            assert status["switch"]["failedLedgers"] == [], status
            # Resumed from the persisted state: the restarted run did not discover again.
            assert "ledgers to copy" not in process.output()

        process.stop()
        state, copies = asyncio.run(_offline_copies(data_dir, new_uri))
        kinds = {item.kind for item in state.items}
        assert kinds == {ItemKind.SCHEMA, ItemKind.CURSOR}, state.items
        compared = 0
        for item in state.items:
            old, new = copies[item.ledger_id]
            if item.status is ItemStatus.ROLLED_OVER:
                continue  # a cursor that moved on to a ledger of the new cluster
            assert item.status is ItemStatus.PROMOTED, item
            assert old is not None and new is not None, (item, old, new)
            assert old == new, item
            compared += 1
        assert compared >= TOPICS + 2

        process.start()
        with AdminClient(process.web_url) as admin:
            assert admin.bookie_clusters.cleanup()["dryRun"] is True
            admin.bookie_clusters.cleanup(dry_run=False, force=True)
            wait_for(
                lambda: admin.bookie_clusters.status()["switch"]["phase"] == "DONE",
                within=60,
                message="CLEANUP done",
            )
            statuses = {c["name"]: c["status"] for c in admin.bookie_clusters.list()}
            assert statuses == {"standalone": "DEPRECATED", "new": "ACTIVE"}

        # Nothing the producers were acknowledged for is lost; new traffic goes on.
        client = official_client(process)
        try:
            for i in range(TOPICS):
                producer = client.create_producer(_topic(i), schema=StringSchema())
                producer.send(f"t{i}-after")
                producer.close()
        finally:
            client.close()
        expected |= {f"t{i}-after" for i in range(TOPICS)}
        received = _drain(process, expected)
        assert received >= expected
        assert not any(f"t{i}-m{n}" in received for i in range(TOPICS) for n in range(ACKED))
    finally:
        if process.running:
            process.stop()
