"""PIP-483's auto-scale loop: the controller leader splits hot segments and merges cold ones.

One :class:`AutoScaler` per :class:`~braid.scalable.controller.ScalableTopicController`; it runs
while that controller leads (it starts when a take-over finishes and stops on leadership loss or
close, so the next leader resumes). Each evaluation gathers a snapshot and calls the pure
:func:`braid.core.autoscale_evaluator.decide`:

* the layout, re-read from the store (a topic override changes it without a new epoch);
* the resolved policy (``broker.conf`` <- namespace <- topic,
  :mod:`braid.scalable.autoscale_policies`; an invalid stored combination leaves the topic alone,
  logged once per distinct error);
* every active segment's ``SegmentLoadStats`` record with the store's modified time of it;
* the consumer count of every STREAM/CHECKPOINT subscription (QUEUE subscriptions have no
  coordinator and add no parallelism);
* the cooldown memory: the controller's ``last_split_at_ms``/``last_merge_at_ms`` (set by every
  split and merge, manual ones included) or, on a new leader, the newest split child's / merged
  child's ``createdAtMs`` in the layout, whichever is later.

Triggers: a periodic tick (``scalableTopicAutoScaleInterval``, re-armed with the topic's interval
after every full evaluation), an evaluation when leadership begins, the consumer-membership events
of the coordinators (event-driven: only a *consumer-driven* split is acted on then; load-driven
splits and merges wait for the tick), and a follow-up evaluation ``splitCooldown`` after an
automatic split, so a topic that needs several splits (1 -> N consumers) converges a cooldown at a
time instead of a tick at a time. Evaluations never overlap: triggers arriving during one are
coalesced into one more evaluation after it (the strongest kind wins), so at most one structural
change is in flight. A load-driven or consumer-driven split cuts where the segment's key-hash
histogram says the load halves (:func:`braid.core.split_point.balanced_split_hash`; the midpoint
without keyed traffic). The last decision, its reason and time are kept for the topic's stats.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from braid.clock import Clock, TimerHandle
from braid.core.autoscale_evaluator import (
    AutoScaleState,
    Decision,
    Merge,
    NoAction,
    NoActionReason,
    Split,
    decide,
)
from braid.core.autoscale_policy import AutoScalePolicy, InvalidAutoScalePolicy
from braid.core.layout import SegmentLayout
from braid.core.segment_load import SegmentLoad
from braid.core.split_point import balanced_split_hash, midpoint_split_hash
from braid.metadata.api import MetadataStore
from braid.scalable.autoscale_decisions import AutoScaleDecisionLog
from braid.scalable.autoscale_metrics import AutoScaleMetrics
from braid.scalable.autoscale_policies import AutoScalePolicies
from braid.scalable.controller import ScalableTopicController
from braid.scalable.errors import NotLeader, OperationInProgress
from braid.scalable.resources import ScalableTopicResources, SubscriptionType

log = logging.getLogger(__name__)


class Trigger(StrEnum):
    """Why an evaluation ran."""

    LEADER = "leader"  # leadership began (after the take-over)
    TICK = "tick"  # the periodic scalableTopicAutoScaleInterval tick
    FOLLOW_UP = "follow-up"  # splitCooldown after an automatic split
    MEMBERSHIP = "membership"  # a STREAM/CHECKPOINT consumer registered, left or was evicted

    @property
    def full(self) -> bool:
        """Acts on every decision (a membership evaluation only on consumer-driven splits)."""
        return self is not Trigger.MEMBERSHIP


@dataclass(frozen=True)
class DecisionRecord:
    """One evaluation's outcome, as topic stats show it."""

    at_ms: int
    trigger: str
    action: str  # "split" | "merge" | "none" | "failed"
    reason: str  # a NoActionReason value, "consumer-driven"/"load-driven", "cold", ...
    detail: str
    segment_ids: tuple[int, ...] = ()
    split_hash: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "atMs": self.at_ms,
            "trigger": self.trigger,
            "action": self.action,
            "reason": self.reason,
            "detail": self.detail,
        }
        if self.segment_ids:
            doc["segmentIds"] = list(self.segment_ids)
        if self.split_hash is not None:
            doc["splitHash"] = self.split_hash
        return doc


