"""The Spark driver's topic snapshot against a real ``braid standalone``: the DAG and the newest
positions describe one epoch, even when a split lands between fetching the two.

Found by ``bench/spark_bench.py``: a ``Trigger.AvailableNow`` query read 318,600 of 600,000 rows
and ended without an error after the auto-scaler split a segment. A snapshot that took the DAG
before the split and the positions after it saw the split segment as active with no position (the
checkpoint reports a sealed segment drained), so the query's target said it held nothing and its
children were not in the snapshot at all. No Spark is needed to show it: the snapshot is the
driver's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import braid
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.spark.offsets import BEGINNING, DRAINED
from braid.spark.topology import Position, Topology

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "topic://public/default/snapshot-race"


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


class SplitOnce(Topology):
    """The real topology, with a real split of segment 0 sent through the admin API between the
    first DAG fetch and the positions fetch: the interleaving the bench met by chance."""

    def __init__(self, client: braid.Client, admin: AdminClient) -> None:
        super().__init__(client, admin)
        self.admin = admin
        self.split_done = False

    def latest_positions(self, topic: str) -> dict[int, Position]:
        if not self.split_done:
            self.split_done = True
            self.admin.scalable_topics.split(topic, 0)
        return super().latest_positions(topic)


def test_a_split_between_the_dag_and_the_positions_does_not_shorten_the_snapshot(
    standalone: StandaloneProcess,
) -> None:
    with (
        AdminClient(standalone.web_url) as admin,
        braid.Client(standalone.service_url, operation_timeout=30) as client,
    ):
        admin.scalable_topics.create(TOPIC, segments=1)
        with client.create_producer(TOPIC) as producer:
            for i in range(50):
                producer.send(f"before-{i}".encode(), key=f"k{i}")
        topology = SplitOnce(client, admin)

        snapshot = topology.snapshot(TOPIC)

        assert topology.split_done
        # The snapshot is of the epoch after the split: segment 0 sealed (read to its end), its
        # two children present - not segment 0 "active and empty".
        assert snapshot.epoch == 1
        assert snapshot.segments[0].sealed
        children = sorted(sid for sid, view in snapshot.segments.items() if view.parents == (0,))
        assert len(children) == 2
        target = snapshot.everything()
        assert target.segments[0] == DRAINED
        assert all(target.segments[c] == BEGINNING for c in children)  # nothing written yet
