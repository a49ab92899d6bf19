"""One conformance suite for every metadata backend (memory, sqlite, ZooKeeper).

A test module instantiates it by subclassing :class:`MetadataStoreConformance` and providing an
``env`` fixture returning a :class:`StoreEnv`: a way to open several sessions on one shared tree,
to expire a session, and (for backends whose times come from the injected clock) a
:class:`~braid.clock.ManualClock`. memory and sqlite run it in ``tests/integration/metadata``,
ZooKeeper in ``tests/cluster/metadata``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

import pytest

from braid.clock import ManualClock
from braid.metadata import (
    MAX_VALUE_SIZE,
    BadVersion,
    InvalidPath,
    LeaderElection,
    LeaderElectionState,
    Lock,
    MetadataStore,
    NodeNotEmpty,
    NodeNotFound,
    Notification,
    NotificationType,
    SessionEvent,
    SessionLost,
    ValueTooLarge,
    read_leader,
)
from tests.support.polling import eventually

CREATED = NotificationType.CREATED
MODIFIED = NotificationType.MODIFIED
DELETED = NotificationType.DELETED
CHILDREN = NotificationType.CHILDREN_CHANGED

LEADING = LeaderElectionState.LEADING
FOLLOWING = LeaderElectionState.FOLLOWING
NO_LEADER = LeaderElectionState.NO_LEADER


class StoreEnv(Protocol):
    """What the suite needs from a backend under test."""

    #: Drives created/modified times, or ``None`` when the backend uses its server's clock.
    clock: ManualClock | None

    async def open(self) -> MetadataStore:
        """A new session on the shared tree (closed by the env at the end of the test)."""
        ...

    async def expire(self, store: MetadataStore) -> None:
        """End ``store``'s session as its server would on a timeout."""
        ...