def last_changes_in(layout: SegmentLayout) -> tuple[int | None, int | None]:
    """When the newest split child and the newest merged child were created (ms), per the layout:
    a new leader's cooldown memory."""
    last_split = last_merge = None
    for segment in layout.segments.values():
        if not segment.created_at_ms:
            continue
        if len(segment.parent_ids) == 1:
            last_split = max(last_split or 0, segment.created_at_ms)
        elif len(segment.parent_ids) >= 2:
            last_merge = max(last_merge or 0, segment.created_at_ms)
    return last_split, last_merge


def _latest(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


class AutoScaler:
    """The auto split/merge loop of one topic's controller (active while it leads)."""

    def __init__(
        self,
        controller: ScalableTopicController,
        *,
        store: MetadataStore,
        resources: ScalableTopicResources,
        policies: AutoScalePolicies,
        clock: Clock,
        metrics: AutoScaleMetrics,
    ) -> None:
        self._controller = controller
        self.topic = controller.topic
        self._store = store
        self._resources = resources
        self._policies = policies
        self._clock = clock
        self._counters = metrics.of(str(controller.topic))
        self._interval_s = policies.broker.auto_scale_interval_ms / 1000.0
        self._running = False
        self._task: asyncio.Task[None] | None = None
        self._pending: Trigger | None = None
        self._tick_timer: TimerHandle | None = None
        self._follow_up_timer: TimerHandle | None = None
        self._policy_error: str | None = None
        #: The effective policy of the last evaluation (None before one, or when invalid).
        self.policy: AutoScalePolicy | None = None
        self.last_decision: DecisionRecord | None = None
        #: Recent decisions taken and not taken, with their reasons (the console's timeline).
        self.decisions = AutoScaleDecisionLog()
        self.evaluations = 0

    @property
    def controller(self) -> ScalableTopicController:
        return self._controller

    @property
    def running(self) -> bool:
        return self._running

    @property
    def idle(self) -> bool:
        """No evaluation is running or pending."""
        return self._task is None or self._task.done()

    # -- lifecycle (the controller's leadership listener) --------------------------------------

    def on_leadership(self, leading: bool) -> None:
        if leading:
            self.start()
        else:
            self.stop()

    def start(self) -> None:
        """Leader duties began: evaluate now, then every interval."""
        if self._running:
            return
        self._running = True
        log.info("auto-scaler of %s: started on the controller leader", self.topic)
        self.trigger(Trigger.LEADER)

    def stop(self) -> None:
        """Leadership lost or the controller closed: no more evaluations. Idempotent."""
        if not self._running:
            return
        self._running = False
        self._pending = None
        for timer in (self._tick_timer, self._follow_up_timer):
            if timer is not None:
                timer.cancel()
        self._tick_timer = self._follow_up_timer = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        log.info("auto-scaler of %s: stopped", self.topic)

    async def wait_idle(self) -> None:
        """Wait for the evaluation in flight (and the one coalesced behind it)."""
        while self._task is not None and not self._task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    # -- triggers ------------------------------------------------------------------------------

    def on_membership_change(self) -> None:
        """A STREAM/CHECKPOINT consumer registered, left or was evicted (event-driven rule)."""
        self.trigger(Trigger.MEMBERSHIP)

    def trigger(self, trigger: Trigger) -> None:
        """Evaluate now, or once more right after the evaluation in flight."""
        if not self._running:
            return
        if self._task is not None and not self._task.done():
            if self._pending is None or (trigger.full and not self._pending.full):
                self._pending = trigger
            return
        self._task = asyncio.ensure_future(self._run(trigger))

    async def _run(self, trigger: Trigger) -> None:
        current: Trigger | None = trigger
        while current is not None and self._running:
            try:
                await self.evaluate(current)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("auto-scaler of %s: evaluation failed", self.topic)
                self._record(current, "failed", "error", f"{type(exc).__name__}: {exc}")
            if current.full and self._running:
                self._arm_tick()
            current, self._pending = self._pending, None

    def _arm_tick(self) -> None:
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        self._tick_timer = self._clock.call_at(
            self._clock.monotonic() + self._interval_s, self._on_tick
        )

    def _on_tick(self) -> None:
        self._tick_timer = None
        self.trigger(Trigger.TICK)

    def _arm_follow_up(self, delay_s: float) -> None:
        if self._follow_up_timer is not None:
            self._follow_up_timer.cancel()

        def fire() -> None:
            self._follow_up_timer = None
            self.trigger(Trigger.FOLLOW_UP)

        self._follow_up_timer = self._clock.call_at(self._clock.monotonic() + delay_s, fire)

    # -- one evaluation ------------------------------------------------------------------------

    async def evaluate(self, trigger: Trigger) -> Decision | None:
        """Gather the snapshot, decide, act; returns the decision (None when not evaluated)."""
        controller = self._controller
        if not controller.is_leader:
            return None
        self.evaluations += 1
        found = await self._resources.get_layout(self.topic)
        if found is None:
            return None  # the topic is being deleted
        layout = found.layout
        try:
            policy = await self._policies.resolve(self.topic, layout)
        except InvalidAutoScalePolicy as exc:
            self.policy = None
            if str(exc) != self._policy_error:
                log.error(
                    "auto-scaler of %s: auto split/merge is off for this topic until its "
                    "overrides are fixed: %s",
                    self.topic,
                    exc,
                )
                self._policy_error = str(exc)
            self._record(trigger, "none", "invalid_policy", str(exc))
            return None
        self._policy_error = None
        self.policy = policy
        self._interval_s = policy.auto_scale_interval_ms / 1000.0
        now_ms = self._clock.now_ms()
        if not policy.enabled:
            disabled = NoAction(
                NoActionReason.DISABLED, "auto split/merge is disabled for this topic"
            )
            self._record_no_action(trigger, disabled, now_ms)
            return disabled
        loads = await self.read_loads(layout)
        consumers = self._consumer_counts()
        layout_split, layout_merge = last_changes_in(layout)
        state = AutoScaleState(
            last_split_at_ms=_latest(controller.last_split_at_ms, layout_split),
            last_merge_at_ms=_latest(controller.last_merge_at_ms, layout_merge),
            operation_in_flight=controller.operation_running,
        )
        decision = decide(layout, loads, consumers, policy, state, now_ms)
        if isinstance(decision, NoAction):
            self._record_no_action(trigger, decision, now_ms)
            return decision
        # Consumers beyond what the segments' entry buckets serve by sharing (PIP-486).
        consumer_driven = (
            isinstance(decision, Split)
            and max(consumers.values(), default=0)
            > len(layout.active_segments) * layout.entry_buckets
        )
        if not trigger.full and not consumer_driven:
            self._record(
                trigger,
                "none",
                "deferred_to_tick",
                f"{decision.reason} (load-driven splits and merges wait for the periodic tick)",
                at_ms=now_ms,
            )
            return decision
        if isinstance(decision, Split):
            await self._split(trigger, decision, layout, loads, consumer_driven, policy)
        else:
            await self._merge(trigger, decision)
        return decision

    async def read_loads(self, layout: SegmentLayout) -> dict[int, SegmentLoad]:
        """The load record of every active segment that has one (unreadable ones are logged)."""
        loads: dict[int, SegmentLoad] = {}
        for segment in layout.active_segments:
            path = self._resources.segment_load_path(self.topic, segment.segment_id)
            found = await self._store.get(path)
            if found is None:
                continue
            data, stat = found
            try:
                loads[segment.segment_id] = SegmentLoad.decode(data, stat.modified_ms)
            except InvalidAutoScalePolicy as exc:
                log.warning(
                    "auto-scaler of %s: ignoring the unreadable load record of segment %d: %s",
                    self.topic,
                    segment.segment_id,
                    exc,
                )
        return loads

    def _consumer_counts(self) -> dict[str, int]:
        counts = {}
        for name in self._controller.coordinator_names():
            coordinator = self._controller.coordinator(name)
            if coordinator is not None and coordinator.sub_type is not SubscriptionType.QUEUE:
                counts[name] = len(coordinator.consumer_names)
        return counts

    async def _split(
        self,
        trigger: Trigger,
        decision: Split,
        layout: SegmentLayout,
        loads: dict[int, SegmentLoad],
        consumer_driven: bool,
        policy: AutoScalePolicy,
    ) -> None:
        segment = layout.segment(decision.segment_id)
        load = loads.get(decision.segment_id)
        at = balanced_split_hash(segment.hash_range, load.key_hash_buckets if load else None)
        split_hash = None if at == midpoint_split_hash(segment.hash_range) else at
        kind = "consumer-driven" if consumer_driven else "load-driven"
        where = "at the midpoint" if split_hash is None else f"at 0x{at:04x} (load-balanced)"
        log.info("auto-scaler of %s: %s %s", self.topic, decision.reason, where)
        if not await self._execute(
            trigger, self._controller.split(decision.segment_id, split_hash)
        ):
            return
        self._counters.auto_splits += 1
        self._record(
            trigger, "split", kind, f"{decision.reason} {where}", (decision.segment_id,), at
        )
        self._arm_follow_up(policy.split_cooldown_ms / 1000.0)

    async def _merge(self, trigger: Trigger, decision: Merge) -> None:
        ids = (decision.segment_id1, decision.segment_id2)
        log.info("auto-scaler of %s: %s", self.topic, decision.reason)
        if not await self._execute(trigger, self._controller.merge(ids)):
            return
        self._counters.auto_merges += 1
        self._record(trigger, "merge", "cold", decision.reason, ids)

    async def _execute(self, trigger: Trigger, operation: Any) -> bool:
        try:
            await operation
        except OperationInProgress as exc:
            self._record(trigger, "none", NoActionReason.OPERATION_IN_FLIGHT.value, str(exc))
            return False
        except NotLeader:
            return False
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("auto-scaler of %s: the structural change failed", self.topic)
            self._record(trigger, "failed", "error", f"{type(exc).__name__}: {exc}")
            return False
        return True

    # -- records -------------------------------------------------------------------------------

    def _record_no_action(self, trigger: Trigger, decision: NoAction, now_ms: int) -> None:
        if decision.reason is NoActionReason.MAX_SEGMENTS:
            self._counters.split_suppressed_max_segments += 1
        elif decision.reason is NoActionReason.MAX_DAG_DEPTH:
            self._counters.merge_suppressed_max_depth += 1
        self._record(trigger, "none", decision.reason.value, decision.detail, at_ms=now_ms)

    def _record(
        self,
        trigger: Trigger,
        action: str,
        reason: str,
        detail: str,
        segment_ids: tuple[int, ...] = (),
        split_hash: int | None = None,
        *,
        at_ms: int | None = None,
    ) -> None:
        self.last_decision = DecisionRecord(
            self._clock.now_ms() if at_ms is None else at_ms,
            trigger.value,
            action,
            reason,
            detail,
            segment_ids,
            split_hash,
        )
        self.decisions.append(self.last_decision)

    def stats(self) -> dict[str, Any]:
        """The loop's state for topic stats."""
        return {
            "running": self._running,
            "evaluations": self.evaluations,
            "intervalMs": round(self._interval_s * 1000),
            "lastDecision": None if self.last_decision is None else self.last_decision.to_json(),
            "counters": self._counters.to_json(),
        }


__all__ = ["AutoScaler", "DecisionRecord", "Trigger", "last_changes_in"]
