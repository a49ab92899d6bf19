"""A ZooKeeper call cancelled in the very loop iteration its answer lands must raise
``CancelledError``: a task that swallows its cancellation never stops (auto-recovery's worker
hung its service's close this way, a flake of the cluster tier). No server is needed - the
kazoo result is stood in for by an object that answers when the test says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from braid.metadata.zookeeper import ZkMetadataStore
from tests.support.polling import eventually

pytestmark = pytest.mark.timeout(10)


class _Answer:
    """The two methods of kazoo's IAsyncResult that the store uses."""

    def __init__(self) -> None:
        self.callback: Callable[[Any], None] | None = None

    def rawlink(self, callback: Callable[[Any], None]) -> None:
        self.callback = callback

    def get_nowait(self) -> str:
        return "the answer"


async def test_a_cancellation_arriving_with_the_answer_is_not_lost() -> None:
    store = ZkMetadataStore("127.0.0.1:1")  # never started: no connection is made
    answer = _Answer()
    call = asyncio.ensure_future(store._await(answer))
    await eventually(lambda: answer.callback is not None, interval=0)  # the call now waits
    answer.callback(answer)  # the answer lands (kazoo's thread hands it to the loop) ...
    call.cancel()  # ... and the caller is cancelled before the loop runs again
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_an_answer_without_cancellation_is_returned() -> None:
    store = ZkMetadataStore("127.0.0.1:1")
    answer = _Answer()
    call = asyncio.ensure_future(store._await(answer))
    await eventually(lambda: answer.callback is not None, interval=0)
    answer.callback(answer)
    assert await call == "the answer"
