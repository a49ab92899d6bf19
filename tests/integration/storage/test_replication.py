"""Replicated ledgers over several in-process bookies whose membership changes: ensemble changes
when a bookie dies or fills up mid-ledger, reads from any replica (speculative too), recovery
with a bookie gone, and quarantine of a failing bookie."""

from __future__ import annotations

import asyncio
import errno
import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.metadata import MetadataStore
from braid.storage import BookKeeperClient, LedgerFenced, LedgerState, StorageReadOnly
from braid.storage.api import BookieUnavailable, LedgerEntry
from braid.storage.bookie import StoredEntry
from braid.storage.bookie_client import BookieClient, LocalBookieClient
from braid.storage.bookie_health import HealthPolicy
from braid.storage.client import ClientSettings
from braid.storage.distribution import write_set
from braid.storage.handles import LedgerWriter
from braid.storage.local import LocalBookieSet, open_local_bookie, open_local_bookies
from braid.storage.placement import NotEnoughBookies
from tests.support.polling import eventually

pytestmark = pytest.mark.timeout(60)


class Cluster:
    """A storage client over a :class:`LocalBookieSet`, and ways to hurt its bookies."""

    def __init__(self, client: BookKeeperClient, bookies: LocalBookieSet) -> None:
        self.client = client
        self.bookies = bookies

    def local(self, bookie_id: str) -> LocalBookieClient:
        found = self.bookies.client(bookie_id)
        assert isinstance(found, LocalBookieClient)
        return found

    async def kill(self, bookie_id: str) -> None:
        """The bookie stops (its journal closes) and leaves the set, as a crashed process's
        registration expires."""
        client = self.bookies.leave(bookie_id)
        assert isinstance(client, LocalBookieClient)
        await client.bookie.close()


async def open_cluster(
    store: MetadataStore,
    root: Path,
    count: int,
    clock: ManualClock,
    settings: ClientSettings | None = None,
) -> Cluster:
    bookies = await open_local_bookies(root, count, clock=clock)
    client = BookKeeperClient(
        store, "repl", bookies, clock=clock, settings=settings, rng=random.Random(7)
    )
    return Cluster(client, bookies)


@pytest.fixture
async def four(store: MetadataStore, tmp_path: Path, clock: ManualClock) -> AsyncIterator[Cluster]:
    cluster = await open_cluster(store, tmp_path / "four", 4, clock)
    yield cluster
    await cluster.client.close()


@pytest.fixture
async def three(store: MetadataStore, tmp_path: Path, clock: ManualClock) -> AsyncIterator[Cluster]:
    """Exactly E=3 bookies: no spare to move to (in ``tmp_path / "three"``)."""
    cluster = await open_cluster(store, tmp_path / "three", 3, clock)
    yield cluster
    await cluster.client.close()


def _payload(i: int) -> bytes:
    return f"entry-{i:05d}".encode() * 3


async def _add_all(writer: LedgerWriter, count: int, first: int = 0) -> list[int]:
    """Issue ``count`` adds at once through the callback API; the entry ids in completion
    order."""
    done: list[int] = []
    errors: list[BaseException] = []
    finished = asyncio.get_running_loop().create_future()

    def completed(entry_id: int, error: BaseException | None, ctx: int) -> None:
        if error is not None:
            errors.append(error)
        else:
            done.append(entry_id)
        if len(done) + len(errors) == count and not finished.done():
            finished.set_result(None)

    for i in range(count):
        writer.add_entry_with_callback(_payload(first + i), completed, first + i)
    await finished
    if errors:
        raise errors[0]
    return done


async def _held_by(cluster: Cluster, bookies: Sequence[str], ledger_id: int, entry: int) -> int:
    held = 0
    for bookie_id in bookies:
        try:
            stored: StoredEntry = await cluster.local(bookie_id).read_entry(ledger_id, entry)
        except Exception:
            continue
        assert stored.data == _payload(entry)
        held += 1
    return held


