"""The Spark driver's topic snapshot against a real ``braid standalone``: one admin REST read
(``GET .../positions``, no client library in the planning process) gives the positions a client
reader started at "latest" would start after, and the DAG of the same epoch.

No Spark is needed: the snapshot is the driver's. (The race of a split between the DAG and the
positions is the broker's to handle: tests/integration/scalable/test_read_snapshot.py.)
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import braid
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.core.errors import NotFoundError, ServiceUnavailableError
from braid.spark.offsets import BEGINNING, DRAINED, SegmentProgress
from braid.spark.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "topic://public/default/snapshot"


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneProcess]:
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", log_path=tmp_path / "standalone.log"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


def test_the_rest_snapshot_has_the_positions_a_latest_reader_starts_after(
    standalone: StandaloneProcess,
) -> None:
    with (
        AdminClient(standalone.web_url) as admin,
        braid.Client(standalone.service_url, operation_timeout=30) as client,
    ):
        admin.scalable_topics.create(TOPIC, segments=3)
        with client.create_producer(TOPIC) as producer:
            producer.send_many([b"x"] * 40, keys=[f"k{i}" for i in range(40)])  # batched entries
            for i in range(10):
                producer.send(f"single-{i}".encode(), key=f"k{i}")
        topology = Topology(standalone.web_url, lambda: client)

        snapshot = topology.snapshot(TOPIC)
        reference = topology.latest_positions(TOPIC)  # a checkpoint consumer at latest

        assert admin.scalable_topics.positions(TOPIC) == topology.read_snapshot(TOPIC)
        assert snapshot.epoch == 0 and set(snapshot.segments) == {0, 1, 2}
        assert dict(snapshot.latest) == reference
        assert reference  # the keys spread over the segments: some hold data

        admin.scalable_topics.split(TOPIC, 0)
        after = topology.snapshot(TOPIC)

        assert after.epoch == 1 and after.segments[0].sealed
        children = sorted(sid for sid, view in after.segments.items() if view.parents == (0,))
        assert len(children) == 2
        target = after.everything()
        assert target.segments[0] == DRAINED  # read to its end, whatever it holds
        assert all(target.segments[c] == BEGINNING for c in children)  # nothing written yet
        assert target.segments[1] == (
            SegmentProgress(reference[1]) if 1 in reference else BEGINNING
        )


def test_a_missing_topic_and_an_unreachable_admin_url_are_typed_errors(
    standalone: StandaloneProcess,
) -> None:
    def no_client() -> braid.Client:
        raise AssertionError("a topic:// snapshot needs no client")

    with pytest.raises(NotFoundError, match="nope"):
        Topology(standalone.web_url, no_client).snapshot("topic://public/default/nope")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(ServiceUnavailableError):
            Topology(f"http://127.0.0.1:{port}", no_client).snapshot(TOPIC)
