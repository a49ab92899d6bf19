"""Fixtures for the managed-ledger tests: a real sqlite metadata store and a real local storage
cluster on the test's tmp directory, with a restart that reopens both on the same files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.ledger import DefaultManagedLedgerFactory
from braid.metadata import open_store
from braid.metadata.api import MetadataStore
from braid.storage import BookKeeperClient, StorageRouter, open_local_cluster


@dataclass
class LedgerEnv:
    """One "broker" worth of managed-ledger plumbing over files that survive :meth:`restart`."""

    root: Path
    clock: ManualClock = field(default_factory=ManualClock)
    metadata: MetadataStore | None = None
    storage: BookKeeperClient | None = None
    router: StorageRouter | None = None
    factory: DefaultManagedLedgerFactory | None = None

    async def start(self) -> DefaultManagedLedgerFactory:
        self.metadata = await open_store(f"sqlite:///{self.root}/metadata.db")
        self.storage = await open_local_cluster(self.metadata, self.root / "data")
        self.router = StorageRouter([self.storage])
        self.factory = DefaultManagedLedgerFactory(self.metadata, self.router, clock=self.clock)
        return self.factory

    def new_factory(self) -> DefaultManagedLedgerFactory:
        """A second factory on the same store and storage: another owner, as another broker."""
        assert self.metadata is not None and self.router is not None
        return DefaultManagedLedgerFactory(self.metadata, self.router, clock=self.clock)

    async def stop(self) -> None:
        if self.factory is not None:
            await self.factory.close()
        if self.router is not None:
            await self.router.close()
        if self.metadata is not None:
            await self.metadata.close()
        self.factory = self.router = self.storage = self.metadata = None

    async def restart(self) -> DefaultManagedLedgerFactory:
        """Close everything cleanly and reopen it on the same sqlite file and data directory."""
        await self.stop()
        return await self.start()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[LedgerEnv]:
    ledger_env = LedgerEnv(tmp_path)
    await ledger_env.start()
    try:
        yield ledger_env
    finally:
        await ledger_env.stop()
