"""Pulsar transactions on an in-process Braid broker (ADRs 0064, 0065).

The transactional side speaks the Java client's commands at the wire level
(:mod:`tests.support.txn_wire`: the official Python client has no transaction API); what
consumers see is checked with the official ``pulsar-client``. Scenarios: commit (messages appear,
acks applied), abort (messages never appear, acked messages come back), isolation (nothing of an
open transaction, nor anything stored after it, is dispatched before its outcome), conflicting
acks refused, a transaction timed out by the coordinator (a later commit fails with
``TransactionNotFound``), and transactions refused while ``transactionCoordinatorEnabled`` is off.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlparse

import pulsar
import pytest

from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for
from tests.support.txn_wire import TxnWire, error_name

T = TypeVar("T")
_names = itertools.count()
_COMMIT, _ABORT = pb.TxnAction.COMMIT, pb.TxnAction.ABORT


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-txn")
    background = BackgroundBroker(data_dir, transaction_coordinator_enabled=True).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.fixture
def official(txn_broker: BackgroundBroker) -> Iterator[pulsar.Client]:
    log = logging.getLogger("pulsar-client")
    log.setLevel(logging.WARNING)
    client = pulsar.Client(txn_broker.service_url, operation_timeout_seconds=10, logger=log)
    try:
        yield client
    finally:
        client.close()


def _topic(label: str) -> str:
    return f"persistent://public/default/txn-{label}-{next(_names)}"


def _run(broker: BackgroundBroker, scenario: Callable[[TxnWire], Awaitable[T]]) -> T:
    """Run ``scenario`` with a wire connection to ``broker`` (on the test's own loop)."""
    url = urlparse(broker.service_url)

    async def main() -> T:
        wire = await TxnWire.open(url.hostname or "127.0.0.1", url.port or 6650)
        try:
            return await scenario(wire)
        finally:
            await wire.close()

    return asyncio.run(main())


def _received(consumer: pulsar.Consumer, within_ms: int = 300) -> list[str]:
    """Everything ``consumer`` gets now (until it waits ``within_ms`` for nothing)."""
    out = []
    while True:
        try:
            message = consumer.receive(timeout_millis=within_ms)
        except pulsar.Timeout:
            return out
        out.append(message.data().decode())
        consumer.acknowledge(message)


def test_committed_messages_appear_only_after_commit_and_nothing_stored_after_them_overtakes(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("commit")
    consumer = official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    later = official.create_producer(topic)
    holder: dict[str, object] = {}

    async def begin(wire: TxnWire) -> None:
        connected = await wire.connect_coordinator()
        assert connected.type == pb.BaseCommand.TC_CLIENT_CONNECT_RESPONSE, connected
        txn = await wire.new_txn()
        assert error_name((await wire.add_partition(txn, topic)).addPartitionToTxnResponse) is None
        await wire.create_producer(topic, 1, "txn-producer")
        for seq in range(3):
            receipt = await wire.send(1, "txn-producer", seq, f"txn-{seq}".encode(), txn)
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
        holder["txn"] = txn

    _run(txn_broker, begin)
    # Stored after the open transaction's messages: held behind them (max read position).
    later.send(b"after")
    assert _received(consumer, 500) == []

    async def commit(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        response = await wire.end(holder["txn"], _COMMIT)  # type: ignore[arg-type]
        assert error_name(response) is None, response

    _run(txn_broker, commit)
    got: list[str] = []
    wait_for(lambda: bool(got.extend(_received(consumer))) or len(got) >= 4, within=20)
    assert got == ["txn-0", "txn-1", "txn-2", "after"]


def test_aborted_messages_are_never_delivered_and_later_ones_are(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("abort")
    consumer = official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = official.create_producer(topic)
    producer.send(b"before")

    async def scenario(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        txn = await wire.new_txn()
        await wire.add_partition(txn, topic)
        await wire.create_producer(topic, 1, "txn-producer")
        for seq in range(2):
            receipt = await wire.send(1, "txn-producer", seq, f"aborted-{seq}".encode(), txn)
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
        assert error_name(await wire.end(txn, _ABORT)) is None
        # A SEND in the ended transaction is refused.
        late = await wire.send(1, "txn-producer", 5, b"late", txn)
        assert late.type == pb.BaseCommand.SEND_ERROR, late

    _run(txn_broker, scenario)
    producer.send(b"after")
    got: list[str] = []
    wait_for(lambda: bool(got.extend(_received(consumer))) or len(got) >= 2, within=20)
    assert got == ["before", "after"]
    assert _received(consumer, 500) == []
    # The aborted entries and the marker were acknowledged for the subscription: no backlog.
    stats = txn_broker.run(
        lambda: txn_broker.service.topics[topic].subscriptions["sub"].msg_backlog
    )
    wait_for(
        lambda: (
            txn_broker.run(
                lambda: txn_broker.service.topics[topic].subscriptions["sub"].msg_backlog
            )
            == 0
        ),
        within=20,
        message=lambda: f"backlog {stats}",
    )


def test_acks_in_a_transaction_are_held_until_commit_and_conflicting_acks_are_refused(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("ack-commit")
    official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared).close()
    producer = official.create_producer(topic)
    for i in range(2):
        producer.send(f"m{i}".encode())

    async def scenario(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        await wire.subscribe(topic, "sub", 7)
        first = await wire.next_message()
        second = await wire.next_message()
        txn, other = await wire.new_txn(), await wire.new_txn()
        for t in (txn, other):
            await wire.add_subscription(t, topic, "sub")
        assert error_name(await wire.ack(7, first.command.message.message_id, txn)) is None
        conflict = await wire.ack(7, first.command.message.message_id, other)
        assert error_name(conflict) == "TransactionConflict", conflict
        # Not acknowledged yet: the subscription still holds both.
        sub = txn_broker.service.topics[topic].subscriptions["sub"]
        assert txn_broker.run(lambda: sub.msg_backlog) == 2
        assert error_name(await wire.end(txn, _COMMIT)) is None
        assert txn_broker.run(lambda: sub.msg_backlog) == 1
        # The first message is acknowledged now: acknowledging it again in a transaction conflicts.
        again = await wire.ack(7, first.command.message.message_id, other)
        assert error_name(again) == "TransactionConflict", again
        assert error_name(await wire.ack(7, second.command.message.message_id, None)) is None
        assert error_name(await wire.end(other, _ABORT)) is None

    _run(txn_broker, scenario)
    sub = txn_broker.service.topics[topic].subscriptions["sub"]
    wait_for(lambda: txn_broker.run(lambda: sub.msg_backlog) == 0, within=20)


@pytest.mark.parametrize("sub_type", ["Shared", "Exclusive", "Failover"])
def test_an_aborted_transaction_releases_its_acks_and_the_messages_come_again(
    txn_broker: BackgroundBroker, official: pulsar.Client, sub_type: str
) -> None:
    topic = _topic(f"ack-abort-{sub_type.lower()}")
    official.subscribe(topic, "sub").close()
    producer = official.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    wire_type = getattr(pb.CommandSubscribe, sub_type)

    async def scenario(wire: TxnWire) -> list[bytes]:
        await wire.connect_coordinator()
        await wire.subscribe(topic, "sub", 3, wire_type)
        delivered = [await wire.next_message() for _ in range(3)]
        txn = await wire.new_txn()
        await wire.add_subscription(txn, topic, "sub")
        for event in delivered[:2]:
            assert error_name(await wire.ack(3, event.command.message.message_id, txn)) is None
        # Asking for redelivery of everything unacknowledged does not bring back held acks.
        await wire.raw.send(
            pb.BaseCommand(
                type=pb.BaseCommand.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                    consumer_id=3
                ),
            )
        )
        again = await wire.next_message()
        assert again.command.message.message_id == delivered[2].command.message.message_id
        assert error_name(await wire.end(txn, _ABORT)) is None
        back = [await wire.next_message() for _ in range(2)]
        return sorted(bytes(e.body or b"")[-2:] for e in back)

    assert _run(txn_broker, scenario) == [b"m0", b"m1"]


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator_and_commit_fails(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("timeout")
    consumer = official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    coordinator = txn_broker.service.transactions.coordinators.get(0)  # type: ignore[union-attr]
    timed_out_before = coordinator.timed_out

    async def scenario(wire: TxnWire) -> pb.CommandEndTxnResponse:
        await wire.connect_coordinator()
        txn = await wire.new_txn(ttl_ms=300)
        await wire.add_partition(txn, topic)
        await wire.create_producer(topic, 1, "txn-producer")
        receipt = await wire.send(1, "txn-producer", 0, b"never", txn)
        assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
        await asyncio.to_thread(
            wait_for, lambda: coordinator.timed_out > timed_out_before, within=20
        )
        return await wire.end(txn, _COMMIT)

    response = _run(txn_broker, scenario)
    assert error_name(response) == "TransactionNotFound", response
    official.create_producer(topic).send(b"after")
    got: list[str] = []
    wait_for(lambda: bool(got.extend(_received(consumer))) or len(got) >= 1, within=20)
    assert got == ["after"]


def test_unknown_transactions_and_coordinators_get_pulsars_errors(
    txn_broker: BackgroundBroker,
) -> None:
    async def scenario(wire: TxnWire) -> None:
        response = await wire.new_txn_response(tc_id=99)
        assert error_name(response.newTxnResponse) == "TransactionCoordinatorNotFound"
        txn = await wire.new_txn()
        assert error_name(await wire.end(txn, _COMMIT)) is None
        assert error_name(await wire.end(txn, _COMMIT)) == "TransactionNotFound"
        aborting = await wire.new_txn()
        assert error_name(await wire.end(aborting, _ABORT)) is None

    _run(txn_broker, scenario)


def test_transactions_are_refused_while_the_coordinator_is_disabled(
    broker: BackgroundBroker,
) -> None:
    async def scenario(wire: TxnWire) -> None:
        response = await wire.new_txn_response()
        assert response.type == pb.BaseCommand.ERROR, response
        assert response.error.error == pb.ServerError.NotAllowedError
        assert "not enabled" in response.error.message

    _run(broker, scenario)


def test_a_transaction_over_the_partitions_of_a_partitioned_topic_commits_on_each(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("partitioned")
    txn_broker.call(txn_broker.service.create_partitioned_topic(topic, 2))
    consumer = official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    holder: dict[str, object] = {}

    async def produce(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        txn = await wire.new_txn()
        for index in range(2):
            partition = f"{topic}-partition-{index}"
            assert (
                error_name((await wire.add_partition(txn, partition)).addPartitionToTxnResponse)
                is None
            )
            await wire.create_producer(partition, index + 1, f"txn-producer-{index}")
            receipt = await wire.send(
                index + 1, f"txn-producer-{index}", 0, f"p{index}".encode(), txn
            )
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
        holder["txn"] = txn

    _run(txn_broker, produce)
    assert _received(consumer, 500) == []

    async def commit(wire: TxnWire) -> None:
        assert error_name(await wire.end(holder["txn"], _COMMIT)) is None  # type: ignore[arg-type]

    _run(txn_broker, commit)
    got: list[str] = []
    wait_for(lambda: bool(got.extend(_received(consumer))) or len(got) >= 2, within=20)
    assert sorted(got) == ["p0", "p1"]


def test_a_reader_sees_no_message_available_behind_an_open_or_after_an_aborted_transaction(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("reader")
    official.create_producer(topic).send(b"plain")
    holder: dict[str, object] = {}

    async def produce(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        aborted, still_open = await wire.new_txn(), await wire.new_txn()
        await wire.create_producer(topic, 1, "txn-producer")
        for seq, txn in enumerate((aborted, still_open)):
            await wire.add_partition(txn, topic)
            receipt = await wire.send(1, "txn-producer", seq, b"hidden", txn)
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
        assert error_name(await wire.end(aborted, _ABORT)) is None
        holder["open"] = still_open

    _run(txn_broker, produce)
    reader = official.create_reader(topic, pulsar.MessageId.earliest)
    read = []
    while reader.has_message_available():
        read.append(reader.read_next(timeout_millis=10_000).data().decode())
    assert read == ["plain"]

    async def abort(wire: TxnWire) -> None:
        assert error_name(await wire.end(holder["open"], _ABORT)) is None  # type: ignore[arg-type]

    _run(txn_broker, abort)
    assert not reader.has_message_available()
    reader.close()


def test_compaction_keeps_no_aborted_or_open_transaction_value(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("compaction")
    official.create_producer(topic).send(b"v1", partition_key="k")

    async def produce(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        await wire.create_producer(topic, 1, "txn-producer")
        aborted, committed, still_open = (
            await wire.new_txn(),
            await wire.new_txn(),
            await wire.new_txn(),
        )
        sends = [
            (aborted, "k", b"aborted"),
            (committed, "k2", b"committed"),
            (still_open, "k", b"open"),
        ]
        for seq, (txn, key, value) in enumerate(sends):
            await wire.add_partition(txn, topic)
            receipt = await wire.send(1, "txn-producer", seq, value, txn, key=key)
            assert receipt.type == pb.BaseCommand.SEND_RECEIPT, receipt
        assert error_name(await wire.end(aborted, _ABORT)) is None
        assert error_name(await wire.end(committed, _COMMIT)) is None

    _run(txn_broker, produce)
    compaction = txn_broker.run(lambda: txn_broker.service.topics[topic].compaction)
    txn_broker.call(txn_broker.service.compact_topic(topic))
    wait_for(lambda: txn_broker.run(lambda: compaction.horizon) is not None, within=20)
    reader = official.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
    values = {}
    while reader.has_message_available():
        message = reader.read_next(timeout_millis=10_000)
        values[message.partition_key()] = message.data().decode()
    reader.close()
    assert values == {"k": "v1", "k2": "committed"}


def test_sends_and_acks_in_a_transaction_that_did_not_add_the_topic_are_refused(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("unregistered")
    official.create_producer(topic).send(b"m0")
    official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()

    async def scenario(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        txn = await wire.new_txn()
        await wire.create_producer(topic, 1, "txn-producer")
        refused = await wire.send(1, "txn-producer", 0, b"x", txn)
        assert refused.type == pb.BaseCommand.SEND_ERROR, refused
        assert "ADD_PARTITION_TO_TXN" in refused.send_error.message
        await wire.subscribe(topic, "sub", 2, pb.CommandSubscribe.Exclusive)
        message = await wire.next_message()
        ack = await wire.ack(2, message.command.message.message_id, txn)
        assert error_name(ack) == "NotAllowedError" and "ADD_SUBSCRIPTION_TO_TXN" in ack.message
        # A short topic name in ADD_PARTITION_TO_TXN names the same topic.
        await wire.add_partition(txn, topic.removeprefix("persistent://public/default/"))
        stored = await wire.send(1, "txn-producer", 1, b"y", txn)
        assert stored.type == pb.BaseCommand.SEND_RECEIPT, stored
        assert error_name(await wire.end(txn, _ABORT)) is None

    _run(txn_broker, scenario)


@pytest.mark.parametrize("sub_type", ["Exclusive", "Failover"])
def test_a_cumulative_ack_in_a_transaction_is_held_then_committed_or_released(
    txn_broker: BackgroundBroker, official: pulsar.Client, sub_type: str
) -> None:
    topic = _topic(f"cumulative-{sub_type.lower()}")
    official.subscribe(topic, "sub").close()
    producer = official.create_producer(topic)
    for i in range(4):
        producer.send(f"m{i}".encode())
    wire_type = getattr(pb.CommandSubscribe, sub_type)
    sub = txn_broker.service.topics[topic].subscriptions["sub"]

    async def scenario(wire: TxnWire) -> list[bytes]:
        await wire.connect_coordinator()
        await wire.subscribe(topic, "sub", 4, wire_type)
        delivered = [await wire.next_message() for _ in range(4)]
        ids = [e.command.message.message_id for e in delivered]
        aborted, committed = await wire.new_txn(), await wire.new_txn()
        for txn in (aborted, committed):
            await wire.add_subscription(txn, topic, "sub")
        assert error_name(await wire.ack(4, ids[1], aborted, cumulative=True)) is None
        conflict = await wire.ack(4, ids[2], committed, cumulative=True)
        assert error_name(conflict) == "TransactionConflict", conflict
        assert txn_broker.run(lambda: sub.msg_backlog) == 4
        # Redelivery of everything unacknowledged leaves out what the pending ack holds.
        await wire.raw.send(
            pb.BaseCommand(
                type=pb.BaseCommand.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                    consumer_id=4
                ),
            )
        )
        redelivered = [await wire.next_message() for _ in range(2)]
        assert [e.command.message.message_id for e in redelivered] == ids[2:]
        assert error_name(await wire.end(aborted, _ABORT)) is None
        # The abort gives m0 and m1 back (with everything unacknowledged after them).
        again = [await wire.next_message() for _ in range(4)]
        assert [e.command.message.message_id for e in again] == ids
        assert error_name(await wire.ack(4, ids[2], committed, cumulative=True)) is None
        assert error_name(await wire.end(committed, _COMMIT)) is None
        assert txn_broker.run(lambda: sub.msg_backlog) == 1
        return [bytes(e.body or b"")[-2:] for e in again]

    assert _run(txn_broker, scenario) == [b"m0", b"m1", b"m2", b"m3"]


def test_a_cumulative_ack_in_a_transaction_is_refused_on_a_shared_subscription(
    txn_broker: BackgroundBroker, official: pulsar.Client
) -> None:
    topic = _topic("cumulative-shared")
    official.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared).close()
    official.create_producer(topic).send(b"m0")

    async def scenario(wire: TxnWire) -> None:
        await wire.connect_coordinator()
        await wire.subscribe(topic, "sub", 9)
        message = await wire.next_message()
        txn = await wire.new_txn()
        await wire.add_subscription(txn, topic, "sub")
        refused = await wire.ack(9, message.command.message.message_id, txn, cumulative=True)
        assert error_name(refused) == "NotAllowedError", refused

    _run(txn_broker, scenario)
