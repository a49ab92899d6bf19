"""Fixtures for the storage tests: a metadata store and a standalone storage cluster on tmp disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.metadata import MetadataStore, open_store
from braid.storage import BookKeeperClient, open_local_cluster


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store("memory://")
    yield s
    await s.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def cluster(
    store: MetadataStore, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[BookKeeperClient]:
    client = await open_local_cluster(store, tmp_path / "standalone", clock=clock)
    yield client
    await client.close()


@pytest.fixture
async def cluster3(
    store: MetadataStore, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[BookKeeperClient]:
    client = await open_local_cluster(store, tmp_path / "three", "three", clock=clock, bookies=3)
    yield client
    await client.close()
