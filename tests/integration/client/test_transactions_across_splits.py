"""A transaction open while its scalable topic splits or merges (ADR 0069), through Braid's client.

The transaction writes keys to a 2-segment topic, a split (or merge) seals a segment it wrote
to, the transaction writes the same keys again - now to the successor, which joins the
transaction as one more partition - and then commits or aborts. The sealed segment cannot take
the commit/abort marker any more; its outcome is recorded in the metadata store instead, and the
sealed segment does not count as drained while the transaction is open, so a Stream
subscription's children are not handed out before the parent's transactional messages are
resolved. A Stream consumer then sees every committed message exactly once, each key's messages
in the order they were sent (parent before child), and nothing of an aborted transaction.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

import braid
from braid.core.hashing import hash16
from braid.core.layout import SegmentLayout
from braid.core.names import SegmentTopicName, TopicName
from tests.integration.client.conftest import ScalableBroker, StepGate
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(240)

_names = itertools.count()
KEYS = [f"key-{i}" for i in range(12)]


def new_topic(broker: ScalableBroker, label: str) -> tuple[str, TopicName]:
    topic = f"topic://public/default/txsplit-{label}-{next(_names)}"
    name = TopicName.parse(topic)
    broker.call(broker.scalable.create_topic(name, 2))
    return topic, name


def segment_of(layout: SegmentLayout, key: str) -> int:
    return next(s.segment_id for s in layout.active_segments if s.hash_range.contains(hash16(key)))


def consume(stream: braid.StreamConsumer, count: int, quiet: float = 1.0) -> list[braid.Message]:
    """``count`` messages (acknowledged as they come, so sealed segments drain), then whatever
    else arrives within ``quiet`` seconds (a duplicate would)."""
    got: list[braid.Message] = []

    def enough() -> bool:
        batch = stream.receive_many(100, timeout=0.1)
        if batch:
            got.extend(batch)
            stream.acknowledge_cumulative(batch[-1])
        return len(got) >= count

    wait_for(enough, within=60, message=f"{count} messages, got {len(got)}")
    while batch := stream.receive_many(100, timeout=quiet):
        got.extend(batch)
        stream.acknowledge_cumulative(batch[-1])
    return got


def by_key(messages: list[braid.Message]) -> dict[str, list[bytes]]:
    keyed: dict[str, list[bytes]] = defaultdict(list)
    for message in messages:
        assert message.key is not None
        keyed[message.key].append(message.value)
    return dict(keyed)


def sent(rounds: range) -> dict[str, list[bytes]]:
    return {key: [f"{key}/{r}".encode() for r in rounds] for key in KEYS}


def send_round(producer: braid.Producer, round_no: int, txn: braid.Transaction) -> None:
    for key in KEYS:
        producer.send_async(f"{key}/{round_no}".encode(), key=key, txn=txn)
    producer.flush()


def test_a_split_during_an_open_transaction_keeps_every_committed_key_in_order(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic, name = new_topic(txn_broker, "split-commit")
    stream = txn_client.subscribe_stream(topic, "ordered", initial_position="earliest")
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction(timeout=120)
    send_round(producer, 0, txn)
    send_round(producer, 1, txn)
    layout = txn_broker.call(txn_broker.scalable.split(name, 0))
    assert len(layout.active_segments) == 3
    send_round(producer, 2, txn)  # keys of segment 0 now go to its children
    send_round(producer, 3, txn)
    assert stream.receive_many(10, timeout=0.5) == []  # isolation across the split
    partitions = txn.async_transaction.partitions
    children = {s.segment_id for s in layout.active_segments} - {1}
    assert len(partitions) == 2 + len({segment_of(layout, k) for k in KEYS} & children)
    txn.commit()
    got = consume(stream, 4 * len(KEYS))
    assert by_key(got) == sent(range(4))  # each once, each key in order: parent, then child


def test_a_split_during_an_aborted_transaction_delivers_none_of_it(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic, name = new_topic(txn_broker, "split-abort")
    stream = txn_client.subscribe_stream(topic, "ordered", initial_position="earliest")
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction(timeout=120)
    send_round(producer, 0, txn)
    txn_broker.call(txn_broker.scalable.split(name, 0))
    send_round(producer, 1, txn)
    txn.abort()
    for key in KEYS:  # plain messages after the abort: the only ones delivered
        producer.send(f"{key}/plain".encode(), key=key)
    got = consume(stream, len(KEYS))
    assert by_key(got) == {key: [f"{key}/plain".encode()] for key in KEYS}


def test_a_merge_during_an_open_transaction_keeps_every_committed_key_in_order(
    txn_broker: ScalableBroker, txn_client: braid.Client
) -> None:
    topic, name = new_topic(txn_broker, "merge-commit")
    stream = txn_client.subscribe_stream(topic, "ordered", initial_position="earliest")
    producer = txn_client.create_producer(topic)
    txn = txn_client.new_transaction(timeout=120)
    send_round(producer, 0, txn)
    layout = txn_broker.call(txn_broker.scalable.merge(name, [0, 1]))
    assert len(layout.active_segments) == 1
    send_round(producer, 1, txn)
    for key in KEYS:  # plain messages after the transactional ones, in the merged segment
        producer.send(f"{key}/2".encode(), key=key)
    txn.commit()
    got = consume(stream, 3 * len(KEYS))
    assert by_key(got) == sent(range(3))


def test_a_sealed_segment_keeps_its_committed_outcome_across_a_broker_restart(
    tmp_path: Path,
) -> None:
    """The outcome recorded for the sealed parent (no marker there) is read back when the
    segment is loaded again: its transactional messages stay committed."""
    broker = ScalableBroker(tmp_path, StepGate(), transaction_coordinator_enabled=True).start()
    try:
        topic, name = new_topic(broker, "restart")
        with braid.Client(broker.service_url, operation_timeout=15) as c:
            producer = c.create_producer(topic)
            txn = c.new_transaction(timeout=120)
            send_round(producer, 0, txn)
            layout = broker.call(broker.scalable.split(name, 0))
            send_round(producer, 1, txn)
            txn.commit()
    finally:
        broker.stop()
    parent = SegmentLayout.initial(2).segments[0]
    segment = str(SegmentTopicName.of(name, parent.hash_range, parent.segment_id))
    broker = ScalableBroker(tmp_path, StepGate(), transaction_coordinator_enabled=True).start()
    try:
        loaded = broker.call(broker.service.get_or_create_topic(segment, create=False))
        assert loaded.is_terminated
        assert loaded.transactions is not None
        assert loaded.transactions.buffer.open_transactions() == []
        with braid.Client(broker.service_url, operation_timeout=15) as c:
            stream = c.subscribe_stream(topic, "late", initial_position="earliest")
            got = consume(stream, 2 * len(KEYS))
        assert by_key(got) == sent(range(2))
        assert len(layout.active_segments) == 3
    finally:
        broker.stop()
