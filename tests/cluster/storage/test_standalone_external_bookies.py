"""A broker with no bookie of its own (``--bookies 0``): it stores through the ``braid bookie``
processes registered in ZooKeeper, and the official client produces and consumes in order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.bookie_process import BookieProcess
from tests.support.standalone import StandaloneProcess, official_client

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def test_a_broker_on_external_bookie_processes_produces_and_consumes(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    three = [bookies(f"bk-{i}") for i in range(3)]
    for bookie in three:
        bookie.start()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metadataStoreUrl={zk_url}\nstandaloneBookies=0\n")
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data",
        extra_args=["--config", str(conf)],
        log_path=tmp_path / "standalone.log",
        timeout=60,
    )
    try:
        assert not any((tmp_path / "data").glob("bookie-*")), "no bookie of its own"
        client = official_client(process)
        try:
            topic = "persistent://public/default/external-bookies"
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic)
            for i in range(100):
                producer.send(f"m-{i}".encode(), partition_key=f"k{i % 7}")
            got = []
            for _ in range(100):
                msg = consumer.receive(timeout_millis=10_000)
                got.append(msg.data().decode())
                consumer.acknowledge(msg)
            assert got == [f"m-{i}" for i in range(100)]
        finally:
            client.close()
    finally:
        process.stop()
