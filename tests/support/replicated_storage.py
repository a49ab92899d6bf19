"""Replicated storage for tests: a storage client over in-process bookies whose membership
changes, on a real metadata store, and the auto-recovery scenarios run on SQLite (integration
tier) and ZooKeeper (cluster tier)."""

from __future__ import annotations

import random
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from braid.clock import ManualClock
from braid.metadata import MetadataStore, open_store
from braid.storage import BookKeeperClient, LedgerState
from braid.storage.autorecovery import AutoRecoveryService, AutoRecoverySettings, BookieAdmin
from braid.storage.bookie_client import LocalBookieClient
from braid.storage.distribution import write_set
from braid.storage.handles import LedgerWriter
from braid.storage.local import LocalBookieSet, open_local_bookies
from tests.support.polling import eventually

RETRY_S = 1.0


@dataclass
class Env:
    store: MetadataStore
    client: BookKeeperClient
    bookies: LocalBookieSet
    clock: ManualClock
    root: Path

    async def kill(self, bookie_id: str, *, wipe: bool = False) -> None:
        client = self.bookies.leave(bookie_id)
        assert isinstance(client, LocalBookieClient)
        await client.bookie.close()
        if wipe:  # lost for good: its directories are gone
            shutil.rmtree(client.bookie.data_dir)

    def service(self, node: str, delay_s: float = 0.0, check_s: float = 0.0) -> AutoRecoveryService:
        return AutoRecoveryService(
            self.client,
            clock=self.clock,
            node_id=node,
            settings=AutoRecoverySettings(
                lost_bookie_recovery_delay_s=delay_s,
                periodic_check_interval_s=check_s,
                worker_retry_interval_s=RETRY_S,
            ),
        )

    async def ledgers_naming(self, bookie_id: str) -> list[int]:
        return await BookieAdmin(self.client, self.service("probe").manager)._ledgers_naming(
            bookie_id
        )


StoreOpener = Callable[[Path], Awaitable[MetadataStore]]


async def open_sqlite(root: Path) -> MetadataStore:
    return await open_store(f"sqlite:///{root}/metadata.db")


async def open_env(root: Path, opener: StoreOpener, bookies: int = 4) -> Env:
    clock = ManualClock()
    store = await opener(root)
    bookie_set = await open_local_bookies(root / "bookies", bookies, clock=clock)
    client = BookKeeperClient(store, "repl", bookie_set, clock=clock, rng=random.Random(11))
    return Env(store, client, bookie_set, clock, root)


async def close_env(env: Env) -> None:
    await env.client.close()
    await env.store.close()


def entry_data(ledger: int, entry: int) -> bytes:
    return b"%d:%d:" % (ledger, entry) + bytes(100)


async def write_entries(writer: LedgerWriter, count: int, first: int = 0) -> None:
    for entry in range(first, first + count):
        assert await writer.add_entry(entry_data(writer.ledger_id, entry)) == entry


async def live_copies(env: Env, ledger_id: int) -> dict[int, int]:
    """Entry id -> live copies on its write set (as the metadata names it)."""
    md = await env.client.get_ledger_metadata(ledger_id)
    out = {}
    for entry in range(md.last_entry_id + 1):
        held = 0
        for bookie_id in write_set(md, entry):
            client = env.client.client_of(bookie_id)
            if client is None:
                continue
            try:
                stored = await client.read_entry(ledger_id, entry)
            except Exception:
                continue
            assert stored.data == entry_data(ledger_id, entry)
            held += 1
        out[entry] = held
    return out


async def until_recovered(env: Env, service: AutoRecoveryService, gone: str) -> None:
    async def recovered() -> bool:
        env.clock.advance(RETRY_S)  # the worker's retry timer runs on the injected clock
        return not await service.manager.marked() and not await env.ledgers_naming(gone)

    await eventually(recovered, within=60, interval=0.02, message=f"copies off {gone}")


