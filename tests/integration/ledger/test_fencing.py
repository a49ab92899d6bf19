"""Two owners of one managed ledger: the second open fences the first, and nothing the first
acknowledged is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from braid.ledger import (
    EARLIEST,
    DefaultManagedLedgerFactory,
    ManagedLedgerConfig,
    ManagedLedgerFenced,
    Position,
)
from braid.storage import StorageRouter, open_local_cluster
from tests.integration.ledger.conftest import LedgerEnv
from tests.support.polling import eventually

TOPIC = "public/default/persistent/contested"
KEEP = ManagedLedgerConfig(max_entries_per_ledger=5, retention_time_s=-1, retention_size_bytes=-1)


async def test_second_owner_fences_the_first_and_keeps_every_acked_entry(env: LedgerEnv) -> None:
    assert env.factory is not None
    first = await env.factory.open(TOPIC, KEEP)
    acked = [(await first.append(f"a{i}".encode()), f"a{i}".encode()) for i in range(12)]

    second_factory = env.new_factory()
    try:
        second = await second_factory.open(TOPIC, KEEP)
        with pytest.raises(ManagedLedgerFenced):
            await first.append(b"from the old owner")
        with pytest.raises(ManagedLedgerFenced):
            await first.append(b"and again")
        entries = await second.read(EARLIEST, 100)
        assert [(e.position, e.data) for e in entries] == acked
        new = await second.append(b"b0")
        assert new > acked[-1][0]
        # The fenced instance left its factory: opening again gives a fresh owner.
        assert first.is_fenced  # type: ignore[attr-defined]
        with pytest.raises(ManagedLedgerFenced):
            await first.terminate()
    finally:
        await second_factory.close()


async def test_appends_in_flight_during_takeover_are_either_acked_and_kept_or_failed(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    first = await env.factory.open(TOPIC, KEEP)
    await first.append(b"warm-up")
    appends = [asyncio.ensure_future(first.append(f"x{i}".encode())) for i in range(200)]
    second_factory = env.new_factory()
    try:
        second = await second_factory.open(TOPIC, KEEP)
        results = await asyncio.gather(*appends, return_exceptions=True)
        acked = {r for r in results if isinstance(r, Position)}
        failed = [r for r in results if not isinstance(r, Position)]
        assert all(isinstance(f, ManagedLedgerFenced) for f in failed)
        stored = {e.position for e in await second.read(EARLIEST, 1000)}
        assert acked <= stored
        # Acknowledgements came back in order: every acked append precedes every failed one.
        outcome = [isinstance(r, Position) for r in results]
        assert outcome == sorted(outcome, reverse=True)
    finally:
        await second_factory.close()


async def test_fenced_owner_cannot_move_cursors_of_the_new_owner(env: LedgerEnv) -> None:
    assert env.factory is not None
    first = await env.factory.open(TOPIC, KEEP)
    old_cursor = await first.open_cursor("sub", EARLIEST)
    positions = [await first.append(bytes([i])) for i in range(6)]
    await old_cursor.mark_delete(positions[1])

    second_factory = env.new_factory()
    try:
        second = await second_factory.open(TOPIC, KEEP)
        new_cursor = second.cursors["sub"]
        assert new_cursor.mark_delete_position == positions[1]
        with pytest.raises(ManagedLedgerFenced):
            await old_cursor.mark_delete(positions[5])
        await new_cursor.mark_delete(positions[3])
        assert new_cursor.backlog() == 2
    finally:
        await second_factory.close()


async def test_old_owner_rollover_after_takeover_is_fenced(env: LedgerEnv) -> None:
    assert env.factory is not None
    first = await env.factory.open(TOPIC, ManagedLedgerConfig(max_entries_per_ledger=1))
    await first.append(b"fills the ledger")
    second_factory = env.new_factory()
    try:
        second = await second_factory.open(TOPIC)
        # The old owner's next append needs a new ledger; its CAS on the ledger list fails.
        with pytest.raises(ManagedLedgerFenced):
            await first.append(b"needs a rollover")
        assert [e.data for e in await second.read(EARLIEST, 10)] == [b"fills the ledger"]
    finally:
        await second_factory.close()


async def test_a_second_owner_on_other_bookies_drops_the_ledger_as_empty_so_the_first_stops_acking(
    env: LedgerEnv, tmp_path: Path
) -> None:
    """The mechanism of issue 22 at the managed-ledger level (ADR 0040): two processes' private
    bookies (both ``bookie-0`` of cluster ``standalone``) on one metadata store. The second
    owner's recovery fences its *own* bookie, which never held the ledger, finds it empty and
    drops it from the shared log: the first owner's acknowledged entries are unreadable to it,
    and the first owner's bookie, never fenced, would go on acknowledging. What stops the first
    owner is the metadata: its next CAS fails, and from then on no append is acknowledged. (The
    start-up guard keeps two such processes off one store; this pins the managed ledger's own
    check.)"""
    assert env.factory is not None and env.metadata is not None
    first = await env.factory.open(TOPIC, KEEP)
    cursor = await first.open_cursor("sub", EARLIEST)
    acked = [await first.append(f"a{i}".encode()) for i in range(3)]

    other_bookies = await open_local_cluster(env.metadata, tmp_path / "other-process")
    other = DefaultManagedLedgerFactory(env.metadata, StorageRouter([other_bookies]))
    try:
        second = await other.open(TOPIC, KEEP)
        assert await second.read(EARLIEST, 10) == []  # the first owner's entries are gone to it
        assert await first.append(b"its bookie was never fenced") > acked[-1]

        outcomes: list[tuple[bool, Position | None]] = []

        def record(position: Position | None, error: BaseException | None, _: None) -> None:
            outcomes.append((first.is_fenced, position))

        for i in range(50):
            first.append_with_callback(f"x{i}".encode(), record, None)
        with pytest.raises(ManagedLedgerFenced):
            await cursor.mark_delete(acked[-1])  # its CAS finds the new owner's cursor
        await eventually(lambda: len(outcomes) == 50, message="every append to be answered")
        assert first.is_fenced
        assert not [o for o in outcomes if o[0] and o[1] is not None], outcomes
    finally:
        await other.close()
        await other_bookies.close()


async def test_appends_in_flight_when_the_log_learns_it_was_taken_over_are_not_acknowledged(
    env: LedgerEnv,
) -> None:
    """Ownership is checked before every acknowledgement: adds storage has not answered yet
    when a cursor's CAS reveals another owner fail, even if storage then takes them."""
    assert env.factory is not None
    first = await env.factory.open(TOPIC, KEEP)
    await first.append(b"warm-up")
    appends = [asyncio.ensure_future(first.append(f"x{i}".encode())) for i in range(20)]
    await asyncio.sleep(0)  # issued to storage, not yet answered
    first.on_cursor_fenced()  # what a cursor store calls when its CAS finds another owner
    results = await asyncio.gather(*appends, return_exceptions=True)
    assert all(isinstance(r, ManagedLedgerFenced) for r in results), results


async def test_a_stale_owner_cannot_write_into_a_ledger_the_new_owner_deleted(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    first = await env.factory.open(TOPIC, KEEP)  # its current ledger is still empty
    second_factory = env.new_factory()
    try:
        await second_factory.open(TOPIC, KEEP)  # recovers it empty, drops and deletes it
        with pytest.raises(ManagedLedgerFenced):
            await first.append(b"acknowledged into a deleted ledger")
    finally:
        await second_factory.close()
