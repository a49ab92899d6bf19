"""Trimming: ledgers every cursor has passed are deleted, subject to retention time and size."""

from __future__ import annotations

from braid.ledger import EARLIEST, ManagedLedgerConfig
from braid.ledger.managed_ledger import ManagedLedgerImpl
from tests.integration.ledger.conftest import LedgerEnv

TOPIC = "public/default/persistent/trimmed"


async def _filled(
    env: LedgerEnv, config: ManagedLedgerConfig, ledgers: int, per_ledger: int = 2
) -> ManagedLedgerImpl:
    """A log that has had ``ledgers`` full ledgers plus a current one holding one entry (trims
    run in the background after each rollover, so some may be gone already)."""
    assert env.factory is not None
    ml = await env.factory.open_impl(TOPIC, config)
    for i in range(ledgers * per_ledger + 1):
        await ml.append(b"x" * 10 + bytes([i]))
    return ml


async def test_trim_deletes_only_ledgers_the_slowest_cursor_passed(env: LedgerEnv) -> None:
    assert env.storage is not None
    cfg = ManagedLedgerConfig(max_entries_per_ledger=2, retention_time_s=0, retention_size_bytes=0)
    assert env.factory is not None
    ml = await env.factory.open_impl(TOPIC, cfg)
    fast = await ml.open_cursor("fast", EARLIEST)
    slow = await ml.open_cursor("slow", EARLIEST)
    for i in range(7):
        await ml.append(bytes([i]))
    ids = [info.ledger_id for info in ml.ledgers]
    assert len(ids) == 4
    everything = await fast.read_entries(100)
    await fast.mark_delete(everything[-1].position)
    await ml.trim()
    assert [info.ledger_id for info in ml.ledgers] == ids  # "slow" has consumed nothing
    await slow.mark_delete(everything[2].position)  # first ledger fully, second partly
    await ml.trim()
    assert [info.ledger_id for info in ml.ledgers] == ids[1:]
    assert ids[0] not in await env.storage.list_ledgers()
    await slow.mark_delete(everything[-1].position)
    await ml.trim()
    # The current ledger is never deleted, even when fully consumed.
    assert [info.ledger_id for info in ml.ledgers] == ids[3:]
    assert set(await env.storage.list_ledgers()).isdisjoint(ids[:3])
    # Reads and backlog still work from the remaining ledger.
    assert slow.backlog() == 0
    assert [e.data for e in await ml.read(EARLIEST, 10)] == [bytes([6])]


async def test_trim_without_cursors_is_governed_by_retention_size(env: LedgerEnv) -> None:
    cfg = ManagedLedgerConfig(
        max_entries_per_ledger=2, retention_time_s=-1, retention_size_bytes=50
    )
    ml = await _filled(env, cfg, ledgers=4)  # 4 x 22 bytes + 11 bytes = 99 bytes
    await ml.trim()
    # Oldest ledgers go until at most 50 bytes remain: 99 -> 77 -> 55 -> 33.
    assert [info.size for info in ml.ledgers] == [22, 11]
    assert ml.total_size == 33


async def test_trim_keeps_consumed_ledgers_for_the_retention_time(env: LedgerEnv) -> None:
    cfg = ManagedLedgerConfig(
        max_entries_per_ledger=2, retention_time_s=3600, retention_size_bytes=-1
    )
    ml = await _filled(env, cfg, ledgers=3)
    cursor = await ml.open_cursor("sub", EARLIEST)
    entries = await cursor.read_entries(100)
    await cursor.mark_delete(entries[-1].position)
    before = [info.ledger_id for info in ml.ledgers]
    assert await ml.trim() == 0
    env.clock.advance(3599)
    assert await ml.trim() == 0
    env.clock.advance(2)
    assert await ml.trim() == 3
    assert [info.ledger_id for info in ml.ledgers] == before[3:]


async def test_trim_respects_the_cursor_even_when_retention_expired(env: LedgerEnv) -> None:
    cfg = ManagedLedgerConfig(
        max_entries_per_ledger=2, retention_time_s=10, retention_size_bytes=-1
    )
    assert env.factory is not None
    ml = await env.factory.open_impl(TOPIC, cfg)
    cursor = await ml.open_cursor("sub", EARLIEST)
    for i in range(5):
        await ml.append(bytes([i]))
    env.clock.advance(100)
    assert await ml.trim() == 0  # nothing consumed: retention never deletes unconsumed data
    first = await cursor.read_entries(2)
    await cursor.mark_delete(first[-1].position)
    assert await ml.trim() == 1
    assert cursor.backlog() == 3


async def test_unlimited_retention_keeps_everything_without_cursors(env: LedgerEnv) -> None:
    cfg = ManagedLedgerConfig(
        max_entries_per_ledger=2, retention_time_s=-1, retention_size_bytes=-1
    )
    ml = await _filled(env, cfg, ledgers=3)
    env.clock.advance(10**6)
    assert await ml.trim() == 0
    assert len(ml.ledgers) == 4
    assert len(await ml.read(EARLIEST, 100)) == 7


async def test_zero_retention_deletes_consumed_ledgers_automatically(env: LedgerEnv) -> None:
    assert env.factory is not None
    cfg = ManagedLedgerConfig(max_entries_per_ledger=2)  # retention 0 / 0: the defaults
    ml = await env.factory.open_impl(TOPIC, cfg)
    cursor = await ml.open_cursor("sub", EARLIEST)
    for i in range(5):
        await ml.append(bytes([i]))
    entries = await cursor.read_entries(10)
    await cursor.mark_delete(entries[3].position)
    await ml.trim()  # also runs in the background; an explicit call makes the test deterministic
    assert [info.entries for info in ml.ledgers] == [1]
    assert cursor.backlog() == 1


async def test_trim_survives_restart(env: LedgerEnv) -> None:
    cfg = ManagedLedgerConfig(
        max_entries_per_ledger=2, retention_time_s=-1, retention_size_bytes=25
    )
    ml = await _filled(env, cfg, ledgers=3)
    await ml.trim()
    kept = [info.ledger_id for info in ml.ledgers]
    factory = await env.restart()
    reopened = await factory.open(TOPIC)
    # The reopened log has the same ledgers plus the new current one.
    assert [info.ledger_id for info in reopened.ledgers][: len(kept)] == kept
    entries = await reopened.read(EARLIEST, 100)
    assert len(entries) == sum(info.entries for info in reopened.ledgers)
