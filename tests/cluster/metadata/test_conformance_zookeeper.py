"""The metadata conformance suite on a real ZooKeeper, plus ZooKeeper-only session behaviour."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from braid.clock import ManualClock
from braid.metadata import (
    LeaderElection,
    LeaderElectionState,
    MetadataStore,
    SessionEvent,
    StoreUnavailable,
    open_store,
)
from braid.metadata.zookeeper import ZkMetadataStore
from tests.support.metadata_conformance import MetadataStoreConformance
from tests.support.polling import eventually
from tests.support.zookeeper import ConnectionCutter, ZooKeeperServer


class ZkEnv:
    clock: ManualClock | None = None  # ZooKeeper stamps times with its own clock

    def __init__(self, server: ZooKeeperServer, hosts: str | None = None) -> None:
        self.server = server
        self.hosts = hosts or server.hosts
        self.chroot = f"/conformance-{uuid.uuid4().hex[:12]}"
        self.stores: list[ZkMetadataStore] = []

    async def open(self) -> MetadataStore:
        store = await ZkMetadataStore.open(self.hosts, self.chroot, session_timeout=6.0)
        self.stores.append(store)
        return store

    async def expire(self, store: MetadataStore) -> None:
        assert isinstance(store, ZkMetadataStore)
        await asyncio.to_thread(self.server.expire_session, store.client_id)

    async def close(self) -> None:
        for store in self.stores:
            await store.close()


class TestZooKeeperConformance(MetadataStoreConformance):
    @pytest.fixture
    async def env(self, zookeeper_server: ZooKeeperServer) -> AsyncIterator[ZkEnv]:
        env = ZkEnv(zookeeper_server)
        yield env
        await env.close()


async def test_open_store_url_reaches_zookeeper_under_its_chroot(
    zookeeper_server: ZooKeeperServer,
) -> None:
    chroot = f"/url-{uuid.uuid4().hex[:8]}"
    store = await open_store(zookeeper_server.url(chroot))
    other = await open_store(zookeeper_server.url("/"))
    try:
        await store.put("/x", b"1")
        found = await other.get(f"{chroot}/x")
        assert found is not None and found[0] == b"1"
    finally:
        await store.close()
        await other.close()


async def test_session_expiry_ends_leadership_and_ephemeral_nodes_and_the_next_contender_leads(
    zookeeper_server: ZooKeeperServer,
) -> None:
    env = ZkEnv(zookeeper_server)
    try:
        leader_store, follower_store = await env.open(), await env.open()
        events: list[SessionEvent] = []
        leader_store.register_session_listener(events.append)
        leader = LeaderElection(leader_store, "/leader", b"old")
        follower = LeaderElection(follower_store, "/leader", b"new")
        assert await leader.start() is LeaderElectionState.LEADING
        assert await follower.start() is LeaderElectionState.FOLLOWING
        await leader_store.put("/owned", b"", ephemeral=True)

        await env.expire(leader_store)

        await eventually(lambda: follower.is_leader, message="the follower takes over")
        assert await follower.leader_value() == b"new"
        assert await follower_store.exists("/owned") is None
        await eventually(lambda: SessionEvent.SESSION_LOST in events, message="SESSION_LOST")
        assert leader.state is LeaderElectionState.NO_LEADER
        await leader.close()
        await follower.close()
    finally:
        await env.close()


async def test_cut_connection_suspends_then_reconnects_with_the_same_session(
    zookeeper_server: ZooKeeperServer,
) -> None:
    cutter = ConnectionCutter(zookeeper_server.port)
    env = ZkEnv(zookeeper_server, hosts=cutter.hosts)
    try:
        store = await env.open()
        events: list[SessionEvent] = []
        store.register_session_listener(events.append)
        election = LeaderElection(store, "/leader", b"me")
        assert await election.start() is LeaderElectionState.LEADING
        await store.put("/mine", b"", ephemeral=True)

        cutter.cut()
        await eventually(lambda: SessionEvent.SUSPENDED in events, message="SUSPENDED")
        await eventually(lambda: election.state is LeaderElectionState.NO_LEADER)
        with pytest.raises(StoreUnavailable):
            await store.get("/mine")

        cutter.restore()
        await eventually(lambda: SessionEvent.RECONNECTED in events, message="RECONNECTED")
        found = await store.get("/mine")
        assert found is not None and found[1].owner == store.session_id
        await eventually(lambda: election.is_leader, message="leadership confirmed again")
        await election.close()
    finally:
        await env.close()
        cutter.close()


async def test_an_unreachable_ensemble_is_store_unavailable() -> None:
    from tests.support.zookeeper import free_port

    with pytest.raises(StoreUnavailable, match="cannot reach ZooKeeper"):
        await ZkMetadataStore.open(f"127.0.0.1:{free_port()}", "/x", connect_timeout=0.5)
