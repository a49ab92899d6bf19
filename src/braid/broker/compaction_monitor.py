"""Automatic compaction: every ``brokerServiceCompactionMonitorIntervalInSeconds``, compact each
loaded topic holding more bytes after its compaction horizon than its threshold.

The threshold is the namespace's ``compaction_threshold`` policy when set, else the broker's
``brokerServiceCompactionThresholdInBytes``; 0 means never (both default to 0, as in Pulsar). The
monitor sleeps on the injected clock, so tests move time instead of waiting; a topic whose
compaction is already running is left alone; a failed check is logged and retried next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from braid.broker.compaction import CompactionInProgress
from braid.broker.resources import BrokerResources
from braid.clock import Clock
from braid.core.names import TopicName

if TYPE_CHECKING:
    from braid.broker.topic import PersistentTopic

log = logging.getLogger(__name__)


class _Broker(Protocol):
    @property
    def topics(self) -> Mapping[str, PersistentTopic]: ...

    @property
    def resources(self) -> BrokerResources: ...


class CompactionMonitor:
    """The broker's periodic compaction check."""

    def __init__(
        self, broker: _Broker, clock: Clock, *, interval_s: float, broker_threshold: int
    ) -> None:
        self._broker = broker
        self._clock = clock
        self._interval_s = max(0.001, interval_s)
        self._broker_threshold = broker_threshold
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: Completed rounds (tests wait on it after moving the clock).
        self.rounds = 0

    def start(self) -> None:
        """Begin the periodic checks (idempotent; a no-op once closed)."""
        if self._task is None and not self._closed:
            self._task = asyncio.ensure_future(self._loop())

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            await self._clock.sleep(self._interval_s)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("compaction check failed")
            self.rounds += 1

    async def check_once(self) -> list[str]:
        """Start compacting every topic over its threshold; returns their names."""
        thresholds: dict[str, int] = {}
        started: list[str] = []
        for name, topic in list(self._broker.topics.items()):
            if topic.closed or topic.compaction.running:
                continue
            namespace = TopicName.parse(name).namespace_name
            if namespace not in thresholds:
                thresholds[namespace] = await self._threshold(name)
            threshold = thresholds[namespace]
            if threshold <= 0 or topic.compaction.backlog_bytes() <= threshold:
                continue
            try:
                topic.compaction.trigger()
            except CompactionInProgress:
                continue
            log.info("compacting %s: more than %d bytes after its horizon", name, threshold)
            started.append(name)
        return started

    async def _threshold(self, topic_name: str) -> int:
        topic = TopicName.parse(topic_name)
        try:
            policies = await self._broker.resources.get_namespace_policies(
                topic.tenant, topic.namespace
            )
        except Exception as exc:
            log.debug("no policies for %s: %r", topic_name, exc)
            return self._broker_threshold
        return policies.compaction_threshold_or(self._broker_threshold)
