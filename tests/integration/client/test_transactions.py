"""Transactions through Braid's client against a real in-process broker with
``transactionCoordinatorEnabled=true`` (``docs/client.md#transactions``).

Scenarios, on a classic ``persistent://`` topic and on a scalable ``topic://`` one: a commit makes
the transaction's messages visible and applies its acknowledgments; an abort makes its messages
vanish and its acknowledged messages come back; nothing of an open transaction is delivered
(isolation); a transaction past its timeout is aborted by its coordinator and refuses to commit;
two transactions acknowledging one message conflict (``TransactionConflictError``); the state
machine's refusals are typed. What consumers see is read with plain (non-transactional)
consumers of the same client library.
"""

from __future__ import annotations

import itertools

import pytest

import braid
from braid.core.message_id import message_position
from braid.core.names import TopicName
from tests.integration.client.conftest import ScalableBroker
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)

_names = itertools.count()


def classic(label: str) -> str:
    return f"persistent://public/default/ctxn-{label}-{next(_names)}"


def scalable(broker: ScalableBroker, label: str, segments: int = 2) -> str:
    topic = f"topic://public/default/ctxn-{label}-{next(_names)}"
    broker.call(broker.scalable.create_topic(TopicName.parse(topic), segments))
    return topic


def drain(consumer: braid.StreamConsumer | braid.QueueConsumer, quiet: float = 0.5) -> list[bytes]:
    """Everything ``consumer`` gets until it stays quiet for ``quiet`` seconds."""
    got: list[bytes] = []
    while True:
        batch = consumer.receive_many(100, timeout=quiet)
        if not batch:
            return got
        got.extend(m.value for m in batch)


def receive_exactly(consumer: braid.StreamConsumer | braid.QueueConsumer, count: int) -> list:
    got: list[braid.Message] = []

    def enough() -> bool:
        got.extend(consumer.receive_many(count - len(got), timeout=0.1))
        return len(got) >= count

    wait_for(enough, within=30, message=f"{count} messages")
    return got


@pytest.mark.parametrize("shape", ["classic", "scalable"])
def test_committed_sends_appear_only_after_the_commit(
    txn_broker: ScalableBroker, txn_client: braid.Client, shape: str
) -> None:
    topic = classic("commit") if shape == "classic" else scalable(txn_broker, "commit")
    stream = txn_client.subscribe_stream(topic, "reader", initial_position="earliest")
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction(timeout=60)
    assert txn.state is braid.TransactionState.OPEN
    ids = [producer.send(b"t%d" % i, key=f"k{i}", txn=txn) for i in range(6)]
    assert len(set(ids)) == 6
    assert drain(stream) == []  # isolation: stored, not delivered
    txn.commit()
    assert txn.state is braid.TransactionState.COMMITTED
    got = receive_exactly(stream, 6)
    assert sorted(m.value for m in got) == [b"t%d" % i for i in range(6)]
    assert drain(stream, 0.3) == []
    if shape == "scalable":  # one partition per segment written to
        assert len(txn.async_transaction.partitions) == 2


@pytest.mark.parametrize("shape", ["classic", "scalable"])
def test_aborted_sends_never_appear_and_later_plain_messages_do(
    txn_broker: ScalableBroker, txn_client: braid.Client, shape: str
) -> None:
    topic = classic("abort") if shape == "classic" else scalable(txn_broker, "abort")
    stream = txn_client.subscribe_stream(topic, "reader", initial_position="earliest")
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction()
    for i in range(4):
        producer.send(b"gone-%d" % i, key=f"k{i}", txn=txn)
    for i in range(4):  # stored after the open transaction's messages: held back too
        producer.send(b"plain-%d" % i, key=f"k{i}")
    assert drain(stream) == []
    txn.abort()
    assert txn.state is braid.TransactionState.ABORTED
    got = receive_exactly(stream, 4)
    assert sorted(m.value for m in got) == [b"plain-%d" % i for i in range(4)]
    assert drain(stream, 0.3) == []


