"""Safe deletes with the official client (issue 27, finding 1): a topic, a partitioned topic, a
namespace or a tenant is not deleted from under its users without ``force=true``; a forced delete
disconnects them, and a producer that was connected does not bring the topic back where
auto-creation is off."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import httpx
import pulsar
import pytest

from braid.admin.app import create_app
from braid.admin.server import AdminServer
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

_names = itertools.count()


@pytest.fixture(scope="module")
def admin_url(broker: BackgroundBroker) -> Iterator[str]:
    """The interop broker's admin API, with forced namespace and tenant deletes allowed."""
    stack = broker.stack
    config = dataclasses.replace(
        stack.config, force_delete_namespace_allowed=True, force_delete_tenant_allowed=True
    )
    server = AdminServer(create_app(config, stack.resources, stack.service), "127.0.0.1", 0)
    broker.call(server.start())
    try:
        yield server.url
    finally:
        broker.call(server.stop())


@pytest.fixture
def strict_namespace(admin_url: str) -> str:
    """A namespace of its own tenant where auto topic creation is off."""
    tenant = f"safe-deletes-{next(_names)}"
    assert httpx.put(f"{admin_url}/admin/v2/tenants/{tenant}", json={}).status_code == 204
    policies = {"autoTopicCreationOverride": {"allowAutoTopicCreation": False}}
    response = httpx.put(f"{admin_url}/admin/v2/namespaces/{tenant}/ns", json=policies)
    assert response.status_code == 204, response.text
    return f"{tenant}/ns"


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def _topics(admin_url: str, namespace: str) -> list[str]:
    response = httpx.get(f"{admin_url}/admin/v2/persistent/{namespace}")
    assert response.status_code == 200, response.text
    return list(response.json())


@pytest.mark.timeout(90)
def test_delete_of_a_topic_with_a_producer_a_consumer_and_a_backlog_is_refused_unless_forced(
    client: pulsar.Client, admin_url: str, strict_namespace: str
) -> None:
    topic = f"persistent://{strict_namespace}/orders"
    assert httpx.put(admin_url + _path(topic)).status_code == 204
    # The finding as written: a live producer, a live consumer, 1,000 unconsumed messages.
    consumer = client.subscribe(topic, "audit", receiver_queue_size=10)
    producer = client.create_producer(topic, send_timeout_millis=3000, batching_enabled=False)
    for i in range(1000):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()

    refused = httpx.delete(admin_url + _path(topic))
    assert refused.status_code == 412, refused.text
    assert "1 connected producer(s) and 1 connected consumer(s)" in refused.json()["reason"]
    assert "force=true" in refused.json()["reason"]
    # Nothing was lost: the topic is there and the backlog is served in full.
    assert topic in _topics(admin_url, strict_namespace)
    received = [consumer.receive(timeout_millis=10_000).data() for _ in range(1000)]
    assert received == [f"m{i}".encode() for i in range(1000)]

    # force=true disconnects them and deletes; the stale producer's next send does not bring
    # the topic back where auto-creation is off (it fails as Pulsar's reconnect does).
    assert httpx.delete(admin_url + _path(topic), params={"force": "true"}).status_code == 204
    assert topic not in _topics(admin_url, strict_namespace)
    with pytest.raises(pulsar.PulsarException):
        producer.send(b"after the delete")
    assert topic not in _topics(admin_url, strict_namespace)
    assert httpx.get(admin_url + _path(topic) + "/stats").status_code == 404


@pytest.mark.timeout(60)
def test_delete_of_a_topic_without_clients_needs_no_force(
    client: pulsar.Client, admin_url: str, topic: str
) -> None:
    producer = client.create_producer(topic)
    producer.send(b"one")
    producer.close()
    assert httpx.delete(admin_url + _path(topic)).status_code == 204
    assert topic not in _topics(admin_url, "public/default")


@pytest.mark.timeout(60)
def test_delete_of_a_partitioned_topic_in_use_is_refused_unless_forced(
    client: pulsar.Client, admin_url: str, topic: str
) -> None:
    assert httpx.put(admin_url + _path(topic) + "/partitions", json=3).status_code == 204
    producer = client.create_producer(topic)
    producer.send(b"one")

    refused = httpx.delete(admin_url + _path(topic) + "/partitions")
    assert refused.status_code == 412, refused.text
    assert "partitioned topic" in refused.json()["reason"]
    assert httpx.get(admin_url + _path(topic) + "/partitions").json() == {"partitions": 3}

    forced = httpx.delete(admin_url + _path(topic) + "/partitions", params={"force": "true"})
    assert forced.status_code == 204, forced.text
    assert httpx.get(admin_url + _path(topic) + "/partitions").json() == {"partitions": 0}


@pytest.mark.timeout(60)
def test_namespace_and_tenant_deletes_name_their_topics_and_force_removes_them(
    client: pulsar.Client, admin_url: str, strict_namespace: str
) -> None:
    tenant = strict_namespace.split("/")[0]
    topic = f"persistent://{strict_namespace}/kept"
    assert httpx.put(admin_url + _path(topic)).status_code == 204
    consumer = client.subscribe(topic, "s")

    refused = httpx.delete(f"{admin_url}/admin/v2/namespaces/{strict_namespace}")
    assert refused.status_code == 409, refused.text
    assert topic in refused.json()["reason"]
    refused = httpx.delete(f"{admin_url}/admin/v2/tenants/{tenant}")
    assert refused.status_code == 409, refused.text
    assert "still has namespaces: ns" in refused.json()["reason"]

    forced = httpx.delete(f"{admin_url}/admin/v2/tenants/{tenant}", params={"force": "true"})
    assert forced.status_code == 204, forced.text
    assert httpx.get(f"{admin_url}/admin/v2/tenants/{tenant}").status_code == 404
    wait_for(lambda: not consumer.is_connected(), message="the consumer to be disconnected")


@pytest.mark.timeout(30)
def test_forced_namespace_delete_is_405_where_the_broker_does_not_allow_it(
    broker: BackgroundBroker, strict_namespace: str
) -> None:
    stack = broker.stack
    server = AdminServer(create_app(stack.config, stack.resources, stack.service), "127.0.0.1", 0)
    broker.call(server.start())
    try:
        url = f"{server.url}/admin/v2/namespaces/{strict_namespace}"
        refused = httpx.delete(url, params={"force": "true"})
        assert refused.status_code == 405, refused.text
        assert "forceDeleteNamespaceAllowed" in refused.json()["reason"]
        tenant_url = f"{server.url}/admin/v2/tenants/{strict_namespace.split('/')[0]}"
        refused = httpx.delete(tenant_url, params={"force": "true"})
        assert refused.status_code == 405, refused.text
        assert "forceDeleteTenantAllowed" in refused.json()["reason"]
    finally:
        broker.call(server.stop())
