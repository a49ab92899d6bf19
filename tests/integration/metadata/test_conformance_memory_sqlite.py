"""The metadata conformance suite on the memory and sqlite backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.metadata import MemoryBackend, MemoryMetadataStore, MetadataStore
from braid.metadata.sqlite import SqliteMetadataStore
from tests.support.metadata_conformance import MetadataStoreConformance


class MemoryEnv:
    def __init__(self) -> None:
        self.clock: ManualClock | None = ManualClock()
        self.backend = MemoryBackend(self.clock)
        self.stores: list[MetadataStore] = []

    async def open(self) -> MetadataStore:
        store = MemoryMetadataStore(self.backend)
        self.stores.append(store)
        return store

    async def expire(self, store: MetadataStore) -> None:
        assert isinstance(store, MemoryMetadataStore)
        store.expire()


class SqliteEnv:
    def __init__(self, path: Path) -> None:
        self.clock: ManualClock | None = ManualClock()
        self.path = path
        self.stores: list[MetadataStore] = []

    async def open(self) -> MetadataStore:
        store = await SqliteMetadataStore.open(str(self.path), clock=self.clock)
        self.stores.append(store)
        return store

    async def expire(self, store: MetadataStore) -> None:
        assert isinstance(store, SqliteMetadataStore)
        await store.expire()


class TestMemoryConformance(MetadataStoreConformance):
    @pytest.fixture
    async def env(self) -> AsyncIterator[MemoryEnv]:
        env = MemoryEnv()
        yield env
        for store in env.stores:
            await store.close()


class TestSqliteConformance(MetadataStoreConformance):
    @pytest.fixture
    async def env(self, tmp_path: Path) -> AsyncIterator[SqliteEnv]:
        env = SqliteEnv(tmp_path / "metadata.db")
        yield env
        for store in env.stores:
            await store.close()
