"""A replicated Braid cluster of real processes for the acceptance tests of issue 24.

:class:`ReplicatedCluster` is a ZooKeeper chroot, ``braid bookie`` processes
(:class:`~tests.support.bookie_process.BookieProcess`, on 127.0.0.1 or each in a host of a
:class:`~tests.support.netns.NetworkLab`) and a broker - ``braid standalone --bookies 0`` on the
ZooKeeper store with E/W/A set in its ``broker.conf`` (a ``braid broker`` role comes later) - all
stopped by process id at the end.

:class:`ClusterInspector` looks at the cluster from the test process the way an operator's tool
would: its own metadata-store session, a ``BookKeeperClient`` over the registered bookies, run on
an event loop in a thread (the tests drive blocking clients). It lists ledgers and the bookies
their fragments name, says who the auditor is, and checks copies: every entry of every ledger is
read from every bookie of its write set (:meth:`ClusterInspector.copies`), or read through the
ledger client from whatever bookies are left (:meth:`ClusterInspector.read_everything`).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from braid.metadata import open_store
from braid.metadata.election import read_leader
from braid.storage.api import LedgerMetadata, LedgerState, StorageError
from braid.storage.autorecovery.underreplication import (
    UnderreplicationManager,
    auditor_election_path,
)
from braid.storage.client import BookKeeperClient
from braid.storage.distribution import write_set
from braid.storage.remote import RegisteredBookieSet, open_remote_cluster
from tests.support.bookie_process import BookieProcess
from tests.support.standalone import StandaloneProcess

T = TypeVar("T")
CLUSTER = "standalone"


def broker_conf(zk_url: str, *, ensemble: int, write: int, ack: int, **extra: str) -> str:
    """``broker.conf`` of a broker on external bookies with the given quorums."""
    keys = {
        "metadataStoreUrl": zk_url,
        "standaloneBookies": "0",
        "managedLedgerDefaultEnsembleSize": str(ensemble),
        "managedLedgerDefaultWriteQuorum": str(write),
        "managedLedgerDefaultAckQuorum": str(ack),
        **extra,
    }
    return "".join(f"{k}={v}\n" for k, v in keys.items())


@dataclass
class ReplicatedCluster:
    """Bookie processes and a broker process sharing one ZooKeeper chroot."""

    tmp_path: Path
    zk_url: str
    bookies: list[BookieProcess]
    broker_keys: dict[str, str] = field(default_factory=dict)
    ensemble: int = 3
    write: int = 2
    ack: int = 2
    broker: StandaloneProcess | None = None

    def start_bookies(self, bookies: Iterable[BookieProcess] | None = None) -> None:
        """Start bookies in parallel (each start waits until it is ready)."""
        todo = list(self.bookies if bookies is None else bookies)
        with ThreadPoolExecutor(len(todo)) as pool:
            for future in [pool.submit(b.start) for b in todo]:
                future.result()

    def start_broker(self) -> StandaloneProcess:
        conf = self.tmp_path / "broker.conf"
        conf.write_text(
            broker_conf(
                self.zk_url,
                ensemble=self.ensemble,
                write=self.write,
                ack=self.ack,
                **self.broker_keys,
            )
        )
        self.broker = StandaloneProcess.start_on_free_ports(
            self.tmp_path / "broker-data",
            extra_args=["--config", str(conf)],
            log_path=self.tmp_path / "broker.log",
            timeout=90,
        )
        return self.broker

    def bookie(self, bookie_id: str) -> BookieProcess:
        return next(b for b in self.bookies if b.bookie_id == bookie_id)

    def stop(self) -> None:
        """Stop the broker, then every bookie (each by its process id)."""
        try:
            if self.broker is not None and self.broker.running:
                self.broker.stop()
        finally:
            for bookie in self.bookies:
                bookie.stop()


@dataclass(frozen=True)
class CopyReport:
    """Every entry of every ledger checked on every bookie of its write set."""

    ledgers: int
    entries: int
    copies: int  # found on the bookie the metadata names
    missing: tuple[str, ...]  # "ledger/entry on bookie: why", capped

    @property
    def complete(self) -> bool:
        return not self.missing


class ClusterInspector:
    """An operator's view of the cluster (its own store session and ledger client)."""

    def __init__(self, zk_url: str) -> None:
        self.zk_url = zk_url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client: BookKeeperClient | None = None
        self._client = self.call(self._open())

    async def _open(self) -> BookKeeperClient:
        store = await open_store(self.zk_url)
        return await open_remote_cluster(
            store,
            CLUSTER,
            min_bookies=1,
            wait_s=60,
            add_timeout_s=5,
            read_timeout_s=5,
            after_close=[store.close],
        )

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    @property
    def client(self) -> BookKeeperClient:
        assert self._client is not None
        return self._client

    @property
    def members(self) -> RegisteredBookieSet:
        bookies = self.client.bookie_set
        assert isinstance(bookies, RegisteredBookieSet)
        return bookies

    def writable(self) -> list[str]:
        return list(self.members.writable())

    def readonly(self) -> list[str]:
        return list(self.members.readonly())

    def ledgers(self) -> dict[int, LedgerMetadata]:
        async def read() -> dict[int, LedgerMetadata]:
            out = {}
            for ledger_id in await self.client.list_ledgers():
                try:
                    out[ledger_id] = await self.client.get_ledger_metadata(ledger_id)
                except StorageError:
                    continue  # deleted meanwhile
            return out

        return self.call(read())

    def ledgers_naming(self, bookie_id: str) -> list[int]:
        """Ledgers with a fragment on ``bookie_id``."""
        return sorted(i for i, md in self.ledgers().items() if bookie_id in md.bookies())

    def ensemble_changes(self) -> int:
        """Fragments beyond the first, over every ledger (each is an ensemble change or a
        re-replication)."""
        return sum(len(md.ensembles) - 1 for md in self.ledgers().values())

    def auditor(self) -> str | None:
        found = self.call(read_leader(self.client.metadata_store, auditor_election_path(CLUSTER)))
        return None if found is None else found.decode()

    def under_replicated(self) -> list[int]:
        manager = UnderreplicationManager(self.client.metadata_store, CLUSTER, self.client.clock)
        return self.call(manager.marked())

    async def _last_entry(self, md: LedgerMetadata) -> int:
        if md.state is LedgerState.CLOSED:
            return md.last_entry_id
        return await self.client.probe_lac(md, -1)

    def copies(self, alive: Iterable[str], ledger_ids: Sequence[int] | None = None) -> CopyReport:
        """Read each entry from each bookie of its write set (the metadata says where); a copy
        on a bookie not in ``alive`` counts as missing without asking it."""
        up = set(alive)

        async def check() -> CopyReport:
            ledgers = await _ledgers(self.client, ledger_ids)
            entries = copies = 0
            missing: list[str] = []
            for md in ledgers:
                last = await self._last_entry(md)
                for entry in range(last + 1):
                    entries += 1
                    for bookie in write_set(md, entry):
                        if bookie not in up:
                            missing.append(f"{md.ledger_id}/{entry} on {bookie}: not alive")
                            continue
                        try:
                            got = await self.client.bookie(bookie).read_entry(md.ledger_id, entry)
                        except StorageError as exc:
                            missing.append(f"{md.ledger_id}/{entry} on {bookie}: {exc}")
                            continue
                        if got.entry_id == entry:
                            copies += 1
            return CopyReport(len(ledgers), entries, copies, tuple(missing[:20]))

        return self.call(check(), timeout=300)

    def read_everything(
        self, ledger_ids: Sequence[int] | None = None
    ) -> dict[tuple[int, int], str]:
        """Every entry of every ledger through the ledger client (any replica), as digests."""

        async def read() -> dict[tuple[int, int], str]:
            out: dict[tuple[int, int], str] = {}
            for md in await _ledgers(self.client, ledger_ids):
                last = await self._last_entry(md)
                if last < 0:
                    continue
                for entry in await self.client.read_range(md, 0, last, last):
                    out[(md.ledger_id, entry.entry_id)] = hashlib.sha1(entry.data).hexdigest()
            return out

        return self.call(read(), timeout=300)

    def close(self) -> None:
        try:
            if self._client is not None:
                self.call(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


async def _ledgers(
    client: BookKeeperClient, ledger_ids: Sequence[int] | None
) -> list[LedgerMetadata]:
    ids = await client.list_ledgers() if ledger_ids is None else list(ledger_ids)
    out = []
    for ledger_id in ids:
        try:
            out.append(await client.get_ledger_metadata(ledger_id))
        except StorageError:
            continue
    return out


__all__ = ["ClusterInspector", "CopyReport", "ReplicatedCluster", "broker_conf"]
