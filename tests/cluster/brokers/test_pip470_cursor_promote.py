"""PIP-470 "Phase 5: PROMOTE - Cursor PROMOTE (forwarded to topic owner)" on a cluster of
separate processes: three ``braid broker`` processes on one ZooKeeper chroot and its bookies
(``standalone``, the cluster they start with), plus a second storage cluster ``new`` of
``braid bookie`` processes in a chroot of its own (ADR 0061).

* The switch is driven from a broker that does not own the topic: the cursor's PROMOTE is
  forwarded to the owner's internal listener (the owner counts it served, the orchestrator
  forwarded), only ``bookieClusterName`` of the cursor node changes (I9), and the subscription
  resumes exactly at its cursor - on the owner, and on the next owner after the owner is
  SIGKILLed once CLEANUP deleted the old copies (so the cursor can only come from the new one).
* A topic no broker owns (its owner was SIGKILLed, its session expired, no client came back):
  the orchestrator CAS-rewrites the node itself, and the next owner resumes at the cursor.
* The owner dies between BUILD and PROMOTE after acknowledging more: the promoted cursor never
  goes back to the older copy - no acknowledged message is delivered again, none is lost.

Every message is keyed, produced without batching (one entry each) and read by one Exclusive
consumer, so "in the order produced" is per-key order too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from braid.admin import AdminClient
from braid.clusters.faults import SWITCH_FAULT_ENV
from braid.core.storage_switch import ItemStatus, SwitchPhase
from tests.cluster.brokers.conftest import MakeCluster
from tests.support.bookie_process import BookieProcess
from tests.support.broker_cluster import SESSION_TIMEOUT_S, Cluster
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for
from tests.support.switch_cluster import (
    HOME,
    NEW,
    counter,
    cursor_item,
    cursor_text,
    ledger_exists,
    new_cluster_bookies,
    persisted_cursor,
    switch_state,
)
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

#: Two bookies per cluster carry E/W/A 2/2/2 (fewer processes on a small machine).
SETTINGS = {
    "managedLedgerDefaultEnsembleSize": "2",
    "managedLedgerDefaultWriteQuorum": "2",
    "managedLedgerDefaultAckQuorum": "2",
}
SUB = "sub"
#: Within this the switch reaches CLEANUP, a lookup finds a new owner, ...
BOUND_S = 90.0

_chroots = iter(range(1_000_000))


@pytest.fixture
def new_bookies(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> Iterator[tuple[str, list[BookieProcess]]]:
    """The ``new`` storage cluster: its metadata URL and two bookies (started)."""
    url = zookeeper_server.url(f"/pip470-new-{next(_chroots)}")
    bookies = new_cluster_bookies(tmp_path, url, 2)
    try:
        for bookie in bookies:
            bookie.start()
        yield url, bookies
    finally:
        for bookie in bookies:
            bookie.stop()


def _send(producer: pulsar.Producer, numbers: range) -> None:
    for n in numbers:
        producer.send(str(n).encode(), partition_key=f"k{n % 5}")


def _subscribe(client: pulsar.Client, topic: str) -> pulsar.Consumer:
    return client.subscribe(
        topic,
        SUB,
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Earliest,
    )


def _receive_all(consumer: pulsar.Consumer, *, ack: bool, quiet_ms: int = 3_000) -> list[int]:
    """Every message until none comes for ``quiet_ms`` (the first may take a lookup)."""
    got: list[int] = []
    timeout = 60_000
    while True:
        try:
            message = consumer.receive(timeout_millis=timeout)
        except pulsar.Timeout:
            return got
        got.append(int(message.data()))
        if ack:
            consumer.acknowledge(message)
        timeout = quiet_ms


def _ack_with_holes(client: pulsar.Client, topic: str, received: int, acked: set[int]) -> None:
    """Receive ``received`` messages and acknowledge those in ``acked`` one by one."""
    consumer = _subscribe(client, topic)
    for n in range(received):
        message = consumer.receive(timeout_millis=60_000)
        assert int(message.data()) == n
        if n in acked:
            consumer.acknowledge(message)
    consumer.close()


def _wait_persisted(owner: BrokerProcess, urls: dict[str, str], topic: str) -> None:
    """Until the owner's cursor (in memory, internal stats) has every acknowledgement and the
    stores hold the same state (node and the last snapshot of its cursor ledger)."""
    with AdminClient(owner.web_url) as admin:

        def settled() -> bool:
            stats = admin.topics.internal_stats(topic)["cursors"][SUB]
            stored = persisted_cursor(urls, topic, SUB)
            return (
                stats["markDeletePosition"],
                stats["individuallyDeletedMessages"],
            ) == cursor_text(stored.state) and stored.node.cursors_ledger_id >= 0

        wait_for(settled, within=BOUND_S, interval=0.2, message="the acknowledgements persisted")
        stats = admin.topics.internal_stats(topic)["cursors"][SUB]
    assert stats["individuallyDeletedMessages"] != "[]", stats  # holes: ranges to preserve
    assert stats["numberOfEntriesSinceFirstNotAckedMessage"] > 0


def _fill(
    cluster: Cluster,
    client: pulsar.Client,
    producer: pulsar.Producer,
    urls: dict[str, str],
    sent: int,
    received: int,
    acked: set[int],
) -> BrokerProcess:
    """The subscription, ``sent`` messages, the first ``received`` received and ``acked`` of
    them acknowledged, persisted by the topic's owner (returned)."""
    topic = producer.topic()
    _ack_with_holes(client, topic, 0, set())  # the subscription, before the messages
    _send(producer, range(sent))
    _ack_with_holes(client, topic, received, acked)
    owner_url = cluster.owner_of(topic)
    assert owner_url is not None
    owner = cluster.by_url(owner_url)
    _wait_persisted(owner, urls, topic)
    return owner


