"""Load reporting: each broker measures itself and writes its report into its registry node.

:class:`LoadReporter` samples, every ``loadBalancerReportUpdateMinIntervalMillis``:

* ``cpu``: this process's CPU time over wall time, in percent of one core, out of 100 x cores
  (Pulsar measures the host; a Braid broker is one process, and several may share a host);
* ``memory``: the process's resident size out of the host's physical memory; ``directMemory``
  is 0 of 0 (no JVM direct memory);
* ``bandwidthIn`` / ``bandwidthOut``: the bytes the broker's topics took in and sent out, in
  kbit/s, out of ``loadBalancerOverrideBrokerNicSpeedGbps`` (0 of 0 when unset);
* per owned bundle: message and byte rates in and out (deltas of the topics' counters), topics,
  producers and consumers.

It writes when :func:`needs_update` says so (Pulsar's ``needBrokerDataUpdate``): the first time,
when the set of bundles changed, when a usage or the throughput moved by more than
``loadBalancerReportUpdateThresholdPercentage``, or ``loadBalancerReportUpdateMaxIntervalMinutes``
after the last write.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from braid.broker.bundles import NamespaceBundle, topic_hash
from braid.broker.load_config import LoadBalancerSettings
from braid.broker.load_data import BundleStats, LocalBrokerData, ResourceUsage
from braid.clock import Clock
from braid.core.names import TopicName

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSample:
    """A loaded topic's cumulative counters at one moment."""

    name: str
    messages_in: int
    bytes_in: int
    messages_out: int
    bytes_out: int
    producers: int
    consumers: int


def _changed(old: float, new: float, threshold_pct: float) -> bool:
    if old == new:
        return False
    base = max(abs(old), 1e-9)
    return abs(new - old) / base * 100.0 > threshold_pct


def needs_update(
    last: LocalBrokerData | None,
    current: LocalBrokerData,
    since_last_s: float,
    settings: LoadBalancerSettings,
) -> bool:
    """Whether to write ``current`` (see the module docstring)."""
    if last is None or since_last_s >= settings.report_max_interval_s:
        return True
    if set(last.bundle_stats) != set(current.bundle_stats):
        return True
    pct = settings.report_update_threshold_percentage
    pairs = (
        (last.cpu.percent, current.cpu.percent),
        (last.memory.percent, current.memory.percent),
        (last.bandwidth_in.percent, current.bandwidth_in.percent),
        (last.bandwidth_out.percent, current.bandwidth_out.percent),
        (
            last.msg_throughput_in + last.msg_throughput_out,
            current.msg_throughput_in + current.msg_throughput_out,
        ),
    )
    return any(_changed(old, new, pct) for old, new in pairs)


def bundle_stats(
    owned: Iterable[NamespaceBundle],
    before: Mapping[str, TopicSample],
    now: Mapping[str, TopicSample],
    elapsed_s: float,
) -> dict[str, BundleStats]:
    """Per owned bundle (``str(bundle)``), the rates of its topics between two samples."""
    per_bundle: dict[NamespaceBundle, list[TopicSample]] = {b: [] for b in owned}
    for name, sample in now.items():
        topic = TopicName.parse(name)
        value = topic_hash(topic)
        for bundle in per_bundle:
            if bundle.namespace == topic.namespace_name and bundle.includes(value):
                per_bundle[bundle].append(sample)
                break
    dt = max(elapsed_s, 1e-3)
    stats: dict[str, BundleStats] = {}
    for bundle, samples in per_bundle.items():
        rates = [0.0, 0.0, 0.0, 0.0]
        for s in samples:
            old = before.get(s.name)
            if old is None:
                continue
            rates[0] += max(0, s.messages_in - old.messages_in) / dt
            rates[1] += max(0, s.messages_out - old.messages_out) / dt
            rates[2] += max(0, s.bytes_in - old.bytes_in) / dt
            rates[3] += max(0, s.bytes_out - old.bytes_out) / dt
        stats[str(bundle)] = BundleStats(
            msg_rate_in=rates[0],
            msg_rate_out=rates[1],
            msg_throughput_in=rates[2],
            msg_throughput_out=rates[3],
            consumer_count=sum(s.consumers for s in samples),
            producer_count=sum(s.producers for s in samples),
            topics=len(samples),
        )
    return stats


def _memory() -> ResourceUsage:
    try:
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, IndexError):
        return ResourceUsage()
    return ResourceUsage(resident_pages * page / 2**20, total / 2**20)


class LoadReporter:
    """Samples this broker and publishes its :class:`LocalBrokerData` (module docstring)."""

    def __init__(
        self,
        settings: LoadBalancerSettings,
        clock: Clock,
        *,
        topics: Callable[[], Iterable[TopicSample]],
        owned: Callable[[], list[NamespaceBundle]],
        publish: Callable[[LocalBrokerData], object],
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._topics = topics
        self._owned = owned
        self._publish = publish
        self._samples: dict[str, TopicSample] = {}
        self._sampled_at = clock.monotonic()
        self._cpu_at = time.process_time()
        self._last: LocalBrokerData | None = None
        self._last_written_at = 0.0
        #: The latest report, written or not.
        self.current: LocalBrokerData = LocalBrokerData()

    def sample(self) -> LocalBrokerData:
        """Measure now (rates since the previous sample)."""
        now = self._clock.monotonic()
        elapsed = max(now - self._sampled_at, 1e-3)
        cpu_now = time.process_time()
        cpu = ResourceUsage(
            100.0 * (cpu_now - self._cpu_at) / elapsed, 100.0 * (os.cpu_count() or 1)
        )
        samples = {s.name: s for s in self._topics()}
        stats = bundle_stats(self._owned(), self._samples, samples, elapsed)
        self._samples, self._sampled_at, self._cpu_at = samples, now, cpu_now
        nic = self._settings.override_broker_nic_speed_gbps
        limit_kbps = nic * 1e6 if nic is not None else 0.0
        kbps_in = sum(s.msg_throughput_in for s in stats.values()) * 8 / 1000
        kbps_out = sum(s.msg_throughput_out for s in stats.values()) * 8 / 1000
        self.current = LocalBrokerData(
            cpu=cpu,
            memory=_memory(),
            bandwidth_in=ResourceUsage(kbps_in, limit_kbps),
            bandwidth_out=ResourceUsage(kbps_out, limit_kbps),
            bundle_stats=stats,
            last_update_ms=self._clock.now_ms(),
        )
        return self.current

    async def report_once(self) -> bool:
        """Sample, and publish if :func:`needs_update`; ``True`` when written."""
        current = self.sample()
        since = self._clock.monotonic() - self._last_written_at
        if not needs_update(self._last, current, since, self._settings):
            return False
        result = self._publish(current)
        if asyncio.iscoroutine(result):
            await result
        self._last, self._last_written_at = current, self._clock.monotonic()
        return True

    async def run(self) -> None:
        """Report every ``loadBalancerReportUpdateMinIntervalMillis`` until cancelled."""
        while True:
            await self._clock.sleep(self._settings.report_interval_s)
            try:
                await self.report_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("writing the load report failed: %s", exc)


__all__ = ["LoadReporter", "TopicSample", "bundle_stats", "needs_update"]
