"""PIP-470 read routing: ledgers are read through the cluster their stamp names."""

from __future__ import annotations

from pathlib import Path

import pytest

from braid.core.errors import NotFoundError
from braid.metadata import MetadataStore
from braid.storage import (
    StorageClusterExists,
    StorageRouter,
    UnknownStorageCluster,
    open_local_cluster,
)


async def test_reads_route_by_stamp_after_the_active_cluster_changes(
    store: MetadataStore, tmp_path: Path
) -> None:
    old = await open_local_cluster(store, tmp_path / "old", "old")
    new = await open_local_cluster(store, tmp_path / "new", "new")
    router = StorageRouter([old, new])
    try:
        assert router.active_name == "old"
        before = await router.active.create_ledger()
        await before.add_entry(b"on old")
        await before.close()
        router.set_active("new")
        after = await router.active.create_ledger()
        await after.add_entry(b"on new")
        await after.close()
        assert (before.cluster_name, after.cluster_name) == ("old", "new")
        for writer, data in ((before, b"on old"), (after, b"on new")):
            client = router.client_for(writer.cluster_name)
            handle = await client.open_ledger(writer.ledger_id, recovery=False)
            assert (await handle.read_entries(0, 0))[0].data == data
        # Each cluster has its own id generator: the same id can exist in both.
        assert before.ledger_id == after.ledger_id == 0
        assert router.cluster_names() == ["new", "old"]
    finally:
        await router.close()


async def test_unknown_cluster_names_get_a_typed_not_found(
    store: MetadataStore, tmp_path: Path
) -> None:
    router = StorageRouter()
    with pytest.raises(UnknownStorageCluster):
        _ = router.active
    only = await open_local_cluster(store, tmp_path / "a", "a")
    try:
        router.register(only)
        with pytest.raises(StorageClusterExists):
            router.register(only)
        with pytest.raises(UnknownStorageCluster) as err:
            router.client_for("elsewhere")
        assert isinstance(err.value, NotFoundError)
        with pytest.raises(UnknownStorageCluster):
            router.set_active("elsewhere")
        assert router.active is only
        with pytest.raises(UnknownStorageCluster):
            StorageRouter([only], active="missing")
    finally:
        await router.close()
