"""Queue consumers on ``topic://`` get what ``persistent://`` Shared subscriptions have (issue 29):
ack timeout, redelivery counts, dead-letter and retry-letter topics (``braid.DeadLetterPolicy``),
and delayed delivery (``deliver_after`` / ``deliver_at``) routed to the right segment across
splits - with Braid's client against a real in-process broker with the scalable-topic layer
(``scalable_broker``), splits through the real controller.

Each test is named after the PIP-460 section it proves: the concepts table's *QueueConsumer*
("subscribes to all active segments with shared dispatch") and the challenge *Delayed message
delivery* ("maintain an active subscription and consumer on every segment that still contains
undelivered delayed messages"). The same features on ``persistent://`` (the plain ``broker``)
close the file: the parity.
"""

from __future__ import annotations

import time

import pytest

import braid
from braid.core.hashing import hash16
from braid.core.names import TopicName
from tests.integration.client.conftest import ScalableBroker
from tests.integration.client.test_conformance import (
    create,
    key_in,
    receive,
    segment_of,
    split,
)
from tests.support.broker_stack import BackgroundBroker

pytestmark = pytest.mark.timeout(90)


def _values(messages: list[braid.Message]) -> set[bytes]:
    return {m.value for m in messages}


def test_pip460_queue_consumer_ack_timeout_redelivers_across_a_split(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    queue = sclient.subscribe_queue(
        scalable_topic, "workers", initial_position="earliest", ack_timeout=1.0
    )
    producer = sclient.create_producer(scalable_topic)
    producer.send_many([b"m%d" % i for i in range(20)], keys=[f"k{i}" for i in range(20)])
    got = receive(queue, 20)
    left = [m for m in got if segment_of(m) == 0]
    assert left and len(left) < 20
    for message in got:
        if segment_of(message) != 0:
            queue.acknowledge(message)
    split(scalable_broker, scalable_topic, 0)  # the unacknowledged ones are in a sealed segment
    started = time.monotonic()
    again = receive(queue, len(left), within=30)
    assert time.monotonic() - started > 0.3  # not before the timeout
    assert _values(again) == _values(left)
    assert {m.redelivery_count for m in again} == {1}
    for message in again:
        queue.acknowledge(message)
    assert queue.receive(timeout=2.5) is None  # acknowledged in time: not redelivered


def test_pip460_queue_consumer_dead_letters_after_max_redeliveries_across_a_split(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    policy = braid.DeadLetterPolicy(max_redeliver_count=2, initial_subscription_name="triage")
    queue = sclient.subscribe_queue(
        scalable_topic,
        "workers",
        initial_position="earliest",
        negative_ack_delay=0.05,
        dead_letter_policy=policy,
    )
    layout = scalable_broker.call(
        scalable_broker.scalable.get_layout(TopicName.parse(scalable_topic))
    )
    keys = [key_in(layout, 0, n) for n in range(3)] + [key_in(layout, 1, 0)]
    producer = sclient.create_producer(scalable_topic)
    ids = [
        producer.send(b"poison-%d" % i, key=key, properties={"app": "x"})
        for i, key in enumerate(keys)
    ]
    counts: dict[bytes, list[int]] = {}
    for round_no in range(3):  # delivered with redelivery counts 0, 1, 2; then dead-lettered
        for message in receive(queue, len(keys), within=30):
            counts.setdefault(message.value, []).append(message.redelivery_count)
            queue.negative_acknowledge(message)
        if round_no == 0:
            split(scalable_broker, scalable_topic, 0)
    assert all(sorted(c) == [0, 1, 2] for c in counts.values()), counts
    assert queue.receive(timeout=1.0) is None  # none redelivered a fourth time

    dlq_topic = f"{scalable_topic}-workers-DLQ"
    triage = sclient.subscribe_queue(dlq_topic, "triage")  # created before the first letter
    dead = receive(triage, len(keys), within=30)
    assert _values(dead) == {b"poison-%d" % i for i in range(len(keys))}
    by_value = {m.value: m for m in dead}
    for i, key in enumerate(keys):
        letter = by_value[b"poison-%d" % i]
        assert letter.key == key
        assert letter.properties["app"] == "x"
        assert letter.properties["REAL_TOPIC"] == scalable_topic
        assert letter.properties["ORIGIN_MESSAGE_ID"] == str(ids[i])
        triage.acknowledge(letter)


def test_pip460_queue_consumer_reconsume_later_goes_through_the_retry_letter_topic(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 2)
    policy = braid.DeadLetterPolicy(max_redeliver_count=2, initial_subscription_name="triage")
    queue = sclient.subscribe_queue(
        scalable_topic,
        "workers",
        initial_position="earliest",
        dead_letter_policy=policy,
        retry_enable=True,
    )
    producer = sclient.create_producer(scalable_topic)
    producer.send(b"later", key="order-7")
    first = receive(queue, 1)[0]
    assert "RECONSUMETIMES" not in first.properties
    seen = []
    message = first
    for attempt in (1, 2):
        asked = time.time()
        queue.reconsume_later(message, 1.0)
        message = receive(queue, 1, within=30)[0]
        assert time.time() - asked >= 0.9  # the retry topic held it for the delay
        assert message.value == b"later" and message.key == "order-7"
        assert message.properties["RECONSUMETIMES"] == str(attempt)
        assert message.properties["REAL_TOPIC"] == scalable_topic
        seen.append(message.topic)
    assert seen == [f"{scalable_topic}-workers-RETRY"] * 2
    queue.reconsume_later(message, 1.0)  # the third time: the dead-letter topic instead
    assert queue.receive(timeout=2.0) is None
    triage = sclient.subscribe_queue(f"{scalable_topic}-workers-DLQ", "triage")
    dead = receive(triage, 1, within=30)[0]
    assert dead.value == b"later" and dead.properties["RECONSUMETIMES"] == "2"


def test_pip460_delayed_message_delivery_across_a_split_reaches_the_queue_consumer(
    scalable_broker: ScalableBroker, sclient: braid.Client, scalable_topic: str
) -> None:
    create(scalable_broker, scalable_topic, 1)
    queue = sclient.subscribe_queue(scalable_topic, "workers", initial_position="earliest")
    producer = sclient.create_producer(scalable_topic)
    due_parent = int(time.time() * 1000) + 2500
    parent_id = producer.send(b"held-in-parent", key="a", deliver_at=due_parent)
    producer.send(b"now", key="a")
    assert segment_of(parent_id) == 0
    assert [m.value for m in receive(queue, 1)] == [b"now"]
    layout = split(scalable_broker, scalable_topic, 0)  # the delayed one stays in sealed 0
    child = layout.find_active_segment(hash16("a")).segment_id
    sent = time.time()
    child_id = producer.send(b"held-in-child", key="a", deliver_after=1.5)
    assert segment_of(child_id) == child  # routed to the segment covering the key now
    got = []
    for message in receive(queue, 2, within=30):
        got.append((message.value, time.time()))
        queue.acknowledge(message)
    when = dict(got)
    assert set(when) == {b"held-in-parent", b"held-in-child"}
    assert when[b"held-in-parent"] * 1000 >= due_parent - 5  # never before its time
    assert when[b"held-in-child"] - sent >= 1.4
    assert queue.receive(timeout=0.5) is None


def test_pip460_queue_parity_on_persistent_topics(
    broker: BackgroundBroker, client: braid.Client, topic: str
) -> None:
    """The same features on a ``persistent://`` topic (a Shared subscription), as the official
    clients have them there."""
    policy = braid.DeadLetterPolicy(max_redeliver_count=1, initial_subscription_name="triage")
    queue = client.subscribe_queue(
        topic,
        "workers",
        initial_position="earliest",
        ack_timeout=1.0,
        negative_ack_delay=0.05,
        dead_letter_policy=policy,
    )
    producer = client.create_producer(topic)
    producer.send(b"slow")
    first = receive(queue, 1)[0]
    again = receive(queue, 1, within=30)[0]  # not acknowledged in time
    assert (first.value, again.value, again.redelivery_count) == (b"slow", b"slow", 1)
    queue.negative_acknowledge(again)  # redelivered once already: dead-lettered
    triage = client.subscribe_queue(f"{topic}-workers-DLQ", "triage")
    assert receive(triage, 1, within=30)[0].properties["REAL_TOPIC"] == topic
    with pytest.raises(braid.BraidError, match="deliver_after"):
        producer.send(b"never", deliver_after=-1)
    producer.flush()  # the refused send is not left pending
    due = int(time.time() * 1000) + 1500
    producer.send(b"delayed", deliver_at=due)
    delayed = receive(queue, 1, within=30)[0]
    assert delayed.value == b"delayed" and time.time() * 1000 >= due - 5