def _switch(driver: BrokerProcess, new_url: str) -> None:
    with AdminClient(driver.web_url) as admin:
        admin.bookie_clusters.register(NEW, new_url, "STANDBY")
        admin.bookie_clusters.advance_idgen(NEW)
        admin.bookie_clusters.switch(NEW)


def _wait_phase(zk_url: str, *phases: SwitchPhase) -> None:
    def reached() -> bool:
        state = switch_state(zk_url)
        return state is not None and state.phase in phases

    wait_for(reached, within=BOUND_S, interval=0.2, message=f"the switch to reach {phases}")


def _cleanup_now(driver: BrokerProcess, zk_url: str) -> None:
    with AdminClient(driver.web_url) as admin:
        admin.bookie_clusters.cleanup(dry_run=False, force=True)
    _wait_phase(zk_url, SwitchPhase.DONE, SwitchPhase.DONE_WITH_FAILURES)
    state = switch_state(zk_url)
    assert state is not None and state.phase is SwitchPhase.DONE, state


def _started(make_cluster: MakeCluster) -> Cluster:
    cluster = make_cluster(extra=SETTINGS)
    cluster.start()
    return cluster


def test_pip470_phase5_cursor_promote_is_forwarded_to_the_topic_owner(
    make_cluster: MakeCluster, new_bookies: tuple[str, list[BookieProcess]]
) -> None:
    new_url, _ = new_bookies
    cluster = _started(make_cluster)
    urls = {HOME: cluster.zk_url, NEW: new_url}
    topic = "persistent://public/default/promote-forwarded"
    acked = set(range(25)) - {7, 13}
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(topic, batching_enabled=False)  # keeps it loaded
        owner = _fill(cluster, client, producer, urls, 60, 30, acked)
        owner_url = owner.service_url
        driver = next(b for b in cluster.brokers if b is not owner)
        before = persisted_cursor(urls, topic, SUB)
        assert before.node.bookie_cluster_name == HOME

        _switch(driver, new_url)
        _wait_phase(cluster.zk_url, SwitchPhase.CLEANUP)

        state = switch_state(cluster.zk_url)
        assert state is not None and state.origin == driver.web_url
        assert cursor_item(state, topic, SUB).status is ItemStatus.PROMOTED
        after = persisted_cursor(urls, topic, SUB)
        # I9: only the cluster name changed; the copy on `new` holds the same last snapshot.
        assert after.node == dataclasses.replace(before.node, bookie_cluster_name=NEW)
        assert after.snapshot == before.snapshot
        # The PROMOTE went through the owner: it served it, the orchestrator forwarded it.
        assert counter(owner, "migration_cursor_promote_served") >= 1
        assert counter(driver, "migration_cursor_promote_forwarded") >= 1
        assert counter(driver, "migration_cursor_promote_served") == 0
        assert counter(driver, "migration_cursor_promote_node") == 0

        # The owner goes on: its consumer resumes at the cursor and acknowledges more, which
        # the owner persists on `new` (nothing was fenced or rewritten behind its back).
        _send(producer, range(60, 80))  # now written on `new`
        consumer = _subscribe(client, topic)
        acked_now = {7} | set(range(25, 50))
        got: list[int] = []
        for _ in range(80 - len(acked)):
            message = consumer.receive(timeout_millis=60_000)
            got.append(int(message.data()))
            if got[-1] in acked_now:
                consumer.acknowledge(message)
        assert got == [n for n in range(80) if n not in acked]
        assert cluster.owner_of(topic) == owner_url
        consumer.close()  # flushes the client's grouped acknowledgements: all of them sent
        _wait_persisted(owner, urls, topic)
        producer.close()
        moved = persisted_cursor(urls, topic, SUB)
        assert moved.node.bookie_cluster_name == NEW
        assert moved.node.cursors_ledger_id != after.node.cursors_ledger_id  # its next ledger

        _cleanup_now(driver, cluster.zk_url)
        ledger = after.node.cursors_ledger_id
        assert not ledger_exists(urls, HOME, ledger)
    finally:
        client.close()

    # The owner dies: the next one loads the cursor from `new` and resumes exactly there.
    owner.kill()
    client = pulsar.Client(driver.service_url, operation_timeout_seconds=60)
    try:
        consumer = _subscribe(client, topic)
        assert _receive_all(consumer, ack=True) == [
            n for n in range(80) if n not in acked | acked_now
        ]
        assert cluster.owner_of(topic) != owner_url
    finally:
        client.close()


