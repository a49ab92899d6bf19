"""An in-process ``StandaloneServer`` (real SQLite, real bookie, real broker, real HTTP server on a
free 127.0.0.1 port) and an httpx client against its admin API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from braid.cli.standalone import StandaloneServer
from tests.support.standalone import standalone_config


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[StandaloneServer]:
    server = StandaloneServer(standalone_config(tmp_path / "data"))
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def admin(standalone: StandaloneServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=standalone.web_service_url, timeout=10.0) as client:
        yield client
