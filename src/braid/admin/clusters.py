"""Admin REST for cluster records (Pulsar's ``/admin/v2/clusters/{cluster}``).

``GET /admin/v2/clusters/{cluster}`` gives a cluster's ``ClusterData`` (``serviceUrl``,
``serviceUrlTls``, ``brokerServiceUrl``, ``brokerServiceUrlTls``); ``PUT`` creates one (409 when it
exists, as Pulsar answers the official client's CI setup, which PUTs the ``standalone`` cluster
every run), ``POST`` updates it, ``DELETE`` removes a cluster other than this broker's own (412
for its own). The records live at ``/admin/clusters/{cluster}`` of the configuration store, where
``braid initialize-cluster-metadata`` writes them; a standalone broker that has none answers
``GET`` for its own cluster with its own URLs. Only super users may call these (the
authorization middleware); listing the clusters is ``GET /admin/v2/clusters``
(:mod:`braid.admin.brokers`).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel

from braid.admin.errors import PreconditionFailed
from braid.admin.path_params import Tenant
from braid.broker.cluster_metadata import CLUSTERS_ROOT, ClusterData
from braid.core.errors import AlreadyExistsError, NotFoundError
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound


class ClusterNotFound(NotFoundError):
    """No record of this cluster."""


class ClusterAlreadyExists(AlreadyExistsError):
    """PUT of a cluster that has a record."""


class ClusterDataBody(BaseModel):
    """Pulsar's ``ClusterData`` as sent in PUT/POST bodies (other keys are ignored)."""

    serviceUrl: str = ""
    serviceUrlTls: str = ""
    brokerServiceUrl: str = ""
    brokerServiceUrlTls: str = ""

    def data(self) -> ClusterData:
        return ClusterData(
            self.serviceUrl, self.brokerServiceUrl, self.serviceUrlTls, self.brokerServiceUrlTls
        )


def clusters_router(
    cluster_name: str, store: MetadataStore, own: ClusterData | None = None
) -> APIRouter:
    """The cluster-record endpoints (mounted under ``/admin/v2``).

    Args:
        cluster_name: this broker's cluster (it cannot be deleted).
        store: the configuration store.
        own: this broker's own URLs, answered for its cluster while no record exists.
    """
    router = APIRouter(tags=["clusters"])

    def path(cluster: str) -> str:
        return f"{CLUSTERS_ROOT}/{cluster}"

    @router.get("/clusters/{cluster}", summary="A cluster's service URLs")
    async def get_cluster(cluster: Tenant) -> dict[str, Any]:
        got = await store.get(path(cluster))
        if got is not None:
            doc = json.loads(got[0] or b"{}")
            return doc if isinstance(doc, dict) else {}
        if cluster == cluster_name and own is not None:
            return own.to_json()
        raise ClusterNotFound(f"cluster {cluster!r} does not exist")

    @router.put("/clusters/{cluster}", status_code=204, summary="Create a cluster record")
    async def create_cluster(cluster: Tenant, body: ClusterDataBody) -> Response:
        try:
            await store.put(path(cluster), json.dumps(body.data().to_json()).encode(), -1)
        except BadVersion:
            raise ClusterAlreadyExists(f"cluster {cluster!r} already exists") from None
        return Response(status_code=204)

    @router.post("/clusters/{cluster}", status_code=204, summary="Update a cluster record")
    async def update_cluster(cluster: Tenant, body: ClusterDataBody) -> Response:
        got = await store.get(path(cluster))
        if got is None:
            raise ClusterNotFound(f"cluster {cluster!r} does not exist")
        doc = json.dumps(body.data().to_json()).encode()
        await store.put(path(cluster), doc, got[1].version)
        return Response(status_code=204)

    @router.delete("/clusters/{cluster}", status_code=204, summary="Delete a cluster record")
    async def delete_cluster(cluster: Tenant) -> Response:
        if cluster == cluster_name:
            raise PreconditionFailed(f"cluster {cluster!r} is this broker's own cluster")
        try:
            await store.delete(path(cluster))
        except NodeNotFound:
            raise ClusterNotFound(f"cluster {cluster!r} does not exist") from None
        return Response(status_code=204)

    return router


__all__ = ["ClusterAlreadyExists", "ClusterNotFound", "clusters_router"]
