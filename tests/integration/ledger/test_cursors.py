"""Cursors: cumulative and individual acknowledgements, reads, seek/reset/rewind, waiting for
entries, backlog, and all of it surviving a restart."""

from __future__ import annotations

import asyncio

import pytest

from braid.core.errors import BraidError
from braid.ledger import (
    EARLIEST,
    LATEST,
    CursorNotFound,
    InvalidPosition,
    ManagedLedgerConfig,
    ManagedLedgerTerminated,
    Position,
)
from braid.ledger.codec import decode_cursor_info
from braid.ledger.names import cursor_path
from tests.integration.ledger.conftest import LedgerEnv
from tests.support.polling import eventually

TOPIC = "public/default/persistent/cursors"
KEEP = ManagedLedgerConfig(max_entries_per_ledger=4, retention_time_s=-1, retention_size_bytes=-1)


async def test_cumulative_and_individual_acks_survive_restart(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(f"m{i}".encode()) for i in range(10)]
    await cursor.mark_delete(positions[2], {"sequence-id": 42})
    await cursor.delete([positions[5], positions[6], positions[8]])
    assert cursor.mark_delete_position == positions[2]
    assert cursor.individually_deleted == [(positions[5], positions[6]), (positions[8],) * 2]
    assert cursor.backlog() == 10 - 3 - 3
    assert cursor.is_deleted(positions[1]) and cursor.is_deleted(positions[8])
    assert not cursor.is_deleted(positions[7])

    factory = await env.restart()
    ml = await factory.open(TOPIC, KEEP)
    restored = ml.cursors["sub"]
    assert restored.mark_delete_position == positions[2]
    assert restored.properties == {"sequence-id": 42}
    assert restored.individually_deleted == [(positions[5], positions[6]), (positions[8],) * 2]
    assert restored.backlog() == 4
    unacked = await restored.read_entries(100)
    assert [e.data for e in unacked] == [b"m3", b"m4", b"m7", b"m9"]


async def test_individual_acks_advance_mark_delete_across_ledger_boundaries(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(10)]  # ledgers of 4, 4, 2
    await cursor.delete(positions[1:7])
    assert cursor.mark_delete_position < positions[0]
    assert cursor.individually_deleted == [
        (positions[1], positions[3]),
        (positions[4], positions[6]),
    ]
    await cursor.delete([positions[0]])
    # 0..6 are now contiguous through the end of the first ledger into the second.
    assert cursor.mark_delete_position == positions[6]
    assert cursor.individually_deleted == []
    assert cursor.backlog() == 3
    await cursor.delete([positions[7]])
    assert cursor.mark_delete_position == positions[7]


async def test_read_entries_skips_acknowledged_and_moves_the_read_position(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(10)]
    await cursor.delete([positions[0], positions[2], positions[3], positions[4], positions[9]])
    first = await cursor.read_entries(3)
    assert [e.position for e in first] == [positions[1], positions[5], positions[6]]
    assert cursor.read_position == positions[7]
    rest = await cursor.read_entries(10)
    assert [e.position for e in rest] == [positions[7], positions[8]]
    assert not cursor.has_more_entries()
    assert await cursor.read_entries(10) == []


