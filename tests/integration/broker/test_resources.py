"""Tenants and namespaces in a real metadata store (SQLite on disk, and the memory backend)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from braid.broker.resources import (
    AutoTopicCreationOverride,
    BrokerResources,
    InvalidPolicies,
    InvalidResourceName,
    NamespaceAlreadyExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    NamespacePolicies,
    RetentionPolicies,
    TenantAlreadyExists,
    TenantInfo,
    TenantNotEmpty,
    TenantNotFound,
)
from braid.metadata import MetadataStore, open_store


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MetadataStore]:
    url = f"sqlite://{tmp_path / 'meta.db'}" if request.param == "sqlite" else "memory://"
    metadata = await open_store(url)
    yield metadata
    await metadata.close()


@pytest.fixture
def resources(store: MetadataStore) -> BrokerResources:
    return BrokerResources(store)


async def test_tenant_crud_roundtrip(resources: BrokerResources) -> None:
    assert await resources.list_tenants() == []
    await resources.create_tenant("acme", TenantInfo(("admin",), ("standalone",)))
    assert await resources.tenant_exists("acme")
    assert await resources.get_tenant("acme") == TenantInfo(("admin",), ("standalone",))
    await resources.update_tenant("acme", TenantInfo((), ("east", "west")))
    assert (await resources.get_tenant("acme")).allowed_clusters == ("east", "west")
    await resources.create_tenant("beta", TenantInfo())
    assert await resources.list_tenants() == ["acme", "beta"]
    await resources.delete_tenant("beta")
    assert await resources.list_tenants() == ["acme"]


async def test_tenant_is_stored_as_pulsar_tenant_info_json(
    resources: BrokerResources, store: MetadataStore
) -> None:
    await resources.create_tenant("acme", TenantInfo(("r",), ("c",)))
    got = await store.get("/admin/policies/acme")
    assert got is not None
    assert json.loads(got[0]) == {"adminRoles": ["r"], "allowedClusters": ["c"]}


async def test_creating_an_existing_tenant_conflicts(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    with pytest.raises(TenantAlreadyExists):
        await resources.create_tenant("acme", TenantInfo(("other",)))
    assert (await resources.get_tenant("acme")).admin_roles == ()


async def test_missing_tenant_is_reported_for_every_operation(resources: BrokerResources) -> None:
    with pytest.raises(TenantNotFound):
        await resources.get_tenant("ghost")
    with pytest.raises(TenantNotFound):
        await resources.update_tenant("ghost", TenantInfo())
    with pytest.raises(TenantNotFound):
        await resources.delete_tenant("ghost")
    with pytest.raises(TenantNotFound):
        await resources.list_namespaces("ghost")
    with pytest.raises(TenantNotFound):
        await resources.create_namespace("ghost", "ns")


async def test_tenant_with_namespaces_cannot_be_deleted(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await resources.create_namespace("acme", "orders")
    with pytest.raises(TenantNotEmpty, match="orders"):
        await resources.delete_tenant("acme")
    await resources.delete_namespace("acme", "orders")
    await resources.delete_tenant("acme")
    assert not await resources.tenant_exists("acme")


async def test_namespace_crud_and_policies(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    policies = NamespacePolicies(
        deduplication_enabled=True,
        auto_topic_creation=AutoTopicCreationOverride(False),
        retention=RetentionPolicies(60, -1),
    )
    await resources.create_namespace("acme", "orders", policies)
    await resources.create_namespace("acme", "audit")
    assert await resources.list_namespaces("acme") == ["acme/audit", "acme/orders"]
    assert await resources.namespace_exists("acme", "orders")
    assert not await resources.namespace_exists("acme", "ghost")
    assert await resources.get_namespace_policies("acme", "orders") == policies
    audit = await resources.get_namespace_policies("acme", "audit")
    assert audit == NamespacePolicies()
    assert audit.is_deduplication_enabled(broker_default=True) is True
    assert audit.is_auto_topic_creation_allowed(broker_default=True) is True
    orders = await resources.get_namespace_policies("acme", "orders")
    assert orders.is_deduplication_enabled(broker_default=False) is True
    assert orders.is_auto_topic_creation_allowed(broker_default=True) is False


async def test_deduplication_toggle_persists(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await resources.create_namespace("acme", "orders")
    await resources.set_deduplication("acme", "orders", True)
    assert (await resources.get_namespace_policies("acme", "orders")).deduplication_enabled
    await resources.set_deduplication("acme", "orders", False)
    got = await resources.get_namespace_policies("acme", "orders")
    assert got.deduplication_enabled is False
    with pytest.raises(NamespaceNotFound):
        await resources.set_deduplication("acme", "ghost", True)


async def test_duplicate_and_missing_namespaces(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await resources.create_namespace("acme", "orders")
    with pytest.raises(NamespaceAlreadyExists):
        await resources.create_namespace("acme", "orders")
    with pytest.raises(NamespaceNotFound):
        await resources.get_namespace_policies("acme", "ghost")
    with pytest.raises(NamespaceNotFound):
        await resources.delete_namespace("acme", "ghost")


async def test_namespace_with_topics_cannot_be_deleted(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await resources.create_namespace("acme", "orders")
    with pytest.raises(NamespaceNotEmpty, match="persistent://acme/orders/t"):
        await resources.delete_namespace("acme", "orders", topics=["persistent://acme/orders/t"])
    assert await resources.namespace_exists("acme", "orders")


async def test_unmodelled_policy_keys_survive_an_update(
    resources: BrokerResources, store: MetadataStore
) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await resources.create_namespace("acme", "orders")
    # A newer writer stored fields this version does not model.
    doc = {"bundles": {"numBundles": 4}, "scalableTopicAutoScalePolicy": {"maxSegments": 8}}
    await store.put("/admin/policies/acme/orders", json.dumps(doc).encode())
    await resources.set_deduplication("acme", "orders", True)
    got = await store.get("/admin/policies/acme/orders")
    assert got is not None
    assert json.loads(got[0]) == {**doc, "deduplicationEnabled": True}
    policies = await resources.get_namespace_policies("acme", "orders")
    assert policies.scalable_topic_auto_scale_policy == {"maxSegments": 8}


async def test_concurrent_policy_updates_are_all_applied(resources: BrokerResources) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await resources.create_namespace("acme", "orders")

    def add_key(i: int) -> Callable[[NamespacePolicies], NamespacePolicies]:
        def mutate(p: NamespacePolicies) -> NamespacePolicies:
            return NamespacePolicies.from_json({**p.to_json(), f"k{i}": i})

        return mutate

    await asyncio.gather(
        *(resources.update_namespace_policies("acme", "orders", add_key(i)) for i in range(10))
    )
    final = (await resources.get_namespace_policies("acme", "orders")).to_json()
    assert {f"k{i}" for i in range(10)} <= set(final)


async def test_corrupt_stored_policies_raise_a_typed_error(
    resources: BrokerResources, store: MetadataStore
) -> None:
    await resources.create_tenant("acme", TenantInfo())
    await store.put("/admin/policies/acme/bad", b"{not json")
    with pytest.raises(InvalidPolicies):
        await resources.get_namespace_policies("acme", "bad")
    await store.put("/admin/policies/acme/bad", b'{"deduplicationEnabled": "yes"}')
    with pytest.raises(InvalidPolicies, match="deduplicationEnabled"):
        await resources.get_namespace_policies("acme", "bad")


@pytest.mark.parametrize("name", ["", "a/b", "sp ace", "..", "é"])
async def test_invalid_names_are_refused(resources: BrokerResources, name: str) -> None:
    with pytest.raises(InvalidResourceName):
        await resources.create_tenant(name, TenantInfo())
    await resources.create_tenant("acme", TenantInfo())
    with pytest.raises(InvalidResourceName):
        await resources.create_namespace("acme", name)


async def test_ensure_default_namespace_is_idempotent(resources: BrokerResources) -> None:
    await resources.ensure_default_namespace("standalone")
    await resources.set_deduplication("public", "default", True)
    await resources.ensure_default_namespace("standalone")
    await asyncio.gather(*(resources.ensure_default_namespace("standalone") for _ in range(3)))
    assert await resources.list_tenants() == ["public"]
    assert await resources.list_namespaces("public") == ["public/default"]
    assert (await resources.get_tenant("public")).allowed_clusters == ("standalone",)
    # Running it again never resets policies an operator changed.
    assert (await resources.get_namespace_policies("public", "default")).deduplication_enabled


async def test_resources_survive_reopening_the_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'meta.db'}"
    first = await open_store(url)
    await BrokerResources(first).ensure_default_namespace()
    await BrokerResources(first).set_deduplication("public", "default", True)
    await first.close()
    second = await open_store(url)
    try:
        policies = await BrokerResources(second).get_namespace_policies("public", "default")
        assert policies.deduplication_enabled is True
    finally:
        await second.close()
