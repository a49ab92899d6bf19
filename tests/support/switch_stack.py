"""PIP-470's components wired over real stores and bookies, without a broker, for the switch
orchestrator's integration tests.

:func:`open_switch_stack` opens what ``braid standalone`` wires for switching: the broker's
SQLite metadata store (wrapped in :class:`~braid.metadata.faults.FaultInjectionMetadataStore` so a
test can make CAS writes lose), the home storage cluster ``old`` (in-process bookie under
``root``), the managed-ledger factory, the schema storage and the
:class:`~braid.clusters.service.StorageClusterService`; a second cluster is registered over its
own SQLite file with its own bookie directory. Reopening on the same ``root`` is a broker restart.

:func:`second_switch_service` is another broker's storage-cluster service on the same stack: its
own metadata session (so it competes in the orchestrator election as another broker would) over
the same data plane (the stack's router, clients and managed ledgers, like
``tests.support.scalable_stack.second_service``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from braid.broker.schemas.model import SchemaData, SchemaType
from braid.broker.schemas.storage import SchemaStorage
from braid.clock import Clock, SystemClock
from braid.clusters.factory import LocalClusterFactory
from braid.clusters.orchestrator import StepHook
from braid.clusters.service import StorageClusterService
from braid.core.storage_switch import BookieClusterInfo, SwitchState
from braid.ledger.api import ManagedLedgerConfig
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.metadata import open_store
from braid.metadata.api import MetadataStore
from braid.metadata.faults import FaultInjectionMetadataStore
from braid.storage.api import NoSuchLedger, StorageClient
from braid.storage.client import BookKeeperClient
from braid.storage.local import open_local_cluster
from braid.storage.router import StorageRouter
from tests.support.polling import eventually

ORIGIN = "http://127.0.0.1:1"


@dataclass
class SwitchStack:
    root: Path
    metadata: FaultInjectionMetadataStore
    home: BookKeeperClient
    router: StorageRouter
    factory: LocalClusterFactory
    ml_factory: DefaultManagedLedgerFactory
    schemas: SchemaStorage
    service: StorageClusterService

    @property
    def new_uri(self) -> str:
        return f"sqlite:///{self.root / 'new-metadata.db'}"

    async def close(self) -> None:
        await self.service.stop()
        await self.ml_factory.close()
        await self.service.close()
        await self.factory.close()
        await self.home.close()
        await self.metadata.close()

    async def state(self) -> SwitchState:
        got = await self.service.registry.state()
        assert got is not None
        return got[0]

    async def wait_phase(
        self, *phases: str, within: float = 30.0, finished: bool | None = None
    ) -> SwitchState:
        """Wait for one of ``phases`` (PIP-470's names); ``finished``: and the run over (or
        not)."""

        async def reached() -> bool:
            got = await self.service.registry.state()
            return (
                got is not None
                and got[0].phase.value in phases
                and (finished is None or got[0].terminal is finished)
            )

        await eventually(reached, within=within, message=f"switch phase in {phases}")
        return await self.state()

    async def add_schema(self, schema_id: str, definition: bytes = b"") -> None:
        locator = await self.schemas.locator(schema_id)
        await self.schemas.append(schema_id, locator, SchemaData(SchemaType.STRING, definition))

    async def entries(self, cluster: str, ledger_id: int) -> list[tuple[int, bytes]]:
        """The ledger's entries on ``cluster`` (it must exist)."""
        found = await ledger_entries(self.client(cluster), ledger_id)
        assert found is not None, f"ledger {ledger_id} is not on {cluster}"
        return found

    def client(self, name: str) -> BookKeeperClient:
        client = self.router.client_for(name)
        assert isinstance(client, BookKeeperClient)
        return client


async def open_switch_stack(
    root: Path,
    *,
    clock: Clock | None = None,
    step_hook: StepHook | None = None,
    concurrency: int = 16,
    window_days: int = 15,
    skip_precheck: bool = False,
    **service_args: Any,
) -> SwitchStack:
    clock = clock or SystemClock()
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    url = f"sqlite:///{root / 'metadata.db'}"
    metadata = FaultInjectionMetadataStore(await open_store(url, clock=clock), clock=clock)
    home = await open_local_cluster(metadata, root, "old", clock=clock)
    router = StorageRouter([home], active="old")
    factory = LocalClusterFactory(root, metadata, url, home_cluster="old", clock=clock)
    ml_factory = DefaultManagedLedgerFactory(metadata, router, clock=clock)
    service = StorageClusterService(
        metadata,
        router,
        home,
        url,
        factory,
        ml_factory,
        clock,
        dual_read_timeout_days=window_days,
        concurrency=concurrency,
        skip_idgen_precheck=skip_precheck,
        step_hook=step_hook,
        **service_args,
    )
    await service.bootstrap()
    await service.start(ORIGIN)
    return SwitchStack(
        root,
        metadata,
        home,
        router,
        factory,
        ml_factory,
        SchemaStorage(metadata, router, clock),
        service,
    )


async def ledger_entries(client: StorageClient, ledger_id: int) -> list[tuple[int, bytes]] | None:
    """Every ``(entry id, data)`` of a ledger, read without recovery; ``None`` if it is missing
    (or was deleted while being read)."""
    try:
        handle = await client.open_ledger(ledger_id, recovery=False)
    except NoSuchLedger:
        return None
    try:
        last = handle.last_add_confirmed
        if last < 0:
            return []
        return [(e.entry_id, e.data) for e in await handle.read_entries(0, last)]
    except NoSuchLedger:
        return None
    finally:
        await handle.close()


def small_ledgers() -> ManagedLedgerConfig:
    """Rollovers every few entries, cursor ledgers every few snapshots."""
    return ManagedLedgerConfig(max_entries_per_ledger=4, max_entries_per_cursor_ledger=1000)


class _SharedClusters:
    """The stack's own clients, handed to a second service of the same data plane (a cluster's
    client must be opened by the stack first, e.g. by ``advance_idgen``)."""

    def __init__(self, router: StorageRouter) -> None:
        self._router = router

    async def open(self, info: BookieClusterInfo) -> BookKeeperClient:
        client = self._router.client_for(info.name)
        assert isinstance(client, BookKeeperClient)
        return client

    async def release(self, name: str) -> None:
        """The stack owns the clients."""


@dataclass
class OtherSwitchBroker:
    store: MetadataStore
    service: StorageClusterService

    async def close(self) -> None:
        await self.service.stop()  # not close(): the clients are the stack's
        await self.store.close()


async def second_switch_service(
    stack: SwitchStack, origin: str, *, step_hook: StepHook | None = None, concurrency: int = 16
) -> OtherSwitchBroker:
    url = f"sqlite:///{stack.root / 'metadata.db'}"
    store = await open_store(url)
    service = StorageClusterService(
        store,
        stack.router,
        stack.home,
        url,
        _SharedClusters(stack.router),
        stack.ml_factory,
        SystemClock(),
        concurrency=concurrency,
        step_hook=step_hook,
    )
    try:
        await service.bootstrap()
        await service.start(origin)
    except BaseException:
        await service.stop()
        await store.close()
        raise
    return OtherSwitchBroker(store, service)
