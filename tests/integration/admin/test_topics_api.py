"""Admin REST API for persistent topics: create, list, stats, terminate, delete."""

from __future__ import annotations

import httpx

from braid.cli.standalone import StandaloneServer

#: The admin API takes a POST only as JSON (its cross-site guard).
JSON = {"Content-Type": "application/json"}

BASE = "/admin/v2/persistent/public/default"


async def test_topic_lifecycle(admin: httpx.AsyncClient) -> None:
    assert (await admin.get(BASE)).json() == []
    assert (await admin.put(f"{BASE}/orders")).status_code == 204
    assert (await admin.get(BASE)).json() == ["persistent://public/default/orders"]
    stats = await admin.get(f"{BASE}/orders/stats")
    assert stats.status_code == 200, stats.text
    assert isinstance(stats.json(), dict)
    terminated = await admin.post(f"{BASE}/orders/terminate", headers=JSON)
    assert terminated.status_code == 200, terminated.text
    assert set(terminated.json()) >= {"ledgerId", "entryId"}
    assert (await admin.delete(f"{BASE}/orders")).status_code == 204
    assert (await admin.get(BASE)).json() == []


async def test_topic_errors(admin: httpx.AsyncClient) -> None:
    await admin.put(f"{BASE}/orders")
    conflict = await admin.put(f"{BASE}/orders")
    assert conflict.status_code == 409
    assert "already exists" in conflict.json()["reason"]
    for response in (
        await admin.get(f"{BASE}/ghost/stats"),
        await admin.post(f"{BASE}/ghost/terminate", headers=JSON),
        await admin.delete(f"{BASE}/ghost"),
        await admin.get("/admin/v2/persistent/public/nope"),
        await admin.put("/admin/v2/persistent/public/nope/t"),
    ):
        assert response.status_code == 404, response.text
        assert "reason" in response.json()
    invalid = await admin.put(f"{BASE}/has%20space")
    assert invalid.status_code == 412, invalid.text


async def test_namespace_with_topics_is_not_deleted(admin: httpx.AsyncClient) -> None:
    await admin.put("/admin/v2/tenants/acme")
    await admin.put("/admin/v2/namespaces/acme/orders")
    await admin.put("/admin/v2/persistent/acme/orders/events")
    refused = await admin.delete("/admin/v2/namespaces/acme/orders")
    assert refused.status_code == 409
    assert "persistent://acme/orders/events" in refused.json()["reason"]
    await admin.delete("/admin/v2/persistent/acme/orders/events")
    assert (await admin.delete("/admin/v2/namespaces/acme/orders")).status_code == 204


async def test_topics_and_policies_survive_a_restart(standalone: StandaloneServer) -> None:
    async with httpx.AsyncClient(base_url=standalone.web_service_url) as admin:
        await admin.put("/admin/v2/tenants/acme")
        await admin.put("/admin/v2/namespaces/acme/orders", json={"deduplicationEnabled": True})
        await admin.put("/admin/v2/persistent/acme/orders/events")
    config = standalone.config
    await standalone.close()
    again = StandaloneServer(config)
    await again.start()
    try:
        async with httpx.AsyncClient(base_url=again.web_service_url) as admin:
            assert (await admin.get("/admin/v2/tenants")).json() == ["acme", "public"]
            got = await admin.get("/admin/v2/namespaces/acme/orders/deduplication")
            assert got.json() is True
            topics = (await admin.get("/admin/v2/persistent/acme/orders")).json()
            assert topics == ["persistent://acme/orders/events"]
    finally:
        await again.close()
