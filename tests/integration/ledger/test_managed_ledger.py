"""Managed ledger over real sqlite metadata and a real local bookie: appends, rollover, reads,
termination, names and the factory."""

from __future__ import annotations

import asyncio

import pytest

from braid.ledger import (
    EARLIEST,
    DefaultManagedLedgerFactory,
    InvalidCursorName,
    InvalidManagedLedgerName,
    LedgerIdNotIncreasing,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerNotFound,
    ManagedLedgerTerminated,
    Position,
)
from braid.ledger.codec import decode_ledger_info
from braid.ledger.names import ledger_path
from braid.storage import StorageRouter, open_local_cluster
from braid.storage.api import ReadHandle
from tests.integration.ledger.conftest import LedgerEnv
from tests.support.polling import eventually

TOPIC = "public/default/persistent/orders"


def keep(**kwargs: float) -> ManagedLedgerConfig:
    """A config with unlimited retention, so consumed ledgers are not trimmed under the test."""
    return ManagedLedgerConfig(retention_time_s=-1, retention_size_bytes=-1, **kwargs)  # type: ignore[arg-type]


async def test_concurrent_appends_keep_call_order_and_are_readable(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC)
    payloads = [f"message-{i}".encode() for i in range(300)]
    positions = await asyncio.gather(*(ml.append(p) for p in payloads))
    assert positions == sorted(positions)
    assert len(set(positions)) == len(positions)
    entries = await ml.read(positions[0], 1000)
    assert [e.data for e in entries] == payloads
    assert [e.position for e in entries] == positions
    assert ml.last_confirmed_position == positions[-1]
    assert ml.number_of_entries == 300


