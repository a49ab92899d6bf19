"""The connector from a Spark Connect client: a Connect server started with the ``pyspark``
package's ``start-connect-server.sh`` (its Python workers have Braid), and a client process
(``sc://``) that registers the braid data source and runs ``examples/spark_copy_job.py``: the
streaming source and sink, exactly once, resumed from the checkpoint, and a batch read."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from braid.admin.client import AdminClient
from tests.spark.helpers import Publisher, read_topic, values_in_order
from tests.spark.processes import ConnectServer
from tests.support.standalone import StandaloneProcess

pytest.importorskip("grpc", reason="Spark Connect's client needs the spark extra's grpcio")
pytest.importorskip("google.rpc", reason="Spark Connect's client needs googleapis-common-protos")
pytest.importorskip("pandas", reason="Spark Connect's client needs pandas")

pytestmark = pytest.mark.timeout(1200)  # two Spark jobs; a loaded 2-core machine is slow

JOB = Path(__file__).resolve().parents[2] / "examples" / "spark_copy_job.py"
SOURCE = "topic://public/connect/orders"
TARGET = "topic://public/connect/orders-copy"


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def run_client(server: ConnectServer, process: StandaloneProcess, cp: Path) -> dict[str, Any]:
    """The copy job as a Spark Connect client process; its JSON summary."""
    args = ["--remote", server.url, "--service-url", process.service_url]
    args += ["--admin-url", process.web_url, "--source", SOURCE, "--target", TARGET]
    args += ["--checkpoint", str(cp), "--max-records-per-trigger", "700"]
    done = subprocess.run(
        [sys.executable, str(JOB), *args],
        capture_output=True,
        text=True,
        timeout=540,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-6000:] + "\n" + server.log_tail()
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def test_a_spark_connect_client_streams_a_topic_into_another_exactly_once_across_restarts(
    connect_server: ConnectServer, standalone: StandaloneProcess, tmp_path: Path
) -> None:
    with AdminClient(standalone.web_url) as admin:
        admin.namespaces.create("public/connect")
        admin.namespaces.set_deduplication("public/connect", True)
        admin.scalable_topics.create(SOURCE, segments=2)
        admin.scalable_topics.create(TARGET, segments=2)
    publisher = Publisher(standalone, SOURCE)
    publisher.publish(1500)
    cp = tmp_path / "checkpoint"  # the server's file system: the same machine here

    first = run_client(connect_server, standalone, cp)
    assert sum(b["rows"] for b in first["batches"]) == 1500
    assert len([b for b in first["batches"] if b["rows"]]) >= 3  # maxRecordsPerTrigger=700
    assert first["source_rows"] == 1500  # the batch read, over Connect too

    publisher.publish(900)
    publisher.close()
    second = run_client(connect_server, standalone, cp)
    assert sum(b["rows"] for b in second["batches"]) == 900  # resumed from the checkpoint

    copied = read_topic(standalone, TARGET, 2400)
    assert len(copied) == 2400
    assert {m.value for m in copied} == publisher.expected()
    for key, counters in values_in_order(copied).items():
        assert counters == sorted(counters), key
