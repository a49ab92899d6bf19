"""Issue 25, scalable topics across brokers (PIP-468, ADR 0051): three ``braid broker`` processes
over three ``braid bookie`` processes (E/W/A 3/2/2) on a real ZooKeeper, each a separate process,
keyed load through Braid's client (one producer, one Stream consumer: cumulative acks, per-key
order checked on every delivery).

* A scalable topic's segments are placed by bundle like any topic, so they end up on several
  brokers; every broker's DAG watch names each segment's real owner and the controller leader.
  The internal Segments API refuses a caller without the cluster's broker secret and is not in
  the public OpenAPI document.
* A split asked through a broker that does not lead (forwarded to the leader), whose children the
  leader creates on their owners, and a merge of two segments owned by different brokers, under
  load: nothing acknowledged is lost, no key goes backwards.
* SIGKILL of the controller leader's broker while its split (or its merge of two segments on two
  brokers) is stopped between sealing the parents and publishing the new layout
  (``BRAID_FAULT_PAUSE_AT=parents-terminated``): another broker takes the leadership over, rolls
  the operation forward (ADR 0021), every broker's DAG watch names it, the consumer's session is
  restored and the clients reconnect by themselves; then SIGKILL of a broker owning segments: its
  bundles move, the new owners recover (fence) the ledgers, and again nothing is lost or reordered.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import httpx
import pytest

import braid
from braid.admin import AdminClient
from braid.core.checkpoint import Checkpoint, CursorKind, checkpoint_cursors
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_from_metadata
from braid.core.names import SegmentTopicName, TopicName
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.cluster.brokers.conftest import MakeCluster
from tests.support.broker_cluster import SESSION_TIMEOUT_S, Cluster
from tests.support.broker_process import BrokerProcess
from tests.support.keyed_load import BraidKeyedLoad, LoadReport, run_until
from tests.support.polling import wait_for
from tests.support.raw_client import RawClient

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

#: After a killed broker's session expires (SESSION_TIMEOUT_S): a new controller leader's take-over
#: and recovery, new bundle owners' ledger recovery, the clients' reconnect back-off.
FAILOVER_BOUND_S = 45.0
#: Receipts to wait for between the steps of a test.
STEP = 150


def get_layout(broker: BrokerProcess, topic: str) -> SegmentLayout:
    with AdminClient(broker.web_url) as admin:
        return layout_from_metadata(admin.scalable_topics.get(topic))


def segment_names(topic: str, layout: SegmentLayout) -> dict[int, str]:
    parent = TopicName.parse(topic)
    return {
        s.segment_id: str(SegmentTopicName.of(parent, s.hash_range, s.segment_id).topic_name)
        for s in layout.active_segments
    }


def segment_owners(cluster: Cluster, topic: str, layout: SegmentLayout) -> dict[int, str | None]:
    return {sid: cluster.owner_of(name) for sid, name in segment_names(topic, layout).items()}


def adjacent_pair_on_two_brokers(layout: SegmentLayout, owners: dict[int, str | None]) -> list[int]:
    active = sorted(layout.active_segments, key=lambda s: s.hash_range.start)
    for low, high in itertools.pairwise(active):
        if owners[low.segment_id] != owners[high.segment_id]:
            return [low.segment_id, high.segment_id]
    raise AssertionError(f"every active segment has the same owner: {owners}")


async def _dag(broker: BrokerProcess, topic: str) -> pb.ScalableTopicDAG:
    raw = await RawClient.open(broker.host, broker.port)
    try:
        await raw.send(commands.scalable_topic_lookup(1, topic))
        update = await raw.next_command(
            lambda c: c.type == pb.BaseCommand.SCALABLE_TOPIC_UPDATE, within=30
        )
        return update.scalableTopicUpdate.dag
    finally:
        await raw.close()


def dag_placement(broker: BrokerProcess, topic: str) -> tuple[dict[int, str], str]:
    """``(segment id -> broker, controller leader)`` as ``broker``'s DAG watch tells a client."""
    dag = asyncio.run(_dag(broker, topic))
    return {b.segment_id: b.broker_url for b in dag.segment_brokers}, dag.controller_broker_url


def consumer_restored(broker: BrokerProcess, topic: str) -> bool:
    """Whether the controller leader (asked through ``broker``) has the load's Stream consumer
    ``s0`` registered and connected."""
    with AdminClient(broker.web_url) as admin:
        stats = admin.scalable_topics.stats(topic)
    coordinator = stats["subscriptions"].get("acceptance", {}).get("coordinator") or {}
    consumer = coordinator.get("consumers", {}).get("s0")
    return bool(stats["controller"]["isLeader"] and consumer and consumer["connected"])


