"""Reads that outlive a store outage (:mod:`braid.metadata.last_known`): while the store is
disconnected a read answers what it last read and marks the request stale; what was never read,
and every write, still fails; once the store is back reads are fresh again."""

from __future__ import annotations

import pytest

from braid.metadata.api import StoreUnavailable
from braid.metadata.last_known import LastKnownReads, track_stale_reads
from braid.metadata.memory import MemoryMetadataStore


async def test_reads_fall_back_to_their_last_answer_only_while_the_store_is_down() -> None:
    store = MemoryMetadataStore()
    reads = LastKnownReads(store)
    await store.put("/a", b"1")
    await store.put("/a/b", b"2")
    assert (await reads.get("/a"))[0] == b"1"  # type: ignore[index]
    assert await reads.children("/a") == ["b"]
    assert await reads.exists("/a/b") is not None

    store.disconnect()
    tracker = track_stale_reads()
    assert (await reads.get("/a"))[0] == b"1"  # type: ignore[index]
    assert await reads.children("/a") == ["b"]
    assert await reads.exists("/a/b") is not None
    assert tracker.stale and reads.stale_answers == 3
    with pytest.raises(StoreUnavailable):
        await reads.get("/never-read")
    with pytest.raises(StoreUnavailable):
        await reads.put("/a", b"3")  # nothing is decided on old data

    store.reconnect()
    await store.put("/a", b"4")
    tracker = track_stale_reads()
    assert (await reads.get("/a"))[0] == b"4"  # type: ignore[index]
    assert not tracker.stale


async def test_at_most_capacity_paths_are_remembered() -> None:
    store = MemoryMetadataStore()
    reads = LastKnownReads(store, capacity=2)
    for name in ("x", "y", "z"):
        await store.put(f"/{name}", name.encode())
        await reads.get(f"/{name}")
    store.disconnect()
    with pytest.raises(StoreUnavailable):
        await reads.get("/x")  # the least recently read went first
    assert (await reads.get("/z"))[0] == b"z"  # type: ignore[index]
