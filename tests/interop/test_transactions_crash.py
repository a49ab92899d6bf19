"""Transactions survive a SIGKILL of ``braid standalone`` (ADRs 0064, 0065).

Before the kill: one transaction has produced (receipted) and is still open, one produced and was
aborted, one holds a pending acknowledgement; a plain message was stored after the open
transaction's. After the restart nothing of the open transaction, nor the plain message behind it,
nor anything aborted is visible; the recovered coordinator commits the open transactions by their
old ids, and then exactly the committed messages appear, once, with the acknowledgement applied.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pulsar
import pytest

from braid.cli.process import StandaloneProcess
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.standalone import nothing_more, official_client, receive_texts
from tests.support.txn_wire import Txn, TxnWire, error_name

T = TypeVar("T")
TOPIC = "persistent://public/default/txn-crash"


@pytest.fixture
def process(tmp_path: Path) -> Iterator[StandaloneProcess]:
    env = {**os.environ, "BRAID_transactionCoordinatorEnabled": "true"}
    proc = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log", env=env
    )
    try:
        yield proc
    finally:
        if proc.running:
            proc.stop()


def _run(process: StandaloneProcess, scenario: Callable[[TxnWire], Awaitable[T]]) -> T:
    async def main() -> T:
        wire = await TxnWire.open(process.host, process.port)
        try:
            await wire.connect_coordinator()
            return await scenario(wire)
        finally:
            await wire.close()

    return asyncio.run(main())


def test_sigkill_mid_transaction_then_restart_keeps_every_outcome(
    process: StandaloneProcess,
) -> None:
    client = official_client(process)
    try:
        client.subscribe(TOPIC, "acks", consumer_type=pulsar.ConsumerType.Shared).close()
        client.subscribe(TOPIC, "reads", initial_position=pulsar.InitialPosition.Earliest).close()
        producer = client.create_producer(TOPIC)
        producer.send(b"m0")
        producer.send(b"m1")

        async def before_crash(wire: TxnWire) -> tuple[Txn, Txn]:
            await wire.create_producer(TOPIC, 1, "txn-producer")
            open_txn = await wire.new_txn()
            aborted = await wire.new_txn()
            acking = await wire.new_txn()
            for txn in (open_txn, aborted):
                await wire.add_partition(txn, TOPIC)
            receipts = [
                await wire.send(1, "txn-producer", 0, b"open-0", open_txn),
                await wire.send(1, "txn-producer", 1, b"aborted-0", aborted),
                await wire.send(1, "txn-producer", 2, b"open-1", open_txn),
            ]
            assert all(r.type == pb.BaseCommand.SEND_RECEIPT for r in receipts), receipts
            assert error_name(await wire.end(aborted, pb.TxnAction.ABORT)) is None
            await wire.add_subscription(acking, TOPIC, "acks")
            await wire.subscribe(TOPIC, "acks", 5)
            first = await wire.next_message()
            assert (first.body or b"").endswith(b"m0")
            ack = await wire.ack(5, first.command.message.message_id, acking)
            assert error_name(ack) is None, ack
            return open_txn, acking

        open_txn, acking = _run(process, before_crash)
        producer.send(b"after")  # stored behind the open transaction's messages
    finally:
        client.close()

    process.kill()
    process.restart()

    client = official_client(process)
    try:
        reads = client.subscribe(TOPIC, "reads", initial_position=pulsar.InitialPosition.Earliest)
        assert receive_texts(reads, 2) == ["m0", "m1"]
        assert nothing_more(reads), "a message of the open transaction (or behind it) leaked"

        async def after_restart(wire: TxnWire) -> None:
            for txn in (open_txn, acking):
                response = await wire.end(txn, pb.TxnAction.COMMIT)
                assert error_name(response) is None, response

        _run(process, after_restart)
        assert receive_texts(reads, 3) == ["open-0", "open-1", "after"]
        assert nothing_more(reads), "an aborted message or a duplicate was delivered"

        acks = client.subscribe(TOPIC, "acks", consumer_type=pulsar.ConsumerType.Shared)
        assert sorted(receive_texts(acks, 4)) == ["after", "m1", "open-0", "open-1"]
        assert nothing_more(acks), "the message acknowledged in the committed transaction came back"
    finally:
        client.close()