async def scenario_a_bookie_lost_for_good_gets_every_copy_back(env: Env) -> None:
    closed = []
    for _ in range(3):
        writer = await env.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
        await write_entries(writer, 30)
        closed.append((await writer.close()).ledger_id)
    open_writer = await env.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    await write_entries(open_writer, 10)
    victim = open_writer.metadata.ensemble[0]
    await env.kill(victim, wipe=True)
    await write_entries(open_writer, 10, first=10)  # the writer moves off it (ensemble change)
    service = env.service("node-a")
    await service.start()
    try:
        await until_recovered(env, service, victim)
        assert service.worker.stats.bytes > 0
        for ledger_id in [*closed, open_writer.ledger_id]:
            md = await env.client.get_ledger_metadata(ledger_id)
            assert victim not in md.bookies()
            if md.state is LedgerState.CLOSED:
                assert set((await live_copies(env, ledger_id)).values()) == {2}
            reader = await env.client.open_ledger(ledger_id, recovery=False)
            last = reader.last_add_confirmed
            got = await reader.read_entries(0, last)
            assert [e.data for e in got] == [entry_data(ledger_id, i) for i in range(last + 1)]
    finally:
        await service.close()


async def scenario_an_idle_open_ledger_is_moved_off_a_lost_bookie(env: Env) -> None:
    """An open ledger that is not written after its bookie is lost: auto-recovery leaves its
    last fragment to the writer, and the writer moves off without an add (ADR 0074)."""
    writer = await env.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    await write_entries(writer, 10)
    victim = writer.metadata.ensemble[0]
    await env.kill(victim, wipe=True)
    service = env.service("node-a")
    await service.start()
    try:
        await until_recovered(env, service, victim)
        md = await env.client.get_ledger_metadata(writer.ledger_id)
        assert md.state is LedgerState.OPEN and list(md.ensembles) == [0, 10]
        assert writer.ensemble_changes == 1
        for entry in range(10):  # each entry back on two live bookies
            held = [b for b in write_set(md, entry) if env.client.client_of(b) is not None]
            for bookie_id in held:
                stored = await env.client.bookie(bookie_id).read_entry(writer.ledger_id, entry)
                assert stored.data == entry_data(writer.ledger_id, entry)
            assert len(held) == 2
        await write_entries(writer, 5, first=10)
        closed = await writer.close()
        reader = await env.client.open_ledger(writer.ledger_id, recovery=False)
        got = await reader.read_entries(0, closed.last_entry_id)
        assert [e.data for e in got] == [entry_data(writer.ledger_id, i) for i in range(15)]
    finally:
        await service.close()


async def scenario_a_bookie_back_within_the_delay_is_not_re_replicated(env: Env) -> None:
    writer = await env.client.create_ledger(ensemble=3, write_quorum=2, ack_quorum=2)
    await write_entries(writer, 10)
    await writer.close()
    victim = writer.metadata.ensemble[1]
    service = env.service("node-a", delay_s=60)
    await service.start()
    try:
        await eventually(lambda: service.auditor is not None, message="an auditor")
        client = env.bookies.leave(victim)
        await eventually(lambda: victim in service.auditor.lost, message="the loss noticed")  # type: ignore[union-attr]
        env.clock.advance(30)
        env.bookies.join(client)
        await eventually(lambda: victim not in service.auditor.lost, message="the return")  # type: ignore[union-attr]
        env.clock.advance(60)
        assert await service.manager.marked() == []
        env.bookies.leave(victim)
        await eventually(lambda: victim in service.auditor.lost, message="the loss noticed")  # type: ignore[union-attr]
        assert await service.manager.marked() == []
        assert service.auditor.marked_total == 0  # type: ignore[union-attr]
        env.clock.advance(61)
        # The counter, not the mark itself: the worker may copy the ledger off the victim and
        # remove the mark before a poll of the marks would see it.
        await eventually(
            lambda: service.auditor.marked_total == 1,  # type: ignore[union-attr]
            message="the ledger marked after the delay",
        )
    finally:
        await service.close()
