"""Fixtures for in-process broker tests: a real broker stack in the test's event loop.

``broker_stack`` is a broker over SQLite metadata and a local bookie in ``tmp_path``; ``restart``
closes it and opens a new one on the same data directory (what a broker restart does to state).
``raw`` opens protocol-level connections to it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_stack import BrokerStack, open_broker_stack
from tests.support.raw_client import RawClient


class StackHolder:
    """The current stack of a test, replaced on restart."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.data_dir = data_dir
        self.config = config
        self.stack: BrokerStack | None = None
        self._clients: list[RawClient] = []

    async def start(self) -> BrokerStack:
        self.stack = await open_broker_stack(self.data_dir, **self.config)
        return self.stack

    async def restart(self) -> BrokerStack:
        await self.close()
        return await self.start()

    async def raw(self) -> RawClient:
        assert self.stack is not None
        client = await RawClient.open("127.0.0.1", self.stack.service.port)
        self._clients.append(client)
        return client

    async def close(self) -> None:
        for client in self._clients:
            await client.close()
        self._clients.clear()
        if self.stack is not None:
            await self.stack.close()
            self.stack = None


@pytest.fixture
async def holder(tmp_path: Path) -> AsyncIterator[StackHolder]:
    h = StackHolder(tmp_path / "broker")
    await h.start()
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
def broker_stack(holder: StackHolder) -> BrokerStack:
    assert holder.stack is not None
    return holder.stack


@pytest.fixture
def raw(holder: StackHolder) -> Callable[[], Awaitable[RawClient]]:
    return holder.raw
