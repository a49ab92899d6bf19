"""Admin REST for migrating a ``persistent://`` topic to a scalable topic (issue 33, ADR 0063).

``/admin/v2/persistent/{tenant}/{namespace}/{topic}/migrateToScalable``:

* ``POST`` with ``{"segments": N, "name": "topic://...", "subscriptionModes": {"sub": "QUEUE"},
  "prepare": false}`` (every field optional) records the migration and runs it to ``DONE``; with
  ``prepare`` it stops once the segment topics exist (``SEGMENTS_CREATED``: nothing terminated, a
  rollback is still possible). A ``POST`` for a source whose migration is recorded and unfinished
  resumes it (the body is then ignored: the record decides); a finished one answers its status.
* ``GET`` answers the status: the phase, the partitions terminated and left, the subscriptions
  with their modes, whether a rollback is possible and the last step's failure.
* ``POST .../migrateToScalable/rollback`` rolls a migration back before its partitions are
  terminated (409 after).

Errors are JSON ``{"reason": ...}``: 404 no such topic or migration, 409 a conflicting state
(the target exists, past the point of no return, a step that cannot run yet), 400/412/422 bad input.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, Field

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.core.migration import MigrationPhase
from braid.core.names import TopicDomain, TopicName
from braid.core.ranges import RING_SIZE
from braid.scalable.migration import MigrationExecutor, MigrationExists


class MigrateRequest(BaseModel):
    """Body of ``POST .../migrateToScalable``."""

    segments: int | None = Field(default=None, ge=1, le=RING_SIZE)
    name: str | None = None
    subscriptionModes: dict[str, str] = Field(default_factory=dict)
    prepare: bool = False


def migration_router(executor: MigrationExecutor) -> APIRouter:
    """The ``migrateToScalable`` endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter()
    base = "/persistent/{tenant}/{namespace}/{topic}/migrateToScalable"

    def source(tenant: str, namespace: str, topic: str) -> str:
        return str(TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic))

    @router.post(
        base,
        tags=["topics"],
        summary="Migrate the topic (partitioned or not) to a scalable topic; returns the status",
    )
    async def migrate(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        body: Annotated[MigrateRequest | None, Body()] = None,
    ) -> Any:
        request = body or MigrateRequest()
        name = source(tenant, namespace, topic)
        try:
            await executor.request(
                name,
                segments=request.segments,
                target=request.name,
                modes=request.subscriptionModes,
            )
        except MigrationExists:
            pass  # resume the recorded migration
        until = MigrationPhase.SEGMENTS_CREATED if request.prepare else None
        return (await executor.run(name, until=until)).status()

    @router.get(base, tags=["topics"], summary="The status of the topic's migration")
    async def status(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        return await executor.status(source(tenant, namespace, topic))

    @router.post(
        base + "/rollback",
        tags=["topics"],
        summary="Roll a migration back (only before its partitions are terminated)",
    )
    async def rollback(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        return (await executor.rollback(source(tenant, namespace, topic))).status()

    return router


__all__ = ["MigrateRequest", "migration_router"]
