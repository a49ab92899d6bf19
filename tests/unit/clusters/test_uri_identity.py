"""Which metadata-service URIs name the same store (the registry refuses collisions)."""

from __future__ import annotations

import pytest

from braid.clusters.registry import uri_identity
from braid.core.errors import InvalidInputError


def test_the_same_file_spelled_twice_collides() -> None:
    assert uri_identity("sqlite:///srv/a.db") == uri_identity("sqlite:////srv/a.db")
    assert uri_identity("sqlite:///srv/a.db") != uri_identity("sqlite:///srv/b.db")


def test_co_located_zookeeper_clusters_need_different_chroots() -> None:
    same = uri_identity("zk://h1:2181,h2:2181/ledgers")
    assert same == uri_identity("zk://h2:2181,h1:2181/ledgers/")
    assert same != uri_identity("zk://h1:2181,h2:2181/ledgers-v2")


def test_malformed_uri_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError):
        uri_identity("bogus")


def test_pip470_phase1_registers_zk_null_metadata_service_uris() -> None:
    # PIP-470 "Phase 1: Cluster Registration": --metadata-service-uri zk+null://new-zk:2181/...
    null = uri_identity("zk+null://new-zk:2181/ledgers-v2")
    assert null == uri_identity("zk://new-zk:2181/ledgers-v2")
    assert null == uri_identity("zk+hierarchical://new-zk:2181/ledgers-v2")
    assert uri_identity("zk+null://a:2181;b:2181/l") == uri_identity("zk://b:2181,a:2181/l")
    assert null != uri_identity("zk+null://new-zk:2181/ledgers")
    with pytest.raises(InvalidInputError, match="unknown ledger layout"):
        uri_identity("zk+bogus://new-zk:2181/ledgers-v2")
    with pytest.raises(InvalidInputError):
        uri_identity("sqlite+null:///a.db")
