"""Non-persistent topics on a ``braid standalone`` subprocess with the official client (ADR 0062):
the stats on Pulsar's REST path count what was dropped, operations on stored messages are refused
with 405, nothing reaches the disk and nothing is replayed after a restart, and a partitioned
non-persistent topic spreads over its partitions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pulsar
import pytest

from braid.cli.process import StandaloneProcess
from tests.support.polling import wait_for
from tests.support.standalone import (  # noqa: F401 - standalone_process is a pytest fixture
    official_client,
    standalone_process,
)

NP = "non-persistent://public/default"
ADMIN_NP = "/admin/v2/non-persistent/public/default"


@pytest.fixture
def client(standalone_process: StandaloneProcess) -> Iterator[pulsar.Client]:  # noqa: F811
    c = official_client(standalone_process)
    try:
        yield c
    finally:
        c.close()


def _get(process: StandaloneProcess, path: str) -> httpx.Response:
    return httpx.get(f"{process.web_url}{path}", timeout=30)


def _stats(process: StandaloneProcess, local: str) -> dict[str, Any]:
    response = _get(process, f"{ADMIN_NP}/{local}/stats")
    assert response.status_code == 200, response.text
    stats: dict[str, Any] = response.json()
    return stats


def test_stats_on_pulsars_path_count_what_no_consumer_had_room_for(
    standalone_process: StandaloneProcess,  # noqa: F811
    client: pulsar.Client,
) -> None:
    consumer = client.subscribe(f"{NP}/np-stats", "slow", receiver_queue_size=3)
    producer = client.create_producer(
        f"{NP}/np-stats", batching_enabled=False, producer_name="np-producer"
    )
    for i in range(10):
        producer.send(f"m{i}".encode())
    stats = _stats(standalone_process, "np-stats")
    sub = stats["subscriptions"]["slow"]
    assert (sub["msgDropCount"], sub["msgOutCounter"], stats["msgInCounter"]) == (7, 3, 10)
    assert sub["type"] == "Exclusive" and sub["msgBacklog"] == 0
    assert stats["storageSize"] == 0 and stats["msgDropRate"] == 0.0
    [publisher] = stats["publishers"]
    assert publisher["producerName"] == "np-producer"
    assert publisher["msgDropRate"] == 0.0 and publisher["msgInCounter"] == 10
    # msgDropRate: drops per second between stats reads at least a second apart.
    wait_for(
        lambda: _stats(standalone_process, "np-stats")["subscriptions"]["slow"]["msgDropRate"] > 0,
        within=30,
        message="a positive msgDropRate",
    )
    listed = _get(standalone_process, ADMIN_NP).json()
    assert listed == [f"{NP}/np-stats"]
    assert [consumer.receive(timeout_millis=10_000).data() for _ in range(3)] == [
        b"m0",
        b"m1",
        b"m2",
    ]


@pytest.mark.parametrize(
    ("method", "operation"),
    [
        ("GET", "subscription/sub/position/1"),
        ("POST", "subscription/sub/resetcursor/0"),
        ("POST", "subscription/sub/skip/1"),
        ("POST", "subscription/sub/expireMessages/10"),
        ("GET", "internalStats"),
        ("PUT", "compaction"),
        ("POST", "terminate"),
    ],
)
def test_operations_on_stored_messages_are_refused_with_405(
    standalone_process: StandaloneProcess,  # noqa: F811
    client: pulsar.Client,
    method: str,
    operation: str,
) -> None:
    client.subscribe(f"{NP}/np-refused", "sub")
    response = httpx.request(
        method,
        f"{standalone_process.web_url}{ADMIN_NP}/np-refused/{operation}",
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 405, response.text
    assert "non-persistent" in response.json()["reason"]


def test_stats_of_a_topic_nobody_uses_are_not_found(
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    response = _get(standalone_process, f"{ADMIN_NP}/np-never/stats")
    assert response.status_code == 404, response.text


def _files_holding(root: Path, marker: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and marker in p.read_bytes()]


def test_nothing_reaches_the_disk_and_nothing_is_replayed_after_a_restart(
    standalone_process: StandaloneProcess,  # noqa: F811
) -> None:
    marker = f"np-{uuid.uuid4().hex}".encode()
    client = official_client(standalone_process)
    try:
        consumer = client.subscribe(f"{NP}/np-restart", "keep")
        producer = client.create_producer(f"{NP}/np-restart", batching_enabled=False)
        for i in range(20):
            producer.send(marker + f"-{i}".encode())
        got = [consumer.receive(timeout_millis=10_000).data() for _ in range(20)]
        assert got == [marker + f"-{i}".encode() for i in range(20)]
        persistent = _get(standalone_process, "/admin/v2/persistent/public/default").json()
        assert not [t for t in persistent if "np-restart" in t]
    finally:
        client.close()
    standalone_process.stop()
    assert _files_holding(standalone_process.data_dir, marker) == []

    standalone_process.start()
    assert _get(standalone_process, ADMIN_NP).json() == []
    client = official_client(standalone_process)
    try:
        consumer = client.subscribe(f"{NP}/np-restart", "keep")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=1_000)  # nothing kept, nothing replayed
        producer = client.create_producer(f"{NP}/np-restart")
        producer.send(b"after")
        assert consumer.receive(timeout_millis=10_000).data() == b"after"
    finally:
        client.close()


def test_a_partitioned_non_persistent_topic_spreads_over_its_partitions(
    standalone_process: StandaloneProcess,  # noqa: F811
    client: pulsar.Client,
) -> None:
    url = f"{standalone_process.web_url}{ADMIN_NP}/np-parts/partitions"
    assert httpx.put(url, json=3, timeout=30).status_code == 204
    assert httpx.get(url, timeout=30).json() == {"partitions": 3}
    listed = _get(standalone_process, f"{ADMIN_NP}/partitioned").json()
    assert listed == [f"{NP}/np-parts"]
    consumer = client.subscribe(f"{NP}/np-parts", "all")
    producer = client.create_producer(f"{NP}/np-parts", batching_enabled=False)
    for i in range(30):
        producer.send(f"m{i}".encode(), partition_key=f"k{i}")
    got = [consumer.receive(timeout_millis=10_000) for _ in range(30)]
    assert sorted(m.data() for m in got) == sorted(f"m{i}".encode() for i in range(30))
    partitions = {m.topic_name() for m in got}
    assert len(partitions) > 1
    assert partitions <= {f"{NP}/np-parts-partition-{i}" for i in range(3)}
    producer.close()
    consumer.close()
    deleted = httpx.delete(url, timeout=30)
    assert deleted.status_code == 204, deleted.text
    assert httpx.get(url, timeout=30).json() == {"partitions": 0}
