"""An in-process broker over real components, for integration and interop tests.

:func:`open_broker_stack` wires what ``braid standalone`` wires - an SQLite metadata store, a local
bookie on disk, the managed-ledger factory, tenant/namespace resources (``public/default``) and a
:class:`~braid.broker.service.BrokerService` on an ephemeral 127.0.0.1 port - in the calling event
loop. :class:`BackgroundBroker` runs such a stack on its own event loop in a thread, because the
official ``pulsar-client`` blocks the calling thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from braid.broker.config import BrokerConfig
from braid.broker.resources import BrokerResources
from braid.broker.service import BrokerService
from braid.clock import Clock, SystemClock
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.metadata import MetadataStore, open_store
from braid.storage.local import open_local_cluster
from braid.storage.router import StorageRouter

T = TypeVar("T")


@dataclass
class BrokerStack:
    """Every component of one in-process broker, closed in reverse order by :meth:`close`."""

    config: BrokerConfig
    metadata: MetadataStore
    storage: Any
    factory: DefaultManagedLedgerFactory
    resources: BrokerResources
    service: BrokerService

    async def close(self) -> None:
        await self.service.close()
        await self.factory.close()
        await self.storage.close()
        await self.metadata.close()


async def open_broker_stack(
    data_dir: Path,
    *,
    clock: Clock | None = None,
    broker_clock: Clock | None = None,
    metadata_clock: Clock | None = None,
    **config: Any,
) -> BrokerStack:
    """Start a broker on ``data_dir`` (reopening keeps data); ``config`` overrides BrokerConfig.

    ``broker_clock`` drives only the broker's own timers (keep-alive), so a test can hold a
    ``ManualClock`` there while storage keeps real time. ``metadata_clock`` stamps the metadata
    store's created/modified times (and drives its session reaper): give it the scalable layer's
    ``ManualClock`` so a load record's modified time and the controller's "now" agree.
    """
    clock = clock or SystemClock()
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "data_dir": data_dir,
        "bind_address": "127.0.0.1",
        "broker_service_port": 0,
        "web_service_port": 0,
    }
    settings.setdefault("metadata_store_url", f"sqlite:///{data_dir / 'metadata.db'}")
    settings.update(config)
    broker_config = BrokerConfig(**settings)
    metadata = await open_store(broker_config.metadata_store_url, clock=metadata_clock or clock)
    storage = await open_local_cluster(metadata, data_dir / "storage", "standalone", clock=clock)
    factory = DefaultManagedLedgerFactory(metadata, StorageRouter([storage]), clock=clock)
    resources = BrokerResources(metadata)
    await resources.ensure_default_namespace(broker_config.cluster_name)
    service = BrokerService(
        broker_config, metadata, factory, resources, clock=broker_clock or clock
    )
    await service.start()
    return BrokerStack(broker_config, metadata, storage, factory, resources, service)


class BackgroundBroker:
    """A :class:`BrokerStack` served by an event loop in a daemon thread."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.data_dir = data_dir
        self._config = config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stack: BrokerStack | None = None

    def start(self) -> BackgroundBroker:
        self._thread.start()
        self._stack = self.call(open_broker_stack(self.data_dir, **self._config))
        return self

    @property
    def stack(self) -> BrokerStack:
        assert self._stack is not None, "start() the broker first"
        return self._stack

    @property
    def service(self) -> BrokerService:
        return self.stack.service

    @property
    def service_url(self) -> str:
        return self.stack.service.service_url

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coro`` on the broker's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def run(self, fn: Any, *args: Any) -> Any:
        """Run a plain function on the broker's loop (to read its state safely)."""

        async def wrapper() -> Any:
            result = fn(*args)
            if isinstance(result, Awaitable):
                return await result
            return result

        return self.call(wrapper())

    def stop(self) -> None:
        try:
            if self._stack is not None:
                self.call(self._stack.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
