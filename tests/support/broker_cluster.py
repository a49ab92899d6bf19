"""A Braid cluster of separate processes for the cluster tests: bookies (``braid bookie``) and
three ``braid broker`` processes on one ZooKeeper chroot, initialised with
``braid initialize-cluster-metadata``; helpers that read what the cluster decided (bundle owners,
registry entries, scalable-topic controller leaders) straight from ZooKeeper.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

import httpx

from braid.broker.bundles import NamespaceBundles
from braid.broker.ownership import OwnerData
from braid.core.names import TopicName
from braid.metadata import open_store
from braid.metadata.election import read_leader
from braid.scalable.resources import ScalableTopicResources
from tests.support.bookie_process import BookieProcess
from tests.support.broker_process import BrokerProcess, initialize_cluster

CLUSTER = "c1"
BUNDLES = 16
SESSION_TIMEOUT_S = 4.0


def broker_settings(zk_url: str) -> dict[str, str]:
    """broker.conf of every test broker: E/W/A 3/2/2 on the bookies, small ledgers, all kept."""
    return {
        "clusterName": CLUSTER,
        "metadataStoreUrl": zk_url,
        "configurationMetadataStoreUrl": zk_url,
        "metadataStoreSessionTimeoutMillis": str(int(SESSION_TIMEOUT_S * 1000)),
        "managedLedgerDefaultEnsembleSize": "3",
        "managedLedgerDefaultWriteQuorum": "2",
        "managedLedgerDefaultAckQuorum": "2",
        "managedLedgerMaxEntriesPerLedger": "50",
        "defaultRetentionTimeInMinutes": "-1",
        "defaultRetentionSizeInMB": "-1",
    }


class Cluster:
    """Bookies and three brokers (not started until :meth:`start`)."""

    def __init__(
        self,
        tmp_path: Path,
        zk_url: str,
        bookies: list[BookieProcess],
        *,
        extra: Mapping[str, str] | None = None,
        env: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        """``extra``: more broker.conf settings for every broker; ``env``: more environment
        variables for the broker of that index (fault points)."""
        self.zk_url = zk_url
        self.bookies = bookies
        settings = {**broker_settings(zk_url), **(extra or {})}
        self.brokers = [
            BrokerProcess(tmp_path / f"broker-{i}", settings, log_path=None) for i in range(3)
        ]
        for index, variables in (env or {}).items():
            self.brokers[index].env.update(variables)

    def start(self) -> None:
        for bookie in self.bookies:
            bookie.start()
        first = self.brokers[0]
        initialize_cluster(CLUSTER, self.zk_url, first.web_url, first.service_url, bundles=BUNDLES)
        for broker in self.brokers:
            broker.start(timeout=90)

    @property
    def service_url(self) -> str:
        """Every broker, as the clients take several hosts."""
        return "pulsar://" + ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    def by_url(self, url: str) -> BrokerProcess:
        (found,) = [b for b in self.brokers if url in (b.service_url, b.web_url)]
        return found

    @property
    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers if b.running]

    def stop(self) -> None:
        for broker in self.brokers:
            if broker.running:
                broker.stop()
        for bookie in self.bookies:
            bookie.stop()

    # -- what ZooKeeper says ---------------------------------------------------------------------

    def ownership_nodes(self) -> dict[str, OwnerData]:
        """``range -> owner`` of every owned bundle of ``public/default``."""
        return asyncio.run(_ownership_nodes(self.zk_url))

    def owner_of(self, topic: str) -> str | None:
        """The service URL of the broker owning ``topic``'s bundle (``None``: unowned)."""
        owner = self.ownership_nodes().get(bundle_of(topic))
        return None if owner is None else owner.native_url

    def controller_leader(self, topic: str) -> str | None:
        """The service URL of the scalable topic's controller leader (``None``: none)."""
        return asyncio.run(read_controller_leader(self.zk_url, TopicName.parse(topic)))

    def registry(self) -> dict[str, dict[str, str]]:
        """``broker id -> registry entry`` of every registered broker."""
        return asyncio.run(_registry(self.zk_url))


def http_lookup(broker: BrokerProcess, topic: str) -> str:
    """The ``brokerUrl`` a broker's HTTP lookup answers for a ``persistent://`` topic."""
    name = TopicName.parse(topic)
    path = f"/lookup/v2/topic/persistent/{name.tenant}/{name.namespace}/{name.local_name}"
    with httpx.Client(base_url=broker.web_url, follow_redirects=True, timeout=30) as http:
        response = http.get(path)
    response.raise_for_status()
    return str(response.json()["brokerUrl"])


def bundle_of(topic: str) -> str:
    return NamespaceBundles.of("public/default", BUNDLES).find(TopicName.parse(topic)).range_name


async def _ownership_nodes(zk_url: str) -> dict[str, OwnerData]:
    store = await open_store(zk_url)
    try:
        found = {}
        for name in await store.children("/namespace/public/default"):
            got = await store.get(f"/namespace/public/default/{name}")
            if got is None:
                continue
            assert got[1].ephemeral
            owner = OwnerData.decode(got[0])
            assert owner is not None
            found[name] = owner
        return found
    finally:
        await store.close()


async def read_controller_leader(zk_url: str, topic: TopicName) -> str | None:
    """The service URL of the scalable topic's controller leader, as ZooKeeper's election says."""
    store = await open_store(zk_url)
    try:
        value = await read_leader(store, ScalableTopicResources.controller_path(topic))
        return None if value is None else value.decode()
    finally:
        await store.close()


async def _registry(zk_url: str) -> dict[str, dict[str, str]]:
    store = await open_store(zk_url)
    try:
        found = {}
        for name in await store.children("/loadbalance/brokers"):
            got = await store.get(f"/loadbalance/brokers/{name}")
            if got is not None:
                found[name] = json.loads(got[0])
        return found
    finally:
        await store.close()


__all__ = [
    "BUNDLES",
    "CLUSTER",
    "SESSION_TIMEOUT_S",
    "Cluster",
    "broker_settings",
    "bundle_of",
    "http_lookup",
    "read_controller_leader",
]