class MetadataStoreConformance:
    """The behaviour every backend must show. Subclasses provide the ``env`` fixture."""

    # -- versions and compare-and-swap ----------------------------------------------------------

    async def test_put_creates_at_version_zero_and_each_write_adds_one(self, env: StoreEnv) -> None:
        store = await env.open()
        first = await store.put("/cas/a", b"v0")
        assert (first.version, first.ephemeral) == (0, False)
        second = await store.put("/cas/a", b"v1", 0)
        third = await store.put("/cas/a", b"v2")
        assert (second.version, third.version) == (1, 2)
        assert await store.get("/cas/a") == (b"v2", third)

    async def test_cas_with_a_stale_version_raises_bad_version_and_keeps_the_value(
        self, env: StoreEnv
    ) -> None:
        store = await env.open()
        await store.put("/cas/b", b"one")
        await store.put("/cas/b", b"two", 0)
        with pytest.raises(BadVersion):
            await store.put("/cas/b", b"stale", 0)
        found = await store.get("/cas/b")
        assert found is not None and found[0] == b"two" and found[1].version == 1

    async def test_only_one_of_two_sessions_wins_a_cas_race(self, env: StoreEnv) -> None:
        a, b = await env.open(), await env.open()
        await a.put("/cas/race", b"base")
        results = await asyncio.gather(
            a.put("/cas/race", b"from-a", 0),
            b.put("/cas/race", b"from-b", 0),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["BadVersion", "Stat"]

    async def test_cas_on_a_missing_node_raises_bad_version(self, env: StoreEnv) -> None:
        store = await env.open()
        with pytest.raises(BadVersion):
            await store.put("/cas/missing", b"x", 3)
        assert await store.exists("/cas/missing") is None

    async def test_create_if_absent_succeeds_once(self, env: StoreEnv) -> None:
        a, b = await env.open(), await env.open()
        stat = await a.put("/cia/node", b"first", -1)
        assert stat.version == 0
        with pytest.raises(BadVersion):
            await b.put("/cia/node", b"second", -1)
        found = await b.get("/cia/node")
        assert found is not None and found[0] == b"first"

    async def test_put_creates_missing_parents_as_empty_persistent_nodes(
        self, env: StoreEnv
    ) -> None:
        store = await env.open()
        await store.put("/deep/a/b/c", b"leaf")
        for parent in ("/deep", "/deep/a", "/deep/a/b"):
            found = await store.get(parent)
            assert found is not None
            assert found[0] == b"" and found[1].version == 0 and not found[1].ephemeral

    # -- delete and children --------------------------------------------------------------------

    async def test_delete_with_version(self, env: StoreEnv) -> None:
        store = await env.open()
        await store.put("/del/a", b"x")
        await store.put("/del/a", b"y", 0)
        with pytest.raises(BadVersion):
            await store.delete("/del/a", 0)
        with pytest.raises(BadVersion):
            await store.delete("/del/a", -1)
        await store.delete("/del/a", 1)
        assert await store.get("/del/a") is None
        with pytest.raises(NodeNotFound):
            await store.delete("/del/a")

    async def test_delete_refuses_a_node_with_children(self, env: StoreEnv) -> None:
        store = await env.open()
        await store.put("/del/parent/child", b"")
        with pytest.raises(NodeNotEmpty):
            await store.delete("/del/parent")
        await store.delete_recursive("/del/parent")
        assert await store.exists("/del/parent") is None
        assert await store.children("/del") == []
        await store.delete_recursive("/del/never-existed")  # not an error

    async def test_children_are_sorted_names_and_empty_for_a_missing_node(
        self, env: StoreEnv
    ) -> None:
        store = await env.open()
        for name in ("b", "a", "c-2", "c-10"):
            await store.put(f"/kids/{name}", name.encode())
        await store.put("/kids/a/grandchild", b"")
        assert await store.children("/kids") == ["a", "b", "c-10", "c-2"]
        assert await store.children("/kids/b") == []
        assert await store.children("/nothing/here") == []
        assert "kids" in await store.children("/")

    # -- times ------------------------------------------------------------------------------------

    async def test_created_ms_is_kept_and_modified_ms_moves_on_each_write(
        self, env: StoreEnv
    ) -> None:
        store = await env.open()
        if env.clock is not None:
            t0 = env.clock.now_ms()
            created = await store.put("/times/a", b"1")
            assert created.created_ms == created.modified_ms == t0
            env.clock.advance(5.0)
            modified = await store.put("/times/a", b"2")
            assert modified.created_ms == t0
            assert modified.modified_ms == t0 + 5000
            found = await store.get("/times/a")
            assert found is not None and found[1] == modified
            return
        # Server clock (ZooKeeper): plausible wall-clock times, modified never before created.
        before = time.time_ns() // 1_000_000
        created = await store.put("/times/a", b"1")
        assert created.created_ms == created.modified_ms
        assert abs(created.created_ms - before) < 60_000
        await eventually(lambda: time.time_ns() // 1_000_000 > created.modified_ms + 5)
        modified = await store.put("/times/a", b"2")
        assert modified.created_ms == created.created_ms
        assert modified.modified_ms > created.modified_ms

    # -- notifications ----------------------------------------------------------------------------

    async def test_notifications_arrive_in_change_order(self, env: StoreEnv) -> None:
        observer, writer = await env.open(), await env.open()
        seen: list[Notification] = []
        observer.register_listener(seen.append)
        await writer.put("/n/a", b"1")
        await writer.put("/n/a", b"2", 0)
        await writer.put("/n/b", b"")
        await writer.delete("/n/a", 1)
        expected = [
            Notification(CREATED, "/n"),
            Notification(CHILDREN, "/"),
            Notification(CREATED, "/n/a"),
            Notification(CHILDREN, "/n"),
            Notification(MODIFIED, "/n/a"),
            Notification(CREATED, "/n/b"),
            Notification(CHILDREN, "/n"),
            Notification(DELETED, "/n/a"),
            Notification(CHILDREN, "/n"),
        ]
        await eventually(lambda: len(seen) >= len(expected), message="all notifications")
        assert seen == expected

    async def test_async_listeners_and_unregistering(self, env: StoreEnv) -> None:
        store = await env.open()
        seen: list[str] = []
        other: list[str] = []

        async def listener(n: Notification) -> None:
            await asyncio.sleep(0)
            seen.append(n.path)

        unregister = store.register_listener(listener)
        store.register_listener(lambda n: other.append(n.path))
        await store.put("/async-listener", b"")
        await eventually(lambda: "/async-listener" in seen)
        unregister()
        await store.put("/async-listener", b"again")
        await eventually(lambda: other.count("/async-listener") == 2)
        assert seen.count("/async-listener") == 1

    async def test_listeners_that_raise_do_not_break_the_store(self, env: StoreEnv) -> None:
        store = await env.open()
        seen: list[Notification] = []

        def bad_sync(_: Notification) -> None:
            raise RuntimeError("listener bug")

        async def bad_async(_: Notification) -> None:
            raise ValueError("async listener bug")

        store.register_listener(bad_sync)
        store.register_listener(bad_async)
        store.register_listener(seen.append)
        await store.put("/raising/a", b"1")
        await store.put("/raising/a", b"2")
        await eventually(lambda: Notification(MODIFIED, "/raising/a") in seen)
        assert (await store.get("/raising/a")) is not None

    # -- ephemeral nodes and sessions -------------------------------------------------------------

    async def test_ephemeral_node_vanishes_when_its_session_closes(self, env: StoreEnv) -> None:
        owner, observer = await env.open(), await env.open()
        seen: list[Notification] = []
        observer.register_listener(seen.append)
        stat = await owner.put("/eph/closing", b"me", ephemeral=True)
        assert stat.ephemeral and stat.owner == owner.session_id
        await owner.put("/eph/persistent", b"stays")
        await owner.close()
        assert await observer.get("/eph/closing") is None
        assert await observer.get("/eph/persistent") is not None
        await eventually(lambda: Notification(DELETED, "/eph/closing") in seen)

    async def test_ephemeral_node_vanishes_when_its_session_expires(self, env: StoreEnv) -> None:
        owner, observer = await env.open(), await env.open()
        events: list[SessionEvent] = []
        owner.register_session_listener(events.append)
        await owner.put("/eph/expiring", b"me", ephemeral=True)
        await env.expire(owner)
        await eventually(_absent(observer, "/eph/expiring"), message="ephemeral node gone")
        await eventually(lambda: SessionEvent.SESSION_LOST in events, message="SESSION_LOST")
        with pytest.raises(SessionLost):
            await owner.get("/eph/expiring")

    async def test_ephemeral_nodes_cannot_have_children(self, env: StoreEnv) -> None:
        store = await env.open()
        await store.put("/eph/parent", b"", ephemeral=True)
        with pytest.raises(InvalidPath, match="ephemeral"):
            await store.put("/eph/parent/child", b"")

    # -- bad input ------------------------------------------------------------------------------

    @pytest.mark.parametrize("path", ["relative/path", "/a//b", "/trailing/", ""])
    async def test_invalid_paths_are_rejected(self, env: StoreEnv, path: str) -> None:
        store = await env.open()
        with pytest.raises(InvalidPath):
            await store.put(path, b"x")
        with pytest.raises(InvalidPath):
            await store.get(path)

    async def test_oversized_values_are_rejected(self, env: StoreEnv) -> None:
        store = await env.open()
        with pytest.raises(ValueTooLarge):
            await store.put("/big", b"x" * (MAX_VALUE_SIZE + 1))
        assert await store.exists("/big") is None
        await store.put("/big", b"x" * MAX_VALUE_SIZE)

    # -- recipes --------------------------------------------------------------------------------

    async def test_leader_election_with_two_contenders(self, env: StoreEnv) -> None:
        s1, s2, reader = await env.open(), await env.open(), await env.open()
        first = LeaderElection(s1, "/election/two", b"broker-1")
        second = LeaderElection(s2, "/election/two", b"broker-2")
        assert await first.start() is LEADING
        assert await second.start() is FOLLOWING
        assert await second.leader_value() == b"broker-1"
        assert await read_leader(reader, "/election/two") == b"broker-1"
        await first.close()  # resigns: the follower takes over
        await eventually(lambda: second.state is LEADING, message="second leads")
        assert await read_leader(reader, "/election/two") == b"broker-2"
        await second.close()
        assert await read_leader(reader, "/election/two") is None

    async def test_two_contenders_sharing_one_session_make_one_leader(self, env: StoreEnv) -> None:
        # Several services of one process on one store (bookies inside a standalone): the node
        # is owned by their common session, but only the one whose value it holds leads.
        store = await env.open()
        first = LeaderElection(store, "/election/shared", b"bookie-1")
        second = LeaderElection(store, "/election/shared", b"bookie-2")
        assert await first.start() is LEADING
        assert await second.start() is FOLLOWING
        await first.close()
        await eventually(lambda: second.state is LEADING, message="second leads")
        await second.close()

    async def test_leader_failover_with_three_contenders_when_the_leader_session_ends(
        self, env: StoreEnv
    ) -> None:
        stores = [await env.open() for _ in range(3)]
        reader = await env.open()
        expired: set[int] = set()
        history: dict[int, list[LeaderElectionState]] = {i: [] for i in range(3)}
        violations: list[str] = []
        elections: list[LeaderElection] = []

        def recorder(index: int):  # type: ignore[no-untyped-def]
            def on_change(state: LeaderElectionState) -> None:
                history[index].append(state)
                leaders = [i for i, e in enumerate(elections) if e.is_leader and i not in expired]
                if len(leaders) > 1:
                    violations.append(f"two leaders at once: {leaders}")

            return on_change

        for i, store in enumerate(stores):
            elections.append(
                LeaderElection(
                    store, "/election/three", f"b{i}".encode(), on_state_change=recorder(i)
                )
            )
        for election in elections:
            await election.start()
        assert [e.state for e in elections] == [LEADING, FOLLOWING, FOLLOWING]

        expired.add(0)
        await env.expire(stores[0])
        await eventually(
            lambda: sorted(e.state.value for e in elections[1:]) == ["following", "leading"],
            message="a new leader among the survivors",
        )
        await eventually(lambda: elections[0].state is NO_LEADER, message="old leader steps down")
        new_leader = next(i for i in (1, 2) if elections[i].is_leader)
        follower = 3 - new_leader
        assert await read_leader(reader, "/election/three") == f"b{new_leader}".encode()
        await eventually(
            lambda: elections[follower].cached_leader_value == f"b{new_leader}".encode(),
            message="follower learns the new leader",
        )
        for i in (1, 2):
            assert NO_LEADER in history[i], f"contender {i} never saw the gap: {history[i]}"
        assert violations == []
        for election in elections:
            await election.close()

    async def test_lock_is_exclusive_and_passes_on_release(self, env: StoreEnv) -> None:
        s1, s2 = await env.open(), await env.open()
        first, second = Lock(s1, "/locks/x", b"1"), Lock(s2, "/locks/x", b"2")
        assert await first.try_acquire()
        assert not await second.try_acquire()
        waiter = asyncio.ensure_future(second.acquire())
        await asyncio.sleep(0)
        assert not waiter.done()
        await first.release()
        async with asyncio.timeout(10):
            await waiter
        assert second.held and not first.held
        await second.close()
        await first.close()


def _absent(store: MetadataStore, path: str):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return await store.exists(path) is None

    return check