def test_a_queue_ack_in_an_aborted_transaction_is_delivered_again(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic = scalable(txn_broker, "ack-abort")
    producer = txn_client.create_producer(topic, batching=False)
    for i in range(4):
        producer.send(b"m%d" % i, key=f"k{i}")
    queue = txn_client.subscribe_queue(topic, "work", initial_position="earliest")
    got = receive_exactly(queue, 4)
    txn = txn_client.new_transaction()
    for message in got:
        queue.acknowledge(message, txn=txn)
    txn.abort()
    again = receive_exactly(queue, 4)
    assert sorted(m.value for m in again) == sorted(m.value for m in got)
    txn2 = txn_client.new_transaction()
    for message in again:
        queue.acknowledge(message, txn=txn2)
    txn2.commit()
    queue.close()
    queue = txn_client.subscribe_queue(topic, "work")
    assert drain(queue) == []  # the commit applied the acks


def test_a_stream_ack_in_an_aborted_transaction_is_delivered_again(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic = scalable(txn_broker, "stream-abort")
    producer = txn_client.create_producer(topic, batching=False)
    for i in range(6):
        producer.send(b"m%d" % i, key=f"k{i}")
    stream = txn_client.subscribe_stream(topic, "etl", initial_position="earliest")
    got = receive_exactly(stream, 6)
    txn = txn_client.new_transaction()
    stream.acknowledge_cumulative(got[-1], txn=txn)
    txn.abort()
    # Delivered again (at least once: one already on its way may come twice, as with Pulsar).
    again: list[braid.Message] = []

    def all_again() -> bool:
        again.extend(stream.receive_many(10, timeout=0.1))
        return {m.value for m in again} == {m.value for m in got}

    wait_for(all_again, within=30, message="the aborted acks' messages again")
    again.extend(stream.receive_many(10, timeout=0.3))
    txn2 = txn_client.new_transaction()
    stream.acknowledge_cumulative(again[-1], txn=txn2)
    txn2.commit()
    stream.close()
    stream = txn_client.subscribe_stream(topic, "etl")
    assert drain(stream) == []


def test_consume_transform_produce_commits_the_acks_and_the_outputs_together(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    source, sink = scalable(txn_broker, "ctp-in"), scalable(txn_broker, "ctp-out")
    inputs = txn_client.create_producer(source, batching=False)
    for i in range(5):
        inputs.send(b"in-%d" % i, key=f"k{i}")
    stream = txn_client.subscribe_stream(source, "etl", initial_position="earliest")
    out = txn_client.create_producer(sink)
    reader = txn_client.subscribe_stream(sink, "check", initial_position="earliest")
    got = receive_exactly(stream, 5)
    txn = txn_client.new_transaction()
    for message in got:
        out.send_async(message.value.replace(b"in", b"out"), key=message.key, txn=txn)
    stream.acknowledge_cumulative(got[-1], txn=txn)
    txn.commit()  # waits for the sends and the acks
    assert sorted(m.value for m in receive_exactly(reader, 5)) == [b"out-%d" % i for i in range(5)]
    stream.close()
    stream = txn_client.subscribe_stream(source, "etl")
    assert drain(stream) == []


def test_two_transactions_acknowledging_one_message_conflict(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic = classic("conflict")
    txn_client.create_producer(topic, batching=False).send(b"once")
    queue = txn_client.subscribe_queue(topic, "work", initial_position="earliest")
    (message,) = receive_exactly(queue, 1)
    first, second = txn_client.new_transaction(), txn_client.new_transaction()
    queue.acknowledge(message, txn=first)
    queue.acknowledge(message, txn=second)
    with pytest.raises(braid.TransactionErroredError) as refused:
        second.commit()
    assert isinstance(refused.value.__cause__, braid.TransactionConflictError)
    assert second.state is braid.TransactionState.ERROR
    second.abort()
    first.commit()


def test_a_transaction_past_its_timeout_is_aborted_by_its_coordinator(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic = scalable(txn_broker, "timeout")
    stream = txn_client.subscribe_stream(topic, "reader", initial_position="earliest")
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction(timeout=1.0)
    producer.send(b"late", key="k", txn=txn)
    wait_for(lambda: txn.state is braid.TransactionState.TIMED_OUT, within=30, message="timed out")
    with pytest.raises(braid.TransactionTimedOutError):
        txn.commit()
    with pytest.raises(braid.TransactionTimedOutError):
        producer.send(b"later", key="k", txn=txn)
    producer.send(b"plain", key="k")
    # The coordinator aborted it: the plain message behind it is delivered, the late one never.
    assert [m.value for m in receive_exactly(stream, 1)] == [b"plain"]
    assert drain(stream, 0.3) == []


def test_ending_a_transaction_twice_is_refused_with_a_typed_error(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    txn = txn_client.new_transaction()
    txn.commit()  # nothing in it: still a transaction
    with pytest.raises(braid.TransactionEndedError):
        txn.commit()
    with pytest.raises(braid.TransactionEndedError):
        txn.abort()
    producer = txn_client.create_producer(classic("ended"))
    with pytest.raises(braid.TransactionEndedError):
        producer.send(b"x", txn=txn)


async def test_the_async_client_commits_a_transaction(txn_broker: ScalableBroker) -> None:
    topic = scalable(txn_broker, "async")
    async with braid.AsyncClient(txn_broker.service_url, operation_timeout=15) as client:
        stream = await client.subscribe_stream(topic, "reader", initial_position="earliest")
        producer = await client.create_producer(topic)
        txn = await client.new_transaction(timeout=30)
        futures = [producer.send_async(b"a%d" % i, key=f"k{i}", txn=txn) for i in range(10)]
        await txn.commit()  # waits for the ten sends first
        assert all(f.done() and f.exception() is None for f in futures)
        # Batched: an entry holds several messages of the one transaction.
        positions = [message_position(f.result()) for f in futures]
        entries = {(p.segment_id, p.ledger_id, p.entry_id) for p in positions if p is not None}
        assert len(entries) < 10
        got = await stream.receive_many(10, timeout=10)
        while len(got) < 10:
            more = await stream.receive_many(10, timeout=10)
            assert more, got
            got.extend(more)
        assert sorted(m.value for m in got) == sorted(b"a%d" % i for i in range(10))


def test_a_broker_without_a_coordinator_refuses_transactions(
    broker: BackgroundBroker,
) -> None:
    with (
        braid.Client(broker.service_url, operation_timeout=10) as client,
        pytest.raises(braid.NotAllowedError),
    ):
        client.new_transaction()
