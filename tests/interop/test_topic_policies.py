"""Topic-level policies with the official client, set through Pulsar's REST paths (issue 31):
the topic's own value over its namespace's over the broker's, for the producer and consumer caps,
deduplication and retention; ``?applied=true`` reports the value in force; a change reaches a
topic that is already loaded (its clients reconnect) and a removed one falls back a level."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import pulsar
import pytest

from braid.core.names import TopicName
from tests.support.admin_server import serve_admin
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

_names = itertools.count()


@pytest.fixture(scope="module")
def admin(broker: BackgroundBroker) -> Iterator[httpx.Client]:
    with serve_admin(broker) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield http


@pytest.fixture
def namespace(broker: BackgroundBroker) -> str:
    """A namespace of the test's own (namespace-level settings do not leak into other tests)."""
    name = f"policies-{next(_names)}"
    broker.call(broker.stack.resources.create_namespace("public", name))
    return f"public/{name}"


def _topic(namespace: str) -> str:
    return f"persistent://{namespace}/t-{next(_names)}"


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def _post(admin: httpx.Client, path: str, body: object) -> None:
    response = admin.post(path, json=body)
    assert response.status_code == 204, response.text


def test_max_producers_topic_over_namespace_over_broker(
    client: pulsar.Client, admin: httpx.Client, namespace: str
) -> None:
    topic, other = _topic(namespace), _topic(namespace)
    _post(admin, f"/admin/v2/namespaces/{namespace}/maxProducersPerTopic", 2)
    assert admin.get(f"/admin/v2/namespaces/{namespace}/maxProducersPerTopic").json() == 2
    _post(admin, _path(topic) + "/maxProducers", 1)
    assert admin.get(_path(topic) + "/maxProducers").json() == 1
    assert admin.get(_path(other) + "/maxProducers").json() is None
    assert admin.get(_path(other) + "/maxProducers", params={"applied": "true"}).json() == 2

    first = client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic)  # the topic's 1
    client.create_producer(other)
    client.create_producer(other)
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(other)  # the namespace's 2

    assert admin.delete(_path(topic) + "/maxProducers").status_code == 204
    client.create_producer(topic)  # the namespace's 2 applies again
    assert admin.delete(f"/admin/v2/namespaces/{namespace}/maxProducersPerTopic").status_code == 204
    client.create_producer(topic)  # the broker's (no cap)
    first.send(b"still served")


def test_max_consumers_and_per_subscription_caps_on_a_topic(
    client: pulsar.Client, admin: httpx.Client, namespace: str
) -> None:
    topic = _topic(namespace)
    _post(admin, _path(topic) + "/maxConsumers", 2)
    _post(admin, _path(topic) + "/maxConsumersPerSubscription", 1)
    shared = pulsar.ConsumerType.Shared
    client.subscribe(topic, "a", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "a", consumer_type=shared)
    client.subscribe(topic, "b", consumer_type=shared)
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "c", consumer_type=shared)


def test_invalid_values_are_refused_with_412(admin: httpx.Client, namespace: str) -> None:
    topic = _topic(namespace)
    for suffix, body in (
        ("/maxProducers", -1),
        ("/maxConsumers", "three"),
        ("/deduplicationEnabled", "yes"),
        ("/retention", {"retentionTimeInMinutes": -5, "retentionSizeInMB": 1}),
    ):
        response = admin.post(_path(topic) + suffix, json=body)
        assert response.status_code == 412, (suffix, response.text)
    response = admin.post(f"/admin/v2/namespaces/{namespace}/maxConsumersPerTopic", json=-2)
    assert response.status_code == 412


def test_topic_deduplication_overrides_the_namespace_and_reaches_a_loaded_topic(
    client: pulsar.Client, broker: BackgroundBroker, admin: httpx.Client, namespace: str
) -> None:
    topic = _topic(namespace)
    name = str(TopicName.parse(topic))
    _post(admin, f"/admin/v2/namespaces/{namespace}/deduplication", False)
    producer = client.create_producer(topic, producer_name="dedup-writer")
    producer.send(b"before", sequence_id=1)
    assert broker.run(lambda: broker.service.topics[name].dedup) is None

    _post(admin, _path(topic) + "/deduplicationEnabled", True)
    assert admin.get(_path(topic) + "/deduplicationEnabled").json() is True
    # The loaded topic is reloaded under the new setting; the producer reconnects to it.
    wait_for(
        lambda: broker.run(
            lambda: name in broker.service.topics and broker.service.topics[name].dedup is not None
        ),
        within=30,
        message="the topic reloaded with deduplication on",
    )
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"one", sequence_id=2)
    producer.send(b"one again", sequence_id=2)  # a duplicate: dropped
    producer.send(b"two", sequence_id=3)
    got = [consumer.receive(timeout_millis=10_000).data() for _ in range(3)]
    assert got == [b"before", b"one", b"two"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)

    applied = admin.get(_path(topic) + "/deduplicationEnabled", params={"applied": "true"})
    assert applied.json() is True
    assert admin.delete(_path(topic) + "/deduplicationEnabled").status_code == 204
    assert admin.get(_path(topic) + "/deduplicationEnabled", params={"applied": "true"}).json() is (
        False
    )


def test_topic_retention_overrides_the_namespace_on_the_loaded_ledger(
    client: pulsar.Client, broker: BackgroundBroker, admin: httpx.Client, namespace: str
) -> None:
    topic = _topic(namespace)
    name = str(TopicName.parse(topic))
    client.create_producer(topic).send(b"x")

    def retention() -> tuple[float, int]:
        config = broker.run(lambda: broker.service.topics[name].ledger.config)
        return config.retention_time_s, config.retention_size_bytes

    namespace_retention = {"retentionTimeInMinutes": 10, "retentionSizeInMB": 5}
    _post(admin, f"/admin/v2/namespaces/{namespace}/retention", namespace_retention)
    wait_for(lambda: retention() == (600.0, 5 * 1024 * 1024), within=30, message="namespace")
    _post(
        admin, _path(topic) + "/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    )
    assert admin.get(_path(topic) + "/retention").json() == {
        "retentionTimeInMinutes": 60,
        "retentionSizeInMB": -1,
    }

    def topic_level() -> bool:
        try:
            return retention() == (3600.0, -1)
        except KeyError:  # unloaded, not yet loaded again
            client.create_producer(topic).close()
            return False

    wait_for(topic_level, within=30, message="the topic's retention on its ledger")
    # A namespace change afterwards does not override the topic's own.
    _post(
        admin,
        f"/admin/v2/namespaces/{namespace}/retention",
        {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1},
    )
    assert (
        admin.get(f"/admin/v2/namespaces/{namespace}/retention").json()["retentionTimeInMinutes"]
        == 1
    )
    wait_for(topic_level, within=30, message="the topic's retention kept")
    applied = admin.get(_path(topic) + "/retention", params={"applied": "true"}).json()
    assert applied == {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    # Removed: the namespace's retention applies to the loaded topic again.
    assert admin.delete(_path(topic) + "/retention").status_code == 204

    def namespace_level() -> bool:
        try:
            return retention() == (60.0, 1024 * 1024)
        except KeyError:
            client.create_producer(topic).close()
            return False

    wait_for(namespace_level, within=30, message="the namespace's retention back on the ledger")
