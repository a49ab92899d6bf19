"""Fixtures for the Braid client against a real in-process broker.

One broker per test session (SQLite metadata and a local bookie in a temporary directory, on an
ephemeral 127.0.0.1 port) runs on its own event loop in a background thread, so both the
blocking ``braid.Client`` and the ``braid.AsyncClient`` on the test's own loop talk to it over
TCP exactly as an application would. Every test gets unique topic names.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import braid
from tests.support.broker_stack import BackgroundBroker

_counter = itertools.count()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-client")
    background = BackgroundBroker(data_dir).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A ``persistent://`` topic name no other test uses."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"persistent://public/default/{name}-{next(_counter)}"


@pytest.fixture
def client(broker: BackgroundBroker) -> Iterator[braid.Client]:
    c = braid.Client(broker.service_url, operation_timeout=15)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
async def aclient(broker: BackgroundBroker) -> AsyncIterator[braid.AsyncClient]:
    async with braid.AsyncClient(broker.service_url, operation_timeout=15) as c:
        yield c


@pytest.fixture
def broker_url(broker: BackgroundBroker) -> str:
    return broker.service_url
