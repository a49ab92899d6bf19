"""A topic's transaction buffer snapshot survives a SIGKILL of ``braid standalone`` (ADR 0071).

Thirty transactions end on one topic (every third aborted) with a snapshot every ten
(``transactionBufferSnapshotMaxTransactionCount=10``; the time rule is set out of reach), then a
tail the snapshot does not cover: four more transactions and a plain message. After a SIGKILL and
a restart, a subscription that never read the topic gets every committed message once, in order,
and no aborted one - the aborted transactions of the snapshotted part are known only from the
snapshot - and ``/admin/v3/transactions/transactionBufferStats`` says the load replayed just the
tail's nine entries, not the 69 of the whole ledger.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.cli.process import StandaloneProcess
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.polling import wait_for
from tests.support.standalone import official_client
from tests.support.txn_wire import TxnWire, error_name

TOPIC = "persistent://public/default/txn-snapshot-crash"
STATS = "/admin/v3/transactions/transactionBufferStats/public/default/txn-snapshot-crash"
SNAPSHOTTED, TAIL = 30, 4


@pytest.fixture
def process(tmp_path: Path) -> Iterator[StandaloneProcess]:
    env = {
        **os.environ,
        "BRAID_transactionCoordinatorEnabled": "true",
        "BRAID_transactionBufferSnapshotMaxTransactionCount": "10",
        "BRAID_transactionBufferSnapshotMinTimeInMillis": "3600000",
    }
    proc = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log", env=env
    )
    try:
        yield proc
    finally:
        if proc.running:
            proc.stop()


def _aborted(i: int) -> bool:
    return i % 3 == 0


async def _transactions(process: StandaloneProcess, first: int, count: int) -> None:
    wire = await TxnWire.open(process.host, process.port)
    try:
        await wire.connect_coordinator()
        await wire.create_producer(TOPIC, 1, f"txn-producer-{first}")
        for i in range(first, first + count):
            txn = await wire.new_txn()
            assert error_name(await wire.add_partition(txn, TOPIC)) is None
            receipt = await wire.send(1, f"txn-producer-{first}", i, f"t{i}".encode(), txn)
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
            action = pb.TxnAction.ABORT if _aborted(i) else pb.TxnAction.COMMIT
            assert error_name(await wire.end(txn, action)) is None
    finally:
        await wire.close()


def _buffer_stats(process: StandaloneProcess) -> dict[str, object]:
    response = httpx.get(f"{process.web_url}{STATS}", timeout=10)
    assert response.status_code == 200, response.text
    stats: dict[str, object] = response.json()
    return stats


def test_after_a_sigkill_the_snapshot_hides_the_aborted_and_the_load_replays_only_the_tail(
    process: StandaloneProcess,
) -> None:
    client = official_client(process)
    try:
        client.subscribe(TOPIC, "reads", initial_position=pulsar.InitialPosition.Earliest).close()
        asyncio.run(_transactions(process, 0, SNAPSHOTTED))
        before = _buffer_stats(process)
        assert before["lastSnapshotTimestamps"] != 0, before
        assert before["snapshotPosition"] == before["maxReadPosition"], before  # all 60 entries
        asyncio.run(_transactions(process, SNAPSHOTTED, TAIL))
        client.create_producer(TOPIC).send(b"plain")
        assert _buffer_stats(process)["lastSnapshotTimestamps"] == before["lastSnapshotTimestamps"]
    finally:
        client.close()

    process.kill()
    process.restart()

    client = official_client(process)
    try:
        reads = client.subscribe(TOPIC, "reads", initial_position=pulsar.InitialPosition.Earliest)
        want = [f"t{i}" for i in range(SNAPSHOTTED + TAIL) if not _aborted(i)] + ["plain"]
        got: list[str] = []

        def more() -> bool:
            try:
                message = reads.receive(timeout_millis=200)
            except pulsar.Timeout:
                return len(got) >= len(want)
            got.append(message.data().decode())
            reads.acknowledge(message)
            return len(got) >= len(want)

        wait_for(more, within=60, message=lambda: f"{len(want)} messages, got {got}")
        assert got == want
        with pytest.raises(pulsar.Timeout):
            reads.receive(timeout_millis=700)  # no aborted message, no duplicate

        after = _buffer_stats(process)
        assert after["recoveredFromSnapshot"] is True, after
        # The tail: 4 transactional messages, their 4 markers and the plain message.
        assert after["recoveryReplayedEntries"] == 2 * TAIL + 1, after
        assert after["abortedTxnSize"] == sum(map(_aborted, range(SNAPSHOTTED + TAIL))), after
        assert after["ongoingTxnSize"] == 0
    finally:
        client.close()
