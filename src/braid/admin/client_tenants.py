"""``AdminClient.tenants``: the ``/admin/v2/tenants`` group of :mod:`braid.admin.client`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from braid.admin.client_transport import _Http, _tenant_path


class Tenants:
    """``/admin/v2/tenants``: tenants and their admin roles and allowed clusters."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def list(self) -> list[str]:
        """The tenants' names."""
        result: list[str] = self._http.call("GET", "/admin/v2/tenants")
        return result

    def get(self, tenant: str) -> dict[str, Any]:
        """``{"adminRoles": [...], "allowedClusters": [...]}``."""
        result: dict[str, Any] = self._http.call("GET", f"/admin/v2/tenants/{_tenant_path(tenant)}")
        return result

    def create(
        self,
        tenant: str,
        *,
        admin_roles: Iterable[str] | None = None,
        allowed_clusters: Iterable[str] | None = None,
    ) -> None:
        """Create a tenant; ``allowed_clusters`` defaults to the broker's cluster.

        Raises:
            AdminAlreadyExistsError, AdminInvalidInputError (name, unknown cluster).
        """
        self._http.call(
            "PUT",
            f"/admin/v2/tenants/{_tenant_path(tenant)}",
            body=_tenant_body(admin_roles, allowed_clusters),
        )

    def update(
        self,
        tenant: str,
        *,
        admin_roles: Iterable[str] | None = None,
        allowed_clusters: Iterable[str] | None = None,
    ) -> None:
        """Replace the tenant's info (omitted fields: no roles, the broker's cluster)."""
        self._http.call(
            "POST",
            f"/admin/v2/tenants/{_tenant_path(tenant)}",
            body=_tenant_body(admin_roles, allowed_clusters),
        )

    def delete(self, tenant: str) -> None:
        """Delete a tenant that has no namespaces left (409 otherwise)."""
        self._http.call("DELETE", f"/admin/v2/tenants/{_tenant_path(tenant)}")


def _tenant_body(
    admin_roles: Iterable[str] | None, allowed_clusters: Iterable[str] | None
) -> dict[str, list[str]] | None:
    if admin_roles is None and allowed_clusters is None:
        return None
    body: dict[str, list[str]] = {"adminRoles": list(admin_roles or ())}
    if allowed_clusters is not None:
        body["allowedClusters"] = list(allowed_clusters)
    return body


__all__ = ["Tenants"]