async def test_a_bookie_dying_mid_ledger_is_replaced_and_no_acknowledged_entry_is_lost(
    four: Cluster,
) -> None:
    writer = await four.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    assert await _add_all(writer, 50) == list(range(50))
    victim = writer.metadata.ensemble[1]
    spare = ({"bookie-0", "bookie-1", "bookie-2", "bookie-3"} - set(writer.metadata.ensemble)).pop()
    # Adds in flight while the bookie dies, and adds after: every one is acknowledged, in order.
    before = asyncio.ensure_future(_add_all(writer, 100, first=50))
    await asyncio.sleep(0)
    await four.kill(victim)
    after = asyncio.ensure_future(_add_all(writer, 100, first=150))
    assert await before == list(range(50, 150))
    assert await after == list(range(150, 250))
    md = await four.client.get_ledger_metadata(writer.ledger_id)
    assert writer.ensemble_changes == 1
    starts = list(md.ensembles)
    assert len(starts) == 2 and 0 < starts[1] <= 250
    assert victim not in md.ensemble and spare in md.ensemble
    assert md.ensemble.index(spare) == md.ensembles[0].index(victim)
    # Every entry of the new fragment is on its whole write set; none on the dead bookie.
    for entry in range(starts[1], 250):
        assert await _held_by(four, write_set(md, entry), writer.ledger_id, entry) == 2
    closed = await writer.close()
    assert closed.last_entry_id == 249 and closed.ensembles == md.ensembles
    reader = await four.client.open_ledger(writer.ledger_id, recovery=False)
    got = await reader.read_entries(0, 249)
    assert [e.data for e in got] == [_payload(i) for i in range(250)]


async def test_a_full_bookie_is_left_for_a_writable_one(four: Cluster) -> None:
    writer = await four.client.create_ledger(ensemble=2, write_quorum=2, ack_quorum=2)
    await _add_all(writer, 10)
    full = writer.metadata.ensemble[0]
    # What the bookie does when a journal write hits ENOSPC (the small-filesystem tests in
    # test_disk_full.py drive the real thing): it turns read-only at once.
    four.local(full).bookie._disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert four.bookies.readonly() == [full]
    assert await _add_all(writer, 10, first=10) == list(range(10, 20))
    md = writer.metadata
    assert full not in md.ensemble and list(md.ensembles) == [0, 10]


async def test_with_no_bookie_to_move_to_a_write_set_short_of_its_ack_quorum_fails_the_handle(
    three: Cluster,
) -> None:
    writer = await three.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    await _add_all(writer, 5)
    await three.kill(writer.metadata.ensemble[0])
    with pytest.raises(NotEnoughBookies):
        await _add_all(writer, 5, first=5)
    with pytest.raises(NotEnoughBookies):
        await writer.add_entry(b"more")
    # The writer closes the ledger at what it acknowledged (its owner then rolls over).
    closed = await writer.close()
    assert closed.last_entry_id == 4
    reader = await three.client.open_ledger(writer.ledger_id)
    assert [e.data for e in await reader.read_entries(0, 4)] == [_payload(i) for i in range(5)]


async def test_with_no_bookie_to_move_to_a_writer_with_spare_copies_writes_on_degraded(
    three: Cluster, tmp_path: Path, clock: ManualClock
) -> None:
    writer = await three.client.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2)
    await _add_all(writer, 5)
    await three.kill(writer.metadata.ensemble[2])
    assert await _add_all(writer, 20, first=5) == list(range(5, 25))
    assert list(writer.metadata.ensembles) == [0]  # two copies of each
    # A bookie joins: the writer moves to it at once, no add needed (ADR 0074).
    three.bookies.join(await open_local_bookie(tmp_path / "three", 3, clock=clock))
    await eventually(lambda: writer.ensemble_changes == 1, message="the move to bookie-3")
    assert writer.metadata.ensemble[2] == "bookie-3"
    assert list(writer.metadata.ensembles) == [0, 25]
    assert await _add_all(writer, 5, first=25) == list(range(25, 30))
    ensemble = writer.metadata.ensemble

    async def three_copies() -> bool:  # A=2: the third copy may land after the ack
        held = [await _held_by(three, ensemble, writer.ledger_id, e) for e in range(25, 30)]
        return held == [3] * 5

    await eventually(three_copies, message="three copies of each new entry")
    closed = await writer.close()
    assert closed.last_entry_id == 29
    reader = await three.client.open_ledger(writer.ledger_id, recovery=False)
    got = await reader.read_entries(0, 29)
    assert [e.data for e in got] == [_payload(i) for i in range(30)]


