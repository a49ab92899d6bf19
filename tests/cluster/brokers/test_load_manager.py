"""Issue 25, the load manager: unloads, splits, shedding and the SIGTERM hand-over, with
ZooKeeper, three ``braid bookie`` processes and three ``braid broker`` processes (each its own
process).

* Unloading a bundle under keyed load from the official client moves its topic to another
  broker; the clients follow without an error and no acknowledged message is lost or reordered.
* ``split-bundle`` cuts a bundle in two: the namespace has one bundle more, every range has one
  owner at most, and the topic keeps being served.
* ThresholdShedder moves bundles off a broker whose load is above the others' (a low threshold
  and a tiny NIC speed make the traffic of one broker "overload").
* SIGTERM on the owner of a topic under keyed load: the broker hands its bundles over, exits 0
  within ``brokerShutdownTimeoutMs``, and the clients continue on other brokers with nothing lost.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from braid.admin import AdminClient
from braid.broker.bundles import NamespaceBundle, NamespaceBundles
from braid.broker.ownership import OwnerData
from braid.cli.process import StandaloneStartError
from braid.core.names import TopicName
from braid.metadata import open_store
from braid.security import tokens
from braid.security.credentials import ClientCredentials
from tests.support.bookie_process import BookieProcess
from tests.support.broker_cluster import CLUSTER, Cluster, http_lookup
from tests.support.broker_cluster import broker_settings as _settings
from tests.support.broker_process import BrokerProcess, initialize_cluster
from tests.support.keyed_load import LoadReport, OfficialKeyedLoad, run_until
from tests.support.polling import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(360)]

NAMESPACE = "public/default"
BUNDLES = 16
#: The official client's token plugin (brokerClientAuthenticationPlugin).
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
#: Load-manager settings of these tests: reports every 0.5 s, rounds every 1.2 s.
FAST = {
    "loadBalancerReportUpdateMinIntervalMillis": "500",
    "loadBalancerReportUpdateThresholdPercentage": "0",
    "loadBalancerSheddingIntervalMinutes": "0.02",
    "brokerShutdownTimeoutMs": "30000",
}


class LoadCluster(Cluster):
    """The many-brokers cluster with the load manager's settings added."""

    def __init__(
        self,
        tmp_path: Path,
        zk_url: str,
        bookies: list[BookieProcess],
        extra: dict[str, str],
        *,
        listeners: bool = False,
    ) -> None:
        super().__init__(tmp_path, zk_url, bookies)
        self.settings = {**_settings(zk_url), **FAST, **extra}
        self.tmp_path = tmp_path
        self.listeners = listeners
        self.brokers = [self._new(f"lm-broker-{i}") for i in range(3)]

    def _new(self, name: str) -> BrokerProcess:
        broker = BrokerProcess(self.tmp_path / name, dict(self.settings))
        if self.listeners:
            # The same port under two names: `external` clients resolve "localhost".
            broker.settings["advertisedListeners"] = (
                f"internal:pulsar://127.0.0.1:{broker.port},"
                f"external:pulsar://localhost:{broker.port}"
            )
        return broker

    def start(self) -> None:
        for bookie in self.bookies:
            bookie.start()
        first = self.brokers[0]
        initialize_cluster(CLUSTER, self.zk_url, first.web_url, first.service_url, bundles=BUNDLES)
        for i in range(len(self.brokers)):
            self.start_broker(i)

    def start_broker(self, i: int) -> BrokerProcess:
        """Start broker ``i``, on new ports if another process took one meanwhile."""
        for attempt in range(3):
            try:
                self.brokers[i].start(timeout=90)
                return self.brokers[i]
            except StandaloneStartError as exc:
                if "address in use" not in str(exc) or attempt == 2:
                    raise
                self.brokers[i] = self._new(f"lm-broker-{i}-{attempt}")
        raise AssertionError("unreachable")

    def cli(self, broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "braid.cli.main", "admin", "--url", broker.web_url, *args],
            capture_output=True,
            text=True,
            env=broker.env,
            timeout=120,
            check=False,
        )


