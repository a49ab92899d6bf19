"""Key_Shared subscriptions with the official client: per-key order while consumers join and
leave, STICKY hash ranges, the ordering key's precedence and the subscription-wide policy."""

from __future__ import annotations

import time
from collections import defaultdict

import pulsar
import pytest

from braid.core.hashing import sticky_key_hash

KEYS = [f"key-{i}" for i in range(20)]


def _key_shared(
    client: pulsar.Client,
    topic: str,
    name: str,
    *,
    policy: pulsar.ConsumerKeySharedPolicy | None = None,
    queue: int = 10,
) -> pulsar.Consumer:
    return client.subscribe(
        topic,
        "ks",
        consumer_type=pulsar.ConsumerType.KeyShared,
        consumer_name=name,
        receiver_queue_size=queue,
        initial_position=pulsar.InitialPosition.Earliest,
        key_shared_policy=policy,
    )


def _send_wave(producer: pulsar.Producer, wave: int, per_key: int) -> None:
    for seq in range(per_key):
        for key in KEYS:
            producer.send_async(f"{key}:{wave * per_key + seq}".encode(), None, partition_key=key)
    producer.flush()


def test_per_key_order_holds_while_three_consumers_join_and_leave(
    client: pulsar.Client, topic: str
) -> None:
    # Key-based batching keeps each batch to one key, so a batch routed whole stays in order.
    producer = client.create_producer(
        topic, batching_enabled=True, batching_type=pulsar.BatchingType.KeyBased
    )
    per_key = 15
    consumers: dict[str, pulsar.Consumer] = {"c1": _key_shared(client, topic, "c1")}
    _send_wave(producer, 0, per_key)
    seen: dict[str, list[int]] = defaultdict(list)
    by_consumer: dict[str, int] = defaultdict(int)
    processed = 0
    trace: list[tuple[str, str, int, int, int]] = []
    total = 2 * per_key * len(KEYS)
    deadline = time.monotonic() + 60
    while processed < total:
        assert time.monotonic() < deadline, f"only {processed} of {total} messages arrived"
        for name, consumer in list(consumers.items()):
            try:
                msg = consumer.receive(timeout_millis=10)
            except pulsar.Timeout:
                continue
            key, seq = msg.data().decode().split(":")
            seen[key].append(int(seq))
            trace.append((name, key, int(seq), msg.redelivery_count(), processed))
            by_consumer[name] += 1
            consumer.acknowledge(msg)
            processed += 1
            if processed == 100:
                consumers["c2"] = _key_shared(client, topic, "c2")
            elif processed == 200:
                consumers["c3"] = _key_shared(client, topic, "c3")
            elif processed == 300:
                # c1 leaves with prefetched messages it never handed to the application: they
                # go to the others, in order, and nothing it processed comes back.
                consumers.pop("c1").close()
                _send_wave(producer, 1, per_key)
    for key in KEYS:
        assert seen[key] == list(range(2 * per_key)), repr([t for t in trace if t[1] == key])
    assert set(by_consumer) == {"c1", "c2", "c3"}, dict(by_consumer)


def test_sticky_consumers_get_exactly_the_keys_of_their_hash_ranges(
    client: pulsar.Client, topic: str
) -> None:
    low = _key_shared(
        client,
        topic,
        "low",
        policy=pulsar.ConsumerKeySharedPolicy(
            key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=[(0, 32767)]
        ),
        queue=100,
    )
    high = _key_shared(
        client,
        topic,
        "high",
        policy=pulsar.ConsumerKeySharedPolicy(
            key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=[(32768, 65535)]
        ),
        queue=100,
    )
    producer = client.create_producer(topic, batching_enabled=False)
    for key in KEYS:
        producer.send(key.encode(), partition_key=key)
    # The ordering key wins over the partition key: all of these follow "ordered-by-this".
    ordering = "ordered-by-this"
    for key in KEYS[:5]:
        producer.send(b"ordered:" + key.encode(), partition_key=key, ordering_key=ordering)

    def drain(consumer: pulsar.Consumer) -> list[bytes]:
        got = []
        while True:
            try:
                msg = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                return got
            got.append(msg.data())
            consumer.acknowledge(msg)

    got_low, got_high = drain(low), drain(high)
    want_low = {k.encode() for k in KEYS if sticky_key_hash(k) <= 32767}
    assert {m for m in got_low if not m.startswith(b"ordered:")} == want_low
    assert {m for m in got_high if not m.startswith(b"ordered:")} == {
        k.encode() for k in KEYS
    } - want_low
    ordered_to = got_low if sticky_key_hash(ordering) <= 32767 else got_high
    assert [m for m in ordered_to if m.startswith(b"ordered:")] == [
        b"ordered:" + k.encode() for k in KEYS[:5]
    ]


def test_overlapping_sticky_ranges_are_refused(client: pulsar.Client, topic: str) -> None:
    sticky = pulsar.KeySharedMode.Sticky
    _key_shared(
        client,
        topic,
        "first",
        policy=pulsar.ConsumerKeySharedPolicy(key_shared_mode=sticky, sticky_ranges=[(0, 1000)]),
    )
    with pytest.raises(pulsar.ConsumerAssignError):
        _key_shared(
            client,
            topic,
            "second",
            policy=pulsar.ConsumerKeySharedPolicy(
                key_shared_mode=sticky, sticky_ranges=[(900, 2000)]
            ),
        )


def test_a_consumer_with_another_key_shared_policy_is_refused(
    client: pulsar.Client, topic: str
) -> None:
    _key_shared(client, topic, "in-order")
    with pytest.raises(pulsar.ConsumerBusy):
        _key_shared(
            client,
            topic,
            "out-of-order",
            policy=pulsar.ConsumerKeySharedPolicy(allow_out_of_order_delivery=True),
        )


def test_cumulative_ack_is_refused_on_key_shared(client: pulsar.Client, topic: str) -> None:
    consumer = _key_shared(client, topic, "c")
    client.create_producer(topic).send(b"m", partition_key="k")
    msg = consumer.receive(timeout_millis=10_000)
    with pytest.raises(pulsar.CumulativeAcknowledgementNotAllowedError):
        consumer.acknowledge_cumulative(msg)