async def test_an_idle_writer_moves_off_a_bookie_that_left_the_cluster_without_an_add(
    four: Cluster,
) -> None:
    # ADR 0074: auto-recovery leaves an open ledger's last fragment to its writer, so an idle
    # writer must not wait for an add to time out before it moves.
    writer = await four.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    await _add_all(writer, 10)
    victim = writer.metadata.ensemble[1]
    await four.kill(victim)
    await eventually(lambda: writer.ensemble_changes == 1, message="the writer moved off it")
    md = await four.client.get_ledger_metadata(writer.ledger_id)
    assert md.state is LedgerState.OPEN and list(md.ensembles) == [0, 10]
    assert victim in md.ensembles[0] and victim not in md.ensemble
    assert md.ensemble == writer.metadata.ensemble
    assert await _add_all(writer, 10, first=10) == list(range(10, 20))
    for entry in range(10, 20):
        assert await _held_by(four, write_set(md, entry), writer.ledger_id, entry) == 2
    closed = await writer.close()
    assert closed.last_entry_id == 19 and list(closed.ensembles) == [0, 10]


async def test_with_nowhere_to_go_a_writer_stays_on_a_bookie_that_left_and_came_back(
    three: Cluster,
) -> None:
    writer = await three.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    await _add_all(writer, 5)
    # The set calls its listeners in order: once this one ran, the storage client's has too.
    heard = asyncio.Event()
    three.bookies.add_listener(heard.set)
    # Its registration lapses (a long pause, a session expiry) while the process lives on.
    away = writer.metadata.ensemble[0]
    client = three.bookies.leave(away)
    await heard.wait()
    heard.clear()
    assert writer.ensemble_changes == 0
    three.bookies.join(client)
    await heard.wait()
    assert writer.ensemble_changes == 0
    assert await _add_all(writer, 5, first=5) == list(range(5, 10))
    md = await three.client.get_ledger_metadata(writer.ledger_id)
    assert list(md.ensembles) == [0] and md.state is LedgerState.OPEN
    assert (await writer.close()).last_entry_id == 9


async def test_an_ensemble_change_after_the_ledger_was_fenced_fails_the_writer(
    four: Cluster,
) -> None:
    writer = await four.client.create_ledger(ensemble=3, write_quorum=3, ack_quorum=3)
    await _add_all(writer, 5)
    victim = writer.metadata.ensemble[0]
    # A new owner recovers the ledger while the old writer still believes it owns it.
    await four.client.open_ledger(writer.ledger_id, recovery=True)
    await four.kill(victim)
    with pytest.raises(LedgerFenced):
        await writer.add_entry(b"late")
    md = await four.client.get_ledger_metadata(writer.ledger_id)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 4


async def test_recovery_fences_a_covering_set_and_rewrites_the_tail_on_a_replacement(
    four: Cluster,
) -> None:
    writer = await four.client.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2)
    await _add_all(writer, 20)
    dead = writer.metadata.ensemble[1]
    await four.kill(dead)
    reader = await four.client.open_ledger(writer.ledger_id, recovery=True)
    md = reader.metadata
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 19
    assert md.length == sum(len(_payload(i)) for i in range(20))
    assert [e.data for e in await reader.read_entries(0, 19)] == [_payload(i) for i in range(20)]
    with pytest.raises(LedgerFenced):
        await writer.add_entry(b"after the fence")


