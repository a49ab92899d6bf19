"""Authorization of scalable topics with Braid's own client against ``braid standalone``.

A scalable topic is reached through commands the classic topics do not have - the DAG watch
(``SCALABLE_TOPIC_LOOKUP``), the consumer controller's registration (``SCALABLE_TOPIC_SUBSCRIBE``),
the namespace watch - and its data lives in ``segment://`` topics. A grant on the namespace or on
the ``topic://`` name must open all of them, and a role without one must get
``braid.AuthorizationError`` from each.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

import braid
from braid.cli.standalone import StandaloneServer
from braid.security import tokens
from tests.support.standalone import standalone_config

pytestmark = pytest.mark.timeout(120)

SECRET = b"scalable-authorization-secret-32b"


def _token(role: str) -> str:
    return tokens.create_token(role, secret_key=SECRET)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[StandaloneServer]:
    config = standalone_config(
        tmp_path / "data",
        authentication_enabled=True,
        authentication_providers=(tokens.CLASS_NAME,),
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        authorization_enabled=True,
        super_user_roles=("root",),
    )
    standalone = StandaloneServer(config)
    await standalone.start()
    try:
        yield standalone
    finally:
        await standalone.close()


def _client(server: StandaloneServer, role: str) -> braid.AsyncClient:
    return braid.AsyncClient(
        server.service_url,
        authentication=braid.AuthenticationToken(_token(role)),
        operation_timeout=5,
    )


async def _grant(server: StandaloneServer, path: str, actions: list[str]) -> None:
    headers = {"Authorization": f"Bearer {_token('root')}"}
    async with httpx.AsyncClient(base_url=server.web_service_url, headers=headers) as http:
        answer = await http.post(path, json=actions)
        assert answer.status_code == 204, answer.text


async def test_a_role_without_a_grant_is_refused_every_scalable_topic_command(
    server: StandaloneServer,
) -> None:
    topic = "topic://public/default/guarded"
    owner = _client(server, "root")
    stranger = _client(server, "stranger")
    try:
        await (await owner.create_producer(topic)).send(b"root may", key="k")
        with pytest.raises(braid.AuthorizationError):
            await stranger.create_producer(topic)
        with pytest.raises(braid.AuthorizationError):
            await stranger.subscribe_stream(topic, "s", initial_position="earliest")
    finally:
        await owner.close()
        await stranger.close()


async def test_a_namespace_grant_opens_the_dag_watch_the_segments_and_the_controller(
    server: StandaloneServer,
) -> None:
    await _grant(
        server, "/admin/v2/namespaces/public/default/permissions/app", ["produce", "consume"]
    )
    client = _client(server, "app")
    try:
        topic = "topic://public/default/granted"
        consumer = await client.subscribe_stream(topic, "s", initial_position="earliest")
        producer = await client.create_producer(topic)
        await producer.send(b"through every segment command", key="k")
        message = await consumer.receive(timeout=10)
        assert message is not None and message.value == b"through every segment command"
    finally:
        await client.close()


async def test_a_topic_grant_on_the_scalable_topic_covers_its_segments_and_nothing_else(
    server: StandaloneServer,
) -> None:
    topic = "topic://public/default/writable"
    await _grant(
        server, "/admin/v2/scalable/public/default/writable/permissions/writer", ["produce"]
    )
    client = _client(server, "writer")
    try:
        producer = await client.create_producer(topic)
        await producer.send(b"to a granted scalable topic", key="k")
        with pytest.raises(braid.AuthorizationError):
            await client.subscribe_stream(topic, "s", initial_position="earliest")
        with pytest.raises(braid.AuthorizationError):
            await client.create_producer("topic://public/default/not-granted")
    finally:
        await client.close()
