"""Fixtures of the bookie-process tests: a real ZooKeeper shared by the whole run, and bookie
processes that are always stopped afterwards."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.bookie_process import BookieProcess
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]

_chroots = itertools.count()


@pytest.fixture
def zk_url(zookeeper_server: ZooKeeperServer) -> str:
    """A fresh chroot per test: its clusters do not see each other's bookies."""
    return zookeeper_server.url(f"/bookie-test-{next(_chroots)}")


@pytest.fixture
def bookies(tmp_path: Path, zk_url: str) -> Iterator[Callable[..., BookieProcess]]:
    """Make bookie processes (not started) that are stopped at the end of the test."""
    made: list[BookieProcess] = []

    def make(bookie_id: str, **extra: str) -> BookieProcess:
        bookie = BookieProcess(bookie_id, tmp_path / bookie_id, zk_url, extra=extra)
        made.append(bookie)
        return bookie

    yield make
    for bookie in made:
        bookie.stop()
