"""PIP-470's cursor PROMOTE on the internal listener (:mod:`braid.admin.internal`, ADR 0061) over a
real broker: refused without the cluster's broker secret, 409 (promoted via rollover) for a cursor
that no longer uses the ledger the orchestrator copied, and the owner's counter."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from braid.admin.internal import create_internal_app
from braid.broker.broker_secret import BROKER_SECRET_HEADER
from braid.cli.standalone import StandaloneServer
from braid.clusters.cursor_owners import PROMOTE_CURSOR_PATH

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cret-of-the-cluster"
PATH = "/internal/v1" + PROMOTE_CURSOR_PATH


@pytest.fixture
async def internal(standalone: StandaloneServer) -> AsyncIterator[httpx.AsyncClient]:
    app = create_internal_app(None, SECRET, storage_clusters=standalone.storage_clusters)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://internal"
    ) as client:
        yield client


def _body(topic: str, ledger_id: int) -> dict[str, object]:
    return {
        "topic": topic,
        "cursorName": "sub",
        "sourceClusterName": "standalone",
        "targetClusterName": "new",
        "expectedCursorsLedgerId": ledger_id,
        "copiedLastEntryId": 0,
    }


async def test_pip470_internal_promote_cursor_needs_the_broker_secret(
    internal: httpx.AsyncClient,
) -> None:
    refused = await internal.post(PATH, json=_body("public/default/persistent/t", 1))
    assert refused.status_code == 403
    wrong = await internal.post(
        PATH, json=_body("public/default/persistent/t", 1), headers={BROKER_SECRET_HEADER: "no"}
    )
    assert wrong.status_code == 403


async def test_pip470_internal_promote_cursor_of_a_moved_on_cursor_answers_409(
    standalone: StandaloneServer, internal: httpx.AsyncClient
) -> None:
    assert standalone.ml_factory is not None and standalone.storage_clusters is not None
    name = "public/default/persistent/promote-here"
    ml = await standalone.ml_factory.open_impl(name)
    cursor = await ml.open_cursor("sub")
    await ml.append(b"m0")
    await cursor.mark_delete(ml.last_confirmed_position)  # starts its cursor ledger
    headers = {BROKER_SECRET_HEADER: SECRET}
    stale = cursor.cursors_ledger_id + 1000  # not the ledger it uses
    answer = await internal.post(PATH, json=_body(name, stale), headers=headers)
    assert answer.status_code == 409, answer.text
    assert "rolled over" in answer.json()["reason"]
    assert standalone.storage_clusters.metrics.promote_served == 1
    gone = await internal.post(
        PATH, json=_body("public/default/persistent/never-made", 7), headers=headers
    )
    assert gone.status_code == 409  # no node: nothing left to re-point
    bad = await internal.post(
        PATH, json={**_body(name, 1), "targetClusterName": "bad name"}, headers=headers
    )
    assert bad.status_code in (400, 412, 422) and "bad name" in bad.text
