"""Multi-topic consumers with the official client: a regex subscription picks up a topic created
after it subscribed (the client re-reads GET_TOPICS_OF_NAMESPACE on its discovery period), and a
consumer of a list of topics reads all of them.

``pulsar.Client.subscribe`` of pulsar-client 3.13 checks ``pattern_auto_discovery_period`` but
never hands it to the C++ core, whose default is 60 s; the regex consumer here is made through the
same C++ binding the wrapper calls (``subscribe_pattern``) with the period set to 1 s.
"""

from __future__ import annotations

import _pulsar
import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker


@pytest.mark.interop
def test_regex_consumer_picks_up_a_topic_created_after_it_subscribed(
    client: pulsar.Client, broker: BackgroundBroker, topic: str
) -> None:
    first = f"{topic}-a"
    client.create_producer(first).send(b"before")
    conf = _pulsar.ConsumerConfiguration()
    conf.subscription_initial_position(pulsar.InitialPosition.Earliest)
    conf.pattern_auto_discovery_period(1)
    # The topic name has letters, digits and '-' only: no character to escape.
    consumer = client._client.subscribe_pattern(topic + "-.*", "regex-sub", conf)
    msg = consumer.receive(10_000)
    assert msg.data() == b"before"
    consumer.acknowledge(msg)

    later = f"{topic}-b"
    producer = client.create_producer(later)
    producer.send(b"after")
    # The consumer discovers the new topic within a discovery period or two and reads it from
    # the earliest position.
    msg = consumer.receive(20_000)
    assert (msg.data(), msg.topic_name()) == (b"after", later)
    consumer.acknowledge(msg)
    # A topic that does not match is not consumed.
    client.create_producer(f"{topic}x-c").send(b"other")
    with pytest.raises(pulsar.Timeout):
        consumer.receive(2_500)
    consumer.close()


@pytest.mark.interop
def test_consumer_of_a_topic_list_reads_every_topic(client: pulsar.Client, topic: str) -> None:
    topics = [f"{topic}-{i}" for i in range(3)]
    consumer = client.subscribe(topics, "multi")
    for name in topics:
        client.create_producer(name).send(name.encode())
    got = {consumer.receive(timeout_millis=10_000).data() for _ in topics}
    assert got == {name.encode() for name in topics}