async def test_seek_reset_and_rewind(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(10)]
    await cursor.mark_delete(positions[1])
    await cursor.delete([positions[4]])
    await cursor.seek(positions[6])
    assert [e.position for e in await cursor.read_entries(2)] == positions[6:8]
    # Seeking below the mark-delete position starts at the first unacknowledged entry, and
    # individually acknowledged entries stay acknowledged.
    await cursor.seek(positions[0])
    assert cursor.read_position == positions[2]
    assert [e.position for e in await cursor.read_entries(3)] == [
        positions[2],
        positions[3],
        positions[5],
    ]
    cursor.rewind()
    assert cursor.read_position == positions[2]
    await cursor.seek(LATEST)
    assert not cursor.has_more_entries()
    # Reset moves the mark-delete to just before the position and forgets individual acks.
    await cursor.reset(positions[3])
    assert cursor.mark_delete_position == Position(positions[3].ledger_id, 2)
    assert cursor.individually_deleted == []
    assert cursor.backlog() == 7
    assert (await cursor.read_entries(1))[0].position == positions[3]
    await cursor.reset(EARLIEST)
    assert cursor.backlog() == 10
    assert (await cursor.read_entries(1))[0].position == positions[0]
    await cursor.reset(LATEST)
    assert cursor.backlog() == 0
    factory = await env.restart()
    ml = await factory.open(TOPIC, KEEP)
    assert ml.cursors["sub"].mark_delete_position == positions[-1]


