"""Slow and failing bookies, as one storage client sees them (BookKeeper's client health check).

Every add or read that fails or times out on a bookie is recorded against it, and a sample of
successful adds records their latency. Once per ``bookkeeperClientHealthCheckIntervalSeconds`` the
client looks back: a bookie with more than ``bookkeeperClientHealthCheckErrorThresholdPerInterval``
failures in that interval is *quarantined* (with probability ``bookkeeperClientQuarantineRatio``)
for ``bookkeeperClientHealthCheckQuarantineTimeInSeconds``. A quarantined bookie is left out of new
ensembles and ensemble changes while enough other bookies are writable, and is asked last for
reads; it is never removed from an existing ensemble for that alone. These are Pulsar's keys and
BookKeeper's rules (``BookKeeper.checkForFaultyBookies``, ``BookieWatcher.quarantineBookie``).

The clock is injected; the ratio draw uses an injected RNG. State is owned here and changed only
through :meth:`BookieHealth.record_failure`, :meth:`BookieHealth.record_latency` and
:meth:`BookieHealth.check`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass

from braid.clock import Clock
from braid.core.errors import InvalidInputError
from braid.storage.api import StorageError

log = logging.getLogger(__name__)

#: Weight of a new latency sample in the per-bookie moving average.
_EWMA_WEIGHT = 0.2


class InvalidHealthPolicy(StorageError, InvalidInputError):
    """Impossible health-check settings."""


@dataclass(frozen=True, slots=True)
class HealthPolicy:
    """Pulsar's ``bookkeeperClientHealthCheck*`` keys and ``bookkeeperClientQuarantineRatio``."""

    enabled: bool = True
    interval_s: float = 60.0
    error_threshold_per_interval: int = 5
    quarantine_s: float = 1800.0
    quarantine_ratio: float = 1.0

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.quarantine_s < 0 or self.error_threshold_per_interval < 0:
            raise InvalidHealthPolicy(f"impossible bookie health-check settings: {self}")
        if not 0.0 <= self.quarantine_ratio <= 1.0:
            raise InvalidHealthPolicy(
                f"bookkeeperClientQuarantineRatio must be in 0..1, got {self.quarantine_ratio}"
            )


class BookieHealth:
    """Failure counts, sampled add latencies and quarantines of the bookies of one cluster."""

    def __init__(self, policy: HealthPolicy, clock: Clock, rng: random.Random) -> None:
        self._policy = policy
        self._clock = clock
        self._rng = rng
        self._failures: dict[str, int] = {}
        self._latency_ms: dict[str, float] = {}
        self._quarantined_until: dict[str, float] = {}
        self._next_check = clock.monotonic() + policy.interval_s
        self.quarantines = 0

    @property
    def policy(self) -> HealthPolicy:
        return self._policy

    def record_failure(self, bookie_id: str) -> None:
        """An add or read on ``bookie_id`` failed or timed out."""
        self._failures[bookie_id] = self._failures.get(bookie_id, 0) + 1
        self.check()

    def record_latency(self, bookie_id: str, seconds: float) -> None:
        """A sampled successful add took ``seconds`` on ``bookie_id``."""
        ms = seconds * 1000.0
        old = self._latency_ms.get(bookie_id)
        self._latency_ms[bookie_id] = ms if old is None else old + _EWMA_WEIGHT * (ms - old)

    def check(self) -> None:
        """Close the interval if it is over: quarantine the bookies that failed too often."""
        now = self._clock.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + self._policy.interval_s
        failures, self._failures = self._failures, {}
        if not self._policy.enabled:
            self._quarantined_until.clear()
            return
        for bookie_id, count in sorted(failures.items()):
            if count <= self._policy.error_threshold_per_interval:
                continue
            if self._rng.random() <= self._policy.quarantine_ratio:
                self._quarantined_until[bookie_id] = now + self._policy.quarantine_s
                self.quarantines += 1
                log.warning(
                    "bookie %s failed %d requests in %.0fs: quarantined for %.0fs",
                    bookie_id,
                    count,
                    self._policy.interval_s,
                    self._policy.quarantine_s,
                )

    def is_quarantined(self, bookie_id: str) -> bool:
        until = self._quarantined_until.get(bookie_id)
        if until is None:
            return False
        if self._clock.monotonic() >= until:
            del self._quarantined_until[bookie_id]
            return False
        return True

    def quarantined(self) -> set[str]:
        """The bookies in quarantine now."""
        return {b for b in list(self._quarantined_until) if self.is_quarantined(b)}

    def latency_ms(self) -> Mapping[str, float]:
        """Moving average of the sampled add latency per bookie, in milliseconds."""
        return dict(self._latency_ms)
