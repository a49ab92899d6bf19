"""Fixtures for the storage tests: a metadata store and a storage cluster on tmp disk.

``cluster`` and ``cluster3`` run every test twice: over in-process bookies called directly
(``local``), and over the same bookies served by :class:`~braid.storage.bookie.server.BookieServer`
on 127.0.0.1 and reached through :class:`~braid.storage.bookie_net_client.NetBookieClient`
(``net``) - the ``BookieClient`` conformance of the network path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.metadata import MetadataStore, open_store
from braid.storage import BookKeeperClient, open_local_cluster
from braid.storage.bookie import Bookie
from braid.storage.bookie.server import BookieServer
from braid.storage.bookie_client import BookieClient, LocalBookieClient
from braid.storage.bookie_net_client import NetBookieClient
from braid.storage.bookie_set import StaticBookieSet

#: The engine behind each bookie id of the ``net`` clusters (tests that look at the disk).
_ENGINES: dict[int, dict[str, Bookie]] = {}


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store("memory://")
    yield s
    await s.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def engine_of(client: BookKeeperClient, bookie_id: str) -> Bookie:
    """The storage engine of one bookie of a test cluster, local or served over TCP."""
    bookie = client.bookie(bookie_id)
    if isinstance(bookie, LocalBookieClient):
        return bookie.bookie
    return _ENGINES[id(client)][bookie_id]


async def _net_cluster(
    store: MetadataStore, data_dir: Path, name: str, clock: ManualClock, bookies: int
) -> AsyncIterator[BookKeeperClient]:
    engines: list[Bookie] = []
    servers: list[BookieServer] = []
    clients: list[BookieClient] = []
    try:
        for i in range(bookies):
            engine = await Bookie.open(
                data_dir / f"bookie-{i}", bookie_id=f"bookie-{i}", clock=clock
            )
            engines.append(engine)
            server = BookieServer(engine, "127.0.0.1", 0)
            await server.start()
            servers.append(server)
            # The real clock for request timeouts: the tests' manual clock never advances them.
            clients.append(NetBookieClient(f"bookie-{i}", ("127.0.0.1", server.port)))
        client = BookKeeperClient(
            store, name, StaticBookieSet(clients, owns_clients=False), clock=clock
        )
        _ENGINES[id(client)] = {e.bookie_id: e for e in engines}
        yield client
        _ENGINES.pop(id(client), None)
        await client.close()
    finally:
        for c in clients:
            await c.close()
        for server in servers:
            await server.close()
        for engine in engines:
            await engine.close()


@pytest.fixture(params=["local", "net"])
async def cluster(
    request: pytest.FixtureRequest, store: MetadataStore, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[BookKeeperClient]:
    if request.param == "net":
        async for client in _net_cluster(store, tmp_path / "standalone", "standalone", clock, 1):
            yield client
        return
    client = await open_local_cluster(store, tmp_path / "standalone", clock=clock)
    yield client
    await client.close()


@pytest.fixture(params=["local", "net"])
async def cluster3(
    request: pytest.FixtureRequest, store: MetadataStore, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[BookKeeperClient]:
    if request.param == "net":
        async for client in _net_cluster(store, tmp_path / "three", "three", clock, 3):
            yield client
        return
    client = await open_local_cluster(store, tmp_path / "three", "three", clock=clock, bookies=3)
    yield client
    await client.close()
