"""The internal Segments API (:mod:`braid.admin.internal`, ADR 0051) over a real broker: what the
controller leader asks of a segment's owner, refused to anyone without the cluster's broker
secret, and absent from the public admin API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from braid.admin.internal import create_internal_app
from braid.broker.broker_secret import BROKER_SECRET_HEADER
from braid.cli.standalone import StandaloneServer
from braid.core.names import TopicName
from braid.scalable.segments import LocalSegmentAdmin

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cret-of-the-cluster"
BASE = "/internal/v1/segments/public/default/by-hand"


@pytest.fixture
async def internal(standalone: StandaloneServer) -> AsyncIterator[httpx.AsyncClient]:
    assert standalone.broker is not None and standalone.scalable is not None
    drained: list[tuple[str, str]] = []
    app = create_internal_app(
        LocalSegmentAdmin(standalone.broker), SECRET, lambda s, sub: drained.append((s, sub))
    )
    app.state.drained = drained
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://internal", headers={BROKER_SECRET_HEADER: SECRET}
    ) as client:
        yield client


async def test_the_segments_table_runs_on_the_owner(
    standalone: StandaloneServer, internal: httpx.AsyncClient
) -> None:
    assert standalone.scalable is not None
    await standalone.scalable.create_topic(TopicName.parse("topic://public/default/by-hand"), 1)
    segment = f"{BASE}/0000-ffff-0"
    assert (await internal.put(segment, json=["extra"])).status_code == 204  # adds the cursor
    assert (await internal.get(f"{segment}/subscriptions")).json() == ["extra"]
    assert (await internal.get(segment)).json() == {"exists": True, "terminated": False}
    assert (await internal.put(f"{segment}/subscriptions/audit?earliest=true")).status_code == 204
    assert (await internal.get(f"{segment}/subscriptions/audit/drained")).json() == {
        "drained": False
    }
    assert (await internal.post(f"{segment}/terminate")).status_code == 204
    assert (await internal.get(segment)).json() == {"exists": True, "terminated": True}
    # Sealed and empty: every cursor has nothing left to read.
    assert (await internal.get(f"{segment}/subscriptions/audit/drained")).json() == {
        "drained": True
    }
    seek = await internal.post(f"{segment}/subscriptions/audit/seek", json={"timestamp": 0})
    assert seek.status_code == 204
    stats = (await internal.get(f"{segment}/stats")).json()["stats"]
    assert stats["terminated"] is True and "audit" in stats["subscriptions"]
    assert (await internal.get(f"{segment}/last-confirmed")).json() == {"lastConfirmed": None}
    assert (await internal.delete(f"{segment}/subscriptions/audit")).status_code == 204

    spare = f"{BASE}/0000-ffff-5"
    assert (await internal.put(spare)).status_code == 204
    assert (await internal.delete(spare)).status_code == 204
    assert (await internal.get(spare)).json() == {"exists": False, "terminated": False}
    assert (await internal.get(f"{spare}/stats")).json() == {"stats": None}
    assert (await internal.get(f"{spare}/last-confirmed")).json() == {"lastConfirmed": None}
    missing = await internal.post(f"{spare}/terminate")
    assert missing.status_code == 404
    bad = await internal.put(f"{BASE}/zz")
    assert bad.status_code in (400, 412) and "descriptor" in bad.json()["reason"]

    told = await internal.post(
        "/internal/v1/drained",
        json={"segment": segment[len("/internal/v1/segments/") :], "subscription": "extra"},
    )
    assert told.status_code == 204


async def test_a_request_without_the_broker_secret_is_refused(
    internal: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    for headers in ({BROKER_SECRET_HEADER: ""}, {BROKER_SECRET_HEADER: "guess"}):
        refused = await internal.get(f"{BASE}/0000-ffff-0", headers=headers)
        assert refused.status_code == 403
        assert "brokers of this cluster only" in refused.json()["reason"]
    assert (await internal.get("/openapi.json")).status_code in (403, 404)
    assert [r for r in caplog.records if "no valid broker secret" in r.getMessage()]


async def test_the_public_admin_api_has_no_segments_table(admin: httpx.AsyncClient) -> None:
    paths = (await admin.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/admin/v2/segments")]
    gone = await admin.post("/admin/v2/segments/public/default/t/0000-ffff-0/terminate", json={})
    assert gone.status_code == 404
