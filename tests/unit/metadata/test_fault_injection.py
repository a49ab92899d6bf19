"""The fault-injection wrapper fails, delays and holds chosen operations on chosen paths."""

from __future__ import annotations

import asyncio

import pytest

from braid.clock import ManualClock
from braid.metadata import (
    BadVersion,
    FaultInjectionMetadataStore,
    MemoryMetadataStore,
    MetadataStore,
    StoreUnavailable,
)
from tests.support.polling import eventually


@pytest.fixture
async def store() -> FaultInjectionMetadataStore:
    return FaultInjectionMetadataStore(MemoryMetadataStore(), clock=ManualClock())


async def test_failure_hits_only_the_chosen_operation_and_path_once(
    store: FaultInjectionMetadataStore,
) -> None:
    assert isinstance(store, MetadataStore)  # a drop-in for any store
    fault = store.fail("put", "/a")
    await store.put("/b", b"")  # other path: untouched
    with pytest.raises(StoreUnavailable):
        await store.put("/a", b"")
    assert await store.get("/a") is None  # failed before reaching the store
    await store.put("/a", b"")  # only once
    assert fault.hits == 1


async def test_failure_after_the_call_models_a_lost_acknowledgement(
    store: FaultInjectionMetadataStore,
) -> None:
    store.fail("put", lambda p: p.startswith("/acks/"), BadVersion, after=True)
    with pytest.raises(BadVersion):
        await store.put("/acks/x", b"written")
    found = await store.get("/acks/x")
    assert found is not None and found[0] == b"written"


async def test_delay_waits_on_the_injected_clock(store: FaultInjectionMetadataStore) -> None:
    clock = ManualClock()
    delayed = FaultInjectionMetadataStore(store.inner, clock=clock)
    delayed.delay("get", "/slow", 2.0)
    call = asyncio.ensure_future(delayed.get("/slow"))
    await eventually(lambda: clock.pending_timers == 1)
    assert not call.done()
    clock.advance(2.0)
    assert await call is None


async def test_hold_parks_an_operation_until_released(store: FaultInjectionMetadataStore) -> None:
    gate = store.hold("delete", "/held")
    await store.put("/held", b"")
    call = asyncio.ensure_future(store.delete("/held"))
    await eventually(lambda: gate.waiting == 1)
    assert await store.exists("/held") is not None
    gate.release()
    await call
    assert await store.exists("/held") is None


async def test_repeating_faults_and_removal(store: FaultInjectionMetadataStore) -> None:
    fault = store.fail("*", None, times=None)
    for _ in range(3):
        with pytest.raises(StoreUnavailable):
            await store.children("/")
    store.remove(fault)
    assert await store.children("/") == []
    with pytest.raises(ValueError, match="unknown operation"):
        store.fail("rename", "/x")
    await store.close()
