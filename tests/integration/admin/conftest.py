"""Fixtures of the admin tests.

* ``standalone`` / ``admin``: an in-process ``StandaloneServer`` (real SQLite, real bookie, real
  broker, real HTTP server on a free 127.0.0.1 port) per test, and an httpx client of its API.
* ``standalone_subprocess`` / ``admin_client``: the real ``braid standalone`` command as a child
  process, one per test module, and an :class:`~braid.admin.client.AdminClient` of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from braid.admin.client import AdminClient
from braid.cli.standalone import StandaloneServer
from tests.support.standalone import StandaloneProcess, standalone_config


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


# --- a real `braid standalone` child process, shared by the tests of one module ----------------


@pytest.fixture(scope="module")
def standalone_subprocess(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[StandaloneProcess]:
    """One ``braid standalone`` process per test module (start-up is the slow part); tests
    use names of their own so they do not depend on each other's leftovers."""
    root = tmp_path_factory.mktemp("standalone")
    process = StandaloneProcess.start_on_free_ports(root / "data", log_path=root / "standalone.log")
    try:
        yield process
    finally:
        if process.running:
            process.stop()


@pytest.fixture(scope="module")
def admin_client(standalone_subprocess: StandaloneProcess) -> Iterator[AdminClient]:
    with AdminClient(standalone_subprocess.web_url) as client:
        yield client
