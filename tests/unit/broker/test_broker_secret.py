"""The cluster's broker secret (ADR 0051): made once per cluster, the same for every broker,
compared in constant time; and the registry entry that carries the internal listener's URL."""

from __future__ import annotations

import asyncio

from braid.broker.broker_registry import BrokerInfo
from braid.broker.broker_secret import load_broker_secret, secret_matches, secret_path
from braid.metadata.memory import MemoryBackend, MemoryMetadataStore


async def test_racing_brokers_agree_on_one_secret_per_cluster() -> None:
    backend = MemoryBackend()
    stores = [MemoryMetadataStore(backend) for _ in range(4)]
    try:
        await stores[0].put("/admin/clusters/c1", b"{}", -1)
        secrets = await asyncio.gather(*(load_broker_secret(s, "c1") for s in stores))
        assert len(set(secrets)) == 1 and len(secrets[0]) >= 40
        got = await stores[1].get(secret_path("c1"))
        assert got is not None and got[0].decode() == secrets[0]
        assert not got[1].ephemeral  # it outlives every broker's session
        assert await load_broker_secret(stores[2], "c2") != secrets[0]
    finally:
        for store in stores:
            await store.close()


def test_only_the_exact_secret_matches() -> None:
    assert secret_matches("abc", "abc")
    assert not secret_matches("abc", "abd")
    assert not secret_matches("abc", "ab")
    assert not secret_matches("abc", "")
    assert not secret_matches("abc", None)


def test_a_registry_entry_carries_the_internal_listener_and_older_entries_read_without() -> None:
    info = BrokerInfo(
        "h:6650", "pulsar://h:6650", "http://h:8080", "c1", internal_url="http://h:9090"
    )
    assert BrokerInfo.decode("h:6650", info.encode()) == info
    plain = BrokerInfo("h:6650", "pulsar://h:6650", "http://h:8080", "c1")
    assert b"internalUrl" not in plain.encode()
    assert BrokerInfo.decode("h:6650", plain.encode()) == plain