def test_pip470_phase5_cursor_promote_of_a_topic_no_broker_owns_rewrites_its_node(
    make_cluster: MakeCluster, new_bookies: tuple[str, list[BookieProcess]]
) -> None:
    new_url, _ = new_bookies
    cluster = _started(make_cluster)
    urls = {HOME: cluster.zk_url, NEW: new_url}
    topic = "persistent://public/default/promote-orphan"
    acked = set(range(15)) - {5}
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        owner = _fill(cluster, client, producer, urls, 40, 20, acked)
    finally:
        client.close()  # no client comes back: nobody loads the topic again
    before = persisted_cursor(urls, topic, SUB)
    owner.kill()
    wait_for(
        lambda: cluster.owner_of(topic) is None,
        within=SESSION_TIMEOUT_S + BOUND_S,
        interval=0.2,
        message="the dead owner's bundle to be unowned",
    )
    driver = cluster.live[0]

    _switch(driver, new_url)
    _wait_phase(cluster.zk_url, SwitchPhase.CLEANUP)

    state = switch_state(cluster.zk_url)
    assert state is not None
    assert cursor_item(state, topic, SUB).status is ItemStatus.PROMOTED
    after = persisted_cursor(urls, topic, SUB)
    assert after.node.cursors_ledger_id == before.node.cursors_ledger_id
    assert after.node.bookie_cluster_name == NEW
    assert after.snapshot == before.snapshot
    assert counter(driver, "migration_cursor_promote_node") >= 1
    assert all(counter(b, "migration_cursor_promote_served") == 0 for b in cluster.live)
    assert cluster.owner_of(topic) is None  # the switch did not take the bundle
    _cleanup_now(driver, cluster.zk_url)

    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        consumer = _subscribe(client, topic)
        assert _receive_all(consumer, ack=True) == [n for n in range(40) if n not in acked]
    finally:
        client.close()