async def test_recovery_without_a_covering_set_refuses_rather_than_guess(four: Cluster) -> None:
    writer = await four.client.create_ledger(ensemble=3, write_quorum=3, ack_quorum=2)
    await _add_all(writer, 3)
    # Both leave at once (before the set's listeners run), so the writer has nowhere to move
    # (ADR 0074) and the ledger's only fragment has one live bookie of three.
    gone = [four.bookies.leave(bookie_id) for bookie_id in writer.metadata.ensemble[:2]]
    for client in gone:
        assert isinstance(client, LocalBookieClient)
        await client.bookie.close()
    assert writer.ensemble_changes == 0
    with pytest.raises(BookieUnavailable):
        await four.client.open_ledger(writer.ledger_id, recovery=True)
    md = await four.client.get_ledger_metadata(writer.ledger_id)
    assert md.state is LedgerState.IN_RECOVERY


class _SilentReads:
    """A real bookie whose reads never answer (a hung process): fault injection for reads."""

    def __init__(self, inner: BookieClient) -> None:
        self._inner = inner
        self.asked = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def read_entry(self, ledger_id: int, entry_id: int) -> StoredEntry:
        self.asked += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def read_entries(self, ledger_id: int, first: int, last: int) -> list[StoredEntry]:
        self.asked += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_hung_replica_read_is_answered_by_the_next_after_the_speculative_timeout(
    store: MetadataStore, tmp_path: Path, clock: ManualClock
) -> None:
    settings = ClientSettings(speculative_read_timeout_ms=50)
    cluster = await open_cluster(store, tmp_path / "spec", 3, clock, settings)
    try:
        writer = await cluster.client.create_ledger(ensemble=3, write_quorum=3, ack_quorum=3)
        await _add_all(writer, 4)
        first = cluster.client.read_order(writer.metadata.ensemble)[0]
        silent = _SilentReads(cluster.bookies.client(first))
        cluster.bookies.join(silent)  # type: ignore[arg-type]
        reading = asyncio.ensure_future(writer.read_entries(0, 3))
        await eventually(lambda: silent.asked > 0, message="the first replica asked")
        assert not reading.done()
        clock.advance(0.05)
        got: list[LedgerEntry] = await asyncio.wait_for(reading, 5)
        assert [e.data for e in got] == [_payload(i) for i in range(4)]
    finally:
        await cluster.client.close()


async def test_a_bookie_failing_repeatedly_is_quarantined_out_of_new_ensembles(
    store: MetadataStore, tmp_path: Path, clock: ManualClock
) -> None:
    settings = ClientSettings(
        health=HealthPolicy(interval_s=10, error_threshold_per_interval=2, quarantine_s=60)
    )
    cluster = await open_cluster(store, tmp_path / "health", 4, clock, settings)
    try:
        for _ in range(3):
            cluster.client.record_failure("bookie-2")
        clock.advance(10)
        cluster.client.health.check()
        assert cluster.client.health.quarantined() == {"bookie-2"}
        for _ in range(10):
            writer = await cluster.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
            assert "bookie-2" not in writer.metadata.ensemble
        clock.advance(61)
        assert not cluster.client.health.is_quarantined("bookie-2")
    finally:
        await cluster.client.close()


async def test_too_few_writable_bookies_for_a_new_ledger_is_a_typed_refusal(
    four: Cluster,
) -> None:
    with pytest.raises(NotEnoughBookies):
        await four.client.create_ledger(ensemble=5, write_quorum=2, ack_quorum=2)
    await four.kill("bookie-3")
    await four.kill("bookie-2")
    with pytest.raises(NotEnoughBookies):
        await four.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    assert isinstance(NotEnoughBookies("x"), BookieUnavailable)
    assert not isinstance(NotEnoughBookies("x"), StorageReadOnly)
