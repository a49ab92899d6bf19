"""Unloading and splitting on the ownership side (ADR 0050), over one metadata store shared by
several brokers' sessions (memory backend): a bundle being unloaded is served by nobody and sends
lookups to the next owner, which waits for the release; a lock taken on a range that was split
meanwhile is given back; lookups naming a listener get the other broker's listener URL."""

from __future__ import annotations

import asyncio

import pytest

from braid.broker import ownership as ownership_module
from braid.broker.broker_registry import BrokerRegistry
from braid.broker.bundles import NamespaceBundle, NamespaceBundles
from braid.broker.errors import UnknownListener
from braid.broker.ownership import (
    BundleOwnership,
    Candidate,
    NotOwner,
    OwnerData,
    ownership_path,
)
from braid.core.names import TopicName
from braid.metadata.memory import MemoryBackend, MemoryMetadataStore

TOPIC = TopicName.parse("persistent://public/default/orders")


class Node:
    """One broker's session, registry entry and ownership; lookups of unowned bundles go to
    ``self.next`` (a stand-in for the load manager's choice, which the cluster tests cover)."""

    def __init__(self, backend: MemoryBackend, name: str, shared: dict[str, NamespaceBundles]):
        self.store = MemoryMetadataStore(backend)
        listeners = (("external", f"pulsar://{name}.example:6651", None),)
        self.me = OwnerData(f"pulsar://{name}:6650", f"http://{name}:8080", listeners=listeners)
        self.registry = BrokerRegistry(self.store, cluster="c1")
        self.next: Node | None = None
        self._shared = shared

        async def bundles_of(topic: TopicName) -> NamespaceBundles:
            return self._shared["bundles"]

        self.ownership = BundleOwnership(
            self.store,
            self.registry,
            bundles_of,
            on_lost=lambda b: None,
            on_session_lost=lambda: None,
            placement=self,
        )

    async def candidate(self, bundle: NamespaceBundle) -> Candidate | None:
        if self.next is None:
            return None
        info = await self.registry.get(self.next.me.native_url.removeprefix("pulsar://"))
        return None if info is None else Candidate(info)

    async def start(self) -> None:
        await self.registry.register(
            self.me.native_url, self.me.http_url, listeners=self.me.listeners
        )
        self.ownership.announce(self.me)


@pytest.fixture
async def nodes() -> list[Node]:
    backend = MemoryBackend()
    shared = {"bundles": NamespaceBundles.of("public/default", 4)}
    made = [Node(backend, f"b{i}", shared) for i in range(2)]
    for node in made:
        await node.start()
    made[0].next = made[1]
    made[1].next = made[1]
    return made


async def test_a_bundle_being_unloaded_is_served_by_nobody_and_handed_to_the_next_owner(
    nodes: list[Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the store's notification of the release can end the next owner's wait in time.
    monkeypatch.setattr(ownership_module, "_NODE_RECHECK_S", 3600.0)
    old, new = nodes
    bundle = await old.ownership.check_serving(TOPIC)
    assert await old.ownership.begin_unload(bundle)
    assert not old.ownership.owns(bundle)
    owner = await old.ownership.owner(bundle)
    assert owner is not None and owner.disabled
    with pytest.raises(NotOwner):
        await old.ownership.check_serving(TOPIC)  # not even by the unloading owner
    # Lookups on either broker send the client to the next owner.
    redirected = await old.ownership.lookup(TOPIC, authoritative=False)
    assert redirected.redirect and redirected.service_url == new.me.native_url
    there = await new.ownership.lookup(TOPIC, authoritative=True)
    assert there.local and not there.redirect
    # The next owner waits for the release instead of refusing the client.
    taking = asyncio.ensure_future(new.ownership.check_serving(TOPIC))
    await asyncio.sleep(0)
    assert not taking.done()
    await old.ownership.release(bundle)
    assert await asyncio.wait_for(taking, 10) == bundle
    assert new.ownership.owns(bundle)
    taken = await new.ownership.owner(bundle)
    assert taken is not None and taken.native_url == new.me.native_url and not taken.disabled


async def test_a_lock_taken_on_a_range_split_meanwhile_is_given_back(nodes: list[Node]) -> None:
    node = nodes[0]
    before = node._shared["bundles"]
    parent = before.find(TOPIC)
    calls = 0
    original = node.ownership.bundle_of

    async def split_after_first_read(topic: TopicName) -> NamespaceBundle:
        nonlocal calls
        calls += 1
        if calls == 2:  # the re-read after taking the lock sees the split
            node._shared["bundles"] = before.split(parent)
        return await original(topic)

    node.ownership.bundle_of = split_after_first_read  # type: ignore[method-assign]
    with pytest.raises(NotOwner, match="split"):
        await node.ownership.check_serving(TOPIC)
    assert not node.ownership.owns(parent)
    assert await node.store.get(ownership_path(parent)) is None
    node.ownership.bundle_of = original  # type: ignore[method-assign]
    child = await node.ownership.check_serving(TOPIC)
    assert child != parent and parent.lower <= child.lower < child.upper <= parent.upper


async def test_split_children_are_taken_only_if_free(nodes: list[Node]) -> None:
    a, b = nodes
    child = NamespaceBundle("public/default", 0, 0x20000000)
    assert await a.ownership.acquire_new(child)
    assert not await b.ownership.acquire_new(child)
    assert a.ownership.owns(child)


async def test_lookups_naming_a_listener_get_the_other_brokers_listener_url(
    nodes: list[Node],
) -> None:
    owner, other = nodes
    await owner.ownership.check_serving(TOPIC)
    answer = await other.ownership.lookup(TOPIC, authoritative=False, listener="external")
    assert answer.service_url == "pulsar://b0.example:6651" and not answer.local
    plain = await other.ownership.lookup(TOPIC, authoritative=False)
    assert plain.service_url == owner.me.native_url
    with pytest.raises(UnknownListener, match="internal"):
        await other.ownership.lookup(TOPIC, authoritative=False, listener="internal")
    info = await other.registry.get("b0:6650")
    assert info is not None and info.listeners == owner.me.listeners
