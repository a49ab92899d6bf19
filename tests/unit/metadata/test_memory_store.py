"""Memory backend specifics: shared trees, session faults, delivery outside the call."""

from __future__ import annotations

import pytest

from braid.clock import ManualClock
from braid.metadata import (
    LeaderElection,
    LeaderElectionState,
    MemoryBackend,
    MemoryMetadataStore,
    Notification,
    NotificationType,
    SessionEvent,
    SessionLost,
    StoreClosed,
    StoreUnavailable,
    open_store,
)
from tests.support.polling import eventually


async def test_named_memory_urls_share_a_tree_and_anonymous_ones_do_not() -> None:
    a = await open_store("memory://shared-tree-test")
    b = await open_store("memory://shared-tree-test")
    c = await open_store("memory://")
    await a.put("/x", b"1")
    assert await b.get("/x") is not None
    assert await c.get("/x") is None
    for store in (a, b, c):
        await store.close()


async def test_listeners_run_after_the_call_returns_not_inside_it() -> None:
    store = MemoryMetadataStore()
    seen: list[Notification] = []
    store.register_listener(seen.append)
    await store.put("/a", b"")
    assert seen == []  # queued, not delivered while the tree was locked
    await eventually(lambda: len(seen) == 2)
    await store.close()


async def test_backend_expiry_removes_ephemerals_and_reports_session_lost() -> None:
    backend = MemoryBackend(ManualClock())
    owner, other = MemoryMetadataStore(backend), MemoryMetadataStore(backend)
    events: list[SessionEvent] = []
    owner.register_session_listener(events.append)
    await owner.put("/e", b"", ephemeral=True)
    assert owner.session_id in backend.session_ids
    backend.expire_session(owner.session_id)
    assert await other.get("/e") is None
    assert owner.session_id not in backend.session_ids
    await eventually(lambda: events == [SessionEvent.SESSION_LOST])
    with pytest.raises(SessionLost):
        await owner.put("/f", b"")
    await owner.close()
    await other.close()


async def test_disconnect_suspends_and_reconnect_resumes_the_same_session() -> None:
    store = MemoryMetadataStore()
    events: list[SessionEvent] = []
    store.register_session_listener(events.append)
    election = LeaderElection(store, "/leader", b"me")
    assert await election.start() is LeaderElectionState.LEADING
    store.disconnect()
    with pytest.raises(StoreUnavailable):
        await store.get("/leader")
    await eventually(lambda: election.state is LeaderElectionState.NO_LEADER)
    store.reconnect()
    await eventually(lambda: election.is_leader, message="leadership confirmed after reconnect")
    assert events == [SessionEvent.SUSPENDED, SessionEvent.RECONNECTED]
    await election.close()
    assert await store.get("/leader") is None
    await store.close()


async def test_closed_store_refuses_calls_and_close_is_idempotent() -> None:
    store = MemoryMetadataStore()
    await store.close()
    await store.close()
    with pytest.raises(StoreClosed):
        await store.get("/a")


async def test_a_listener_may_close_its_own_store() -> None:
    store = MemoryMetadataStore()
    closed: list[bool] = []

    async def close_on_first(_: Notification) -> None:
        if not closed:
            closed.append(True)
            await store.close()

    store.register_listener(close_on_first)
    await store.put("/a", b"")
    await eventually(lambda: closed == [True])
    with pytest.raises(StoreClosed):
        await store.get("/a")


async def test_deleting_a_subtree_notifies_deepest_first() -> None:
    store = MemoryMetadataStore()
    await store.put("/t/a/b", b"")
    seen: list[Notification] = []
    store.register_listener(seen.append)
    await store.delete_recursive("/t")

    # (the creations may still be queued when the listener registers, so look at deletions)
    def deleted() -> list[str]:
        return [n.path for n in seen if n.type is NotificationType.DELETED]

    await eventually(lambda: len(deleted()) == 3)
    assert deleted() == ["/t/a/b", "/t/a", "/t"]
    await store.close()
