"""Producing and consuming on persistent:// topics with the blocking client (the migration
bridge: a synthetic single-segment layout, the same code path as scalable topics)."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

import braid
from tests.support.broker_stack import BackgroundBroker


def test_send_returns_ordered_ids_and_every_field_round_trips(
    client: braid.Client, topic: str
) -> None:
    with client.create_producer(topic, producer_name="fields") as producer:
        queue = client.subscribe_queue(topic, "q", initial_position="earliest")
        first = producer.send(
            b"one", key="k-1", properties={"a": "1"}, event_time=1_700_000_000_123
        )
        second = producer.send(b"two")
        assert first < second
        assert producer.last_sequence_id == 1
        got = [queue.receive(timeout=10) for _ in range(2)]
    one, two = got
    assert one is not None and two is not None
    assert (one.value, one.data, one.key, one.properties) == (b"one", b"one", "k-1", {"a": "1"})
    assert one.event_time == 1_700_000_000_123 and two.event_time is None
    assert one.message_id == first and two.message_id == second
    assert (one.sequence_id, two.sequence_id) == (0, 1)
    assert one.producer_name == "fields" and one.topic == topic
    assert one.redelivery_count == 0 and one.size == 3 and one.publish_time > 0
    assert two.key is None and two.properties == {}


@pytest.mark.parametrize("compression", [None, "lz4", "zlib", "zstd"])
@pytest.mark.parametrize("batching", [True, False])
def test_batching_and_compression_deliver_everything_in_order(
    client: braid.Client, topic: str, compression: str | None, batching: bool
) -> None:
    producer = client.create_producer(topic, batching=batching, compression=compression)
    stream = client.subscribe_stream(topic, "s", initial_position="earliest")
    futures = [producer.send_async(b"m-%d" % i * 10, key=f"k{i % 7}") for i in range(300)]
    ids = [f.result(timeout=30) for f in futures]
    assert ids == sorted(ids)
    received = []
    while len(received) < 300:
        batch = stream.receive_many(100, timeout=10)
        assert batch, f"only {len(received)} of 300 arrived"
        received.extend(batch)
    assert [m.value for m in received] == [b"m-%d" % i * 10 for i in range(300)]
    assert [m.message_id for m in received] == ids
    stream.acknowledge_cumulative(received[-1])


def test_send_async_order_is_call_order_across_threads(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    queue = client.subscribe_queue(topic, "q", initial_position="earliest")
    lock = threading.Lock()
    issued: list[bytes] = []
    futures: list[concurrent.futures.Future[braid.MessageId]] = []

    def worker(n: int) -> None:
        for i in range(200):
            value = b"%d-%d" % (n, i)
            with lock:  # the lock fixes a global call order to compare against
                issued.append(value)
                futures.append(producer.send_async(value))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [f.result(timeout=30) for f in futures]
    assert ids == sorted(ids)
    got = queue.receive_many(1000, timeout=10)
    while len(got) < 800:
        more = queue.receive_many(1000, timeout=10)
        assert more
        got.extend(more)
    assert [m.value for m in got] == issued


def test_send_many_returns_every_id_in_order(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    ids = producer.send_many(
        [b"a", b"b", b"c"], keys=["x", None, "z"], properties=[{"p": "1"}, None, None]
    )
    assert len(ids) == 3 and ids == sorted(ids) and len(set(ids)) == 3
    assert producer.send_many([]) == []
    consumer = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    got = consumer.receive_many(10, timeout=10)
    while len(got) < 3:
        got += consumer.receive_many(10, timeout=10)
    assert [(m.value, m.key, m.properties) for m in got] == [
        (b"a", "x", {"p": "1"}),
        (b"b", None, {}),
        (b"c", "z", {}),
    ]


def test_flush_waits_for_everything_sent_before(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_max_delay=5.0)
    futures = [producer.send_async(b"x") for _ in range(10)]
    producer.flush()
    assert all(f.done() and f.exception() is None for f in futures)


def test_close_is_idempotent_and_later_sends_fail(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"x")
    producer.close()
    producer.close()
    with pytest.raises(braid.AlreadyClosedError):
        producer.send(b"y")
    assert isinstance(producer.send_async(b"z").exception(timeout=5), braid.AlreadyClosedError)
    consumer = client.subscribe_queue(topic, "q")
    consumer.close()
    consumer.close()
    with pytest.raises(braid.AlreadyClosedError):
        consumer.receive(timeout=0)


def test_receive_times_out_with_none_and_consumers_iterate(
    client: braid.Client, topic: str
) -> None:
    queue = client.subscribe_queue(topic, "q")
    assert queue.receive(timeout=0.05) is None
    assert queue.receive_many(5, timeout=0) == []
    producer = client.create_producer(topic)
    producer.send_many([b"%d" % i for i in range(5)])
    seen = []
    for message in queue:
        seen.append(message.value)
        queue.acknowledge(message)
        if len(seen) == 5:
            break
    assert seen == [b"0", b"1", b"2", b"3", b"4"]


def test_queue_consumers_share_a_subscription_without_loss(
    client: braid.Client, topic: str
) -> None:
    a = client.subscribe_queue(topic, "shared", receiver_queue_size=10)
    b = client.subscribe_queue(topic, "shared", receiver_queue_size=10)
    producer = client.create_producer(topic, batching=False)
    producer.send_many([b"%d" % i for i in range(100)])
    seen: dict[bytes, str] = {}
    while len(seen) < 100:
        progressed = False
        for name, consumer in (("a", a), ("b", b)):
            for message in consumer.receive_many(10, timeout=0.2):
                assert message.value not in seen
                seen[message.value] = name
                consumer.acknowledge(message)
                progressed = True
        assert progressed or len(seen) == 100
    assert set(seen.values()) == {"a", "b"}


def test_negative_ack_redelivers_with_a_higher_count(client: braid.Client, topic: str) -> None:
    queue = client.subscribe_queue(topic, "nack", negative_ack_delay=0.05)
    client.create_producer(topic).send(b"again")
    first = queue.receive(timeout=10)
    assert first is not None and first.redelivery_count == 0
    queue.negative_acknowledge(first)
    second = queue.receive(timeout=10)
    assert second is not None and second.value == b"again" and second.redelivery_count == 1
    queue.acknowledge(second)


def test_a_partly_acknowledged_batch_is_redelivered(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_max_delay=1.0)
    queue = client.subscribe_queue(topic, "batch", initial_position="earliest")
    producer.send_many([b"a", b"b", b"c"])  # one entry
    got = queue.receive_many(3, timeout=10)
    assert [m.value for m in got] == [b"a", b"b", b"c"]
    queue.acknowledge(got[0])
    queue.acknowledge(got[1])
    queue.close()
    again = client.subscribe_queue(topic, "batch")
    redelivered = again.receive_many(3, timeout=10)
    assert [m.value for m in redelivered] == [b"a", b"b", b"c"]  # no batch-index acks
    for message in redelivered:
        again.acknowledge(message)
    again.close()
    third = client.subscribe_queue(topic, "batch")
    assert third.receive(timeout=0.5) is None


def test_stream_cumulative_ack_survives_a_new_consumer(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    stream = client.subscribe_stream(topic, "orders", initial_position="earliest")
    producer.send_many([b"%d" % i for i in range(10)])
    got = []
    while len(got) < 10:
        got += stream.receive_many(10, timeout=10)
    stream.acknowledge_cumulative(got[5])
    stream.close()  # nothing further is acknowledged on close
    again = client.subscribe_stream(topic, "orders")
    rest = []
    while len(rest) < 4:
        rest += again.receive_many(10, timeout=10)
    assert [m.value for m in rest] == [b"6", b"7", b"8", b"9"]


def test_a_cumulative_ack_inside_a_batch_keeps_that_entry(client: braid.Client, topic: str) -> None:
    """Without batch-index acks a cumulative ack stops before a partly acknowledged entry:
    the entry comes back whole (at-least-once), never a message lost."""
    producer = client.create_producer(topic, batching_max_delay=1.0)
    stream = client.subscribe_stream(topic, "batched", initial_position="earliest")
    producer.send_many([b"a%d" % i for i in range(4)])  # entry 1
    producer.send_many([b"b%d" % i for i in range(4)])  # entry 2
    got = []
    while len(got) < 8:
        got += stream.receive_many(10, timeout=10)
    stream.acknowledge_cumulative(got[5])  # inside entry 2: entry 1 is acknowledged
    stream.close()
    again = client.subscribe_stream(topic, "batched")
    rest = []
    while len(rest) < 4:
        rest += again.receive_many(10, timeout=10)
    assert [m.value for m in rest] == [b"b0", b"b1", b"b2", b"b3"]


def test_a_second_stream_consumer_takes_over_when_the_first_leaves(
    client: braid.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    first = client.subscribe_stream(topic, "failover", consumer_name="a")
    second = client.subscribe_stream(topic, "failover", consumer_name="b")
    producer.send(b"for-a")
    message = first.receive(timeout=10)
    assert message is not None and message.value == b"for-a"
    assert second.receive(timeout=0.3) is None  # standby
    first.acknowledge_cumulative(message)
    first.close()
    producer.send(b"for-b")
    taken = second.receive(timeout=10)
    assert taken is not None and taken.value == b"for-b"


def test_stream_initial_position_applies_only_to_a_new_subscription(
    client: braid.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    producer.send(b"old")
    latest = client.subscribe_stream(topic, "late", initial_position="latest")
    earliest = client.subscribe_stream(topic, "early", initial_position="earliest")
    producer.send(b"new")
    assert [m.value for m in earliest.receive_many(5, timeout=5)][:1] == [b"old"]
    assert latest.receive(timeout=5).value == b"new"  # type: ignore[union-attr]


def test_checkpoint_restore_reads_exactly_the_rest(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_max_messages=7)
    producer.send_many([b"%d" % i for i in range(50)])
    reader = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.earliest())
    first = []
    while len(first) < 23:
        first += reader.receive_many(23 - len(first), timeout=10)
    saved = reader.checkpoint().to_bytes()  # mid-batch: 23 = 3 * 7 + 2
    reader.close()
    producer.send_many([b"%d" % i for i in range(50, 60)])
    restored = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.from_bytes(saved))
    rest = []
    while len(rest) < 37:
        batch = restored.receive_many(100, timeout=10)
        assert batch
        rest += batch
    assert [m.value for m in first + rest] == [b"%d" % i for i in range(60)]
    assert restored.receive(timeout=0.2) is None


def test_checkpoint_of_a_latest_start_is_exact_before_any_message(
    client: braid.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    producer.send(b"before")
    reader = client.create_checkpoint_consumer(topic)  # latest
    saved = reader.checkpoint()
    reader.close()
    producer.send(b"after")
    restored = client.create_checkpoint_consumer(topic, start=saved)
    message = restored.receive(timeout=10)
    assert message is not None and message.value == b"after"
    assert restored.receive(timeout=0.2) is None


def test_checkpoint_latest_sentinel_skips_history(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"history")
    reader = client.create_checkpoint_consumer(topic, start=braid.Checkpoint.latest())
    producer.send(b"live")
    message = reader.receive(timeout=10)
    assert message is not None and message.value == b"live"


def test_typed_errors_for_bad_names_and_missing_namespaces(client: braid.Client) -> None:
    with pytest.raises(braid.NotFoundError):
        client.create_producer("persistent://public/no-such-namespace/t")
    with pytest.raises(braid.InvalidTopicNameError):
        client.create_producer("segment://public/default/t/0000-ffff-0")
    with pytest.raises(braid.InvalidTopicNameError):
        client.subscribe_queue("persistent://bad name", "s")
    with pytest.raises(braid.FeatureNotSupportedError):
        client.create_producer("topic://public/default/scalable")
    with pytest.raises(braid.InvalidConfigurationError):
        client.create_producer("t", access_mode="sometimes")
    with pytest.raises(braid.InvalidConfigurationError):
        client.subscribe_stream("t", "s", initial_position="middle")
    with pytest.raises(braid.InvalidServiceURLError):
        braid.Client("http://127.0.0.1:6650")


def test_bad_values_fail_the_future_not_the_call(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    future = producer.send_async("not bytes")  # type: ignore[arg-type]
    assert isinstance(future.exception(timeout=5), braid.BraidError)
    with pytest.raises(braid.BraidError):
        producer.send(b"x", properties={"k": 1})  # type: ignore[dict-item]


def test_exclusive_access_modes(client: braid.Client, topic: str) -> None:
    owner = client.create_producer(topic, access_mode="exclusive")
    with pytest.raises(braid.ProducerBusyError):
        client.create_producer(topic, access_mode="exclusive")
    with pytest.raises(braid.ProducerBusyError):
        client.create_producer(topic)  # a classic topic attaches at create, as v4 does
    owner.send(b"mine")
    fencer = client.create_producer(topic, access_mode="exclusive_with_fencing")
    fencer.send(b"fenced the owner")
    with pytest.raises(braid.ProducerBusyError):
        owner.send(b"too late")


def test_wait_for_exclusive_gets_the_topic_when_the_owner_leaves(
    client: braid.Client, topic: str
) -> None:
    owner = client.create_producer(topic, access_mode="exclusive")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    waiting = pool.submit(client.create_producer, topic, access_mode="wait_for_exclusive")
    with pytest.raises(concurrent.futures.TimeoutError):
        waiting.result(timeout=0.5)
    owner.close()
    successor = waiting.result(timeout=15)
    successor.send(b"now mine")
    pool.shutdown()


def test_a_terminated_topic_fails_sends_with_topic_terminated(
    broker: BackgroundBroker, client: braid.Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    producer.send(b"last")
    broker.call(broker.service.terminate_topic(topic))
    with pytest.raises(braid.TopicTerminatedError):
        producer.send(b"after the end")
    # The producer stays valid: later sends fail fast with the same category.
    with pytest.raises(braid.TopicTerminatedError):
        producer.send(b"still closed")


def test_a_message_larger_than_the_broker_allows_fails(client: braid.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    producer.send(b"warm-up")  # attached: the broker's limit is known
    with pytest.raises(braid.MessageTooLargeError):
        producer.send(b"x" * (6 * 1024 * 1024))
    producer.send(b"fine again")


def test_closing_the_client_ends_a_create_waiting_for_exclusivity(
    broker: BackgroundBroker, topic: str
) -> None:
    owner_client = braid.Client(broker.service_url)
    waiter_client = braid.Client(broker.service_url)
    try:
        owner_client.create_producer(topic, access_mode="exclusive")
        pool = concurrent.futures.ThreadPoolExecutor(1)
        waiting = pool.submit(
            waiter_client.create_producer, topic, access_mode="wait_for_exclusive"
        )
        with pytest.raises(concurrent.futures.TimeoutError):
            waiting.result(timeout=0.3)
        waiter_client.close()
        with pytest.raises(braid.BraidError):
            waiting.result(timeout=15)
        pool.shutdown()
    finally:
        owner_client.close()
        waiter_client.close()


def test_a_restored_reader_keeps_flowing_past_an_entry_it_skips(
    client: braid.Client, topic: str
) -> None:
    """Skipped messages (at or before the checkpoint) used the broker's permits too: the reader
    must grant them back, or a skipped entry larger than its receiver queue stalls it."""
    producer = client.create_producer(topic, batching_max_delay=1.0)
    reader = client.create_checkpoint_consumer(
        topic, start=braid.Checkpoint.earliest(), receiver_queue_size=10
    )
    producer.send_many([b"old-%d" % i for i in range(50)])  # one entry of 50
    seen = []
    while len(seen) < 50:
        seen += reader.receive_many(50, timeout=10)
    saved = reader.checkpoint()
    reader.close()
    producer.send_many([b"new-%d" % i for i in range(5)])
    restored = client.create_checkpoint_consumer(topic, start=saved, receiver_queue_size=10)
    rest = []
    while len(rest) < 5:
        batch = restored.receive_many(10, timeout=10)
        assert batch, "the restored reader stalled"
        rest += batch
    assert [m.value for m in rest] == [b"new-%d" % i for i in range(5)]
