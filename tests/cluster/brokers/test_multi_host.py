"""Issue 25 acceptance, multi-host: ZooKeeper, 3 bookies (E=3, W=2, A=2) and 3 brokers, each in a
network namespace of its own with its own address
(:class:`tests.support.multi_host.MultiHostCluster`,
made by the test as root); the test's clients in the root namespace reach them over the lab's
bridge.

Keyed load through the official ``pulsar-client`` on a persistent topic (Exclusive), a persistent
topic (Key_Shared, 2 consumers) and a partitioned topic of 4 partitions (Failover, 2 consumers),
and through Braid's client on a scalable topic of 4 segments (a Stream subscription) whose
segments are split and merged all along (one operation per 150 receipts, through each broker's
admin API in turn), while the test

1. SIGKILLs the broker serving the Exclusive topic, then restarts it (as a supervisor would);
2. SIGKILLs the broker leading the scalable topic's controller, then restarts it;
3. takes the link of the broker serving the Exclusive topic down for 20 s (packets dropped), then
   brings it back: its ZooKeeper session expired meanwhile, so it exits 1 when it learns so; it is
   restarted.

After each fault every load makes progress again with the same clients (they recover by
themselves). At the end: 0 acknowledged messages lost, per-key order kept for every
subscription, and :class:`tests.support.multi_host.ServingMonitor` never saw a topic (segments
included) loaded on two brokers with live sessions, nor on a broker not holding the topic's
bundle lock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, cast

import pulsar
import pytest

from braid.admin import AdminClient
from tests.support.keyed_load import BraidKeyedLoad, LoadReport, OfficialKeyedLoad, run_until
from tests.support.layout_churn import LayoutChurn
from tests.support.multi_host import HostBroker, MultiHostCluster, ServingMonitor
from tests.support.netns import NetworkLab
from tests.support.netns import missing_requirement as netns_missing
from tests.support.zookeeper import missing_requirement as zk_missing

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.timeout(900),
    pytest.mark.skipif(zk_missing() is not None, reason=str(zk_missing())),
    pytest.mark.skipif(netns_missing() is not None, reason=str(netns_missing())),
]

SESSION_TIMEOUT_S = 4.0
#: After a dead or cut-off owner's session expires: the clients' reconnect back-off and lookups,
#: the new owner's ledger recovery; generous for a loaded 2-core machine.
RECOVERY_BOUND_S = 90.0
CUT_S = 20.0
STEP = 200  # receipts each load must add after each fault

SETTINGS = {
    "metadataStoreSessionTimeoutMillis": str(int(SESSION_TIMEOUT_S * 1000)),
    "managedLedgerDefaultEnsembleSize": "3",
    "managedLedgerDefaultWriteQuorum": "2",
    "managedLedgerDefaultAckQuorum": "2",
    "managedLedgerMaxEntriesPerLedger": "100",
    "defaultRetentionTimeInMinutes": "-1",
    "defaultRetentionSizeInMB": "-1",
}
EXCLUSIVE = "persistent://public/default/mh-exclusive"
KEY_SHARED = "persistent://public/default/mh-key-shared"
PARTITIONED = "persistent://public/default/mh-partitioned"
SCALABLE = "topic://public/default/mh-scalable"
CHURN_EVERY = 150  # the scalable load's receipts between two splits or merges


class KeyedLoad(Protocol):
    """What the test needs of a load (``OfficialKeyedLoad`` and ``BraidKeyedLoad`` both are)."""

    @property
    def acked_count(self) -> int: ...

    def stop_producing(self) -> None: ...

    def wait_delivered(self, within: float = 60.0) -> None: ...

    def report(self) -> LoadReport: ...

    def close(self) -> None: ...


def official_loads(cluster: MultiHostCluster) -> dict[str, KeyedLoad]:
    with AdminClient(cluster.brokers[0].web_url) as admin:
        admin.topics.create_partitioned(PARTITIONED, 4)
    url = cluster.service_url
    kinds = pulsar.ConsumerType
    return {
        "exclusive": OfficialKeyedLoad(url, EXCLUSIVE, consumer_type=kinds.Exclusive).start(),
        "key_shared": OfficialKeyedLoad(
            url, KEY_SHARED, consumers=2, consumer_type=kinds.KeyShared
        ).start(),
        "failover_partitioned": OfficialKeyedLoad(
            url, PARTITIONED, consumers=2, consumer_type=kinds.Failover
        ).start(),
    }


class ScalableLoad:
    """The Braid client's keyed load on a scalable topic (a Stream subscription) with splits and
    merges kept in flight (:class:`tests.support.layout_churn.LayoutChurn`, one operation per
    ``every`` receipts through the brokers' admin APIs in turn) until production stops."""

    def __init__(self, cluster: MultiHostCluster, topic: str) -> None:
        self.load = BraidKeyedLoad(cluster.service_url, topic)
        self.churn = LayoutChurn(
            topic,
            lambda: [b.web_url for b in cluster.live()],
            lambda: self.load.acked_count,
            every=CHURN_EVERY,
        )

    def start(self) -> ScalableLoad:
        self.load.start()
        self.churn.start()
        return self

    @property
    def acked_count(self) -> int:
        return self.load.acked_count

    def stop_producing(self) -> None:
        self.churn.stop()
        print(self.churn.line())
        for url, error in self.churn.failed[:10]:
            print(f"  failed through {url}: {error[:200]}")
        self.load.stop_producing()
        for failure in self.load.producer.failed[:10]:  # not acknowledged: not counted as lost
            print(f"  failed send: {failure[:300]}")

    def wait_delivered(self, within: float = 60.0) -> None:
        self.load.wait_delivered(within)

    def report(self) -> LoadReport:
        return self.load.report()

    def close(self) -> None:
        self.load.close()


def scalable_loads(cluster: MultiHostCluster) -> dict[str, KeyedLoad]:
    """The Braid client's load on a scalable topic of 4 segments, splits and merges in flight."""
    with AdminClient(cluster.brokers[0].web_url) as admin:
        admin.scalable_topics.create(SCALABLE, segments=4)
    return {"scalable_stream": ScalableLoad(cluster, SCALABLE).start()}


class Loads:
    """Every load of the test, made progress-checked together."""

    def __init__(self, loads: dict[str, KeyedLoad]) -> None:
        self.loads = loads

    def counts(self) -> dict[str, int]:
        return {name: load.acked_count for name, load in self.loads.items()}

    def wait_more(self, each: int, within: float, what: str) -> float:
        start = self.counts()
        took = run_until(
            lambda: all(load.acked_count >= start[n] + each for n, load in self.loads.items()),
            within,
            lambda: (
                f"{each} more receipts on every load ({what}); at {self.counts()}, from {start}"
            ),
        )
        print(f"{what}: every load +{each} receipts after {took:.1f}s")
        return took

    def finish(self) -> dict[str, LoadReport]:
        for load in self.loads.values():
            load.stop_producing()
        for load in self.loads.values():
            load.wait_delivered(120)
        return {name: load.report() for name, load in self.loads.items()}

    def close(self) -> None:
        for load in self.loads.values():
            load.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MultiHostCluster]:
    with NetworkLab() as lab:
        made = MultiHostCluster(lab, tmp_path, SETTINGS)
        try:
            made.start()
            yield made
        finally:
            made.close()


