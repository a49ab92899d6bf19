"""Fixtures for the official ``pulsar-client`` against an in-process Braid broker.

One broker per test session (real SQLite metadata and a real local bookie in a temporary
directory, listening on an ephemeral 127.0.0.1 port) runs on its own event loop in a background
thread, because the official client's calls block. Each test gets a fresh client and unique topic
names, so tests do not see each other's data.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.support.broker_stack import BackgroundBroker

_topic_counter = itertools.count()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-interop")
    background = BackgroundBroker(data_dir).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.fixture
def client(broker: BackgroundBroker) -> Iterator[pulsar.Client]:
    c = pulsar.Client(
        broker.service_url,
        operation_timeout_seconds=10,
        logger=_quiet_logger(),
    )
    try:
        yield c
    finally:
        try:
            c.close()
        except pulsar.AlreadyClosed:
            # The C++ client reports this when a producer it is closing was already closed by
            # a terminated topic (a race inside the client); everything is closed either way.
            pass


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"persistent://public/default/{name}-{next(_topic_counter)}"


def _quiet_logger() -> logging.Logger:
    """The C++ client logs every connection at INFO; keep warnings and errors only."""
    log = logging.getLogger("pulsar-client")
    log.setLevel(logging.WARNING)
    return log