def _make(
    tmp_path: Path,
    zk_url: str,
    bookies: Callable[..., BookieProcess],
    extra: dict[str, str],
    *,
    listeners: bool = False,
) -> LoadCluster:
    made = [bookies(f"bk-{i}") for i in range(3)]
    return LoadCluster(tmp_path, zk_url, made, extra, listeners=listeners)


@pytest.fixture
def cluster(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> Iterator[LoadCluster]:
    made = _make(tmp_path, zk_url, bookies, {"loadBalancerSheddingEnabled": "false"})
    try:
        yield made
    finally:
        made.stop()


async def _owners(zk_url: str) -> dict[str, str]:
    store = await open_store(zk_url)
    try:
        found = {}
        for name in await store.children(f"/namespace/{NAMESPACE}"):
            got = await store.get(f"/namespace/{NAMESPACE}/{name}")
            if got is not None:
                owner = OwnerData.decode(got[0])
                assert owner is not None
                found[name] = owner.native_url
        return found
    finally:
        await store.close()


def owners(zk_url: str) -> dict[str, str]:
    """Bundle range -> owner's service URL, from the ownership nodes."""
    return asyncio.run(_owners(zk_url))


def assert_one_owner_per_range(nodes: dict[str, str]) -> None:
    ranges = sorted(NamespaceBundle.parse(NAMESPACE, name) for name in nodes)
    for a, b in itertools.pairwise(ranges):
        assert a.upper <= b.lower, f"overlapping owned ranges {a.range_name} and {b.range_name}"


def finish(load: OfficialKeyedLoad) -> LoadReport:
    """Stop producing, wait for every acknowledged message to be delivered; the counts."""
    load.stop_producing()
    load.wait_delivered(90)
    return load.report()


def assert_nothing_lost(report: LoadReport) -> None:
    print(report.line())
    assert report.failed == 0, report.line()
    assert report.lost == 0, report.line()
    assert report.reordered == 0, f"{report.line()}: {report.order_problems}"


def bundle_of(topic: str, bundles: NamespaceBundles) -> str:
    return bundles.find(TopicName.parse(topic)).range_name


def current_bundles(
    broker: BrokerProcess, credentials: ClientCredentials | None = None
) -> NamespaceBundles:
    with AdminClient(broker.web_url, credentials=credentials) as admin:
        doc = admin.namespaces.bundles(NAMESPACE)
    return NamespaceBundles(NAMESPACE, tuple(int(b, 16) for b in doc["boundaries"]))


def test_unloading_a_bundle_moves_its_topic_to_another_broker_without_losing_a_message(
    cluster: LoadCluster,
) -> None:
    cluster.start()
    topic = "persistent://public/default/moving"
    bundles = current_bundles(cluster.brokers[1])
    assert len(bundles.bundles) == BUNDLES
    load = OfficialKeyedLoad(cluster.service_url, topic).start()
    try:
        run_until(lambda: load.acked_count >= 300, 90, "300 receipts before the unload")
        first = http_lookup(cluster.brokers[0], topic)
        other = next(b for b in cluster.brokers if b.service_url != first)
        # Through the CLI, on a broker that does not own the bundle (307 to the owner).
        unloaded = cluster.cli(
            other, "namespaces", "unload", NAMESPACE, "--bundle", bundle_of(topic, bundles)
        )
        assert unloaded.returncode == 0, unloaded.stderr
        before = load.acked_count
        wait_for(
            lambda: http_lookup(cluster.brokers[2], topic) not in ("", first),
            within=60,
            message="the topic to be served by another broker",
        )
        gap = run_until(
            lambda: load.acked_count >= before + 300, 90, "300 more receipts after the unload"
        )
        print(f"receipts continued {gap:.1f}s after the unload")
        second = http_lookup(cluster.brokers[0], topic)
        assert second != first
        report = finish(load)
    finally:
        load.close()
    assert_nothing_lost(report)
    assert_one_owner_per_range(owners(cluster.zk_url))


def test_split_bundle_cuts_a_bundle_in_two_and_keeps_one_owner_per_range(
    cluster: LoadCluster,
) -> None:
    cluster.start()
    topic = "persistent://public/default/split-me"
    client = pulsar.Client(cluster.service_url, operation_timeout_seconds=60)
    try:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"before")
        bundles = current_bundles(cluster.brokers[0])
        parent = bundle_of(topic, bundles)
        listed = cluster.cli(
            cluster.brokers[2], "--output", "json", "namespaces", "bundles", NAMESPACE
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["numBundles"] == BUNDLES
        split = cluster.cli(
            cluster.brokers[2], "namespaces", "split-bundle", NAMESPACE, "--bundle", parent
        )
        assert split.returncode == 0, split.stderr
        after = current_bundles(cluster.brokers[1])
        assert len(after.bundles) == BUNDLES + 1
        assert parent not in {b.range_name for b in after.bundles}
        nodes = owners(cluster.zk_url)
        assert parent not in nodes
        assert_one_owner_per_range(nodes)
        producer.send(b"after")
        got = [consumer.receive(timeout_millis=60_000).data() for _ in range(2)]
        assert got == [b"before", b"after"]
        # The topic's new bundle has one owner, and every broker's lookup names it.
        child = bundle_of(topic, after)
        wait_for(lambda: child in owners(cluster.zk_url), within=30, message="child owned")
        seen = {http_lookup(b, topic) for b in cluster.brokers}
        assert seen == {owners(cluster.zk_url)[child]}
        # Unloading the whole namespace on a broker that owns none of its bundles: it asks
        # each owner.
        held = set(owners(cluster.zk_url).values())
        asked = next(b for b in cluster.brokers if b.service_url not in held)
        unloaded = cluster.cli(asked, "namespaces", "unload", NAMESPACE)
        assert unloaded.returncode == 0, unloaded.stderr
        producer.send(b"after-unload")
        # Unacknowledged messages may come again first (at-least-once), then the new one.
        received = [consumer.receive(timeout_millis=60_000).data()]
        while received[-1] != b"after-unload":
            assert received[-1] in (b"before", b"after"), received
            received.append(consumer.receive(timeout_millis=60_000).data())
        assert_one_owner_per_range(owners(cluster.zk_url))
    finally:
        client.close()


def test_threshold_shedder_moves_bundles_off_an_overloaded_broker(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    made = _make(
        tmp_path,
        zk_url,
        bookies,
        {
            # Traffic alone decides: 8 kbit/s of NIC, a 1 % threshold, no minimum to move.
            "loadBalancerOverrideBrokerNicSpeedGbps": "0.000008",
            "loadBalancerBrokerThresholdShedderPercentage": "1",
            "loadBalancerBundleUnloadMinThroughputThreshold": "0",
            "loadBalancerHistoryResourcePercentage": "0.5",
            "loadBalancerCPUResourceWeight": "0",
            "loadBalancerMemoryResourceWeight": "0",
            "loadBalancerAutoBundleSplitEnabled": "false",
        },
    )
    clients: list[pulsar.Client] = []
    try:
        made.start()
        with AdminClient(made.brokers[0].web_url) as admin:
            leader = admin.leader_broker()["brokerId"]
        # The hot broker is not the leader: the leader sheds through its admin API.
        hot = next(b for b in made.brokers if b.broker_id != leader)
        topics = [f"persistent://public/default/hot-{i}" for i in range(8)]
        client = pulsar.Client(made.service_url, operation_timeout_seconds=60)
        clients.append(client)
        producers = [client.create_producer(t) for t in topics]
        bundles = current_bundles(made.brokers[0])
        hot_bundles = {bundle_of(t, bundles) for t in topics}
        assert len(hot_bundles) >= 4
        for name in sorted(hot_bundles):
            if owners(zk_url)[name] != hot.service_url:
                moved = made.cli(
                    made.brokers[0],
                    "namespaces",
                    "unload",
                    NAMESPACE,
                    "--bundle",
                    name,
                    "--destination-broker",
                    hot.broker_id,
                )
                assert moved.returncode == 0, moved.stderr
        # The producers follow their bundles there (no traffic yet: nothing to shed).
        wait_for(
            lambda: all(owners(zk_url).get(n) == hot.service_url for n in hot_bundles),
            within=60,
            message=f"the hot bundles to be on {hot.broker_id}",
        )
        payload = b"x" * 512
        deadline = time.monotonic() + 120
        while True:
            for producer in producers:
                producer.send(payload)
            nodes = owners(zk_url)
            if any(nodes.get(n) not in (None, hot.service_url) for n in hot_bundles):
                break
            assert time.monotonic() < deadline, "no bundle was shed from the overloaded broker"
        moved_off = sorted(n for n in hot_bundles if nodes.get(n) not in (None, hot.service_url))
        assert_one_owner_per_range(nodes)
        print(f"shed {len(moved_off)} of {len(hot_bundles)} bundles off {hot.broker_id}")
        # The producers followed their topics.
        for producer in producers:
            producer.send(b"still-here")
    finally:
        for client in clients:
            client.close()
        made.stop()


def test_sigterm_hands_the_bundles_over_before_the_broker_exits(
    cluster: LoadCluster,
) -> None:
    cluster.start()
    topic = "persistent://public/default/handover"
    load = OfficialKeyedLoad(cluster.service_url, topic).start()
    try:
        run_until(lambda: load.acked_count >= 300, 90, "300 receipts before SIGTERM")
        owner = cluster.by_url(http_lookup(cluster.brokers[0], topic))
        before = load.acked_count
        started = time.monotonic()
        code = owner.stop(timeout=60)
        took = time.monotonic() - started
        assert code == 0, owner.output()
        assert took < 30 + 15, f"SIGTERM took {took:.1f}s"
        assert "handed" in owner.output()
        gap = run_until(
            lambda: load.acked_count >= before + 300, 60, "300 more receipts after SIGTERM"
        )
        print(f"SIGTERM: exit after {took:.1f}s; receipts continued within {gap:.1f}s")
        live = [b for b in cluster.brokers if b is not owner]
        assert http_lookup(live[0], topic) in {b.service_url for b in live}
        report = finish(load)
    finally:
        load.close()
    assert_nothing_lost(report)


def test_lookups_naming_a_listener_are_sent_to_the_owners_listener_address(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    made = _make(tmp_path, zk_url, bookies, {}, listeners=True)
    try:
        made.start()
        topic = "persistent://public/default/listening"
        # The official client through broker 0 with the `external` listener: every redirect
        # and the owner's address are `localhost` ones.
        client = pulsar.Client(
            made.brokers[0].service_url, listener_name="external", operation_timeout_seconds=60
        )
        try:
            producer = client.create_producer(topic)
            consumer = client.subscribe(
                topic, "s", initial_position=pulsar.InitialPosition.Earliest
            )
            producer.send(b"via-external")
            assert consumer.receive(timeout_millis=60_000).data() == b"via-external"
        finally:
            client.close()
        owner = made.by_url(http_lookup(made.brokers[0], topic))
        name = TopicName.parse(topic)
        path = f"/lookup/v2/topic/persistent/{name.tenant}/{name.namespace}/{name.local_name}"
        for broker in made.brokers:
            with httpx.Client(base_url=broker.web_url, follow_redirects=True, timeout=30) as http:
                answer = http.get(path, params={"listenerName": "external"})
            assert answer.json()["brokerUrl"] == f"pulsar://localhost:{owner.port}", broker.web_url
    finally:
        made.stop()


def test_with_authentication_the_leader_splits_another_brokers_bundle_with_its_broker_credentials(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> None:
    """Token authentication and authorization on every broker: the leader's split of a bundle a
    non-leader owns goes to that owner's admin API, which authenticates it - with the leader's
    ``brokerClientAuthentication*`` credentials (a superuser role). Without them the owner
    answered 401 and the bundle was never split."""
    secret = b"load-manager-auth-secret-0123456789"

    def token(role: str) -> str:
        return tokens.create_token(role, secret_key=secret)

    made = _make(
        tmp_path,
        zk_url,
        bookies,
        {
            "authenticationEnabled": "true",
            "authenticationProviders": tokens.CLASS_NAME,
            "tokenSecretKey": "data:;base64," + base64.b64encode(secret).decode(),
            "authorizationEnabled": "true",
            "superUserRoles": "root,broker",
            "brokerClientAuthenticationPlugin": TOKEN_PLUGIN,
            "brokerClientAuthenticationParameters": f"token:{token('broker')}",
            "loadBalancerSheddingEnabled": "false",
            "loadBalancerNamespaceBundleMaxTopics": "2",
            "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": "1",
        },
    )
    root = ClientCredentials(method="token", token=token("root"))
    clients: list[pulsar.Client] = []
    try:
        made.start()
        with AdminClient(made.brokers[0].web_url, credentials=root) as admin:
            leader = admin.leader_broker()["brokerId"]
            doc = admin.namespaces.bundles(NAMESPACE)
        owner = next(b for b in made.brokers if b.broker_id != leader)
        bundles = NamespaceBundles(NAMESPACE, tuple(int(b, 16) for b in doc["boundaries"]))
        # Three topics of one bundle (over the two-topic limit), served by a non-leader.
        names = (f"persistent://{NAMESPACE}/auth-split-{i}" for i in itertools.count())
        first = next(names)
        target = bundle_of(first, bundles)
        topics = [
            first,
            *itertools.islice((n for n in names if bundle_of(n, bundles) == target), 2),
        ]
        client = pulsar.Client(
            made.service_url,
            authentication=pulsar.AuthenticationToken(token("root")),
            operation_timeout_seconds=60,
        )
        clients.append(client)
        # One topic first (within the limit): the bundle gets an owner, moved to a non-leader
        # before the other two topics push it over.
        producers = [client.create_producer(topics[0])]
        if owners(zk_url)[target] != owner.service_url:
            with AdminClient(made.brokers[0].web_url, credentials=root) as admin:
                admin.namespaces.unload(NAMESPACE, target, owner.broker_id)
        wait_for(
            lambda: owners(zk_url).get(target) == owner.service_url,
            within=60,
            message=f"{target} to move to {owner.broker_id}",
        )
        producers += [client.create_producer(t) for t in topics[1:]]
        for producer in producers:
            producer.send(b"load")

        def split() -> bool:
            with AdminClient(owner.web_url, credentials=root) as admin:
                boundaries = admin.namespaces.bundles(NAMESPACE)["boundaries"]
            return len(boundaries) - 1 > len(bundles.bundles)

        wait_for(split, within=90, message=f"the leader to split {target} on {owner.broker_id}")
        nodes = owners(zk_url)
        assert target not in nodes
        assert_one_owner_per_range(nodes)
        for producer in producers:  # the producers followed their halves
            producer.send(b"after")
        # An admin call through a broker that does not own the topic is redirected to the owner
        # and authenticated there (the client sends its credentials again), and a namespace
        # unload passes the caller's credentials to the owners of its bundles.
        served_by = owners(zk_url)[bundle_of(topics[0], current_bundles(made.brokers[0], root))]
        other = next(b for b in made.brokers if b.service_url != served_by)
        with AdminClient(other.web_url, credentials=root) as admin:
            assert admin.topics.stats(topics[0])["publishers"]
            clients.remove(client)
            client.close()  # nothing takes the bundles again after the unload
            admin.namespaces.unload(NAMESPACE)
        wait_for(
            lambda: not owners(zk_url),
            within=60,
            message="the namespace unload to release every bundle",
        )
    finally:
        for client in clients:
            client.close()
        made.stop()
