"""The append pipeline under concurrency: cancelled callers, tailing readers during rollovers,
cursor state flushed on close, and taking a fenced log over again."""

from __future__ import annotations

import asyncio

import pytest

from braid.ledger import (
    EARLIEST,
    LATEST,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerFenced,
    ManagedLedgerMetadataError,
)
from braid.ledger.names import ledger_path
from tests.integration.ledger.conftest import LedgerEnv

TOPIC = "public/default/persistent/pipeline"
KEEP = ManagedLedgerConfig(max_entries_per_ledger=7, retention_time_s=-1, retention_size_bytes=-1)


async def test_a_cancelled_append_does_not_break_the_pipeline(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    tasks = [asyncio.ensure_future(ml.append(f"m{i}".encode())) for i in range(40)]
    await asyncio.sleep(0)  # one loop turn: every append has been issued
    tasks[5].cancel()
    tasks[20].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    positions = [p for i, p in enumerate(done) if i not in (5, 20)]
    assert positions == sorted(positions)
    after = await ml.append(b"after")
    assert after > positions[-1]
    # The cancelled callers' entries may or may not be stored; every other one is, in order.
    stored = [e.data for e in await ml.read(EARLIEST, 100)]
    expected = [f"m{i}".encode() for i in range(40) if i not in (5, 20)] + [b"after"]
    assert [d for d in stored if d in expected] == expected


async def test_tailing_cursor_sees_every_entry_in_order_across_rollovers(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("tail", LATEST)
    total = 150

    async def consume() -> list[bytes]:
        seen: list[bytes] = []
        while len(seen) < total:
            entries = await cursor.read_entries_or_wait(16)
            seen.extend(e.data for e in entries)
            await cursor.mark_delete(entries[-1].position)
        return seen

    consumer = asyncio.ensure_future(consume())
    for start in range(0, total, 10):
        await asyncio.gather(*(ml.append(f"m{i}".encode()) for i in range(start, start + 10)))
    seen = await asyncio.wait_for(consumer, timeout=60)
    assert seen == [f"m{i}".encode() for i in range(total)]
    assert cursor.backlog() == 0
    assert len(ml.ledgers) >= total // 7


async def test_close_flushes_acknowledgements_not_yet_awaited(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(20)]
    # Fire-and-forget acks, as a broker may do; close() must still persist the latest state.
    pending = [asyncio.ensure_future(cursor.delete([p])) for p in positions[::2]]
    await asyncio.sleep(0)  # one loop turn: the acks are applied in memory, writes in flight
    await env.factory.close()
    await asyncio.gather(*pending)
    factory = await env.restart()
    reopened = await factory.open(TOPIC, KEEP)
    restored = reopened.cursors["sub"]
    assert restored.backlog() == 10
    assert all(restored.is_deleted(p) for p in positions[::2])


async def test_a_fenced_log_can_be_taken_over_again_through_its_factory(env: LedgerEnv) -> None:
    assert env.factory is not None
    first = await env.factory.open(TOPIC, KEEP)
    await first.append(b"one")
    other = env.new_factory()
    try:
        second = await other.open(TOPIC, KEEP)
        await second.append(b"two")
        with pytest.raises(ManagedLedgerFenced):
            await first.append(b"lost the log")
        # The first broker gets the log back: its factory forgot the fenced instance.
        again = await env.factory.open(TOPIC, KEEP)
        assert again is not first
        await again.append(b"three")
        assert [e.data for e in await again.read(EARLIEST, 10)] == [b"one", b"two", b"three"]
    finally:
        await other.close()


async def test_waiting_readers_are_released_when_the_log_closes(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", LATEST)
    waiting = asyncio.ensure_future(cursor.read_entries_or_wait(5))
    await asyncio.sleep(0)  # one loop turn: the reader is now parked
    assert not waiting.done()
    await ml.close()
    with pytest.raises(ManagedLedgerClosed):
        await asyncio.wait_for(waiting, timeout=10)
    with pytest.raises(ManagedLedgerClosed):
        await cursor.mark_delete(ml.last_confirmed_position)
    with pytest.raises(ManagedLedgerClosed):
        await ml.read(EARLIEST, 1)


async def test_a_corrupt_ledger_node_is_a_typed_error(env: LedgerEnv) -> None:
    assert env.factory is not None and env.metadata is not None
    await env.metadata.put(ledger_path("/managed-ledgers", TOPIC), b"{not json")
    with pytest.raises(ManagedLedgerMetadataError):
        await env.factory.open(TOPIC)
