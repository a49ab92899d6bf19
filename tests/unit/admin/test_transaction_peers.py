"""Gathering ``/admin/v3/transactions`` answers from the other brokers of the registry
(:mod:`braid.admin.transaction_peers`), on a real in-memory metadata tree: this broker is never
asked, and a registered broker that does not answer fails the whole request, naming it, rather
than leaving its coordinators silently out."""

from __future__ import annotations

import socket

import pytest

from braid.admin.transaction_peers import TransactionPeers
from braid.broker.broker_registry import BrokerRegistry
from braid.clock import ManualClock
from braid.core.errors import ServiceUnavailableError
from braid.metadata.memory import MemoryBackend, MemoryMetadataStore

pytestmark = pytest.mark.timeout(30)


def _closed_port() -> int:
    """A local port nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _registered(backend: MemoryBackend, name: str, web: str) -> BrokerRegistry:
    registry = BrokerRegistry(MemoryMetadataStore.shared(backend), cluster="c1")
    await registry.register(f"pulsar://{name}", web)
    return registry


async def test_a_broker_alone_in_the_registry_gathers_nothing_and_asks_nobody() -> None:
    backend = MemoryBackend(ManualClock())
    me = await _registered(backend, f"127.0.0.1:{_closed_port()}", "http://127.0.0.1:1")
    assert await TransactionPeers(me).gather("/coordinators") == {}


async def test_a_registered_broker_that_does_not_answer_fails_the_gathering_naming_it() -> None:
    backend = MemoryBackend(ManualClock())
    me = await _registered(backend, "127.0.0.1:16650", "http://127.0.0.1:1")
    port = _closed_port()
    await _registered(backend, "127.0.0.1:26650", f"http://127.0.0.1:{port}")
    with pytest.raises(ServiceUnavailableError, match=r"broker 127\.0\.0\.1:26650 "):
        await TransactionPeers(me, timeout_s=5).gather("/coordinatorStats")


async def test_without_a_registry_there_is_nobody_to_ask() -> None:
    assert await TransactionPeers(None).gather("/slowTransactions/0") == {}