async def test_rollover_by_entries_and_reads_across_ledgers(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, keep(max_entries_per_ledger=4))
    positions = [await ml.append(f"m{i}".encode()) for i in range(10)]
    ledger_ids = [info.ledger_id for info in ml.ledgers]
    assert [info.entries for info in ml.ledgers] == [4, 4, 2]
    assert [p.ledger_id for p in positions] == [ledger_ids[i // 4] for i in range(10)]
    assert [p.entry_id for p in positions] == [i % 4 for i in range(10)]
    # A read spanning all three ledgers, starting in the middle of the first.
    entries = await ml.read(positions[2], 100)
    assert [e.data for e in entries] == [f"m{i}".encode() for i in range(2, 10)]
    # Every ledger is stamped with the cluster that holds it (PIP-470).
    assert {info.bookie_cluster_name for info in ml.ledgers} == {"standalone"}
    # Closed ledgers are closed in storage with their final counts.
    assert env.storage is not None
    md = await env.storage.get_ledger_metadata(ledger_ids[0])
    assert md.state.value == "CLOSED" and md.last_entry_id == 3


async def test_a_ledger_closed_by_the_log_is_read_without_reopening_it(
    env: LedgerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each sealed segment of a DAG walk used to cost a ledger metadata read here (ADR 0068).
    assert env.factory is not None and env.storage is not None
    opened: list[int] = []
    open_ledger = env.storage.open_ledger

    async def counting(ledger_id: int, recovery: bool = True) -> ReadHandle:
        opened.append(ledger_id)
        return await open_ledger(ledger_id, recovery)

    monkeypatch.setattr(env.storage, "open_ledger", counting)
    ml = await env.factory.open(TOPIC, keep(max_entries_per_ledger=4))
    first = [await ml.append(f"m{i}".encode()) for i in range(6)]  # one rollover
    await ml.terminate()  # closes the second ledger
    entries = await ml.read(first[0], 100)
    assert [e.data for e in entries] == [f"m{i}".encode() for i in range(6)]
    assert opened == []
    # Another owner (a reopened log) did not close them: it opens each ledger once to read it.
    await ml.close()
    reopened = await env.new_factory().open(TOPIC, keep(max_entries_per_ledger=4))
    entries = await reopened.read(first[0], 100)
    assert [e.data for e in entries] == [f"m{i}".encode() for i in range(6)]
    assert sorted(opened) == sorted({p.ledger_id for p in first})


async def test_rollover_by_size(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, keep(max_size_per_ledger=250))
    for _ in range(7):
        await ml.append(b"x" * 100)
    assert [info.size for info in ml.ledgers] == [300, 300, 100]
    assert ml.total_size == 700


async def test_rollover_by_age_reads_the_injected_clock(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, keep(max_ledger_age_s=60.0))
    await ml.append(b"a")
    await ml.append(b"b")
    assert len(ml.ledgers) == 1
    env.clock.advance(59)
    await ml.append(b"c")
    assert len(ml.ledgers) == 1
    env.clock.advance(2)
    position = await ml.append(b"d")
    assert len(ml.ledgers) == 2
    assert position == Position(ml.ledgers[1].ledger_id, 0)
    assert [info.entries for info in ml.ledgers] == [3, 1]


async def test_ledger_list_is_persisted_with_camel_case_fields(env: LedgerEnv) -> None:
    assert env.factory is not None and env.metadata is not None
    ml = await env.factory.open(TOPIC, keep(max_entries_per_ledger=2))
    for i in range(3):
        await ml.append(bytes([i]))
    got = await env.metadata.get(ledger_path("/managed-ledgers", TOPIC))
    assert got is not None
    assert b'"bookieClusterName":"standalone"' in got[0]
    info = decode_ledger_info(got[0])
    assert info.ledgers[0].entries == 2 and info.ledgers[0].size == 2
    assert [li.ledger_id for li in info.ledgers] == [li.ledger_id for li in ml.ledgers]


async def test_append_after_terminate_fails_and_termination_survives_reopen(
    env: LedgerEnv,
) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC)
    for i in range(5):
        await ml.append(bytes([i]))
    last = await ml.terminate()
    assert last == ml.last_confirmed_position == Position(ml.ledgers[-1].ledger_id, 4)
    assert ml.is_terminated
    assert await ml.terminate() == last  # idempotent
    with pytest.raises(ManagedLedgerTerminated):
        await ml.append(b"late")

    factory = await env.restart()
    reopened = await factory.open(TOPIC)
    assert reopened.is_terminated
    assert reopened.last_confirmed_position == last
    assert await reopened.terminate() == last
    with pytest.raises(ManagedLedgerTerminated):
        await reopened.append(b"late")
    entries = await reopened.read(EARLIEST, 10)
    assert [e.data for e in entries] == [bytes([i]) for i in range(5)]


async def test_terminate_seals_after_appends_already_called(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, keep(max_entries_per_ledger=3))
    appends = [asyncio.ensure_future(ml.append(bytes([i]))) for i in range(8)]
    await asyncio.sleep(0)  # let the appends start: they were called before terminate
    last = await ml.terminate()
    positions = await asyncio.gather(*appends)
    assert last == positions[-1]
    assert ml.number_of_entries == 8


async def test_terminate_of_an_empty_ledger_records_its_empty_position(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC)
    last = await ml.terminate()
    assert last.entry_id == -1
    factory = await env.restart()
    reopened = await factory.open(TOPIC)
    assert reopened.is_terminated and reopened.last_confirmed_position == last


async def test_reopen_after_clean_close_continues_in_a_new_ledger(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC)
    first = [await ml.append(f"a{i}".encode()) for i in range(3)]
    await ml.close()
    with pytest.raises(ManagedLedgerClosed):
        await ml.append(b"closed")
    factory = await env.restart()
    ml2 = await factory.open(TOPIC)
    later = await ml2.append(b"b0")
    assert later > first[-1]
    assert later.ledger_id > first[-1].ledger_id
    entries = await ml2.read(EARLIEST, 10)
    assert [e.data for e in entries] == [b"a0", b"a1", b"a2", b"b0"]


async def test_bad_names_are_rejected_with_typed_errors(env: LedgerEnv) -> None:
    assert env.factory is not None
    for bad in ["", "/leading", "trailing/", "a//b", "a/../b", ".", "tab\there", " pad", "x" * 600]:
        with pytest.raises(InvalidManagedLedgerName):
            await env.factory.open(bad)
    with pytest.raises(InvalidManagedLedgerName):
        await env.factory.exists("a//b")
    with pytest.raises(InvalidManagedLedgerName):
        await env.factory.open(123)  # type: ignore[arg-type]
    ml = await env.factory.open(TOPIC)
    for bad_cursor in ["", "..", "new\nline"]:
        with pytest.raises(InvalidCursorName):
            await ml.open_cursor(bad_cursor)


async def test_names_with_odd_characters_map_to_distinct_nodes(env: LedgerEnv) -> None:
    assert env.factory is not None
    names = ["t/a%2Fb", "t/a/b", "t/a b:c=d", "t/ünïcode", "t/a%252Fb"]
    for name in names:
        ml = await env.factory.open(name)
        await ml.append(name.encode())
    assert list(await env.factory.list()) == sorted(names)
    factory = await env.restart()
    for name in names:
        ml = await factory.open(name, create_if_missing=False)
        assert [e.data for e in await ml.read(EARLIEST, 5)] == [name.encode()]


async def test_factory_open_missing_exists_list_and_delete(env: LedgerEnv) -> None:
    assert env.factory is not None and env.storage is not None
    with pytest.raises(ManagedLedgerNotFound):
        await env.factory.open("t/missing", create_if_missing=False)
    assert not await env.factory.exists("t/missing")
    ml = await env.factory.open("t/one", keep(max_entries_per_ledger=1))
    assert await env.factory.open("t/one") is ml  # one instance per name
    await ml.open_cursor("sub", EARLIEST)
    for i in range(3):
        await ml.append(bytes([i]))
    ledger_ids = [info.ledger_id for info in ml.ledgers]
    assert await env.factory.exists("t/one")
    assert list(await env.factory.list()) == ["t/one"]
    await env.factory.delete("t/one")
    assert not await env.factory.exists("t/one")
    assert list(await env.factory.list()) == []
    remaining = set(await env.storage.list_ledgers())
    assert not remaining & set(ledger_ids)
    with pytest.raises(ManagedLedgerNotFound):
        await env.factory.delete("t/one")


async def test_concurrent_opens_of_one_name_share_one_instance(env: LedgerEnv) -> None:
    assert env.factory is not None
    a, b = await asyncio.gather(env.factory.open(TOPIC), env.factory.open(TOPIC))
    assert a is b


async def test_new_ledgers_go_to_the_active_cluster_and_reads_route_by_stamp(
    env: LedgerEnv,
) -> None:
    assert env.metadata is not None and env.storage is not None
    second = await open_local_cluster(env.metadata, env.root / "data-b", cluster_name="cluster-b")
    # PIP-470's switch precheck (I11): the new cluster's ids start above the old cluster's.
    advanced = await second.create_ledger_adv(1000)
    await advanced.close()
    await second.delete_ledger(1000)
    router = StorageRouter([env.storage, second])
    factory = DefaultManagedLedgerFactory(env.metadata, router, clock=env.clock)
    try:
        ml = await factory.open(TOPIC, keep(max_entries_per_ledger=2))
        for i in range(3):
            await ml.append(f"old{i}".encode())
        router.set_active("cluster-b")
        for i in range(3):
            await ml.append(f"new{i}".encode())
        clusters = [info.bookie_cluster_name for info in ml.ledgers]
        assert clusters[:2] == ["standalone", "standalone"]
        assert clusters[-1] == "cluster-b"
        assert ml.ledgers[-1].ledger_id > 1000
        entries = await ml.read(EARLIEST, 10)
        assert [e.data for e in entries] == [b"old0", b"old1", b"old2", b"new0", b"new1", b"new2"]
        await factory.close()
        # A new owner recovers the tail on cluster-b and keeps reading the old ledgers on the
        # standalone cluster.
        factory = DefaultManagedLedgerFactory(env.metadata, router, clock=env.clock)
        reopened = await factory.open(TOPIC)
        assert len(await reopened.read(EARLIEST, 10)) == 6
    finally:
        await factory.close()
        await second.close()


async def test_rollover_refuses_a_cluster_whose_ledger_ids_are_behind(env: LedgerEnv) -> None:
    assert env.metadata is not None and env.storage is not None and env.factory is not None
    second = await open_local_cluster(env.metadata, env.root / "data-b", cluster_name="cluster-b")
    router = StorageRouter([env.storage, second])
    factory = DefaultManagedLedgerFactory(env.metadata, router, clock=env.clock)
    try:
        ml = await factory.open(TOPIC, keep(max_entries_per_ledger=1))
        for i in range(3):
            await ml.append(bytes([i]))
        router.set_active("cluster-b")  # its id generator still starts at 0
        with pytest.raises(LedgerIdNotIncreasing):
            await ml.append(b"would break position order")
        router.set_active("standalone")
        position = await ml.append(b"after")
        assert position.ledger_id > ml.ledgers[-2].ledger_id
        assert await second.list_ledgers() == []
    finally:
        await factory.close()
        await second.close()


async def test_an_idle_ledger_rolls_over_at_its_maximum_age(env: LedgerEnv) -> None:
    assert env.factory is not None
    ml = await env.factory.open(TOPIC, ManagedLedgerConfig(max_ledger_age_s=600.0))
    cursor = await ml.open_cursor("sub", EARLIEST)
    for i in range(3):
        await ml.append(bytes([i]))
    entries = await cursor.read_entries(10)
    await cursor.mark_delete(entries[-1].position)
    first_ledger = ml.ledgers[0].ledger_id
    env.clock.advance(601)  # no append follows: the age timer alone rolls the ledger over
    await eventually(
        lambda: ml.ledgers[0].ledger_id != first_ledger, message="the first ledger to be trimmed"
    )
    # The consumed ledger was then trimmed (retention 0), leaving only the new, empty one.
    assert [info.entries for info in ml.ledgers] == [0]
    assert cursor.backlog() == 0
    assert (await ml.append(b"next")).ledger_id > first_ledger
