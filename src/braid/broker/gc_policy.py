"""The garbage-collection policy of a long-running broker process, and GC accounting.

CPython frees almost everything by reference counting; its cyclic collector exists only for
reference cycles. It runs a young collection once net container allocations (allocations minus
frees) since the last one pass ``threshold0``, and every ``threshold1`` young ones an older one;
a full collection walks every tracked object of the process. A broker keeps about ten tracked
objects alive per message in flight, so with the defaults ``(700, 10, 10)`` any growth of the
in-flight window triggers collections that walk every message in flight again and again, and
each full collection walks the whole start-up heap too (FastAPI, pydantic, protobuf descriptors,
the metadata store). The policy for a high-allocation server:

- ``gc.freeze()`` once start-up is done (after one ``gc.collect()``): everything alive then -
  modules, the admin app, descriptors, configuration - moves to the permanent generation and is
  never scanned again;
- larger thresholds, so young collections are rare and cheap relative to the work between them.

Both are safe only because the hot path creates no reference cycles: its objects die by
reference counting, so a collection finds nothing there and raising the thresholds delays no
memory. Configured by the Braid-specific keys ``pythonGcFreezeAfterStartup`` and
``pythonGcThresholds`` (Pulsar's JVM has no equivalent key). :class:`GcStats` times every
collection through ``gc.callbacks`` so the share of CPU spent collecting is observable
(``GET /admin/v2/broker-stats/runtime``).
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: CPython's own thresholds (for comparison and to turn the policy off).
PYTHON_DEFAULT_THRESHOLDS = (700, 10, 10)
#: A young collection after 200,000 net container allocations instead of 700. The count is
#: *net* (frees subtract), so in steady state it grows only with what stays alive - above all
#: the messages in flight, about ten tracked objects each: 10,000 in flight stay below it.
BROKER_DEFAULT_THRESHOLDS = (200_000, 20, 100)


@dataclass(frozen=True, slots=True)
class GcPolicy:
    """How the process's collector is tuned (``pythonGc*`` keys of ``broker.conf``)."""

    freeze_after_startup: bool = True
    thresholds: tuple[int, int, int] = BROKER_DEFAULT_THRESHOLDS

    def apply_thresholds(self) -> None:
        """Set the collector's thresholds (call at process start)."""
        gc.set_threshold(*self.thresholds)

    def after_startup(self) -> None:
        """Freeze the start-up heap (when configured): collect once, then ``gc.freeze()``."""
        if not self.freeze_after_startup:
            return
        gc.collect()
        gc.freeze()
        log.info(
            "froze the start-up heap",
            extra={
                "fields": {"frozenObjects": gc.get_freeze_count(), "gcThresholds": self.thresholds}
            },
        )


class GcStats:
    """Collections and seconds spent collecting, per generation, since :meth:`install`.

    One ``gc.callbacks`` entry reads the clock at the start and the end of every collection.
    """

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.collected = 0
        self._started = 0.0
        self._installed = False

    def install(self) -> None:
        """Start timing collections (idempotent)."""
        if not self._installed:
            gc.callbacks.append(self._on_gc)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._on_gc)
            self._installed = False

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self.collections[generation] += 1
        self.seconds[generation] += time.perf_counter() - self._started
        self.collected += info["collected"]

    def snapshot(self) -> dict[str, object]:
        """A JSON-able view: totals per generation, the thresholds, the frozen count, process
        CPU seconds (for the GC share)."""
        return {
            "collections": list(self.collections),
            "seconds": [round(s, 6) for s in self.seconds],
            "totalSeconds": round(sum(self.seconds), 6),
            "collectedObjects": self.collected,
            "thresholds": list(gc.get_threshold()),
            "frozenObjects": gc.get_freeze_count(),
            "processCpuSeconds": round(time.process_time(), 6),
        }


#: The process's GC accounting (one collector per process, so one instance).
GC_STATS = GcStats()
