"""Admin REST API: tenants, namespaces and deduplication, with Pulsar's statuses and bodies."""

from __future__ import annotations

import httpx


def _assert_reason(response: httpx.Response, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"reason", "category", "retriable"}
    for fragment in fragments:
        assert fragment in body["reason"]


async def test_standalone_starts_with_public_default(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/admin/v2/tenants")).json() == ["public"]
    assert (await admin.get("/admin/v2/namespaces/public")).json() == ["public/default"]
    tenant = (await admin.get("/admin/v2/tenants/public")).json()
    assert tenant == {"adminRoles": [], "allowedClusters": ["standalone"]}
    assert (await admin.get("/admin/v2/clusters")).json() == ["standalone"]


async def test_tenant_lifecycle(admin: httpx.AsyncClient) -> None:
    created = await admin.put(
        "/admin/v2/tenants/acme", json={"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    )
    assert created.status_code == 204
    assert (await admin.get("/admin/v2/tenants")).json() == ["acme", "public"]
    assert (await admin.get("/admin/v2/tenants/acme")).json()["adminRoles"] == ["ops"]
    updated = await admin.post("/admin/v2/tenants/acme", json={"adminRoles": ["dev"]})
    assert updated.status_code == 204
    assert (await admin.get("/admin/v2/tenants/acme")).json() == {
        "adminRoles": ["dev"],
        "allowedClusters": ["standalone"],  # omitted: this broker's cluster
    }
    assert (await admin.delete("/admin/v2/tenants/acme")).status_code == 204
    _assert_reason(await admin.get("/admin/v2/tenants/acme"), 404, "acme")


async def test_tenant_without_body_is_allowed_on_this_cluster(admin: httpx.AsyncClient) -> None:
    assert (await admin.put("/admin/v2/tenants/plain")).status_code == 204
    info = (await admin.get("/admin/v2/tenants/plain")).json()
    assert info["allowedClusters"] == ["standalone"]


async def test_tenant_errors_use_pulsar_statuses(admin: httpx.AsyncClient) -> None:
    assert (await admin.put("/admin/v2/tenants/acme")).status_code == 204
    _assert_reason(await admin.put("/admin/v2/tenants/acme"), 409, "already exists")
    _assert_reason(await admin.delete("/admin/v2/tenants/ghost"), 404, "ghost")
    _assert_reason(await admin.post("/admin/v2/tenants/ghost", json={}), 404)
    _assert_reason(
        await admin.put("/admin/v2/tenants/other", json={"allowedClusters": ["mars"]}),
        412,
        "mars",
    )
    _assert_reason(await admin.put("/admin/v2/tenants/bad%20name"), 412, "bad name")
    _assert_reason(
        await admin.put("/admin/v2/tenants/typed", json={"adminRoles": "not-a-list"}), 400
    )
    bad_json = await admin.put(
        "/admin/v2/tenants/typed", content=b"{nope", headers={"content-type": "application/json"}
    )
    _assert_reason(bad_json, 400)


async def test_tenant_with_namespaces_is_not_deleted(admin: httpx.AsyncClient) -> None:
    await admin.put("/admin/v2/tenants/acme")
    assert (await admin.put("/admin/v2/namespaces/acme/orders")).status_code == 204
    _assert_reason(await admin.delete("/admin/v2/tenants/acme"), 409, "orders")
    assert (await admin.delete("/admin/v2/namespaces/acme/orders")).status_code == 204
    assert (await admin.delete("/admin/v2/tenants/acme")).status_code == 204


async def test_namespace_lifecycle_and_policies(admin: httpx.AsyncClient) -> None:
    await admin.put("/admin/v2/tenants/acme")
    policies = {
        "deduplicationEnabled": True,
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
    }
    assert (await admin.put("/admin/v2/namespaces/acme/orders", json=policies)).status_code == 204
    assert (await admin.put("/admin/v2/namespaces/acme/audit")).status_code == 204
    assert (await admin.get("/admin/v2/namespaces/acme")).json() == ["acme/audit", "acme/orders"]
    assert (await admin.get("/admin/v2/namespaces/acme/orders")).json() == policies
    assert (await admin.get("/admin/v2/namespaces/acme/audit")).json() == {}
    assert (await admin.delete("/admin/v2/namespaces/acme/audit")).status_code == 204
    assert (await admin.get("/admin/v2/namespaces/acme")).json() == ["acme/orders"]


async def test_namespace_errors(admin: httpx.AsyncClient) -> None:
    _assert_reason(await admin.get("/admin/v2/namespaces/ghost"), 404, "ghost")
    _assert_reason(await admin.put("/admin/v2/namespaces/ghost/ns"), 404, "ghost")
    _assert_reason(await admin.put("/admin/v2/namespaces/public/default"), 409)
    _assert_reason(await admin.delete("/admin/v2/namespaces/public/nope"), 404, "public/nope")
    _assert_reason(await admin.get("/admin/v2/namespaces/public/nope"), 404)
    _assert_reason(await admin.put("/admin/v2/namespaces/public/b%20d"), 412)
    _assert_reason(
        await admin.put("/admin/v2/namespaces/public/x", json={"deduplicationEnabled": "yes"}),
        400,
        "deduplicationEnabled",
    )


async def test_deduplication_setting_roundtrip(admin: httpx.AsyncClient) -> None:
    url = "/admin/v2/namespaces/public/default/deduplication"
    assert (await admin.get(url)).json() is None  # not set: the broker default applies
    assert (await admin.post(url, json=True)).status_code == 204
    assert (await admin.get(url)).json() is True
    assert (await admin.post(url, json=False)).status_code == 204
    assert (await admin.get(url)).json() is False
    assert (await admin.delete(url)).status_code == 204
    assert (await admin.get(url)).json() is None
    _assert_reason(await admin.post(url, json="maybe"), 400, "true or false")
    _assert_reason(await admin.post(url, headers={"Content-Type": "application/json"}), 400)
    _assert_reason(
        await admin.post("/admin/v2/namespaces/public/nope/deduplication", json=True), 404
    )


async def test_health_endpoints_and_openapi(admin: httpx.AsyncClient) -> None:
    assert (await admin.get("/health")).json() == {"status": "ok"}
    health = await admin.get("/admin/v2/brokers/health")
    assert health.status_code == 200
    assert health.text == "ok"
    spec = (await admin.get("/openapi.json")).json()
    for path in (
        "/admin/v2/tenants",
        "/admin/v2/tenants/{tenant}",
        "/admin/v2/namespaces/{tenant}",
        "/admin/v2/namespaces/{tenant}/{namespace}",
        "/admin/v2/namespaces/{tenant}/{namespace}/deduplication",
        "/admin/v2/persistent/{tenant}/{namespace}",
        "/admin/v2/persistent/{tenant}/{namespace}/{topic}",
        "/admin/v2/persistent/{tenant}/{namespace}/{topic}/terminate",
        "/admin/v2/persistent/{tenant}/{namespace}/{topic}/stats",
        "/admin/v2/brokers/health",
    ):
        assert path in spec["paths"], path


async def test_runtime_stats_report_gc_collections_and_cpu(admin: httpx.AsyncClient) -> None:
    gc_stats = (await admin.get("/admin/v2/broker-stats/runtime")).json()["gc"]
    assert len(gc_stats["collections"]) == 3
    assert len(gc_stats["thresholds"]) == 3
    assert gc_stats["processCpuSeconds"] > 0


async def test_unknown_path_is_a_json_404(admin: httpx.AsyncClient) -> None:
    _assert_reason(await admin.get("/admin/v2/nothing-here"), 404)
