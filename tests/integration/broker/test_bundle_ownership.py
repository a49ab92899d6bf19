"""Bundle ownership over one metadata store shared by several brokers' sessions (memory backend:
each store is one session, ``expire()`` ends it as a ZooKeeper expiry does), and the cluster
metadata a broker needs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

from braid.broker import ownership as ownership_module
from braid.broker.broker_registry import BrokerRegistry
from braid.broker.bundles import NamespaceBundles
from braid.broker.cluster_metadata import (
    ClusterData,
    ClusterNotInitialized,
    check_initialized,
    initialize_cluster_metadata,
)
from braid.broker.errors import ServiceNotReady
from braid.broker.owner_probe import OwnerProbe
from braid.broker.ownership import BundleOwnership, NotOwner, OwnerData, ownership_path
from braid.broker.partitions import PartitionedTopics
from braid.core.names import TopicName
from braid.core.partitions import InvalidPartitionCount
from braid.metadata.memory import MemoryBackend, MemoryMetadataStore
from tests.support.polling import eventually

TOPIC = TopicName.parse("persistent://public/default/orders")
BUNDLES = NamespaceBundles.of("public/default", 4)


class Node:
    """One broker's session, registry entry and ownership."""

    def __init__(self, backend: MemoryBackend, name: str) -> None:
        self.store = MemoryMetadataStore(backend)
        self.me = OwnerData(f"pulsar://{name}:6650", f"http://{name}:8080")
        self.registry = BrokerRegistry(self.store, cluster="c1")
        self.lost: list[str] = []
        self.session_lost = asyncio.Event()

        async def bundles_of(topic: TopicName) -> NamespaceBundles:
            return BUNDLES

        self.ownership = BundleOwnership(
            self.store,
            self.registry,
            bundles_of,
            on_lost=lambda b: self.lost.append(b.range_name),
            on_session_lost=self.session_lost.set,
        )

    async def start(self) -> None:
        await self.registry.register(self.me.native_url, self.me.http_url)
        self.ownership.announce(self.me)


@pytest.fixture
async def nodes() -> list[Node]:
    backend = MemoryBackend()
    made = [Node(backend, f"b{i}") for i in range(3)]
    for node in made:
        await node.start()
    return made


async def test_racing_brokers_leave_exactly_one_owner(nodes: list[Node]) -> None:
    bundle = BUNDLES.find(TOPIC)
    owners = await asyncio.gather(*(n.ownership.try_acquire(bundle) for n in nodes))
    assert len(set(owners)) == 1
    assert [n.ownership.owns(bundle) for n in nodes].count(True) == 1
    losers = [n for n in nodes if not n.ownership.owns(bundle)]
    with pytest.raises(NotOwner, match="look the topic up again"):
        await losers[0].ownership.check_serving(TOPIC)


async def test_an_unowned_bundle_is_redirected_to_one_candidate_that_then_takes_it(
    nodes: list[Node],
) -> None:
    bundle = BUNDLES.find(TOPIC)
    brokers = await nodes[0].registry.brokers()
    chosen = max(brokers, key=lambda b: _score(b.broker_id, bundle)).service_url
    target = next(n for n in nodes if n.me.native_url == chosen)
    for node in nodes:
        if node is not target:  # every other broker redirects there, authoritatively
            answer = await node.ownership.lookup(TOPIC, authoritative=False)
            assert (answer.redirect, answer.authoritative, answer.service_url) == (
                True,
                True,
                chosen,
            )
    assert await nodes[0].store.get(ownership_path(bundle)) is None
    taken = await target.ownership.lookup(TOPIC, authoritative=False)
    assert (taken.redirect, taken.local, taken.service_url) == (False, True, chosen)
    candidate = chosen
    for node in nodes:
        answer = await node.ownership.lookup(TOPIC, authoritative=False)
        assert (answer.redirect, answer.service_url) == (False, candidate)


async def test_bundles_spread_over_the_brokers(nodes: list[Node]) -> None:
    many = NamespaceBundles.of("public/default", 64).bundles
    chosen = {
        max(await n.registry.brokers(), key=lambda b: _score(b.broker_id, bundle)).broker_id
        for bundle in many
        for n in nodes[:1]
    }
    assert len(chosen) == 3


def _score(broker: str, bundle: object) -> int:
    from braid.broker.ownership import rendezvous_score

    return rendezvous_score(bundle, broker)  # type: ignore[arg-type]


