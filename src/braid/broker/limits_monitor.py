"""The broker's background checks of backlog quotas, message TTL, retention and cursor writes.

Four periodic checks over the loaded topics, as Pulsar's broker runs them, each on its own
interval of the injected clock (tests move time instead of waiting, or call a check directly):

* every ``backlogQuotaCheckIntervalInSeconds`` (when ``backlogQuotaCheckEnabled``): each quota unit
  over a backlog quota gets its policy (:class:`~braid.broker.backlog_quota_manager.
  BacklogQuotaManager`);
* every ``messageExpiryCheckIntervalInMinutes``: messages older than the topic's message TTL
  (else the namespace's ``message_ttl_in_seconds``, else ``ttlDurationDefaultInSeconds``; 0 =
  never) are acknowledged for every durable subscription;
* every ``retentionCheckIntervalInSeconds``: each managed ledger deletes its ledgers that every
  cursor has passed and retention lets go (the storage deletes them, so their disk space returns);
* every ``managedLedgerCursorPositionFlushSeconds``: a durable subscription whose cursor's last
  state write failed is written again, and reported drained if that is what it waited for (ADR
  0076: a hand-over waits for the write, so a failed one must not hold it back for good).

A failed round is logged and retried at the next interval; one topic's failure does not stop the
others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from braid.broker.backlog_quota_manager import BacklogQuotaManager, expire_published_before
from braid.clock import Clock
from braid.core.errors import BraidError
from braid.core.names import TopicName

if TYPE_CHECKING:
    from braid.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

#: The namespace's ``message_ttl_in_seconds`` (``None``: not set) for ``(tenant, namespace)``.
NamespaceTtl = Callable[[str, str], Awaitable[int | None]]


class LimitsMonitor:
    """Runs the three checks periodically; each is also callable on its own."""

    def __init__(
        self,
        topics: Callable[[], Mapping[str, PersistentTopic]],
        quotas: BacklogQuotaManager,
        namespace_ttl: NamespaceTtl,
        clock: Clock,
        *,
        default_ttl_s: int,
        quota_interval_s: float | None,
        expiry_interval_s: float,
        retention_interval_s: float,
        cursor_flush_interval_s: float,
    ) -> None:
        self._topics = topics
        self.quotas = quotas
        self._namespace_ttl = namespace_ttl
        self._clock = clock
        self._default_ttl_s = default_ttl_s
        self._intervals: list[tuple[float, Callable[[], Awaitable[object]]]] = [
            (expiry_interval_s, self.expire_messages),
            (retention_interval_s, self.trim_consumed_ledgers),
            (cursor_flush_interval_s, self.write_unwritten_cursors),
        ]
        if quota_interval_s is not None:
            self._intervals.append((quota_interval_s, self.quotas.check_once))
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def start(self) -> None:
        """Begin the periodic checks (idempotent; a no-op once closed)."""
        if self._tasks or self._closed:
            return
        for interval, check in self._intervals:
            self._tasks.append(asyncio.ensure_future(self._loop(max(0.001, interval), check)))

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _loop(self, interval_s: float, check: Callable[[], Awaitable[object]]) -> None:
        while True:
            await self._clock.sleep(interval_s)
            try:
                await check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic limits check %s failed", check.__name__)

    async def expire_messages(self) -> list[str]:
        """Apply message TTL to every loaded topic; returns the topics where a cursor moved."""
        ttls: dict[tuple[str, str], int] = {}
        expired: list[str] = []
        now = self._clock.now_ms()
        for name, topic in list(self._topics().items()):
            if topic.closed:
                continue
            parsed = TopicName.parse(name)
            key = (parsed.tenant, parsed.namespace)
            try:
                if key not in ttls:
                    ttl = await self._namespace_ttl(*key)
                    ttls[key] = self._default_ttl_s if ttl is None else ttl
                own = await self.quotas.topic_policies.message_ttl(parsed)
                ttl_s = ttls[key] if own is None else own
                if ttl_s <= 0:
                    continue
                if await expire_published_before(topic, now - ttl_s * 1000):
                    expired.append(name)
            except BraidError as exc:
                log.warning("expiring messages of %s failed: %r", name, exc)
        return expired

    async def trim_consumed_ledgers(self) -> int:
        """Delete the ledgers retention lets go on every loaded topic; returns how many."""
        deleted = 0
        for name, topic in list(self._topics().items()):
            if topic.closed:
                continue
            try:
                deleted += await topic.ledger.trim()
            except BraidError as exc:
                log.warning("trimming %s failed: %r", name, exc)
        return deleted

    async def write_unwritten_cursors(self) -> int:
        """Write again every durable cursor whose last write failed (one in flight is left to
        finish); returns how many were written."""
        written = 0
        for name, topic in list(self._topics().items()):
            if topic.closed:
                continue
            for sub in list(topic.subscriptions.values()):
                if not sub.durable or sub.cursor.state_written or sub.cursor.write_in_flight:
                    continue
                try:
                    await sub.cursor.write_state()
                except BraidError as exc:
                    log.warning("writing cursor %s of %s failed again: %r", sub.name, name, exc)
                    continue
                written += 1
                topic.check_drained(sub)
        return written

    async def run_once(self) -> None:
        """Every check once, in Pulsar's order of effect: quotas, TTL, then trimming."""
        await self.quotas.check_once()
        await self.expire_messages()
        await self.trim_consumed_ledgers()


__all__ = ["LimitsMonitor", "NamespaceTtl"]
