"""Fixtures of the many-brokers tests: the real ZooKeeper (one chroot per test), bookie processes
of the storage tests, and clusters of three ``braid broker`` processes over three bookies
(:mod:`tests.support.broker_cluster`), always stopped afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.cluster.storage.conftest import bookies, zk_url
from tests.support.bookie_process import BookieProcess
from tests.support.broker_cluster import Cluster
from tests.support.zookeeper import zookeeper_server

MakeCluster = Callable[..., Cluster]


@pytest.fixture
def make_cluster(
    tmp_path: Path, zk_url: str, bookies: Callable[..., BookieProcess]
) -> Iterator[MakeCluster]:
    """``make_cluster(extra=..., env=...)``: a cluster (not started) stopped at the end."""
    made: list[Cluster] = []

    def make(
        *,
        extra: Mapping[str, str] | None = None,
        env: Mapping[int, Mapping[str, str]] | None = None,
    ) -> Cluster:
        cluster = Cluster(
            tmp_path, zk_url, [bookies(f"bk-{i}") for i in range(3)], extra=extra, env=env
        )
        made.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()


@pytest.fixture
def cluster(make_cluster: MakeCluster) -> Cluster:
    """Three brokers over three bookies, not started."""
    return make_cluster()


__all__ = ["bookies", "cluster", "make_cluster", "zk_url", "zookeeper_server"]