def _topic_owned_elsewhere(
    cluster: Cluster, client: pulsar.Client, than: BrokerProcess
) -> tuple[str, pulsar.Producer]:
    """A topic whose owner is not ``than`` (lookups spread the bundles), with a producer."""
    for i in range(64):
        topic = f"persistent://public/default/promote-crash-{i}"
        producer = client.create_producer(topic, batching_enabled=False)
        owner = cluster.owner_of(topic)
        if owner is not None and owner != than.service_url:
            return topic, producer
        producer.close()
    raise AssertionError(f"every topic landed on {than.service_url}")


def test_pip470_failure_handling_cursor_owner_killed_mid_promote_keeps_every_acknowledgement(
    make_cluster: MakeCluster, new_bookies: tuple[str, list[BookieProcess]]
) -> None:
    """The orchestrator stops before PROMOTE (test-only fault point) with the cursor BUILT; the
    owner acknowledges more (its cursor ledger grows past the copy) and is SIGKILLed, then the
    orchestrator is. The broker that adopts the switch finds the topic owned by nobody, sees the
    source ledger ahead of the copy and keeps the newer snapshot (ROLLED_OVER): the next
    consumer gets exactly what was never acknowledged."""
    new_url, _ = new_bookies
    cluster = make_cluster(extra=SETTINGS, env={0: {SWITCH_FAULT_ENV: "PROMOTE"}})
    cluster.start()
    urls = {HOME: cluster.zk_url, NEW: new_url}
    driver = cluster.brokers[0]
    acked = set(range(25)) - {7, 13}
    acked_late = {7} | set(range(25, 40))
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        topic, producer = _topic_owned_elsewhere(cluster, client, driver)
        owner = _fill(cluster, client, producer, urls, 60, 30, acked)

        _switch(driver, new_url)
        _wait_phase(cluster.zk_url, SwitchPhase.PROMOTE)  # paused before its first step
        state = switch_state(cluster.zk_url)
        assert state is not None
        built = cursor_item(state, topic, SUB)
        assert built.status is ItemStatus.BUILT

        consumer = _subscribe(client, topic)
        for _ in range(60 - len(acked)):
            message = consumer.receive(timeout_millis=60_000)
            if int(message.data()) in acked_late:
                consumer.acknowledge(message)
        # Closing flushes the client's grouped acknowledgements: without it the owner's state
        # and the stores could agree on a prefix of them, and the rest land after the read.
        consumer.close()
        _wait_persisted(owner, urls, topic)
        late = persisted_cursor(urls, topic, SUB)
        assert late.node.cursors_ledger_id == built.ledger_id  # the copied ledger, grown
        assert late.node.bookie_cluster_name == HOME
        producer.close()
    finally:
        client.close()

    owner.kill()
    wait_for(
        lambda: cluster.owner_of(topic) is None,
        within=SESSION_TIMEOUT_S + BOUND_S,
        interval=0.2,
        message="the dead owner's bundle to be unowned",
    )
    driver.kill()
    _wait_phase(cluster.zk_url, SwitchPhase.CLEANUP)

    state = switch_state(cluster.zk_url)
    assert state is not None
    assert cursor_item(state, topic, SUB).status is ItemStatus.ROLLED_OVER
    folded = persisted_cursor(urls, topic, SUB)
    assert folded.node.cursors_ledger_id == -1  # the newest snapshot, kept in the node
    assert cursor_text(folded.node) == cursor_text(late.state)
    (survivor,) = cluster.live
    with AdminClient(survivor.web_url) as admin:  # it adopted the switch
        assert admin.bookie_clusters.status()["switch"]["origin"] == survivor.web_url
    assert counter(survivor, "migration_cursor_promote_node") >= 1

    client = pulsar.Client(survivor.service_url, operation_timeout_seconds=60)
    try:
        consumer = _subscribe(client, topic)
        assert _receive_all(consumer, ack=True) == [
            n for n in range(60) if n not in acked | acked_late
        ]
    finally:
        client.close()
