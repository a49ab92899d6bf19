"""Fixtures of the many-brokers tests: the real ZooKeeper (one chroot per test) and bookie
processes of the storage tests."""

from __future__ import annotations

from tests.cluster.storage.conftest import bookies, zk_url
from tests.support.zookeeper import zookeeper_server

__all__ = ["bookies", "zk_url", "zookeeper_server"]
