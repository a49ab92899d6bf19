"""PIP-483's ``SegmentLoadReporter``: each broker pushes its segments' load to the metadata store.

One per broker. Every ``scalableTopicLoadReportInterval`` (10 s) it looks at each ``segment://``
topic loaded here that is still active (not terminated, not closed), samples the topic's
cumulative traffic counters into a :class:`~braid.broker.rates.RollingRates` (a window of six
report intervals: 60 s at the default interval) and writes the four rates as ``SegmentLoadStats``
JSON to ``/topics/{t}/{ns}/{topic}/segments/{id}/load`` **only when they changed materially**
since the last write (:func:`braid.core.segment_load.is_material_change`: the first report always
writes, crossing zero counts, otherwise a rate must move by more than
``scalableTopicLoadReportRateChangeThreshold``). A steady segment writes once and then stays
silent; the store's modified time of the record then proves how long the load has been what it
says, which is what the controller's merge window reads.

The record also carries the segment's key-hash histogram (``keyHashBuckets``, from the topic's
:class:`~braid.broker.key_sampler.KeyHashSampler`, decayed here with the same window), so the
controller can split where the load halves. The histogram causes a write by itself only when the
split hash it gives moved by more than 1/16 of the segment's range
(:func:`braid.core.split_point.split_point_moved`): when it has filled up, or the keys' load
shifted; steady keys stay silent too.

A segment is forgotten as soon as its topic is unloaded, reloaded, closed or terminated; its
record is deleted with the segment (the controller's GC, or the topic's recursive delete). A
record is never written for a closed topic: the check is made right before the write, and a
topic's metadata is deleted only after its segment topics are closed, so no write can recreate a
deleted topic's node. Per-topic ``loadReportIntervalMs`` / ``loadReportRateChangeThreshold``
overrides are honoured (an interval shorter than the broker's is rounded up to one tick); the
resolved policies are cached for six ticks.

Timers go through the injected :class:`~braid.clock.Clock` (``call_at``), so a test drives the
reporter by advancing a ``ManualClock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from braid.broker.rates import RollingRates
from braid.broker.topic import PersistentTopic
from braid.clock import Clock, TimerHandle
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.names import InvalidTopicName, SegmentTopicName, TopicDomain, TopicName
from braid.core.segment_load import SegmentLoad, is_material_change
from braid.core.split_point import split_point_moved
from braid.metadata.api import MetadataStore
from braid.scalable.resources import ScalableTopicResources

log = logging.getLogger(__name__)

#: The rate window spans this many report intervals (PIP-483's 60 s at the default 10 s).
WINDOW_INTERVALS = 6
_SEGMENT_PREFIX = f"{TopicDomain.SEGMENT.value}://"

PolicySource = Callable[[TopicName], Awaitable[AutoScalePolicy]]


@dataclass
class _Reported:
    """What the reporter remembers about one active segment topic."""

    topic: PersistentTopic  # the loaded object: a reload (new object) starts over
    name: SegmentTopicName
    rates: RollingRates
    last_sampled: float
    last_written: SegmentLoad | None = None
    last_reported: float | None = None
    writes: int = 0


class SegmentLoadReporter:
    """Writes ``SegmentLoadStats`` for the segment topics this broker serves."""

    def __init__(
        self,
        topics: Callable[[], Mapping[str, PersistentTopic]],
        store: MetadataStore,
        *,
        clock: Clock,
        policy: AutoScalePolicy,
        policy_of: PolicySource | None = None,
    ) -> None:
        """
        Args:
            topics: the topics loaded on this broker (``BrokerService.topics``).
            store: where records are written.
            clock: timers and the rate clock.
            policy: the broker's policy (``broker.conf``): the report interval of the tick and
                the change threshold when a topic's policy cannot be resolved.
            policy_of: a topic's effective policy (namespace and topic overrides), if any.
        """
        self._topics = topics
        self._store = store
        self._clock = clock
        self._policy = policy
        self._policy_of = policy_of
        self._interval_s = policy.load_report_interval_ms / 1000.0
        self._window_s = WINDOW_INTERVALS * self._interval_s
        self._segments: dict[str, _Reported] = {}
        self._policies: dict[str, tuple[AutoScalePolicy, float]] = {}
        self._timer: TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._running = False
        #: Reports made and records written since start (the bench and tests read them).
        self.ticks = 0
        self.writes = 0

    def set_policy_source(self, policy_of: PolicySource | None) -> None:
        """Where a topic's effective policy comes from (its overrides); ``None``: the broker's."""
        self._policy_of = policy_of
        self._policies.clear()

    @property
    def idle(self) -> bool:
        """No report is running."""
        return self._task is None or self._task.done()

    @property
    def interval_s(self) -> float:
        return self._interval_s

    @property
    def window_s(self) -> float:
        return self._window_s

    def writes_of(self, segment_topic: str) -> int:
        """Records written for a segment topic since the reporter started following it."""
        state = self._segments.get(segment_topic)
        return 0 if state is None else state.writes

    def last_written(self, segment_topic: str) -> SegmentLoad | None:
        state = self._segments.get(segment_topic)
        return None if state is None else state.last_written

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start reporting every interval (idempotent)."""
        if self._running:
            return
        self._running = True
        self._arm()

    async def close(self) -> None:
        """Stop reporting; an in-flight report is cancelled. Idempotent."""
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _arm(self) -> None:
        self._timer = self._clock.call_at(self._clock.monotonic() + self._interval_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._running:
            self._task = asyncio.ensure_future(self._tick_and_rearm())

    async def _tick_and_rearm(self) -> None:
        try:
            await self.report()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("segment load report failed; retrying next interval")
        finally:
            if self._running:
                self._arm()

    # -- one report ----------------------------------------------------------------------------

    async def report(self) -> int:
        """Sample every active segment topic and write the records that changed materially;
        returns how many were written."""
        now = self._clock.monotonic()
        self.ticks += 1
        current: dict[str, _Reported] = {}
        for name, topic in list(self._topics().items()):
            if not name.startswith(_SEGMENT_PREFIX) or topic.closed or topic.is_terminated:
                continue
            state = self._segments.get(name)
            if state is None or state.topic is not topic:
                try:
                    segment = SegmentTopicName.parse(name)
                except InvalidTopicName:
                    continue
                state = _Reported(topic, segment, RollingRates(self._window_s), now)
            self._sample(state, now)
            current[name] = state
        self._segments = current  # the rest were unloaded, closed or terminated: forget them
        parents = {str(state.name.parent) for state in current.values()}
        self._policies = {k: v for k, v in self._policies.items() if k in parents}
        written = 0
        for state in current.values():
            if await self._maybe_write(state, now):
                written += 1
        return written

    def _sample(self, state: _Reported, now: float) -> None:
        state.rates.sample(now, state.topic.counters.snapshot())
        sampler = state.topic.key_sampler
        if sampler is not None and now > state.last_sampled:
            # Exponential decay with the rate window as time constant.
            sampler.decay(math.exp(-(now - state.last_sampled) / self._window_s))
        state.last_sampled = now

    async def _maybe_write(self, state: _Reported, now: float) -> bool:
        if state.rates.observed_s <= 0:
            return False  # first sight of the segment: no interval to compute a rate over yet
        policy = await self._policy_for(state.name.parent, now)
        interval_s = policy.load_report_interval_ms / 1000.0
        if state.last_reported is not None and now - state.last_reported < interval_s - 1e-9:
            return False
        state.last_reported = now
        sampler = state.topic.key_sampler
        load = SegmentLoad(
            *state.rates.rates(),
            modified_ms=0,
            key_hash_buckets=sampler.snapshot() if sampler is not None else (),
        )
        last = state.last_written
        if not is_material_change(
            last, load, policy.load_report_rate_change_threshold
        ) and not split_point_moved(
            state.name.hash_range, last.key_hash_buckets if last else None, load.key_hash_buckets
        ):
            return False
        topic = state.topic
        if topic.closed or topic.is_terminated:
            return False  # checked right before the write: never recreate a deleted topic's node
        path = ScalableTopicResources.segment_load_path(state.name.parent, state.name.segment_id)
        try:
            await self._store.put(path, load.encode())
        except Exception as exc:
            log.warning("writing the load record of %s failed (%s); retrying", state.name, exc)
            state.last_reported = None
            return False
        state.last_written = load
        state.writes += 1
        self.writes += 1
        log.debug("load of %s: %s", state.name, load.to_json())
        return True

    async def _policy_for(self, topic: TopicName, now: float) -> AutoScalePolicy:
        if self._policy_of is None:
            return self._policy
        key = str(topic)
        cached = self._policies.get(key)
        if cached is not None and now - cached[1] < self._window_s:
            return cached[0]
        try:
            policy = await self._policy_of(topic)
        except Exception as exc:
            log.debug("using the broker's load-report settings for %s: %s", topic, exc)
            policy = self._policy
        self._policies[key] = (policy, now)
        return policy


__all__ = ["WINDOW_INTERVALS", "SegmentLoadReporter"]
