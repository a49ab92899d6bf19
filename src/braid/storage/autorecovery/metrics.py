"""The auto-recovery metrics (Prometheus) of the process hosting an
:class:`~braid.storage.autorecovery.service.AutoRecoveryService` - a broker's ``/metrics`` or a
bookie's (``autoRecoveryDaemonEnabled`` in either's configuration).

``braid_autorecovery_under_replicated_ledgers`` (gauge, as the worker last counted),
``braid_autorecovery_rereplicated_bytes_total``, ``braid_autorecovery_rereplicated_entries_total``,
``braid_autorecovery_rereplicated_fragments_total``, ``braid_autorecovery_failures_total`` and
``braid_autorecovery_auditor`` (1 while this process is the cluster's auditor). Read when scraped:
nothing is counted twice.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from braid.storage.autorecovery.service import AutoRecoveryService


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


__all__ = ["AutoRecoveryCollector"]
