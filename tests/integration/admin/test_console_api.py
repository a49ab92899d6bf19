"""The console's server side on an in-process standalone: its pages and files, its event streams
(the DAG watch's pushes and the traffic sampler's ticks) and the auto-scaler's decision history
over REST. The page itself is tested in a real browser in ``tests/browser``."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

import braid
from braid.admin.console.pages import load_static_files
from braid.cli.standalone import StandaloneServer
from tests.support.polling import eventually

TOPIC_PATH = "/admin/v2/scalable/public/default"


async def _events(admin: httpx.AsyncClient, path: str) -> AsyncIterator[tuple[str, Any]]:
    """The (event, data) pairs of a server-sent event stream."""
    async with admin.stream("GET", path, timeout=httpx.Timeout(10.0, read=15.0)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: ") and event is not None:
                yield event, json.loads(line[len("data: ") :])
                event = None


async def _next(events: AsyncIterator[tuple[str, Any]], kind: str, within: float = 10.0) -> Any:
    async def find() -> Any:
        async for event, data in events:
            if event == kind:
                return data
        raise AssertionError(f"the stream ended before a {kind!r} event")

    return await asyncio.wait_for(find(), within)


async def test_console_pages_and_files_are_served_with_a_content_security_policy(
    admin: httpx.AsyncClient,
) -> None:
    for path in ("/console", "/console/topic/public/default/anything"):
        response = await admin.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert '<script type="module" src="/console/static/console.js">' in response.text
    script = await admin.get("/console/static/dag.js")
    assert script.headers["content-type"].startswith("text/javascript")
    for bad in ("nope.js", "..%2Fpages.py", "__init__.py"):
        missing = await admin.get(f"/console/static/{bad}")
        assert missing.status_code == 404 and "reason" in missing.json()


async def test_every_file_the_page_loads_is_served(admin: httpx.AsyncClient) -> None:
    files = load_static_files()
    wanted = set(re.findall(r"/console/static/([\w.-]+)", files["index.html"][0].decode()))
    for name, (content, _) in files.items():
        if name.endswith(".js"):
            wanted |= set(re.findall(r'from "\./([\w.-]+)"', content.decode()))
    assert {"console.js", "console.css", "dag.js", "topic.js", "api.js"} <= wanted
    for name in sorted(wanted):
        response = await admin.get(f"/console/static/{name}")
        assert response.status_code == 200, name


async def test_topic_stream_sends_the_dag_then_every_change(admin: httpx.AsyncClient) -> None:
    await admin.put(f"{TOPIC_PATH}/watched", json={"numInitialSegments": 2})
    events = _events(admin, "/console/api/scalable/public/default/watched/events")
    try:
        first = await _next(events, "dag")
        assert first["topic"] == "topic://public/default/watched"
        assert first["metadata"]["epoch"] == 0 and set(first["metadata"]["segments"]) == {"0", "1"}
        assert set(first["segmentBrokers"]) == {"0", "1"}
        assert first["controllerBrokerUrl"].startswith("pulsar://")
        split = await admin.post(f"{TOPIC_PATH}/watched/split/0", json={})
        assert split.status_code == 200
        second = await _next(events, "dag")
        assert second["metadata"]["epoch"] == 1
        assert second["metadata"]["segments"]["0"]["state"] == "SEALED"
        assert set(second["segmentBrokers"]) == {"1", "2", "3"}
        traffic = await _next(events, "traffic")
        assert set(traffic) >= {"atMs", "topic", "segments", "decisionSeq"}
        assert isinstance(traffic["decisionSeq"], int)  # this broker leads: its log is here
    finally:
        await events.aclose()


async def test_viewing_an_unknown_topic_reports_it_and_does_not_create_it(
    admin: httpx.AsyncClient,
) -> None:
    events = _events(admin, "/console/api/scalable/public/default/never-made/events")
    error = await _next(events, "error")
    await events.aclose()
    assert "never-made" in error["reason"] and "does not exist" in error["reason"]
    assert (await admin.get(f"{TOPIC_PATH}/never-made")).status_code == 404


async def test_overview_stream_reports_rates_backlog_and_clients_of_loaded_topics(
    standalone: StandaloneServer, admin: httpx.AsyncClient
) -> None:
    topic = "topic://public/default/busy"
    await admin.put(f"{TOPIC_PATH}/busy", json={"numInitialSegments": 2})
    await admin.put(f"{TOPIC_PATH}/busy/subscriptions/audit", json={"initialPosition": "Earliest"})
    events = _events(admin, "/console/api/events")
    async with braid.AsyncClient(standalone.service_url, operation_timeout=15) as client:
        producer = await client.create_producer(topic)
        before = (await _next(events, "traffic"))["topics"][topic]
        assert before["msgRateIn"] == 0 and before["backlog"] == 0
        for i in range(50):
            await producer.send(f"order-{i}".encode(), key=f"customer-{i % 7}")
        try:
            for _ in range(5):  # a tick every 2 s
                numbers = (await _next(events, "traffic"))["topics"][topic]
                if numbers["msgRateIn"] > 0:
                    break
        finally:
            await events.aclose()
        assert numbers["msgRateIn"] > 0, numbers
        assert numbers["backlog"] == 50 and numbers["producers"] >= 1
        assert numbers["subscriptions"]["audit"]["backlog"] == 50
        assert numbers["storageSize"] > 0
        await producer.close()


async def test_open_streams_end_when_the_admin_server_stops(
    standalone: StandaloneServer, admin: httpx.AsyncClient
) -> None:
    events = _events(admin, "/console/api/events")
    await _next(events, "traffic")
    assert standalone.admin is not None
    started = time.monotonic()
    await standalone.admin.stop()
    # Without ending the stream first uvicorn would wait its whole 5 s grace for it.
    assert time.monotonic() - started < 2.0
    await events.aclose()


async def test_decision_history_shows_a_consumer_driven_split_and_the_decisions_not_taken(
    standalone: StandaloneServer, admin: httpx.AsyncClient
) -> None:
    topic = "topic://public/default/workers"
    await admin.put(f"{TOPIC_PATH}/workers", json={"numInitialSegments": 1})
    async with braid.AsyncClient(standalone.service_url, operation_timeout=15) as client:
        consumers = [
            await client.subscribe_stream(topic, "jobs", consumer_name=f"worker-{i}")
            for i in range(2)
        ]
        history: dict[str, Any] = {}

        async def split_recorded() -> bool:
            history.update((await admin.get(f"{TOPIC_PATH}/workers/autoScaleDecisions")).json())
            return any(d["action"] == "split" for d in history["taken"])

        await eventually(split_recorded, within=15.0, message="an automatic split")
        for consumer in consumers:
            await consumer.close()
    split = next(d for d in history["taken"] if d["action"] == "split")
    assert split["reason"] == "consumer-driven" and split["segmentIds"] == [0]
    assert "subscription 'jobs' has 2 consumers for 1 active segments" in split["detail"]
    assert history["leaderBrokerUrl"] == standalone.service_url and history["running"] is True
    assert history["notTaken"], "the evaluations that held back are listed"
    assert all(d["action"] == "none" and d["count"] >= 1 for d in history["notTaken"])
    assert history["seq"] == max(d["seq"] for d in history["taken"] + history["notTaken"])
    missing = await admin.get(f"{TOPIC_PATH}/nobody-here/autoScaleDecisions")
    assert missing.status_code == 404
