"""Backlog quotas on a scalable topic with Braid's client (issue 27, finding 3).

Finding 3 as filed first: a Stream consumer that never acknowledges while messages arrive, and
every message is accepted. Then a quota set on the scalable topic (``/admin/v2/scalable/...``)
counts the subscription's backlog over the whole segment DAG - sized so that no segment alone is
over it but the DAG is - and each policy applies: ``producer_exception`` and
``producer_request_hold`` refuse producers with Braid's ``ProducerBlockedQuotaExceeded...``
errors, and ``consumer_backlog_eviction`` moves the stream forward, oldest segment first.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import braid
from braid.broker.backlog_quota_manager import quota_units, subscription_backlog_bytes
from braid.clock import ManualClock
from tests.integration.client.conftest import ScalableBroker, StepGate
from tests.support.admin_server import serve_admin
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(120)

_PAYLOAD = b"y" * 200
_counter = itertools.count()


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScalableBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-quotas-scalable")
    clock = ManualClock(start_ms=int(time.time() * 1000))
    background = ScalableBroker(data_dir, StepGate(), broker_clock=clock).start()
    try:
        yield background
    finally:
        background.gate.release()
        background.stop()


@pytest.fixture(scope="module")
def admin_url(sbroker: ScalableBroker) -> Iterator[str]:
    with serve_admin(sbroker, sbroker.scalable) as url:
        yield url


@pytest.fixture
def client(sbroker: ScalableBroker) -> Iterator[braid.Client]:
    c = braid.Client(sbroker.service_url, operation_timeout=15)
    try:
        yield c
    finally:
        c.close()


def _dag_backlog(sbroker: ScalableBroker, topic: str, subscription: str) -> tuple[int, list[int]]:
    """The subscription's backlog bytes over the DAG, and per segment."""

    def measure() -> tuple[int, list[int]]:
        unit = quota_units(sbroker.service.topics)[topic]
        per_segment = [subscription_backlog_bytes([t]).get(subscription, 0) for t in unit]
        return subscription_backlog_bytes(unit)[subscription], per_segment

    result: tuple[int, list[int]] = sbroker.run(measure)
    return result


def _split_and_fill(
    sbroker: ScalableBroker, admin_url: str, client: braid.Client
) -> tuple[str, braid.StreamConsumer, braid.Producer]:
    """Finding 3: a stream that never acknowledges; 300 messages before a split, 300 after -
    all accepted."""
    topic = f"topic://public/default/quota-{next(_counter)}"
    base = f"{admin_url}/admin/v2/scalable/public/default/{topic.rsplit('/', 1)[1]}"
    assert httpx.put(base, json={"numInitialSegments": 1}).status_code in (200, 204)
    stream = client.subscribe_stream(topic, "never-acks", initial_position="earliest")
    producer = client.create_producer(topic)
    for i in range(300):
        producer.send(_PAYLOAD, key=f"k{i}")
    json_type = {"Content-Type": "application/json"}  # the admin API refuses other POSTs
    assert httpx.post(f"{base}/split/0", headers=json_type).status_code in (200, 204)
    for i in range(300):
        producer.send(_PAYLOAD, key=f"k{i}")
    producer.flush()
    return topic, stream, producer


def _set_quota(admin_url: str, topic: str, limit: int, policy: str) -> None:
    base = f"{admin_url}/admin/v2/scalable/public/default/{topic.rsplit('/', 1)[1]}"
    quota = {"limitSize": limit, "limitTime": -1, "policy": policy}
    url = f"{base}/backlogQuota?backlogQuotaType=destination_storage"
    assert httpx.post(url, json=quota).status_code == 204
    assert httpx.get(f"{base}/backlogQuotaMap").json()["destination_storage"]["policy"] == policy


def _quota_between_segment_and_dag(sbroker: ScalableBroker, topic: str) -> int:
    total, per_segment = _dag_backlog(sbroker, topic, "never-acks")
    assert len(per_segment) == 3  # the sealed parent and its two children
    limit = (max(per_segment) + total) // 2
    assert max(per_segment) < limit < total  # only the DAG's sum is over the quota
    return limit


def test_finding_3_without_a_quota_a_stream_that_never_acks_lets_every_message_in(
    sbroker: ScalableBroker, admin_url: str, client: braid.Client
) -> None:
    topic, stream, producer = _split_and_fill(sbroker, admin_url, client)  # 600 sends accepted
    total, per_segment = _dag_backlog(sbroker, topic, "never-acks")
    assert total == sum(per_segment) >= 600 * len(_PAYLOAD)
    producer.close()
    stream.close()


@pytest.mark.parametrize(
    ("policy", "error"),
    [
        ("producer_exception", braid.ProducerBlockedQuotaExceededException),
        ("producer_request_hold", braid.ProducerBlockedQuotaExceededError),
    ],
)
def test_a_producer_policy_refuses_producers_when_the_dag_backlog_is_over_the_quota(
    sbroker: ScalableBroker,
    admin_url: str,
    client: braid.Client,
    policy: str,
    error: type[Exception],
) -> None:
    topic, stream, producer = _split_and_fill(sbroker, admin_url, client)
    _set_quota(admin_url, topic, _quota_between_segment_and_dag(sbroker, topic), policy)
    acted = sbroker.call(sbroker.service.backlog_quotas.check_once())
    assert topic in acted
    with pytest.raises(error):
        client.create_producer(topic).send(b"refused", key="k1")
    # The stream catches up (a child's messages come once its parent is acknowledged):
    # producers are accepted again.
    received = 0
    while received < 600:
        batch = stream.receive_many(100, timeout=10)
        assert batch, f"the stream stalled after {received} messages"
        stream.acknowledge_cumulative(batch[-1])
        received += len(batch)
    wait_for(
        lambda: _dag_backlog(sbroker, topic, "never-acks")[0] == 0,
        within=10,
        message="the acknowledged backlog to reach the cursors",
    )
    client.create_producer(topic).send(b"accepted", key="k1")
    producer.close()
    stream.close()


def test_consumer_backlog_eviction_moves_the_stream_forward_oldest_segment_first(
    sbroker: ScalableBroker, admin_url: str, client: braid.Client
) -> None:
    topic, stream, producer = _split_and_fill(sbroker, admin_url, client)
    limit = _quota_between_segment_and_dag(sbroker, topic)
    _set_quota(admin_url, topic, limit, "consumer_backlog_eviction")
    _, before = _dag_backlog(sbroker, topic, "never-acks")
    sbroker.call(sbroker.service.backlog_quotas.check_once())
    total, per_segment = _dag_backlog(sbroker, topic, "never-acks")
    assert total <= limit
    # The excess came off the sealed parent (the oldest); the children kept theirs.
    assert per_segment[0] < before[0]
    assert per_segment[1:] == before[1:]
    producer.send(b"still-accepted", key="k1")  # eviction leaves producers alone
    producer.close()
    stream.close()
