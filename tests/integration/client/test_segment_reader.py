"""``Client.create_segment_reader``: one segment as column chunks, against a real broker with the
scalable-topic layer (and a classic topic on the plain broker).

The rows are held against what a checkpoint consumer (the message-at-a-time path) delivers from
the same segment: same ids, keys, values, properties, event times, publish times, producers and
sequence ids, in the same order - for list chunks and for packed ones (``packed=True``: Arrow-layout
buffers, read back here with ``array``).
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest

import braid
from braid.client import PackedColumns, segment_reader
from braid.core.checkpoint import SegmentCursor
from braid.core.message_id import MessageId, message_position
from tests.integration.client.conftest import ScalableBroker
from tests.integration.client.test_conformance import create, receive, segment_of, split
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(60)


def message_rows(messages: list[braid.Message]) -> list[tuple[Any, ...]]:
    return [
        (
            m.message_id,
            m.key,
            m.value,
            m.properties,
            m.event_time,
            m.publish_time,
            m.producer_name,
            m.sequence_id,
        )
        for m in messages
    ]


def column_rows(cols: braid.MessageColumns) -> list[tuple[Any, ...]]:
    return [
        (
            cols.message_id(i),
            cols.keys[i],
            cols.values[i],
            dict(cols.properties[i]),
            cols.event_times[i],
            cols.publish_times[i],
            cols.producer_names[i],
            cols.sequence_ids[i],
        )
        for i in range(len(cols))
    ]


def packed_rows(cols: PackedColumns) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for e, start, stop in cols:
        ends, key_ends = array("i", e.value_offsets), array("i", e.key_offsets)
        times, seqs = array("q", e.event_times), array("q", e.sequence_ids)
        id_ends = array("i", e.message_id_offsets)
        for i in range(start, stop):
            has_key = not e.key_nulls or e.key_validity[i >> 3] >> (i & 7) & 1
            rows.append(
                (
                    MessageId.from_bytes(e.message_ids[id_ends[i] : id_ends[i + 1]]),
                    e.keys[key_ends[i] : key_ends[i + 1]].decode() if has_key else None,
                    e.values[ends[i] : ends[i + 1]],
                    {} if e.properties is None else dict(e.properties[i]),
                    times[i] if e.event_time_validity[i >> 3] >> (i & 7) & 1 else None,
                    e.publish_time,
                    e.producer_name,
                    seqs[i],
                )
            )
    return rows


def read_all(reader: braid.SegmentReader[Any], chunk: int = 7, within: float = 15.0) -> list[Any]:
    """Every row until the reader is drained, in chunks of at most ``chunk``."""
    rows: list[Any] = []

    def more() -> bool:
        cols = reader.read_columns(chunk, timeout=0.05)
        assert len(cols) <= chunk
        if isinstance(cols, PackedColumns):
            rows.extend(packed_rows(cols))
        else:
            rows.extend(column_rows(cols))
        return reader.drained

    wait_for(more, within=within, message=lambda: f"the segment drained (got {len(rows)})")
    return rows


def publish(producer: braid.Producer, start: int, count: int) -> None:
    keys = [f"k{i % 11}" for i in range(start, start + count)]
    producer.send_many(
        [b"v%d" % i for i in range(start, start + count)],
        keys=keys,
        properties=[{"n": str(i)} if i % 5 == 0 else {} for i in range(start, start + count)],
        event_times=[
            1_700_000_000_000 + i if i % 3 == 0 else None for i in range(start, start + count)
        ],
    )
    producer.send(b"single-%d" % start, key="solo", properties={"p": "q"}, event_time=1234)


@pytest.mark.parametrize("packed", [False, True], ids=["lists", "packed"])
def test_a_sealed_segment_reads_to_drained_with_the_rows_a_consumer_gets(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str, packed: bool
) -> None:
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic)
    publish(producer, 0, 120)
    producer.flush()
    unbatched = sclient.create_producer(scalable_topic, batching=False)
    unbatched.send(b"unbatched", key="u", properties={"a": "b"}, event_time=99)
    split(scalable_broker, scalable_topic, 0)
    consumer = sclient.create_checkpoint_consumer(scalable_topic, start=braid.Checkpoint.earliest())
    expected = [m for m in receive(consumer, 122) if segment_of(m) == 0]
    consumer.close()
    with sclient.create_segment_reader(scalable_topic, 0, packed=packed) as reader:
        rows = read_all(reader)
        assert len(reader.read_columns(10, timeout=0.05)) == 0
    assert rows == message_rows(expected)
    assert len(rows) == 122
    assert message_position(rows[-1][0]).batch_index == -1  # type: ignore[union-attr]


@pytest.mark.parametrize("packed", [False, True], ids=["lists", "packed"])
def test_reading_starts_just_after_a_message_id_or_a_cursor(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str, packed: bool
) -> None:
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic)
    publish(producer, 0, 60)
    producer.flush()
    split(scalable_broker, scalable_topic, 0)
    with sclient.create_segment_reader(scalable_topic, 0) as reader:
        rows = read_all(reader)
    middle = rows[25][0]  # a message in the middle of a batch
    position = message_position(middle)
    assert position is not None and position.batch_index > 0
    with sclient.create_segment_reader(scalable_topic, 0, start=middle, packed=packed) as reader:
        assert read_all(reader, chunk=1000) == rows[26:]
    cursor = SegmentCursor.after(position.ledger_id, position.entry_id, 2**31 - 1)
    with sclient.create_segment_reader(scalable_topic, 0, start=cursor, packed=packed) as reader:
        after_entry = read_all(reader, chunk=1000)
    assert after_entry == [r for r in rows if message_position(r[0]).entry_id > position.entry_id]  # type: ignore[union-attr]


def test_an_active_segment_is_read_as_it_grows_and_never_drains(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    producer = sclient.create_producer(scalable_topic)
    with sclient.create_segment_reader(scalable_topic, 0, receiver_queue_size=10) as reader:
        assert len(reader.read_columns(5, timeout=0.1)) == 0
        values: list[bytes] = []
        for round_ in range(3):
            producer.send_many([b"%d-%d" % (round_, i) for i in range(40)])
            producer.flush()

            def more(want: int = 40 * (round_ + 1)) -> bool:
                values.extend(reader.read_columns(8, timeout=0.05).values)
                return len(values) >= want

            wait_for(more, within=15, message="the new messages")
        assert not reader.drained
        assert values == [b"%d-%d" % (r, i) for r in range(3) for i in range(40)]
        assert reader.last_position is not None


def test_a_classic_topic_is_one_segment(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send_many([b"a", b"b", b"c"], keys=["x", "y", "z"])
    producer.flush()
    consumer = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    expected = receive(consumer, 3)
    consumer.close()
    sid = segment_of(expected[0])
    with client.create_segment_reader(topic, sid) as reader:
        got: list[Any] = []
        wait_for(
            lambda: got.extend(column_rows(reader.read_columns(10, timeout=0.05))) or len(got) >= 3,
            within=15,
            message="three rows",
        )
    assert got == message_rows(expected)


def test_bad_arguments_and_unknown_segments_are_typed_errors(
    scalable_broker: ScalableBroker,
    sclient: braid.Client,
    scalable_topic: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create(scalable_broker, scalable_topic, 2)
    for bad in (-1, "0", True):
        with pytest.raises(braid.InvalidConfigurationError):
            sclient.create_segment_reader(scalable_topic, bad)  # type: ignore[arg-type]
    with pytest.raises(braid.InvalidConfigurationError):
        sclient.create_segment_reader(scalable_topic, 0, start="earliest")  # type: ignore[arg-type]
    monkeypatch.setattr(segment_reader, "NEWER_LAYOUT_WAIT", 0.3)
    with pytest.raises(braid.NotFoundError, match="segment 99 "):
        sclient.create_segment_reader(scalable_topic, 99)  # above every id: waits, then fails
    reader = sclient.create_segment_reader(scalable_topic, 1)
    reader.close()
    with pytest.raises(braid.AlreadyClosedError):
        reader.read_columns(1, timeout=0)


async def test_the_async_reader_grants_permits_on_the_loop_as_rows_are_taken(
    aclient: braid.AsyncClient, topic: str
) -> None:
    producer = await aclient.create_producer(topic, batching=False)
    for i in range(60):
        await producer.send(b"%d" % i, key=f"k{i % 4}")
    consumer = await aclient.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    first = await consumer.receive(timeout=10)
    assert first is not None
    sid = segment_of(first)
    await consumer.close()
    # A queue of 10: the 60 messages arrive only if taking rows grants permits back (on the
    # loop, where this reader runs).
    async with await aclient.create_segment_reader(topic, sid, receiver_queue_size=10) as reader:
        values: list[bytes] = []
        while len(values) < 60:
            cols = await reader.read_columns(7, timeout=10)
            assert 0 < len(cols) <= 7
            values += cols.values
        assert values == [b"%d" % i for i in range(60)]
        assert len(await reader.read_columns(7, timeout=0.05)) == 0
        assert not reader.drained


def test_a_byte_bound_keeps_the_read_ahead_within_it(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    for i in range(40):
        producer.send(b"%02d" % i + b"x" * 10_000)
    consumer = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    first = receive(consumer, 1)[0]
    consumer.close()
    sid = segment_of(first)
    # Unbounded in bytes, a queue of 1000 lets the broker send all 40 ahead of the reader.
    with client.create_segment_reader(topic, sid, receiver_queue_size=1000) as unbounded:
        wait_for(lambda: len(unbounded._reader._buffer) == 40, message="all 40 read ahead")
    # 35,000 bytes hold three of these entries: never more are in flight, and all are read.
    with client.create_segment_reader(
        topic, sid, receiver_queue_size=1000, receiver_queue_bytes=35_000
    ) as reader:
        values: list[bytes] = []

        def one_more() -> bool:
            assert len(reader._reader._buffer) <= 3
            values.extend(reader.read_columns(1, timeout=0.05).values)
            return len(values) == 40

        wait_for(one_more, within=15, message=lambda: f"40 rows (got {len(values)})")
        seg = reader._reader._seg
        assert seg is not None and seg.window.window == 3
    assert [v[:2] for v in values] == [b"%02d" % i for i in range(40)]