async def test_a_lost_session_drops_every_bundle_and_another_broker_takes_them(
    nodes: list[Node],
) -> None:
    first, second, _ = nodes
    bundle = BUNDLES.find(TOPIC)
    await first.ownership.check_serving(TOPIC)
    first.store.expire()
    await asyncio.wait_for(first.session_lost.wait(), 10)
    assert first.lost == [bundle.range_name]
    assert not first.ownership.owns(bundle)
    with pytest.raises(ServiceNotReady):
        await first.ownership.try_acquire(bundle)
    await second.ownership.check_serving(TOPIC)  # the node went with the session
    assert second.ownership.owns(bundle)


async def test_a_deleted_ownership_node_is_noticed_by_its_owner(nodes: list[Node]) -> None:
    owner = nodes[0]
    bundle = await owner.ownership.check_serving(TOPIC)
    await nodes[1].store.delete(ownership_path(bundle))
    await eventually(lambda: owner.lost == [bundle.range_name])
    assert not owner.ownership.owns(bundle)


async def test_a_bundle_taken_again_right_after_its_release_stays_owned(
    nodes: list[Node],
) -> None:
    owner = nodes[0]
    bundle = await owner.ownership.check_serving(TOPIC)
    await owner.ownership.release(bundle)
    # Taken again before the deletion's notification is delivered: that notification is about
    # the released node, not about the new one.
    assert await owner.ownership.try_acquire(bundle) == owner.me
    for _ in range(20):
        await asyncio.sleep(0)
    assert owner.lost == [] and owner.ownership.owns(bundle)
    # A later deletion of the new node is still noticed.
    await nodes[1].store.delete(ownership_path(bundle))
    await eventually(lambda: owner.lost == [bundle.range_name])


async def test_a_clean_release_frees_the_bundles(nodes: list[Node]) -> None:
    bundle = await nodes[0].ownership.check_serving(TOPIC)
    await nodes[0].ownership.release_all()
    assert await nodes[1].ownership.owner(bundle) is None


async def test_a_broker_not_announced_yet_serves_nothing() -> None:
    node = Node(MemoryBackend(), "b9")
    with pytest.raises(ServiceNotReady, match="starting"):
        await node.ownership.check_serving(TOPIC)


async def test_registry_lists_brokers_and_elects_one_leader(nodes: list[Node]) -> None:
    assert [b.broker_id for b in await nodes[0].registry.brokers()] == [
        "b0:6650",
        "b1:6650",
        "b2:6650",
    ]
    for node in nodes:
        await node.registry.elect_leader()
    leader = await nodes[0].registry.leader()
    assert leader is not None and leader["brokerId"] in {"b0:6650", "b1:6650", "b2:6650"}
    assert [n.registry.is_leader for n in nodes].count(True) == 1


async def test_cluster_metadata_is_written_once_and_checked_by_brokers() -> None:
    store = MemoryMetadataStore()
    with pytest.raises(ClusterNotInitialized, match="initialize-cluster-metadata --cluster c1"):
        await check_initialized(store, "c1", "zk:h:2181/x")
    data = ClusterData("http://h:8080", "pulsar://h:6650")
    created = await initialize_cluster_metadata(
        store, store, "c1", data, namespace_bundles=8, transaction_coordinators=4
    )
    assert "/admin/clusters/c1" in created and "/admin/policies/public/default" in created
    # The transaction coordinators' assign topic, one partition per coordinator (ADR 0070).
    assign = TopicName.parse("persistent://pulsar/system/transaction_coordinator_assign")
    assert await PartitionedTopics(store).partitions(assign) == 4
    with pytest.raises(InvalidPartitionCount):
        await initialize_cluster_metadata(store, store, "c1", data, transaction_coordinators=0)
    assert await initialize_cluster_metadata(store, store, "c1", data) == []
    assert await check_initialized(store, "c1", "zk:h:2181/x") == data
    got = await store.get("/admin/policies/public/default")
    assert got is not None
    policies = json.loads(got[0])
    assert policies["bundles"]["numBundles"] == 8
    assert policies["replication_clusters"] == ["c1"]
    # A second cluster on the same stores is added where lists name clusters.
    await initialize_cluster_metadata(store, store, "c2", data)
    tenant = await store.get("/admin/policies/public")
    assert tenant is not None and json.loads(tenant[0])["allowedClusters"] == ["c1", "c2"]


