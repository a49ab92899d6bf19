"""Admin REST about the broker itself: its cluster, its health and its runtime.

* ``GET /admin/v2/clusters``: the one cluster this broker belongs to;
* ``GET /admin/v2/brokers/{cluster}``: the live brokers (their registry ids, ``host:port`` of
  their broker service URLs) and ``GET /admin/v2/brokers/leaderBroker`` the leader broker
  (``{"brokerId", "serviceUrl"}``), read from the broker registry
  (:mod:`braid.broker.broker_registry`);
* ``GET /admin/v2/brokers/health``: Pulsar's health check, ``ok`` after a real round-trip to the
  metadata store; 503 (retriable, with the reason) while the broker's storage is read-only;
* ``GET /admin/v2/broker-stats/runtime``: garbage collections and the time they took.

The process-level ``/health`` (liveness, 200 even when degraded) and ``/metrics`` are mounted at
the root by :func:`braid.admin.app.create_app`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from braid.broker.broker_registry import BrokerRegistry
from braid.broker.gc_policy import GC_STATS
from braid.broker.resources import BrokerResources
from braid.core.errors import NotFoundError, ServiceUnavailableError


class StorageUnavailable(ServiceUnavailableError):
    """The broker cannot store messages now (503): its storage is read-only."""


class NoLeaderBroker(ServiceUnavailableError):
    """No broker leads right now (an election is settling); retry."""


class ClusterNotFound(NotFoundError):
    """Not this broker's cluster."""


def brokers_router(
    cluster_name: str,
    resources: BrokerResources,
    storage_status: Callable[[], Mapping[str, object]],
    registry: BrokerRegistry | None = None,
) -> APIRouter:
    """The cluster, broker-health and runtime-stats endpoints (mounted under ``/admin/v2``).

    Args:
        cluster_name: the broker's cluster (``clusterName``).
        resources: the metadata the health check reads.
        storage_status: the broker's storage state (``{"state": "read-write" | ..., "reason"}``).
        registry: the broker registry; ``None`` leaves the broker list and leader out.
    """
    router = APIRouter()

    @router.get("/clusters", tags=["clusters"], summary="List clusters")
    async def get_clusters() -> list[str]:
        return [cluster_name]

    @router.get(
        "/brokers/health",
        tags=["brokers"],
        summary="Broker health check",
        response_class=PlainTextResponse,
    )
    async def broker_health() -> str:
        # A real round-trip to the metadata store, not a constant: a broker whose store is gone
        # is not healthy; nor is one that cannot store a message (its bookies are read-only:
        # 503, retriable, with the reason).
        await resources.list_tenants()
        storage = storage_status()
        if storage["state"] != "read-write":
            raise StorageUnavailable(f"broker is read-only: {storage['reason']}")
        return "ok"

    if registry is not None:
        _registry_routes(router, cluster_name, registry)

    @router.get(
        "/broker-stats/runtime",
        tags=["brokers"],
        summary="Python runtime statistics: garbage collections and the time they took",
    )
    async def runtime_stats() -> dict[str, object]:
        return {"gc": GC_STATS.snapshot()}

    return router


def _registry_routes(router: APIRouter, cluster_name: str, registry: BrokerRegistry) -> None:
    @router.get(
        "/brokers/leaderBroker", tags=["brokers"], summary="The leader broker of the cluster"
    )
    async def leader_broker() -> dict[str, str]:
        leader = await registry.leader()
        if leader is None:
            raise NoLeaderBroker("no leader broker right now (an election is settling); retry")
        return leader

    @router.get("/brokers/{cluster}", tags=["brokers"], summary="The live brokers of a cluster")
    async def list_brokers(cluster: str) -> list[str]:
        if cluster != cluster_name:
            raise ClusterNotFound(f"cluster {cluster!r} does not exist (this is {cluster_name!r})")
        return [b.broker_id for b in await registry.brokers()]


__all__ = ["ClusterNotFound", "NoLeaderBroker", "StorageUnavailable", "brokers_router"]
