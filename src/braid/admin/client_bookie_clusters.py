"""``AdminClient.bookie_clusters``: the ``/admin/v2/bookie-clusters`` group of
:mod:`braid.admin.client` (PIP-470 storage clusters and switching between them)."""

from __future__ import annotations

from typing import Any

from braid.admin.client_transport import _choice, _Http, _q
from braid.core.errors import InvalidInputError


class BookieClusters:
    """``/admin/v2/bookie-clusters``: PIP-470 storage clusters and switching between them."""

    _ROOT = "/admin/v2/bookie-clusters"

    def __init__(self, http: _Http) -> None:
        self._http = http

    def _path(self, name: str) -> str:
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"a storage cluster name is a non-empty string, got {name!r}")
        return f"{self._ROOT}/{_q(name)}"

    def list(self) -> list[dict[str, Any]]:
        """The registered clusters (``name``, ``metadataServiceUri``, ``status``, ``active``,
        ``clientOpen``)."""
        result: list[dict[str, Any]] = self._http.call("GET", self._ROOT)
        return result

    def get(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._http.call("GET", self._path(name))
        return result

    def register(
        self, name: str, metadata_service_uri: str, status: str = "STANDBY"
    ) -> dict[str, Any]:
        """Register a cluster (409 when its URI collides with another's), or set a registered
        one's status (``ACTIVE`` only for the active cluster: reconciliation)."""
        status = _choice("status", status, ("ACTIVE", "STANDBY", "DEPRECATED"))
        result: dict[str, Any] = self._http.call(
            "PUT",
            self._path(name),
            body={"metadataServiceUri": metadata_service_uri, "status": status},
        )
        return result

    def precheck(self, name: str) -> dict[str, Any]:
        """I11: ``{"ready", "idgenAdvancedBeyondSource", "sourceClusterName",
        "targetClusterName", "sourceMaxHighOrderBit", "targetMaxHighOrderBit"}``."""
        result: dict[str, Any] = self._http.call("GET", f"{self._path(name)}/precheck")
        return result

    def advance_idgen(self, name: str, margin: int = 1_000_000) -> dict[str, Any]:
        """Raise the cluster's id generator ``margin`` past every other cluster's ids; returns
        the precheck."""
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise InvalidInputError(f"margin must be an integer >= 0, got {margin!r}")
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._path(name)}/advance-idgen", body={"margin": margin}
        )
        return result

    def switch(self, target: str) -> dict[str, Any]:
        """Switch to ``target``; returns the status. 409 when refused (precheck, no client,
        another switch unfinished)."""
        self._path(target)
        result: dict[str, Any] = self._http.call(
            "POST", f"{self._ROOT}/switch", body={"target": target}
        )
        return result

    def status(self) -> dict[str, Any]:
        """The active cluster, dual read, and the switch's phase, progress and failures."""
        result: dict[str, Any] = self._http.call("GET", f"{self._ROOT}/status")
        return result

    def rollback(self) -> dict[str, Any]:
        """Return every attribution to the old cluster (within the window)."""
        result: dict[str, Any] = self._http.call("POST", f"{self._ROOT}/rollback")
        return result

    def cleanup(
        self,
        *,
        dry_run: bool = True,
        src_cluster_filter: str | None = None,
        max_deletions: int = 0,
        force: bool = False,
    ) -> dict[str, Any]:
        """Preview (default) or start the deletion of the old cluster's copies."""
        if isinstance(max_deletions, bool) or not isinstance(max_deletions, int):
            raise InvalidInputError(f"max_deletions must be an integer, got {max_deletions!r}")
        result: dict[str, Any] = self._http.call(
            "POST",
            f"{self._ROOT}/cleanup",
            body={
                "dryRun": bool(dry_run),
                "srcClusterFilter": src_cluster_filter,
                "maxDeletions": max_deletions,
                "force": bool(force),
            },
        )
        return result

    def close_client(self, name: str) -> None:
        """Close the broker's client of a retired cluster."""
        self._http.call("POST", f"{self._path(name)}/close-client")


__all__ = ["BookieClusters"]
