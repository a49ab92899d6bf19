"""Fixtures of the standalone cluster tests: a real ZooKeeper shared by the whole run."""

from __future__ import annotations

from tests.support.zookeeper import zookeeper_server

__all__ = ["zookeeper_server"]
