"""Fixtures for the Braid client against real in-process brokers.

Two brokers per test session, each (SQLite metadata and a local bookie in a temporary directory,
on an ephemeral 127.0.0.1 port) on its own event loop in a background thread, so both the
blocking ``braid.Client`` and the ``braid.AsyncClient`` on the test's own loop talk to them over
TCP exactly as an application would:

* ``broker`` - the plain broker, which does not advertise scalable topics (the client drives
  ``persistent://`` topics through synthetic layouts, and must never send it a scalable-topic
  command);
* ``scalable_broker`` - the same with the scalable-topic layer installed, as ``braid standalone``
  runs it, plus a :class:`StepGate` that can hold a split or merge between two of its steps.

Every test gets unique topic names.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pulsar
import pytest

import braid
from braid.scalable.service import ScalableTopicService
from tests.support.broker_stack import BackgroundBroker
from tests.support.scalable_stack import ScalableStack, open_scalable_stack

T = TypeVar("T")

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


class StepGate:
    """A controller step hook (``braid.scalable.controller.STEPS``) a test can stop at.

    :meth:`arm` makes the next split or merge wait right after ``step`` until :meth:`release`;
    :attr:`reached` is set when it got there. Runs on the broker's loop; the wait happens in a
    worker thread so the broker keeps serving everything else meanwhile.
    """

    def __init__(self) -> None:
        self._step: str | None = None
        self.reached = threading.Event()
        self._release = threading.Event()

    def arm(self, step: str) -> None:
        self.reached.clear()
        self._release.clear()
        self._step = step

    def release(self) -> None:
        self._step = None
        self._release.set()

    async def __call__(self, step: str) -> None:
        if step == self._step:
            self.reached.set()
            await asyncio.to_thread(self._release.wait, 60)


class ScalableBroker(BackgroundBroker):
    """A :class:`BackgroundBroker` with the scalable-topic layer installed, as ``braid
    standalone`` wires it (it advertises ``supports_scalable_topics``)."""

    def __init__(self, data_dir: Path, gate: StepGate, **config: Any) -> None:
        super().__init__(data_dir, **config)
        self.gate = gate
        self._scalable_stack: ScalableStack | None = None

    def start(self) -> ScalableBroker:
        self._thread.start()
        self._scalable_stack = self.call(
            open_scalable_stack(self.data_dir, step_hook=self.gate, **self._config)
        )
        self._stack = self._scalable_stack.broker
        return self

    @property
    def scalable(self) -> ScalableTopicService:
        assert self._scalable_stack is not None
        return self._scalable_stack.scalable

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the broker's loop without waiting for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def stop(self) -> None:
        try:
            if self._scalable_stack is not None:
                self.call(self._scalable_stack.close())
                self._stack = None
        finally:
            super().stop()


@pytest.fixture(scope="session")
def scalable_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScalableBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-client-scalable")
    background = ScalableBroker(data_dir, StepGate()).start()
    try:
        yield background
    finally:
        background.gate.release()
        background.stop()


@pytest.fixture
def scalable_topic(request: pytest.FixtureRequest) -> str:
    """A ``topic://`` name no other test uses (not created yet)."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    return f"topic://public/default/{name}-{next(_counter)}"


@pytest.fixture
def official(scalable_broker: ScalableBroker) -> Iterator[pulsar.Client]:
    """An official ``pulsar-client`` of the scalable-topic broker (migration tests)."""
    c = pulsar.Client(scalable_broker.service_url, operation_timeout_seconds=10)
    try:
        yield c
    finally:
        try:
            c.close()
        except pulsar.AlreadyClosed:
            pass


@pytest.fixture
def sclient(scalable_broker: ScalableBroker) -> Iterator[braid.Client]:
    """A blocking client of the scalable-topic broker."""
    c = braid.Client(scalable_broker.service_url, operation_timeout=15)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="session")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScalableBroker]:
    """A scalable-topic broker with ``transactionCoordinatorEnabled=true``."""
    data_dir: Path = tmp_path_factory.mktemp("braid-client-txn")
    broker = ScalableBroker(data_dir, StepGate(), transaction_coordinator_enabled=True).start()
    try:
        yield broker
    finally:
        broker.gate.release()
        broker.stop()


@pytest.fixture
def txn_client(txn_broker: ScalableBroker) -> Iterator[braid.Client]:
    """A blocking client of :func:`txn_broker`."""
    c = braid.Client(txn_broker.service_url, operation_timeout=15)
    try:
        yield c
    finally:
        c.close()
