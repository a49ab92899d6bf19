"""Acknowledgements in a transaction that ADR 0065 refused, against ``braid standalone`` (ADR 0071):

* **batch-index acks** - a transaction holds single messages of a batch the official client
  produced; another transaction acknowledging one of them is refused (``TransactionConflict``)
  while one acknowledging another message of the batch is not; the batch is redelivered meanwhile
  without the held messages; after one abort and one commit the official client gets exactly the
  messages nobody committed;
* **cumulative batch-index acks** (Exclusive) - a transaction holds the entries before a batch and
  the batch's messages up to the one acknowledged; another transaction's cumulative ack conflicts;
  an abort releases them, a commit moves the mark-delete position and acknowledges the batch's
  messages up to it (the official client gets only the rest);
* **Key_Shared** - an ack in a transaction holds its message; an abort redelivers it (ahead of a
  newer message of its key), a commit acknowledges it for good.

The transactional acks go over the wire in the Java client's command order
(:mod:`tests.support.txn_wire`); what is delivered afterwards is read with the official client.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.cli.process import StandaloneProcess
from braid.core import ack_set
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.standalone import nothing_more, official_client, receive_texts
from tests.support.txn_wire import Txn, TxnWire, error_name

pytestmark = pytest.mark.timeout(120)
BATCH_TOPIC = "persistent://public/default/txn-batch-acks"
KEYED_TOPIC = "persistent://public/default/txn-key-shared-acks"


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


def _batch_ack(message: pb.CommandMessage, count: int, index: int) -> pb.MessageIdData:
    """The MessageIdData a client sends to acknowledge message ``index`` of a batch."""
    mid = pb.MessageIdData(ledgerId=message.message_id.ledgerId, entryId=message.message_id.entryId)
    mid.ack_set.extend(ack_set.of_indexes(i for i in range(count) if i != index))
    return mid


async def test_batch_index_acks_in_transactions_hold_single_messages_of_a_batch(
    process: StandaloneProcess,
) -> None:
    client = official_client(process)
    try:
        client.subscribe(BATCH_TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared).close()
        producer = client.create_producer(
            BATCH_TOPIC, batching_enabled=True, batching_max_messages=4,
            batching_max_publish_delay_ms=60_000,
        )  # fmt: skip
        for i in range(4):
            producer.send_async(f"b{i}".encode(), None)
        producer.flush()

        wire = await TxnWire.open(process.host, process.port)
        try:
            await wire.connect_coordinator()
            first, second = await wire.new_txn(), await wire.new_txn()
            for txn in (first, second):
                assert error_name(await wire.add_subscription(txn, BATCH_TOPIC, "s")) is None
            await wire.subscribe(BATCH_TOPIC, "s", 3)
            batch = (await wire.next_message()).command.message
            assert not batch.ack_set  # all four messages

            async def ack(index: int, txn: object) -> pb.CommandAckResponse:
                rid = wire.next_id()
                cmd = commands.ack(3, [_batch_ack(batch, 4, index)], request_id=rid)
                cmd.ack.txnid_most_bits, cmd.ack.txnid_least_bits = txn.most, txn.least  # type: ignore[attr-defined]
                response = await wire.request(cmd, rid)
                return response.ackResponse

            assert error_name(await ack(1, first)) is None
            assert error_name(await ack(1, second)) == "TransactionConflict"
            assert error_name(await ack(2, second)) is None

            # The consumer leaves: the batch goes out again without the two held messages.
            rid = wire.next_id()
            await wire.request(commands.close_consumer(3, rid), rid)
            await wire.subscribe(BATCH_TOPIC, "s", 4)
            again = (await wire.next_message()).command.message
            assert sorted(ack_set.indexes(again.ack_set, 4)) == [0, 3]

            assert error_name(await wire.end(first, pb.TxnAction.ABORT)) is None
            assert error_name(await wire.end(second, pb.TxnAction.COMMIT)) is None
        finally:
            await wire.close()

        consumer = client.subscribe(BATCH_TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared)
        assert sorted(receive_texts(consumer, 3)) == ["b0", "b1", "b3"]
        assert nothing_more(consumer), "the committed message b2 came back"
    finally:
        client.close()


async def test_key_shared_acks_in_transactions_abort_redelivers_and_commit_acknowledges(
    process: StandaloneProcess,
) -> None:
    client = official_client(process)
    try:
        client.subscribe(KEYED_TOPIC, "ks", consumer_type=pulsar.ConsumerType.KeyShared).close()
        producer = client.create_producer(KEYED_TOPIC, batching_enabled=False)
        for key, value in (("k1", "k1-a"), ("k2", "k2-a"), ("k1", "k1-b")):
            producer.send(value.encode(), partition_key=key)

        wire = await TxnWire.open(process.host, process.port)
        try:
            await wire.connect_coordinator()
            aborted, other = await wire.new_txn(), await wire.new_txn()
            for txn in (aborted, other):
                assert error_name(await wire.add_subscription(txn, KEYED_TOPIC, "ks")) is None
            await wire.subscribe(KEYED_TOPIC, "ks", 5, sub_type=pb.CommandSubscribe.Key_Shared)
            received = [await wire.next_message() for _ in range(3)]
            by_value = {
                (m.body or b"")[-4:].decode(): m.command.message.message_id for m in received
            }
            assert set(by_value) == {"k1-a", "k2-a", "k1-b"}

            assert error_name(await wire.ack(5, by_value["k1-a"], aborted)) is None
            assert error_name(await wire.ack(5, by_value["k1-a"], other)) == "TransactionConflict"
            assert error_name(await wire.ack(5, by_value["k2-a"], None)) is None
            assert error_name(await wire.ack(5, by_value["k1-b"], None)) is None

            assert error_name(await wire.end(aborted, pb.TxnAction.ABORT)) is None
            producer.send(b"k1-c", partition_key="k1")
            redelivered = [await wire.next_message() for _ in range(2)]
            assert [(m.body or b"")[-4:].decode() for m in redelivered] == ["k1-a", "k1-c"]
            assert error_name(await wire.ack(5, by_value["k1-a"], other)) is None
            assert error_name(await wire.end(other, pb.TxnAction.COMMIT)) is None
        finally:
            await wire.close()

        consumer = client.subscribe(KEYED_TOPIC, "ks", consumer_type=pulsar.ConsumerType.KeyShared)
        assert receive_texts(consumer, 1) == ["k1-c"]  # k1-a committed, the others acknowledged
        assert nothing_more(consumer)
    finally:
        client.close()


async def _hold_one_message_of_a_batch(process: StandaloneProcess, topic: str) -> Txn:
    """Produce a batch of four with the official client; hold message 1 in an open txn."""
    client = official_client(process)
    try:
        client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared).close()
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=4,
            batching_max_publish_delay_ms=60_000,
        )  # fmt: skip
        for i in range(4):
            producer.send_async(f"b{i}".encode(), None)
        producer.flush()
    finally:
        client.close()
    wire = await TxnWire.open(process.host, process.port)
    try:
        await wire.connect_coordinator()
        txn = await wire.new_txn(ttl_ms=600_000)
        assert error_name(await wire.add_subscription(txn, topic, "s")) is None
        await wire.subscribe(topic, "s", 3)
        batch = (await wire.next_message()).command.message
        rid = wire.next_id()
        cmd = commands.ack(3, [_batch_ack(batch, 4, 1)], request_id=rid)
        cmd.ack.txnid_most_bits, cmd.ack.txnid_least_bits = txn.most, txn.least
        assert error_name((await wire.request(cmd, rid)).ackResponse) is None
        return txn
    finally:
        await wire.close()


async def test_a_held_batch_message_survives_a_sigkill_and_its_commit_acknowledges_it(
    process: StandaloneProcess,
) -> None:
    topic = "persistent://public/default/txn-batch-crash"
    txn = await _hold_one_message_of_a_batch(process, topic)
    process.kill()
    process.restart()

    wire = await TxnWire.open(process.host, process.port)
    try:
        await wire.connect_coordinator()
        await wire.subscribe(topic, "s", 4)
        again = (await wire.next_message()).command.message
        assert sorted(ack_set.indexes(again.ack_set, 4)) == [0, 2, 3]  # 1 still held
        assert error_name(await wire.end(txn, pb.TxnAction.COMMIT)) is None
    finally:
        await wire.close()
    client = official_client(process)
    try:
        consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        assert sorted(receive_texts(consumer, 3)) == ["b0", "b2", "b3"]
        assert nothing_more(consumer), "the committed message b1 came back"
    finally:
        client.close()


def _cumulative_batch_ack(message: pb.CommandMessage, count: int, index: int) -> pb.MessageIdData:
    """The MessageIdData a client sends to acknowledge a batch cumulatively up to ``index``:
    the messages after it are left set (unacknowledged)."""
    mid = pb.MessageIdData(ledgerId=message.message_id.ledgerId, entryId=message.message_id.entryId)
    mid.ack_set.extend(ack_set.of_indexes(range(index + 1, count)))
    return mid


async def test_a_cumulative_batch_index_ack_in_a_transaction_holds_up_to_its_message(
    process: StandaloneProcess,
) -> None:
    topic = "persistent://public/default/txn-cumulative-batch-acks"
    exclusive = pulsar.ConsumerType.Exclusive
    client = official_client(process)
    try:
        client.subscribe(topic, "s", consumer_type=exclusive).close()
        client.create_producer(topic, batching_enabled=False).send(b"w0")
        producer = client.create_producer(
            topic, batching_enabled=True, batching_max_messages=4,
            batching_max_publish_delay_ms=60_000,
        )  # fmt: skip
        for i in range(4):
            producer.send_async(f"b{i}".encode(), None)
        producer.flush()
        client.create_producer(topic, batching_enabled=False).send(b"w1")

        wire = await TxnWire.open(process.host, process.port)
        try:
            await wire.connect_coordinator()
            first, second, third, fourth = [await wire.new_txn() for _ in range(4)]
            for txn in (first, second, third, fourth):
                assert error_name(await wire.add_subscription(txn, topic, "s")) is None
            await wire.subscribe(topic, "s", 3, sub_type=pb.CommandSubscribe.Exclusive)
            whole = (await wire.next_message()).command.message
            batch = (await wire.next_message()).command.message
            later = (await wire.next_message()).command.message

            async def ack_up_to(index: int | None, txn: Txn) -> str | None:
                mid = whole.message_id if index is None else _cumulative_batch_ack(batch, 4, index)
                return error_name(await wire.ack(3, mid, txn, cumulative=True))

            # `fourth` holds b3 alone: a cumulative ack past the batch conflicts with it.
            assert error_name(await wire.ack(3, _batch_ack(batch, 4, 3), fourth)) is None
            assert error_name(await wire.ack(3, later.message_id, second, cumulative=True)) == (
                "TransactionConflict"
            )
            assert await ack_up_to(1, first) is None  # w0, b0 and b1 held by `first`
            assert await ack_up_to(0, second) == "TransactionConflict"
            assert await ack_up_to(None, second) == "TransactionConflict"
            where = (
                f"{process.web_url}/admin/v3/transactions/positionStatsInPendingAck/public/default"
            )
            entry = f"{batch.message_id.ledgerId}/{batch.message_id.entryId}"
            async with httpx.AsyncClient(timeout=30) as http:
                states = [
                    (
                        await http.get(
                            f"{where}/{topic.rsplit('/', 1)[1]}/s/{entry}?batchIndex={i}"
                        )
                    ).json()
                    for i in range(4)
                ]
            assert [s["state"] for s in states] == [
                "PendingAck", "PendingAck", "NotInPendingAck", "PendingAck",
            ]  # fmt: skip

            for txn in (fourth, first):  # released
                assert error_name(await wire.end(txn, pb.TxnAction.ABORT)) is None
            assert await ack_up_to(2, second) is None
            assert error_name(await wire.end(second, pb.TxnAction.COMMIT)) is None
            # b0..b2 are acknowledged now: a cumulative ack up to b1 conflicts with the cursor.
            assert await ack_up_to(1, third) == "TransactionConflict"
            assert error_name(await wire.end(third, pb.TxnAction.ABORT)) is None
        finally:
            await wire.close()

        consumer = client.subscribe(topic, "s", consumer_type=exclusive)
        assert receive_texts(consumer, 2) == ["b3", "w1"]  # w0 mark-deleted, b0..b2 acked
        assert nothing_more(consumer)
    finally:
        client.close()