def _kill_and_restart(
    cluster: MultiHostCluster, victim: HostBroker, loads: Loads, what: str
) -> None:
    victim.kill()
    loads.wait_more(STEP, SESSION_TIMEOUT_S + RECOVERY_BOUND_S, f"after SIGKILL of {what}")
    victim.start(timeout=120)
    run_until(
        lambda: len(cluster.registered()) == 3, 60, f"{what} to register again after its restart"
    )


def _cut_and_restore(cluster: MultiHostCluster, victim: HostBroker, loads: Loads) -> None:
    cluster.lab.cut(victim.lab_host)
    cut_at = time.monotonic()
    # The fault lasts CUT_S; meanwhile the victim's ZooKeeper session expires on the server.
    run_until(
        lambda: time.monotonic() - cut_at >= CUT_S and victim.broker_id not in cluster.registered(),
        CUT_S + 30,
        "the cut to last 20 s and the cut broker's registration to expire",
    )
    cluster.lab.restore(victim.lab_host)
    # Reconnected, its metadata client learns the session expired: it drops its bundles, exits 1.
    restored_at = time.monotonic()
    run_until(lambda: not victim.running, 90, "the cut-off broker to exit")
    print(
        f"the cut-off broker exited {time.monotonic() - restored_at:.1f}s after its link came back"
    )
    assert victim.stop() == 1
    print(victim.output().splitlines()[-1])
    loads.wait_more(STEP, RECOVERY_BOUND_S, "after the cut broker's link came back")
    victim.start(timeout=120)
    run_until(lambda: len(cluster.registered()) == 3, 60, "the cut broker to register again")


def test_three_hosts_of_brokers_survive_two_kills_and_a_cut_link_without_losing_a_message(
    cluster: MultiHostCluster,
) -> None:
    monitor = ServingMonitor(cluster).start()
    scalable = scalable_loads(cluster)
    loads = Loads({**official_loads(cluster), **scalable})
    try:
        loads.wait_more(STEP, 120, "before any fault")
        _kill_and_restart(
            cluster, cluster.owner_of(EXCLUSIVE), loads, "the Exclusive topic's owner"
        )
        controller = cluster.controller_leader(SCALABLE)
        assert controller is not None, "the scalable topic's controller has no leader"
        _kill_and_restart(cluster, controller, loads, "the controller leader's broker")
        _cut_and_restore(cluster, cluster.owner_of(EXCLUSIVE), loads)
        loads.wait_more(STEP, RECOVERY_BOUND_S, "with every broker back")
        reports = loads.finish()
    finally:
        loads.close()
        serving = monitor.stop()
    for name, report in reports.items():
        print(f"{name}: {report.line()}")
    print(serving.line())
    for report in reports.values():
        assert report.acknowledged >= 4 * STEP, report.line()
        assert report.lost == 0, report.line()
        assert report.reordered == 0, f"{report.line()}: {report.order_problems}"
        assert report.failed == 0, report.line()  # every client recovered by itself
    assert serving.samples > 20
    assert serving.violations == [], serving.violations[:10]
    assert serving.not_owner == [], serving.not_owner[:10]
    assert len(serving.brokers_serving) >= 2, serving.line()
    churn = cast(ScalableLoad, scalable["scalable_stream"]).churn
    assert any(op.startswith("split") for op in churn.done), churn.line()
    assert any(op.startswith("merge") for op in churn.done), churn.line()
    assert len(serving.segment_brokers) >= 2, serving.line()  # the segments spread
