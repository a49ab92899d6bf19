"""Issue 27, finding 5 on a real standalone: a cross-site "simple" request no longer reshapes a
topic, while the broker's own callers (AdminClient, the CLI, the console's fetch) still do."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from braid.admin.client import AdminClient
from braid.cli.main import main
from braid.cli.standalone import StandaloneServer

TOPIC = "topic://public/default/guarded"
SPLIT = "/admin/v2/scalable/public/default/guarded/split/0"


async def _active(admin: httpx.AsyncClient) -> int:
    layout = (await admin.get("/admin/v2/scalable/public/default/guarded")).json()
    return sum(1 for s in layout["segments"].values() if s.get("state", "ACTIVE") == "ACTIVE")


@pytest.mark.timeout(60)
async def test_a_text_plain_post_from_evil_example_no_longer_splits_a_segment(
    standalone: StandaloneServer, admin: httpx.AsyncClient
) -> None:
    created = await admin.put(
        "/admin/v2/scalable/public/default/guarded", json={"numInitialSegments": 1}
    )
    assert created.status_code in (200, 204), created.text
    before = (await admin.get("/admin/v2/scalable/public/default/guarded")).json()

    # The finding as written: text/plain, Origin and Host of another site.
    attack = await admin.post(
        SPLIT,
        content="x",
        headers={
            "Content-Type": "text/plain",
            "Origin": "http://evil.example",
            "Host": "evil.example",
        },
    )
    assert attack.status_code == 403, attack.text
    # The same page on the broker's own host name (no DNS rebinding) is still refused...
    same_host = await admin.post(
        SPLIT, content="x", headers={"Content-Type": "text/plain", "Origin": "http://evil.example"}
    )
    assert same_host.status_code == 403, same_host.text
    # ...and so is a simple POST without any Origin (an old browser, a sandboxed page).
    simple = await admin.post(SPLIT, content="x", headers={"Content-Type": "text/plain"})
    assert simple.status_code == 415, simple.text
    assert (await admin.get("/admin/v2/scalable/public/default/guarded")).json() == before

    # What the console's fetch sends (same origin, JSON) splits.
    web = standalone.web_service_url
    console_like = await admin.post(SPLIT, json={}, headers={"Origin": web})
    assert console_like.status_code == 200, console_like.text
    # The AdminClient and the CLI send JSON too.
    layout = (await admin.get("/admin/v2/scalable/public/default/guarded")).json()
    child = max(int(i) for i in layout["segments"])

    def split_with_the_admin_client() -> None:
        with AdminClient(web) as client:
            client.scalable_topics.split(TOPIC, child)

    # Blocking callers in a thread: the broker serves on this test's loop.
    await asyncio.to_thread(split_with_the_admin_client)
    child = max(
        int(i)
        for i in (await admin.get("/admin/v2/scalable/public/default/guarded")).json()["segments"]
    )
    argv = ["admin", "--url", web, "scalable-topics", "split", TOPIC, str(child)]
    assert await asyncio.to_thread(main, argv) == 0
    assert await _active(admin) == 4
