"""A Braid cluster spread over simulated hosts: ZooKeeper, bookies and brokers, each in a network
namespace of its own with its own address (:class:`tests.support.netns.NetworkLab`), and a
monitor that checks no topic is served by two brokers at once.

* :class:`HostBroker` is :class:`tests.support.broker_process.BrokerProcess` started inside its
  host (``ip netns exec``), listening on the host's address with Pulsar's default ports (6650,
  8080); readiness, stop and kill work from the test process, which reaches every host.
* :class:`MultiHostCluster` makes the hosts, starts ZooKeeper (Debian's), the bookies, runs
  ``braid initialize-cluster-metadata`` and starts the brokers; it answers who owns a topic (HTTP
  lookup) and who leads, and stops everything it started (by process id) when closed.
* :class:`ServingMonitor` samples, every ``interval`` seconds, the broker registry and the bundle
  ownership nodes in ZooKeeper, and each reachable broker's ``/metrics`` (a topic is listed there
  while it is loaded on that broker). A sample where one topic is loaded on two brokers that were
  both registered (a live metadata session) before and after the scrape is a *violation*; so is
  a topic loaded on a registered broker that does not hold the lock of the topic's bundle (read
  after the scrape: a new owner takes the lock before it loads a topic). A
  broker whose session expired while it was cut off still has its topics loaded until it learns
  of the expiry; those samples are counted apart (*stale*): fencing refuses its writes, and the
  loads' loss/order counts check that.
"""

from __future__ import annotations

import asyncio
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from braid.broker.broker_registry import BrokerRegistry
from braid.broker.bundles import NamespaceBundles
from braid.broker.ownership import OwnerData
from braid.core.names import TopicName
from braid.metadata import MetadataStore, open_store
from tests.support.bookie_process import BookieProcess
from tests.support.broker_cluster import read_controller_leader
from tests.support.broker_process import BrokerProcess, initialize_cluster
from tests.support.netns import Host, NetworkLab
from tests.support.zookeeper import ZooKeeperServer

CLUSTER = "mh"
BROKER_PORT, WEB_PORT = 6650, 8080
_LOADED = re.compile(r'^pulsar_in_messages_total\{[^}]*topic="([^"]+)"', re.MULTILINE)


class HostBroker(BrokerProcess):
    """A ``braid broker`` inside a lab host, on the host's address."""

    def __init__(self, host: Host, data_dir: Path, settings: dict[str, str]) -> None:
        super().__init__(data_dir, settings, host=host.address, port=BROKER_PORT, web_port=WEB_PORT)
        self.lab_host = host

    def command(self) -> list[str]:
        return [*self.lab_host.exec_prefix(), *super().command()]


class MultiHostCluster:
    """ZooKeeper, ``bookies`` bookies and ``brokers`` brokers, one host each."""

    def __init__(
        self,
        lab: NetworkLab,
        tmp_path: Path,
        broker_settings: dict[str, str],
        *,
        brokers: int = 3,
        bookies: int = 3,
        bundles: int = 16,
    ) -> None:
        self.lab = lab
        self.bundles = bundles
        zk_host = lab.add_host("zk")
        self.zk = ZooKeeperServer(
            bind_address=zk_host.address, command_prefix=tuple(zk_host.exec_prefix())
        )
        self._tmp = tmp_path
        self._bookie_hosts = [lab.add_host(f"bk-{i}") for i in range(1, bookies + 1)]
        self._broker_hosts = [lab.add_host(f"br-{i}") for i in range(1, brokers + 1)]
        self._settings = broker_settings
        self.bookies: list[BookieProcess] = []
        self.brokers: list[HostBroker] = []
        self.zk_url = ""

    def start(self) -> None:
        self.zk.start()
        self.zk_url = self.zk.url("/braid")
        settings = {
            "clusterName": CLUSTER,
            "metadataStoreUrl": self.zk_url,
            "configurationMetadataStoreUrl": self.zk_url,
            **self._settings,
        }
        self.bookies = [
            BookieProcess(
                host.name,
                self._tmp / host.name,
                self.zk_url,
                extra={"httpServerEnabled": "false"},
                address=host.address,
                exec_prefix=host.exec_prefix(),
            )
            for host in self._bookie_hosts
        ]
        for bookie in self.bookies:
            bookie.start(wait=False)
        for bookie in self.bookies:
            bookie.wait_ready(120)
        self.brokers = [HostBroker(h, self._tmp / h.name, settings) for h in self._broker_hosts]
        first = self.brokers[0]
        initialize_cluster(
            CLUSTER, self.zk_url, first.web_url, first.service_url, bundles=self.bundles
        )
        for broker in self.brokers:
            broker.start(timeout=120)

    @property
    def service_url(self) -> str:
        return "pulsar://" + ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    def live(self) -> list[HostBroker]:
        return [b for b in self.brokers if b.running]

    def by_url(self, url: str) -> HostBroker:
        (found,) = [b for b in self.brokers if url in (b.service_url, b.web_url)]
        return found

    def owner_of(self, topic: str) -> HostBroker:
        """The broker serving ``topic`` (HTTP lookup through a live broker; loads the topic)."""
        name = TopicName.parse(topic)
        path = f"/lookup/v2/topic/persistent/{name.tenant}/{name.namespace}/{name.local_name}"
        broker = self.live()[0]
        with httpx.Client(base_url=broker.web_url, follow_redirects=True, timeout=30) as http:
            response = http.get(path)
        response.raise_for_status()
        return self.by_url(str(response.json()["brokerUrl"]))

    def leader(self) -> HostBroker:
        """The leader broker (``/admin/v2/brokers/leaderBroker`` of a live broker)."""
        broker = self.live()[0]
        with httpx.Client(base_url=broker.web_url, timeout=30) as http:
            response = http.get("/admin/v2/brokers/leaderBroker")
        response.raise_for_status()
        broker_id = str(response.json()["brokerId"])
        (found,) = [b for b in self.brokers if b.broker_id == broker_id]
        return found

    def controller_leader(self, topic: str) -> HostBroker | None:
        """The broker leading the scalable topic's controller, as ZooKeeper's election says."""
        url = asyncio.run(read_controller_leader(self.zk_url, TopicName.parse(topic)))
        return None if url is None else self.by_url(url)

    def registered(self) -> list[str]:
        return asyncio.run(_registered(self.zk_url))

    def close(self) -> None:
        """Stop every process this cluster started, by id (the lab removes the hosts)."""
        for broker in self.brokers:
            if broker.running:
                broker.kill()
        for bookie in self.bookies:
            bookie.stop()
        self.zk.stop()