class _Listening:
    """A TCP port on 127.0.0.1 that accepts connections (a live broker's service port)."""

    async def __aenter__(self) -> int:
        self.server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()


async def _probing_nodes(first_port: int, wait_s: float) -> tuple[Node, Node]:
    """Two nodes; the first's service URL is 127.0.0.1:``first_port``, the second probes
    owners and waits up to ``wait_s`` for a dead one's node to go (ADR 0067)."""
    backend = MemoryBackend()
    first, second = Node(backend, "b0"), Node(backend, "b1")
    first.me = OwnerData(f"pulsar://127.0.0.1:{first_port}", "http://127.0.0.1:8080")
    second.ownership = BundleOwnership(
        second.store,
        second.registry,
        second.ownership._bundles_of,
        on_lost=lambda b: None,
        on_session_lost=lambda: None,
        probe=OwnerProbe(asyncio.get_running_loop().time),
        dead_owner_wait_s=wait_s,
    )
    for node in (first, second):
        await node.start()
    return first, second


async def test_a_lookup_waits_for_a_dead_owners_session_instead_of_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only the store's notification about the node can end the wait in time: no re-read.
    monkeypatch.setattr(ownership_module, "_NODE_RECHECK_S", 3600.0)
    async with _Listening() as port:
        pass  # closed: nothing listens there any more, connections are refused
    dead, asked = await _probing_nodes(port, wait_s=60)
    bundle = await dead.ownership.check_serving(TOPIC)
    lookup = asyncio.ensure_future(asked.ownership.lookup(TOPIC, authoritative=False))
    again = asyncio.ensure_future(asked.ownership.lookup(TOPIC, authoritative=False))
    await eventually(lambda: bundle in asked.ownership._dead_waits)
    assert not lookup.done()  # not sent to the dead owner's refusing port
    dead.store.expire()  # its session ends: the node goes
    answers = await asyncio.wait_for(asyncio.gather(lookup, again), 30)
    assert {a.service_url for a in answers} == {asked.me.native_url}
    assert asked.ownership.owns(bundle)


async def test_a_lookup_names_a_live_owner_at_once_and_a_dead_one_after_the_bound() -> None:
    async with _Listening() as port:
        live, asked = await _probing_nodes(port, wait_s=0.3)
        await live.ownership.check_serving(TOPIC)
        answer = await asyncio.wait_for(asked.ownership.lookup(TOPIC, authoritative=False), 5)
        assert answer.service_url == live.me.native_url and not answer.redirect
    # The port closed, the session still alive (a broker cut off): after the bound, the
    # recorded owner is named as before.
    answer = await asyncio.wait_for(asked.ownership.lookup(TOPIC, authoritative=False), 10)
    assert answer.service_url == live.me.native_url


async def test_a_brokers_tls_url_is_read_once_until_its_registry_node_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every segment of a consumer's assignment names its broker's TLS URL (ADR 0073): a walk
    # through a long DAG must not read the registry once per segment.
    backend = MemoryBackend()
    asker = MemoryMetadataStore(backend)
    registry = BrokerRegistry(asker, cluster="c1")
    reads: list[str] = []
    get = asker.get

    async def counting(path: str) -> object:
        reads.append(path)
        return await get(path)

    monkeypatch.setattr(asker, "get", counting)
    url = "pulsar://b2:6650"
    assert await registry.service_url_tls(url) is None  # not registered yet
    other = BrokerRegistry(MemoryMetadataStore(backend), cluster="c1")
    await other.register(url, "http://b2:8080", "pulsar+ssl://b2:6651")

    def answers(expected: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await registry.service_url_tls(url) == expected

        return check

    await eventually(answers("pulsar+ssl://b2:6651"), within=5, message="the registration")
    before = len(reads)
    for _ in range(10):
        assert await registry.service_url_tls(url) == "pulsar+ssl://b2:6651"
    assert len(reads) == before
    # The broker comes back with another TLS port: its node goes and comes back.
    await other.unregister()
    again = BrokerRegistry(MemoryMetadataStore(backend), cluster="c1")
    await again.register(url, "http://b2:8080", "pulsar+ssl://b2:7651")
    await eventually(answers("pulsar+ssl://b2:7651"), within=5, message="the new TLS URL")
    await again.unregister()
    await registry.unregister()
