"""Group commit on the sqlite store (ADR 0077): writes queued while its thread is busy share one
transaction, yet each is atomic and checked alone, applies in call order, is answered only once
committed, and a group that fails as a whole is run again one write at a time."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from braid.metadata import BadVersion, NodeNotFound, Notification, NotificationType
from braid.metadata.sqlite import SqliteMetadataStore
from tests.support.polling import eventually

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    opened = await SqliteMetadataStore.open(str(tmp_path / "metadata.db"))
    yield opened
    await opened.close()


async def queued_together(
    store: SqliteMetadataStore, *calls: Callable[[], Awaitable[Any]]
) -> list[Any]:
    """Run ``calls`` while the store's thread is held, so they all queue before it takes them;
    each call's result or exception, in order."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(10)

    store._executor.submit(hold)
    await asyncio.to_thread(held.wait, 10)
    tasks = [asyncio.ensure_future(call()) for call in calls]
    await eventually(
        lambda: len(store._queued_writes) == len(calls), message="every call queued its write"
    )
    release.set()
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_queued_writes_share_one_commit_and_each_is_checked_alone(
    store: SqliteMetadataStore, tmp_path: Path
) -> None:
    seen: list[Notification] = []

    def listen(event: object) -> None:
        if not isinstance(event, Notification) or not event.path.startswith("/g/"):
            return
        if event.type is not NotificationType.CHILDREN_CHANGED:
            seen.append(event)

    store.register_listener(listen)
    await store.put("/g/cas", b"v0")
    await store.put("/g/gone-soon", b"x")
    commits = store.commits
    results = await queued_together(
        store,
        lambda: store.put("/g/a", b"a"),
        lambda: store.put("/g/cas", b"v1", 0),  # right version: applies
        lambda: store.put("/g/cas", b"stale", 0),  # the write before it moved the version on
        lambda: store.delete("/g/missing"),
        lambda: store.delete("/g/gone-soon"),
        lambda: store.put("/g/b", b"b", -1),
    )
    assert store.commits == commits + 1
    assert results[0].version == 0 and results[1].version == 1 and results[5].version == 0
    assert isinstance(results[2], BadVersion)
    assert isinstance(results[3], NodeNotFound)
    assert results[4] is None
    # What a failed write did inside the transaction is gone; the others are durable: a
    # second session on the file reads them.
    other = await SqliteMetadataStore.open(str(tmp_path / "metadata.db"))
    try:
        assert (await other.get("/g/cas"))[0] == b"v1"  # type: ignore[index]
        assert await other.get("/g/gone-soon") is None
        assert [name for name in await other.children("/g")] == ["a", "b", "cas"]
    finally:
        await other.close()
    # Listeners hear the writes that applied, in call order, and nothing of those that failed.
    expected = [
        Notification(NotificationType.CREATED, "/g/cas"),
        Notification(NotificationType.CREATED, "/g/gone-soon"),
        Notification(NotificationType.CREATED, "/g/a"),
        Notification(NotificationType.MODIFIED, "/g/cas"),
        Notification(NotificationType.DELETED, "/g/gone-soon"),
        Notification(NotificationType.CREATED, "/g/b"),
    ]
    await eventually(lambda: seen == expected, message=lambda: f"notifications {seen}")


async def test_a_group_that_fails_as_a_whole_is_run_again_one_write_at_a_time(
    store: SqliteMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = store._put_sync
    failed: list[str] = []

    def put_failing_once(path: str, *args: Any) -> Any:
        if path == "/f/flaky" and not failed:
            failed.append(path)
            raise sqlite3.OperationalError("disk I/O error")
        return original(path, *args)

    monkeypatch.setattr(store, "_put_sync", put_failing_once)
    commits = store.commits
    results = await queued_together(
        store,
        lambda: store.put("/f/first", b"1", -1),  # applied in the group, then rolled back
        lambda: store.put("/f/flaky", b"2"),
        lambda: store.put("/f/last", b"3", -1),
    )
    assert failed == ["/f/flaky"]
    # Each write applied exactly once: a create that had not been rolled back with the group
    # would fail with BadVersion ("already exists") when run again alone.
    assert [r.version for r in results] == [0, 0, 0]
    assert store.commits == commits + 3
    for path, value in (("/f/first", b"1"), ("/f/flaky", b"2"), ("/f/last", b"3")):
        assert (await store.get(path))[0] == value  # type: ignore[index]


async def test_a_write_alone_is_its_own_transaction(store: SqliteMetadataStore) -> None:
    commits = store.commits
    for i in range(3):
        await store.put(f"/alone/{i}", b"x")
    assert store.commits == commits + 3
