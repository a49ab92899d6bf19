"""Counters of storage-cluster switching (PIP-470's ``BookieClusterSwitchMetrics``), read by the
admin ``/metrics`` collector at scrape time. Plain integers: bumping one costs nothing."""

from __future__ import annotations

import dataclasses

from braid.core.storage_switch import SwitchPhase


@dataclasses.dataclass
class SwitchMetrics:
    """Everything counted since the process started.

    Exposed (``braid.admin.metrics``) as ``pulsar_bookie_cluster_switch_total{result}``,
    ``pulsar_bookie_cluster_rollback_total``, ``migration_ledgers_built_total{kind}``,
    ``migration_ledgers_failed_total{kind}``, ``migration_ledger_id_conflict_total``,
    ``migration_ledgers_promoted_total{kind}``,
    ``migration_ledgers_promoted_via_rollover_total``, ``migration_promote_cas_retries_total``,
    ``migration_promote_deferred_total``, ``migration_ledgers_cleaned_total``,
    ``migration_ledgers_reverted_total``, and where cursors were re-attributed (ADR 0061):
    ``migration_cursor_promote_forwarded_total`` (sent to the owning broker),
    ``migration_cursor_promote_served_total`` (done here for another broker's orchestrator) and
    ``migration_cursor_promote_node_total`` (the node CAS-rewritten: no live cursor), plus the
    gauges ``pulsar_bookie_cluster_active{cluster}``
    and ``pulsar_bookie_cluster_switch_state{state}`` (1 for :attr:`switch_state`, 0 for every
    other of PIP-470's states). ``phase`` is the phase of the last switch state the registry
    read or wrote; ``standby_registered`` whether its last listing had a STANDBY cluster.
    """

    switch_success: int = 0
    switch_failure: int = 0
    rollbacks: int = 0
    built: dict[str, int] = dataclasses.field(default_factory=dict)
    failed: dict[str, int] = dataclasses.field(default_factory=dict)
    promoted: dict[str, int] = dataclasses.field(default_factory=dict)
    id_conflicts: int = 0
    promoted_via_rollover: int = 0
    promote_cas_retries: int = 0
    promote_deferred: int = 0
    promote_forwarded: int = 0
    promote_served: int = 0
    promote_via_node: int = 0
    cleaned: int = 0
    reverted: int = 0
    discarded: int = 0
    phase: SwitchPhase | None = None
    standby_registered: bool = False

    @property
    def switch_state(self) -> SwitchPhase:
        """PIP-470's state: the switch's phase, or before any switch NOT_REGISTERED / STANDBY."""
        if self.phase is not None:
            return self.phase
        return SwitchPhase.STANDBY if self.standby_registered else SwitchPhase.NOT_REGISTERED

    def record_switch_success(self) -> None:
        self.switch_success += 1

    def record_switch_failure(self) -> None:
        self.switch_failure += 1

    @staticmethod
    def bump(counter: dict[str, int], kind: str, by: int = 1) -> None:
        counter[kind] = counter.get(kind, 0) + by


__all__ = ["SwitchMetrics"]
