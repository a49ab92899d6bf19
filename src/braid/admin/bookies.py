"""Admin REST for the home storage cluster's bookies, ``/admin/v2/bookies``, and the
auto-recovery metrics of ``/metrics``.

* ``GET /bookies/all`` - the available bookies (Pulsar's path): ``{"bookies": [{"bookieId",
  "state": "writable"|"readonly", "rack"}]}``;
* ``GET /bookies/underreplicated`` - the ledgers marked under-replicated (``{"ledgers": [...]}``);
* ``POST /bookies/{bookieId}/decommission`` - mark every ledger on the bookie under-replicated so
  replication workers copy its fragments elsewhere; answers the progress;
* ``GET /bookies/{bookieId}/decommission`` - the progress: ``ledgersRemaining`` (ledgers whose
  metadata still names it), ``underReplicatedLedgers``, ``done``.

The auto-recovery metrics of ``/metrics`` (when this broker runs auto-recovery,
``autoRecoveryDaemonEnabled``) come from
:class:`~braid.storage.autorecovery.metrics.AutoRecoveryCollector`.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter

from braid.admin.errors import PreconditionFailed
from braid.storage.autorecovery import BookieAdmin

_BOOKIE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,254}$")


def _bookie(bookie_id: str) -> str:
    if not _BOOKIE_ID.match(bookie_id):
        raise PreconditionFailed(f"invalid bookie id {bookie_id!r}")
    return bookie_id


def bookies_router(admin: BookieAdmin) -> APIRouter:
    """The ``/bookies`` endpoints (mounted under ``/admin/v2``)."""
    router = APIRouter()

    @router.get("/bookies/all", tags=["bookies"], summary="The available bookies")
    async def all_bookies() -> dict[str, Any]:
        return {"bookies": admin.list_bookies()}

    @router.get(
        "/bookies/underreplicated",
        tags=["bookies"],
        summary="Ledgers marked under-replicated (waiting for a replication worker)",
    )
    async def underreplicated() -> dict[str, Any]:
        return {"ledgers": await admin.under_replicated()}

    @router.post(
        "/bookies/{bookie_id}/decommission",
        tags=["bookies"],
        summary="Copy every fragment of a bookie elsewhere (mark its ledgers under-replicated)",
    )
    async def decommission(bookie_id: str) -> dict[str, object]:
        return (await admin.decommission(_bookie(bookie_id))).to_json()

    @router.get(
        "/bookies/{bookie_id}/decommission",
        tags=["bookies"],
        summary="Progress of a decommission",
    )
    async def decommission_status(bookie_id: str) -> dict[str, object]:
        return (await admin.status(_bookie(bookie_id))).to_json()

    return router


__all__ = ["bookies_router"]