async def test_cursor_created_at_latest_or_at_a_position(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    positions = [await ml.append(bytes([i])) for i in range(6)]
    latest = await ml.open_cursor("latest")  # LATEST is the default
    at = await ml.open_cursor("at-4", positions[4])
    earliest = await ml.open_cursor("earliest", EARLIEST)
    assert latest.backlog() == 0 and at.backlog() == 2 and earliest.backlog() == 6
    new = await ml.append(b"new")
    assert [e.position for e in await latest.read_entries(10)] == [new]
    assert [e.position for e in await at.read_entries(10)] == [positions[4], positions[5], new]
    assert await ml.open_cursor("latest", EARLIEST) is latest  # existing cursors are returned
    with pytest.raises(InvalidPosition):
        await ml.open_cursor("beyond", Position(positions[-1].ledger_id + 5, 3))


async def test_read_entries_or_wait_wakes_when_an_entry_is_appended(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", LATEST)
    waiting = asyncio.ensure_future(cursor.read_entries_or_wait(5))
    for _ in range(10):  # give the reader every chance to (wrongly) return
        await asyncio.sleep(0)
    assert not waiting.done()
    position = await ml.append(b"wake up")
    entries = await asyncio.wait_for(waiting, timeout=10)
    assert [(e.position, e.data) for e in entries] == [(position, b"wake up")]


async def test_read_entries_or_wait_ends_at_a_terminated_log(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    await ml.append(b"only")
    assert len(await cursor.read_entries_or_wait(5)) == 1
    waiting = asyncio.ensure_future(cursor.read_entries_or_wait(5))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiting.done()
    await ml.terminate()
    with pytest.raises(ManagedLedgerTerminated):
        await asyncio.wait_for(waiting, timeout=10)


async def test_mark_delete_rejects_going_backwards_or_beyond_the_end(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(bytes([i])) for i in range(3)]
    await cursor.mark_delete(positions[1])
    with pytest.raises(InvalidPosition):
        await cursor.mark_delete(positions[0])
    with pytest.raises(InvalidPosition):
        await cursor.mark_delete(Position(positions[2].ledger_id, 99))
    with pytest.raises(InvalidPosition):
        await cursor.delete([Position(positions[2].ledger_id, 3)])
    with pytest.raises(ValueError):  # InvalidInputError is a ValueError
        await cursor.mark_delete(positions[2], {"bad": "not-an-int"})  # type: ignore[dict-item]
    assert cursor.mark_delete_position == positions[1]


async def test_concurrent_acks_are_coalesced_into_few_snapshot_writes(env: LedgerEnv) -> None:
    assert env.factory is not None and env.metadata is not None and env.storage is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = await asyncio.gather(*(ml.append(bytes([i % 256])) for i in range(200)))
    await asyncio.gather(*(cursor.delete([p]) for p in reversed(positions)))
    assert cursor.mark_delete_position == positions[-1]
    assert cursor.backlog() == 0
    got = await env.metadata.get(cursor_path("/managed-ledgers", TOPIC, "sub"))
    assert got is not None
    node = decode_cursor_info(got[0])
    reader = await env.storage.open_ledger(node.cursors_ledger_id, recovery=False)
    snapshots = await reader.refresh_last_add_confirmed() + 1
    await reader.close()
    # 200 acknowledgements, each awaited until durable, but at most one write in flight: the
    # first starts the cursor ledger, the second carries every ack that arrived meanwhile.
    assert snapshots <= 3


async def test_delete_cursor_removes_its_state(env: LedgerEnv) -> None:
    assert env.factory is not None and env.metadata is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    await ml.append(b"x")
    await cursor.mark_delete(ml.last_confirmed_position)
    await ml.delete_cursor("sub")
    assert "sub" not in ml.cursors
    assert await env.metadata.exists(cursor_path("/managed-ledgers", TOPIC, "sub")) is None
    with pytest.raises(CursorNotFound):
        await ml.delete_cursor("sub")
    factory = await env.restart()
    reopened = await factory.open(TOPIC, KEEP)
    assert dict(reopened.cursors) == {}


async def test_partly_acknowledged_batches_keep_their_ack_sets_across_restart(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(f"batch{i}".encode()) for i in range(3)]
    # Batches of 3 messages: message 1 of entry 0 acknowledged, then message 0 of it.
    await cursor.delete_batch_indexes([(positions[0], [0b101])])
    await cursor.delete_batch_indexes([(positions[0], [0b110]), (positions[2], [0b011])])
    assert cursor.batch_deleted_indexes(positions[0]) == (0b100,)
    assert cursor.batch_deleted_indexes(positions[2]) == (0b011,)
    assert not cursor.is_deleted(positions[0])

    factory = await env.restart()
    ml = await factory.open(TOPIC, KEEP)
    restored = ml.cursors["sub"]
    assert restored.batch_deleted_indexes(positions[0]) == (0b100,)
    assert restored.batch_deleted_indexes(positions[2]) == (0b011,)
    # The last message of entry 0 acknowledged: the entry is gone and mark-delete moves on.
    await restored.delete_batch_indexes([(positions[0], [0b011])])
    assert restored.mark_delete_position == positions[0]
    assert restored.batch_deleted_indexes(positions[0]) is None
    # A whole-entry ack drops the partial state; a reset forgets all of it.
    await restored.delete([positions[2]])
    assert restored.batch_deleted_indexes(positions[2]) is None
    await restored.delete_batch_indexes([(positions[1], [1])])
    await restored.reset(EARLIEST)
    assert restored.batch_deleted_indexes(positions[1]) is None


async def test_state_written_tells_an_acknowledgement_in_memory_from_one_on_disk(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, KEEP)
    cursor = await ml.open_cursor("sub", EARLIEST)
    positions = [await ml.append(f"m{i}".encode()) for i in range(3)]
    assert cursor.state_written
    store = cursor._store  # type: ignore[attr-defined]
    write = store.write
    gate = asyncio.Event()
    writing: list[object] = []
    failures = [OSError("disk gone")]

    async def slow_then_failing(info: object) -> None:
        writing.append(info)
        await gate.wait()
        if failures:
            raise failures.pop()
        await write(info)

    store.write = slow_then_failing
    ack = asyncio.ensure_future(cursor.mark_delete(positions[-1]))
    try:
        await eventually(lambda: len(writing) == 1, message="the ack's write under way")
        assert cursor.backlog() == 0 and not cursor.state_written  # counted, not written
    finally:
        gate.set()
    with pytest.raises(BraidError):
        await ack
    assert cursor.backlog() == 0 and not cursor.state_written  # the write failed
    await cursor.write_state()  # writes it again
    assert cursor.state_written and len(writing) == 2
    await cursor.write_state()  # nothing left to write
    assert len(writing) == 2
    factory = await env.restart()
    restored = (await factory.open(TOPIC, KEEP)).cursors["sub"]
    assert restored.mark_delete_position == positions[-1] and restored.backlog() == 0
