"""Admin REST for the home storage cluster's bookies, ``/admin/v2/bookies``, and the
auto-recovery metrics of ``/metrics``.

* ``GET /bookies/all`` - the available bookies (Pulsar's path): ``{"bookies": [{"bookieId",
  "state": "writable"|"readonly", "rack"}]}``;
* ``GET /bookies/underreplicated`` - the ledgers marked under-replicated (``{"ledgers": [...]}``);
* ``POST /bookies/{bookieId}/decommission`` - mark every ledger on the bookie under-replicated so
  replication workers copy its fragments elsewhere; answers the progress;
* ``GET /bookies/{bookieId}/decommission`` - the progress: ``ledgersRemaining`` (ledgers whose
  metadata still names it), ``underReplicatedLedgers``, ``done``.

Metrics (when this broker runs auto-recovery, ``autoRecoveryDaemonEnabled``):
``braid_autorecovery_under_replicated_ledgers`` (gauge, as the worker last counted),
``braid_autorecovery_rereplicated_bytes_total``, ``braid_autorecovery_rereplicated_entries_total``,
``braid_autorecovery_rereplicated_fragments_total``, ``braid_autorecovery_failures_total`` and
``braid_autorecovery_auditor`` (1 while this broker is the cluster's auditor).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from braid.admin.errors import PreconditionFailed
from braid.storage.autorecovery import AutoRecoveryService, BookieAdmin

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


class AutoRecoveryCollector(Collector):
    """Reads the auto-recovery counters when scraped."""

    def __init__(self, service: AutoRecoveryService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        worker = self._service.worker
        stats = worker.stats
        gauge = GaugeMetricFamily(
            "braid_autorecovery_under_replicated_ledgers",
            "Ledgers marked under-replicated, as the replication worker last counted",
        )
        gauge.add_metric([], worker.under_replicated)
        yield gauge
        for name, help_text, value in (
            ("rereplicated_bytes", "Bytes copied to replacement bookies", stats.bytes),
            ("rereplicated_entries", "Entries copied to replacement bookies", stats.entries),
            ("rereplicated_fragments", "Fragments moved to replacement bookies", stats.fragments),
            ("failures", "Re-replication attempts that failed (retried later)", stats.failures),
        ):
            counter = CounterMetricFamily(f"braid_autorecovery_{name}", help_text)
            counter.add_metric([], value)
            yield counter
        auditor = GaugeMetricFamily(
            "braid_autorecovery_auditor", "1 while this process is the cluster's auditor"
        )
        auditor.add_metric([], 1 if self._service.is_auditor else 0)
        yield auditor


__all__ = ["AutoRecoveryCollector", "bookies_router"]
