"""Admin REST for PIP-470 storage-cluster switching, ``/admin/v2/bookie-clusters``:

* ``GET /bookie-clusters`` - the registered clusters (``name``, ``metadataServiceUri``,
  ``status``, plus ``active`` and ``clientOpen`` as this broker sees them);
* ``GET /bookie-clusters/status`` - the active cluster, dual read, and the switch's phase,
  progress counts, failed and deferred ledgers;
* ``PUT /bookie-clusters/{name}`` ``{"metadataServiceUri", "status"}`` - register (409 when the URI
  collides with another cluster's); ``GET /bookie-clusters/{name}``;
* ``GET /bookie-clusters/{name}/precheck`` - I11 as PIP-470's JSON;
  ``POST /bookie-clusters/{name}/advance-idgen`` ``{"margin"}`` - make it hold;
* ``POST /bookie-clusters/switch`` ``{"target"}`` - 409 when refused (precheck, client, another
  switch); ``POST /bookie-clusters/rollback``;
* ``POST /bookie-clusters/cleanup`` ``{"dryRun": true, "srcClusterFilter", "maxDeletions",
  "force"}``; ``POST /bookie-clusters/{name}/close-client``;
* ``POST /bookie-clusters/internal/promote-cursor`` - PIP-470's call to a cursor's owner (409: the
  cursor rolled over since BUILD; 503: this broker does not own it). Brokers of a cluster make
  that call on each other's internal listener (:mod:`braid.admin.internal`, ADR 0061); this
  super-user endpoint does the same on the broker it reaches.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from braid.clusters.service import StorageClusterService


class RegisterBody(BaseModel):
    """PIP-470's registry document, without the name (it is in the path)."""

    metadataServiceUri: str = Field(min_length=1, max_length=1024)
    status: str = "STANDBY"


class SwitchBody(BaseModel):
    target: str = Field(min_length=1, max_length=128)


class AdvanceIdgenBody(BaseModel):
    margin: int = Field(default=1_000_000, ge=0, le=1 << 40)


class CleanupBody(BaseModel):
    dryRun: bool = True
    srcClusterFilter: str | None = Field(default=None, max_length=128)
    maxDeletions: int = Field(default=0, ge=0, le=1 << 31)
    force: bool = False


class PromoteCursorBody(BaseModel):
    topic: str = Field(min_length=1, max_length=1024, description="the managed ledger's name")
    cursorName: str = Field(min_length=1, max_length=1024)
    targetClusterName: str = Field(min_length=1, max_length=128)
    expectedCursorsLedgerId: int = Field(ge=0, le=(1 << 63) - 1)
    copiedLastEntryId: int = Field(default=-1, ge=-1, le=(1 << 63) - 1)
    sourceClusterName: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="the cluster the cursor is attributed to now (default: the switch's source)",
    )


async def promote_cursor(service: StorageClusterService, body: PromoteCursorBody) -> dict[str, Any]:
    """PROMOTE a cursor this broker owns (here, and on the internal listener)."""
    return await service.promote_cursor(
        body.topic,
        body.cursorName,
        body.targetClusterName,
        body.expectedCursorsLedgerId,
        body.copiedLastEntryId,
        body.sourceClusterName,
    )


def bookie_clusters_router(service: StorageClusterService) -> APIRouter:
    """The ``/bookie-clusters`` endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter(prefix="/bookie-clusters", tags=["bookie-clusters"])

    @router.get("", summary="List the registered storage clusters")
    async def list_clusters() -> list[dict[str, Any]]:
        return await service.list()

    @router.get("/status", summary="Active cluster, dual read, the switch's phase and progress")
    async def status() -> dict[str, Any]:
        return await service.status()

    @router.post("/switch", summary="Switch to a registered cluster (409 when refused)")
    async def switch(body: SwitchBody) -> dict[str, Any]:
        return await service.switch(body.target)

    @router.post("/rollback", summary="Roll the switch back within the dual-read window")
    async def rollback() -> dict[str, Any]:
        return await service.rollback()

    @router.post("/cleanup", summary="Delete the old cluster's copies (dryRun by default)")
    async def cleanup(body: CleanupBody) -> dict[str, Any]:
        return await service.cleanup(
            dry_run=body.dryRun,
            src_cluster_filter=body.srcClusterFilter,
            max_deletions=body.maxDeletions,
            force=body.force,
        )

    @router.post(
        "/internal/promote-cursor",
        summary="PROMOTE a cursor this broker owns (409: it rolled over since BUILD)",
    )
    async def promote(body: PromoteCursorBody) -> dict[str, Any]:
        return await promote_cursor(service, body)

    @router.get("/{name}", summary="One registered storage cluster")
    async def get_cluster(name: str) -> dict[str, Any]:
        return await service.get(name)

    @router.put("/{name}", summary="Register a storage cluster (or set a registered one's status)")
    async def register(name: str, body: RegisterBody) -> dict[str, Any]:
        return await service.register(name, body.metadataServiceUri, body.status)

    @router.get("/{name}/precheck", summary="I11: is the cluster's ledger-id generator ready?")
    async def precheck(name: str) -> dict[str, Any]:
        return await service.precheck(name)

    @router.post(
        "/{name}/advance-idgen",
        summary="Raise the cluster's ledger-id generator past every other cluster's ids",
    )
    async def advance_idgen(name: str, body: AdvanceIdgenBody) -> dict[str, Any]:
        return await service.advance_idgen(name, body.margin)

    @router.post(
        "/{name}/close-client", status_code=204, summary="Close the client of a retired cluster"
    )
    async def close_client(name: str) -> Response:
        await service.close_client(name)
        return Response(status_code=204)

    return router


__all__ = ["PromoteCursorBody", "bookie_clusters_router", "promote_cursor"]
