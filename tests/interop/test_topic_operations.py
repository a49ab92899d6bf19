"""The ``pulsar-admin topics`` operations applications script against, through Pulsar's REST paths,
on messages the official client wrote (issue 31): internal stats, peek, examine, get by id,
reset-cursor (by time and by id), skip, clear-backlog and expire-messages, and the same cursor
moves on a partitioned topic (every partition)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pulsar
import pytest

from braid.protocol.batch import decode_batch
from tests.support.admin_server import serve_admin
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def admin(broker: BackgroundBroker) -> Iterator[httpx.Client]:
    with serve_admin(broker) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield http


def _path(topic: str) -> str:
    return "/admin/v2/persistent/" + topic.removeprefix("persistent://")


def _backlog(admin: httpx.Client, topic: str, sub: str = "sub") -> int:
    stats = admin.get(_path(topic) + "/stats").json()
    backlog: int = stats["subscriptions"][sub]["msgBacklog"]
    return backlog


def _post(admin: httpx.Client, path: str, body: object = None) -> None:
    if body is None:  # Pulsar's admin client sends these with a JSON content type, no body
        response = admin.post(path, headers={"Content-Type": "application/json"})
    else:
        response = admin.post(path, json=body)
    assert response.status_code == 204, response.text


@pytest.fixture
def ten(client: pulsar.Client, topic: str) -> list[pulsar.MessageId]:
    """``m0``..``m9`` on ``topic``, unbatched, with a durable subscription ``sub`` before them."""
    client.subscribe(topic, "sub").close()
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(f"m{i}".encode(), properties={"i": str(i)}) for i in range(10)]
    producer.close()
    return ids


def test_internal_stats_show_ledgers_and_the_subscription_cursor(
    admin: httpx.Client, topic: str, ten: list[pulsar.MessageId]
) -> None:
    stats = admin.get(_path(topic) + "/internalStats").json()
    assert stats["numberOfEntries"] == 10
    assert stats["lastConfirmedEntry"] == f"{ten[-1].ledger_id()}:{ten[-1].entry_id()}"
    assert [ledger["ledgerId"] for ledger in stats["ledgers"]][-1] == ten[-1].ledger_id()
    cursor = stats["cursors"]["sub"]
    assert cursor["numberOfEntriesSinceFirstNotAckedMessage"] == 10
    assert cursor["markDeletePosition"].split(":")[0] == str(ten[0].ledger_id())


def test_peek_examine_and_get_by_id_answer_payloads_with_pulsar_headers(
    admin: httpx.Client, topic: str, ten: list[pulsar.MessageId]
) -> None:
    first = admin.get(_path(topic) + "/subscription/sub/position/1")
    assert first.status_code == 200
    assert first.content == b"m0"
    assert first.headers["X-Pulsar-Message-ID"] == f"{ten[0].ledger_id()}:{ten[0].entry_id()}"
    assert first.headers["X-Pulsar-PROPERTY-i"] == "0"
    assert first.headers["X-Pulsar-sequence-id"] == "0"
    assert admin.get(_path(topic) + "/subscription/sub/position/3").content == b"m2"
    assert admin.get(_path(topic) + "/subscription/sub/position/11").status_code == 404
    assert admin.get(_path(topic) + "/subscription/nope/position/1").status_code == 404

    def examine(initial: str, n: int) -> bytes:
        params = {"initialPosition": initial, "messagePosition": str(n)}
        return admin.get(_path(topic) + "/examinemessage", params=params).content

    assert examine("earliest", 1) == b"m0"
    assert examine("earliest", 4) == b"m3"
    assert examine("latest", 1) == b"m9"
    assert examine("latest", 10) == b"m0"
    five = ten[5]
    by_id = admin.get(_path(topic) + f"/ledger/{five.ledger_id()}/entry/{five.entry_id()}")
    assert by_id.content == b"m5"
    assert admin.get(_path(topic) + f"/ledger/{five.ledger_id()}/entry/999").status_code == 404


def test_skip_reset_clear_and_expire_move_the_cursor_and_consumers_follow(
    client: pulsar.Client, admin: httpx.Client, topic: str, ten: list[pulsar.MessageId]
) -> None:
    sub = _path(topic) + "/subscription/sub"
    _post(admin, sub + "/skip/3")
    assert _backlog(admin, topic) == 7
    assert admin.get(sub + "/position/1").content == b"m3"

    _post(admin, sub + "/resetcursor/0")  # before every message: all of them again
    assert _backlog(admin, topic) == 10
    six = ten[6]
    _post(admin, sub + "/resetcursor", {"ledgerId": six.ledger_id(), "entryId": six.entry_id()})
    assert _backlog(admin, topic) == 4
    consumer = client.subscribe(topic, "sub")
    assert consumer.receive(timeout_millis=10_000).data() == b"m6"
    consumer.close()
    _post(
        admin,
        sub + "/resetcursor?isExcluded=true",
        {"ledgerId": six.ledger_id(), "entryId": six.entry_id()},
    )
    assert admin.get(sub + "/position/1").content == b"m7"

    _post(admin, sub + "/expireMessages/3600")  # nothing that old
    assert _backlog(admin, topic) == 3
    _post(admin, sub + "/skip_all")
    assert _backlog(admin, topic) == 0

    _post(admin, sub + "/resetcursor/0")
    assert _backlog(admin, topic) == 10

    def expired_all() -> bool:
        # Publish times are in ms: within the last one's millisecond it is not "before now" yet.
        _post(admin, _path(topic) + "/all_subscription/expireMessages/0")
        return _backlog(admin, topic) == 0

    wait_for(expired_all, within=10, message="every message expired")


def test_a_batch_peeks_as_one_payload_the_client_splits(
    client: pulsar.Client, admin: httpx.Client, topic: str
) -> None:
    client.subscribe(topic, "sub").close()
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000
    )
    for i in range(3):
        producer.send_async(f"b{i}".encode(), None)
    producer.flush()
    peeked = admin.get(_path(topic) + "/subscription/sub/position/1")
    assert peeked.headers["X-Pulsar-num-batch-message"] == "3"
    messages = decode_batch(peeked.content, 3)
    assert [m.payload for m in messages] == [b"b0", b"b1", b"b2"]


def test_cursor_moves_on_a_partitioned_topic_reach_every_partition(
    client: pulsar.Client, admin: httpx.Client
) -> None:
    topic = f"persistent://public/default/ops-partitioned-{time.monotonic_ns()}"
    assert admin.put(_path(topic) + "/partitions", json=3).status_code == 204
    client.subscribe(topic, "sub").close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(9):
        producer.send(f"p{i}".encode(), partition_key=f"k{i}")

    def total() -> int:
        return sum(_backlog(admin, f"{topic}-partition-{i}") for i in range(3))

    wait_for(lambda: total() == 9, within=30, message="nine messages in the backlogs")
    _post(admin, _path(topic) + "/subscription/sub/skip_all")
    assert total() == 0
    _post(admin, _path(topic) + "/subscription/sub/resetcursor/0")
    assert total() == 9
    # Reads name one partition.
    assert admin.get(_path(topic) + "/subscription/sub/position/1").status_code == 400
    one = admin.get(_path(topic + "-partition-0") + "/subscription/sub/position/1")
    assert one.status_code == 200 and one.content.startswith(b"p")
