"""The cluster's broker secret: how a broker proves to another broker that it is one (ADR 0051).

Brokers call each other's **internal listener** (the Segments API of
:mod:`braid.admin.internal`) for the scalable-topic controller's work on segments they do not own.
That listener accepts a request only when it carries the cluster's broker secret in
:data:`BROKER_SECRET_HEADER`. The secret is 32 random bytes (URL-safe text) written **once** per
cluster, with compare-and-swap (``expected_version=-1``), at ``/admin/clusters/{cluster}/
brokerInternalSecret`` by the first broker that needs it; every later broker reads the same value.

What it proves: the caller can read the cluster's metadata store - which brokers (and the
operators who run them) can and clients cannot, since clients only ever talk to brokers. It is
not a substitute for network isolation: the internal port should not be reachable from outside
the brokers' network (docs/deploy.md), and the value is as secret as the store is.
"""

from __future__ import annotations

import hmac
import logging
import secrets

from braid.metadata.api import BadVersion, MetadataStore

log = logging.getLogger(__name__)

#: The HTTP header a broker sends the secret in.
BROKER_SECRET_HEADER = "X-Braid-Broker-Secret"


def secret_path(cluster: str) -> str:
    """Where the cluster's broker secret lives."""
    return f"/admin/clusters/{cluster}/brokerInternalSecret"


async def load_broker_secret(store: MetadataStore, cluster: str) -> str:
    """The cluster's broker secret, created (once, with CAS) if no broker made it yet."""
    path = secret_path(cluster)
    got = await store.get(path)
    if got is not None:
        return got[0].decode()
    fresh = secrets.token_urlsafe(32)
    try:
        await store.put(path, fresh.encode(), -1)
    except BadVersion:  # another broker created it first: use theirs
        again = await store.get(path)
        assert again is not None
        return again[0].decode()
    log.info("created the broker secret of cluster %s", cluster)
    return fresh


def secret_matches(expected: str, presented: str | None) -> bool:
    """Constant-time comparison of a presented secret with the cluster's."""
    if not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


__all__ = ["BROKER_SECRET_HEADER", "load_broker_secret", "secret_matches", "secret_path"]
