"""Two owners of one managed ledger: the second open fences the first, and nothing the first
acknowledged is lost."""

from __future__ import annotations

import asyncio

import pytest

from braid.ledger import EARLIEST, ManagedLedgerConfig, ManagedLedgerFenced, Position
from tests.integration.ledger.conftest import LedgerEnv

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
