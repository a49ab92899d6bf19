"""Ledger ids are unique per storage cluster, not per process (issue 22, ADR 0040): two processes'
private bookies of one cluster name on one metadata store - what two standalones sharing a store
used to be - never hand out the same id, because ids come from the store's one generator, taken
with compare-and-swap, not from the bookies."""

from __future__ import annotations

import asyncio
from pathlib import Path

from braid.metadata import open_store
from braid.storage import open_local_cluster


async def test_two_sessions_with_private_bookies_never_get_the_same_ledger_id(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'shared.db'}"
    stores = [await open_store(url), await open_store(url)]  # two sessions, as two processes
    clusters = [
        await open_local_cluster(store, tmp_path / f"process-{i}") for i, store in enumerate(stores)
    ]
    try:

        async def create(cluster_index: int) -> int:
            writer = await clusters[cluster_index].create_ledger()
            await writer.close()
            return writer.ledger_id

        ids = await asyncio.gather(*(create(i % 2) for i in range(60)))
        assert len(set(ids)) == 60
        assert sorted(ids) == list(range(60))  # one sequence, shared by both
    finally:
        for cluster in clusters:
            await cluster.close()
        for store in stores:
            await store.close()
