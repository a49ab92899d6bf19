"""Admin REST for tenants (Pulsar's ``/admin/v2/tenants``).

* ``GET /admin/v2/tenants``: the tenants; ``GET .../{tenant}``: its ``TenantInfo``
  (``{"adminRoles", "allowedClusters"}``);
* ``PUT .../{tenant}`` creates and ``POST .../{tenant}`` updates, both with an optional
  ``TenantInfo`` body (omitted ``allowedClusters`` means this broker's cluster; a cluster other
  than this broker's is 412); ``DELETE .../{tenant}`` deletes a tenant with no namespace (409
  naming them otherwise); ``?force=true`` deletes its namespaces and their topics first,
  disconnecting their clients, where ``forceDeleteTenantAllowed`` is on (405 otherwise).

The tenants themselves live in :class:`~braid.broker.resources.BrokerResources`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from pydantic import BaseModel, Field

from braid.admin.errors import ForceDeleteNotAllowed, PreconditionFailed
from braid.admin.path_params import Tenant
from braid.broker.resources import BrokerResources, TenantInfo, check_name


class TenantInfoBody(BaseModel):
    """Pulsar's ``TenantInfo`` as sent in PUT/POST bodies; omitted ``allowedClusters`` means
    this broker's cluster (a tenant allowed on no cluster could hold no topic)."""

    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] | None = None


def tenants_router(
    cluster_name: str,
    resources: BrokerResources,
    delete_namespaces: Callable[[str], Awaitable[None]] | None = None,
) -> APIRouter:
    """The tenant endpoints (mounted under ``/admin/v2``).

    Args:
        cluster_name: the broker's cluster, the only one a tenant may be allowed on.
        resources: where tenants are stored.
        delete_namespaces: deletes a tenant's namespaces and their topics (a ``force=true``
            delete); ``None`` (``forceDeleteTenantAllowed=false``): forced deletes are refused.
    """
    router = APIRouter()

    @router.get("/tenants", tags=["tenants"], summary="List tenants")
    async def get_tenants() -> list[str]:
        return await resources.list_tenants()

    @router.get(
        "/tenants/{tenant}", tags=["tenants"], summary="Get a tenant's admin roles/clusters"
    )
    async def get_tenant(tenant: Tenant) -> dict[str, Any]:
        return (await resources.get_tenant(tenant)).to_json()

    def tenant_info(body: TenantInfoBody | None) -> TenantInfo:
        clusters = body.allowedClusters if body is not None else None
        info = TenantInfo(
            tuple(body.adminRoles) if body else (),
            tuple(clusters) if clusters is not None else (cluster_name,),
        )
        unknown = [c for c in info.allowed_clusters if c != cluster_name]
        if unknown:
            raise PreconditionFailed(f"clusters do not exist: {', '.join(unknown)}")
        return info

    @router.put("/tenants/{tenant}", status_code=204, tags=["tenants"], summary="Create a tenant")
    async def put_tenant(
        tenant: Tenant, body: Annotated[TenantInfoBody | None, Body()] = None
    ) -> Response:
        check_name("tenant", tenant)
        await resources.create_tenant(tenant, tenant_info(body))
        return Response(status_code=204)

    @router.post("/tenants/{tenant}", status_code=204, tags=["tenants"], summary="Update a tenant")
    async def post_tenant(
        tenant: Tenant, body: Annotated[TenantInfoBody | None, Body()] = None
    ) -> Response:
        await resources.update_tenant(tenant, tenant_info(body))
        return Response(status_code=204)

    @router.delete(
        "/tenants/{tenant}", status_code=204, tags=["tenants"], summary="Delete a tenant"
    )
    async def delete_tenant(
        tenant: Tenant,
        force: Annotated[
            bool,
            Query(description="delete its namespaces and topics (needs forceDeleteTenantAllowed)"),
        ] = False,
    ) -> Response:
        if force:
            if delete_namespaces is None:
                raise ForceDeleteNotAllowed(
                    "this broker does not allow forced deletion of tenants "
                    "(forceDeleteTenantAllowed=false)"
                )
            await resources.get_tenant(tenant)  # 404 first
            await delete_namespaces(tenant)
        await resources.delete_tenant(tenant)
        return Response(status_code=204)

    return router


__all__ = ["TenantInfoBody", "tenants_router"]