async def _registered(zk_url: str) -> list[str]:
    store = await open_store(zk_url)
    try:
        return sorted(b.broker_id for b in await BrokerRegistry(store).brokers())
    finally:
        await store.close()


@dataclass
class ServingReport:
    """What :class:`ServingMonitor` saw."""

    samples: int = 0
    #: ``(topic, brokers)`` of each sample where two registered brokers had a topic loaded.
    violations: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    #: Samples in which a broker without a live registration still had topics loaded.
    stale_samples: int = 0
    #: ``(topic, broker, owner)``: loaded on a registered broker that did not hold its bundle.
    not_owner: list[tuple[str, str, str | None]] = field(default_factory=list)
    brokers_serving: set[str] = field(default_factory=set)
    #: Brokers seen serving a scalable topic's ``segment://`` topics.
    segment_brokers: set[str] = field(default_factory=set)

    def line(self) -> str:
        return (
            f"serving monitor: {self.samples} samples, {len(self.violations)} topics on two "
            f"brokers, {len(self.not_owner)} topics on a broker without the bundle lock, "
            f"{self.stale_samples} samples with a cut-off broker's stale topics, brokers that "
            f"served: {sorted(self.brokers_serving)}, segments: {sorted(self.segment_brokers)}"
        )


class ServingMonitor:
    """Samples who serves what until stopped (see the module docstring)."""

    def __init__(self, cluster: MultiHostCluster, interval: float = 0.5) -> None:
        self.cluster = cluster
        self.interval = interval
        self.report = ServingReport()
        self._bundles = NamespaceBundles.of("public/default", cluster.bundles)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="serving-monitor", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> ServingMonitor:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._sample_until_stopped())
        except BaseException as exc:  # reported by stop()
            self.error = exc

    async def _sample_until_stopped(self) -> None:
        store = await open_store(self.cluster.zk_url)
        registry = BrokerRegistry(store)
        try:
            async with httpx.AsyncClient(timeout=1.0) as http:
                while not self._stop.is_set():
                    await self._sample(store, registry, http)
                    await asyncio.sleep(self.interval)  # the sampling period, not a wait
        finally:
            await store.close()

    async def _loaded(self, http: httpx.AsyncClient, broker: HostBroker) -> set[str] | None:
        try:
            response = await http.get(f"{broker.web_url}/metrics")
        except httpx.HTTPError:
            return None  # cut off, or down
        return set(_LOADED.findall(response.text)) if response.status_code == 200 else None

    async def _sample(
        self, store: MetadataStore, registry: BrokerRegistry, http: httpx.AsyncClient
    ) -> None:
        before = {b.broker_id for b in await registry.brokers()}
        brokers = list(self.cluster.brokers)
        loaded = await asyncio.gather(*(self._loaded(http, b) for b in brokers))
        after = {b.broker_id for b in await registry.brokers()}
        owners = await self._owners(store)
        report = self.report
        report.samples += 1
        by_topic: dict[str, list[str]] = {}
        stale = False
        for broker, topics in zip(brokers, loaded, strict=True):
            if not topics:
                continue
            if broker.broker_id in before and broker.broker_id in after:
                report.brokers_serving.add(broker.broker_id)
                for topic in topics:
                    if topic.startswith("segment://"):
                        report.segment_brokers.add(broker.broker_id)
                    by_topic.setdefault(topic, []).append(broker.broker_id)
                    owner = owners.get(self._bundles.find(TopicName.parse(topic)).range_name)
                    if owner != broker.service_url:
                        report.not_owner.append((topic, broker.broker_id, owner))
            else:
                stale = True
        report.stale_samples += stale
        for topic, holders in by_topic.items():
            if len(holders) > 1:
                report.violations.append((topic, tuple(sorted(holders))))

    async def _owners(self, store: MetadataStore) -> dict[str, str | None]:
        """Each bundle's owner (its broker service URL) as the lock nodes say now."""
        root = "/namespace/public/default"
        found: dict[str, str | None] = {}
        for bundle in await store.children(root):
            got = await store.get(f"{root}/{bundle}")
            owner = None if got is None else OwnerData.decode(got[0])
            found[bundle] = None if owner is None else owner.native_url
        return found

    def stop(self) -> ServingReport:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the serving monitor did not stop"
        assert self.error is None, f"the serving monitor failed: {self.error!r}"
        return self.report


__all__ = [
    "BROKER_PORT",
    "CLUSTER",
    "WEB_PORT",
    "HostBroker",
    "MultiHostCluster",
    "ServingMonitor",
    "ServingReport",
]
