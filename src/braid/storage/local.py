"""The standalone storage cluster: in-process bookies on a local data directory."""

from __future__ import annotations

from pathlib import Path

from braid.clock import Clock
from braid.metadata.api import MetadataStore
from braid.storage.api import InvalidQuorum
from braid.storage.bookie import Bookie
from braid.storage.bookie.disk import DiskThresholds
from braid.storage.bookie_client import BookieClient, LocalBookieClient
from braid.storage.bookie_set import StaticBookieSet
from braid.storage.client import BookKeeperClient, ClientSettings
from braid.storage.ledger_metadata import validate_cluster_name


async def open_local_cluster(
    metadata: MetadataStore,
    data_dir: Path,
    cluster_name: str = "standalone",
    *,
    clock: Clock | None = None,
    bookies: int = 1,
    disk_thresholds: DiskThresholds | None = None,
    settings: ClientSettings | None = None,
) -> BookKeeperClient:
    """Start ``bookies`` in-process bookies in ``data_dir/bookie-<i>`` and return a client that owns
    them (closing the client closes the bookies).

    Reopening the same ``data_dir`` after a crash replays each bookie's journal, so every
    acknowledged entry is there again. ``disk_thresholds`` say when a bookie turns read-only
    (its disk nearly full) and back. The bookies form a :class:`StaticBookieSet`.

    Raises:
        InvalidQuorum: ``bookies`` < 1.
        InvalidClusterName: ``cluster_name`` cannot be a metadata path segment.
        StorageIOError: a data directory cannot be opened.
    """
    validate_cluster_name(cluster_name)
    if bookies < 1:
        raise InvalidQuorum(f"a storage cluster needs at least one bookie, got {bookies}")
    data_dir = Path(data_dir)
    clients: list[BookieClient] = []
    try:
        for i in range(bookies):
            bookie = await Bookie.open(
                data_dir / f"bookie-{i}",
                bookie_id=f"bookie-{i}",
                disk_thresholds=disk_thresholds,
                clock=clock,
            )
            clients.append(LocalBookieClient(bookie, owns_bookie=True))
    except BaseException:
        for client in clients:
            await client.close()
        raise
    return BookKeeperClient(
        metadata, cluster_name, StaticBookieSet(clients), clock=clock, settings=settings
    )