def check(report: LoadReport) -> None:
    print(report.line())
    assert report.acknowledged > 0, report.line()
    assert report.lost == 0, report.line()
    assert report.reordered == 0, f"{report.line()}: {report.order_problems}"


def finish(load: BraidKeyedLoad) -> LoadReport:
    load.stop_producing()
    load.wait_delivered(120)
    for failure in load.producer.failed[:5]:  # not acknowledged, so not counted as lost
        print(f"failed send: {failure}")
    return load.report()


def more(load: BraidKeyedLoad, count: int, within: float, what: str) -> float:
    before = load.acked_count
    return run_until(lambda: load.acked_count >= before + count, within, what)


def test_segments_spread_over_brokers_and_split_and_merge_across_them(cluster: Cluster) -> None:
    cluster.start()
    topic = "topic://public/default/spread"
    with AdminClient(cluster.brokers[0].web_url) as admin:
        admin.scalable_topics.create(topic, segments=6)
    layout = get_layout(cluster.brokers[1], topic)
    owners = segment_owners(cluster, topic, layout)
    assert None not in owners.values(), owners  # the controller created each on its owner
    assert len(set(owners.values())) >= 2, owners

    # The internal listener serves brokers only; the public API has no Segments table.
    registry = cluster.registry()
    internal = registry[cluster.brokers[2].broker_id]["internalUrl"]
    segment = next(iter(segment_names(topic, layout).values())).removeprefix("segment://")
    with httpx.Client(timeout=30) as http:
        refused = http.get(f"{internal}/internal/v1/segments/{segment}")
        assert refused.status_code == 403, refused.text
        openapi = http.get(f"{cluster.brokers[2].web_url}/openapi.json").json()
    assert not [p for p in openapi["paths"] if "segments" in p or p.startswith("/internal")]

    load = BraidKeyedLoad(cluster.service_url, topic).start()
    try:
        more(load, STEP, 120, "receipts before the split")
        # Every broker's DAG watch names each segment's owner and the controller leader.
        leader = cluster.controller_leader(topic)
        assert leader in {b.service_url for b in cluster.brokers}
        for broker in cluster.brokers:
            brokers, controller = dag_placement(broker, topic)
            assert brokers == owners, (broker.broker_id, brokers, owners)
            assert controller == leader

        follower = next(b for b in cluster.brokers if b.service_url != leader)
        widest = max(layout.active_segments, key=lambda s: s.hash_range.end - s.hash_range.start)
        with AdminClient(follower.web_url) as admin:
            layout = layout_from_metadata(admin.scalable_topics.split(topic, widest.segment_id))
        children = [
            s.segment_id for s in layout.active_segments if widest.segment_id in s.parent_ids
        ]
        assert len(children) == 2
        more(load, STEP, 120, "receipts after the split")

        owners = segment_owners(cluster, topic, layout)
        pair = adjacent_pair_on_two_brokers(layout, owners)
        with AdminClient(follower.web_url) as admin:
            layout = layout_from_metadata(admin.scalable_topics.merge(topic, pair))
        more(load, STEP, 120, "receipts after the cross-broker merge")
        owners = segment_owners(cluster, topic, layout)
        assert len(set(owners.values())) >= 2, owners
        report = finish(load)
    finally:
        load.close()
    check(report)
    check_read_snapshot(cluster, topic, layout)


def check_read_snapshot(cluster: Cluster, topic: str, layout: SegmentLayout) -> None:
    """Every broker answers ``GET .../positions`` alike, each segment's last entry fetched from
    its owner: the positions a client reader started at "latest" starts after."""
    answers = []
    for broker in cluster.brokers:
        with AdminClient(broker.web_url) as admin:
            answers.append(admin.scalable_topics.positions(topic))
    assert all(a == answers[0] for a in answers), answers
    snapshot = answers[0]
    assert snapshot["epoch"] == layout.epoch
    with (
        braid.Client(cluster.service_url, operation_timeout=60) as client,
        client.create_checkpoint_consumer(topic, start=Checkpoint.latest()) as reader,
    ):
        cursors = checkpoint_cursors(reader.checkpoint()) or {}
    active = {s.segment_id for s in layout.active_segments}
    reference = {
        str(sid): [c.ledger_id, c.entry_id]
        for sid, c in cursors.items()
        if c.kind is CursorKind.AFTER and sid in active
    }
    found = {
        sid: s["lastConfirmed"]
        for sid, s in snapshot["segments"].items()
        if s["lastConfirmed"] is not None
    }
    assert found == reference
    assert {sid for sid, s in snapshot["segments"].items() if s["active"]} == {
        str(sid) for sid in active
    }


@pytest.mark.parametrize("operation", ["split", "merge"])
def test_killing_the_controller_leader_and_a_segment_owner_loses_nothing(
    make_cluster: MakeCluster, operation: str
) -> None:
    # Broker 0 stops any split or merge it leads after sealing the parents, before publishing
    # the new layout.
    cluster = make_cluster(env={0: {"BRAID_FAULT_PAUSE_AT": "parents-terminated"}})
    cluster.start()
    first, second, third = cluster.brokers
    topic = f"topic://public/default/failover-{operation}"
    with AdminClient(first.web_url) as admin:
        admin.scalable_topics.create(topic, segments=4)
        admin.scalable_topics.stats(topic)  # starts broker 0's controller: the first, it leads
    assert cluster.controller_leader(topic) == first.service_url

    load = BraidKeyedLoad(cluster.service_url, topic).start()
    try:
        more(load, STEP, 120, "receipts before the kills")
        layout = get_layout(second, topic)
        if operation == "split":
            parents = [layout.active_segments[0].segment_id]
        else:  # two neighbours on two brokers
            parents = adjacent_pair_on_two_brokers(layout, segment_owners(cluster, topic, layout))
        in_flight = _in_background(second, topic, operation, parents)
        wait_for(
            lambda: "fault point parents-terminated reached" in first.output(),
            within=60,
            message=f"the leader to stop its {operation} after sealing the parents",
        )
        first.kill()
        gap = more(load, STEP, SESSION_TIMEOUT_S + FAILOVER_BOUND_S, "receipts after the kill")
        print(f"receipts resumed {gap:.1f}s after the SIGKILL of the controller leader")
        wait_for(
            lambda: cluster.controller_leader(topic) in {second.service_url, third.service_url},
            within=SESSION_TIMEOUT_S + FAILOVER_BOUND_S,
            message="a live broker to lead the topic's controller",
        )
        wait_for(
            lambda: (
                not set(parents) & {s.segment_id for s in get_layout(second, topic).active_segments}
            ),
            within=FAILOVER_BOUND_S,
            message=f"the new leader to roll the interrupted {operation} forward",
        )
        in_flight.join(60)
        more(load, STEP, FAILOVER_BOUND_S, f"receipts after the {operation} was recovered")
        leader = cluster.controller_leader(topic)
        for broker in (second, third):  # watchers are told where the controller went
            wait_for(
                lambda b=broker: dag_placement(b, topic)[1] == leader,  # type: ignore[misc]
                within=30,
                message=f"{broker.broker_id}'s DAG watch to name the new controller leader",
            )

        wait_for(
            lambda: consumer_restored(second, topic),
            within=60,
            message="the new leader to have the Stream consumer's session, connected",
        )

        layout = get_layout(second, topic)
        owners = segment_owners(cluster, topic, layout)
        leader = cluster.controller_leader(topic)
        owner_url = next(
            (url for url in owners.values() if url and url != leader),
            next(url for url in owners.values() if url),
        )
        owner = cluster.by_url(owner_url)
        owner.kill()
        gap = more(load, STEP, SESSION_TIMEOUT_S + FAILOVER_BOUND_S, "receipts after the kill")
        print(f"receipts resumed {gap:.1f}s after the SIGKILL of a segment owner")
        report = finish(load)
    finally:
        load.close()
    check(report)
    survivor = cluster.live[0]
    final = segment_owners(cluster, topic, get_layout(survivor, topic))
    assert set(final.values()) == {survivor.service_url}, final
    assert dag_placement(survivor, topic) == (final, survivor.service_url)


class _Background:
    """A blocking call run on a thread (its outcome kept, never raised)."""

    def __init__(self, call: Any) -> None:
        self.outcome: object = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Any) -> None:
        try:
            self.outcome = call()
        except Exception as exc:  # the leader dies under it: an error answer is expected
            self.outcome = exc

    def join(self, within: float) -> None:
        self._thread.join(within)


def _in_background(
    broker: BrokerProcess, topic: str, operation: str, segments: list[int]
) -> _Background:
    def call() -> object:
        with AdminClient(broker.web_url, timeout=120) as admin:
            if operation == "split":
                return admin.scalable_topics.split(topic, segments[0])
            return admin.scalable_topics.merge(topic, segments)

    return _Background(call)
