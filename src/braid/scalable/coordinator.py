"""PIP-468 ``SubscriptionCoordinator``: one ordered subscription's consumers and their segments.

Runs on the controller leader, one per STREAM or CHECKPOINT subscription. It owns:

* **Sessions.** A registration (consumer name -> assigned segments) is durable in the metadata
  store; whether the consumer is connected, and its grace-period timer, live only in memory
  (PIP-468 "Consumer Session Lifecycle"). A dropped connection starts the grace timer; the same
  name reconnecting within it gets the same assignment with no rebalance; expiry deletes the
  registration and rebalances. A new leader restores every registration as "just disconnected"
  with a full, fresh grace period.
* **Assignment.** :func:`braid.core.assignment.compute_assignment` over the current layout, the
  members, and the subscription's own drained set. For a STREAM subscription a segment is handed
  out only once every ancestor still holding data *for this subscription* is drained: this is
  Braid's answer to the PIP-468 review question "catch-up reads must take the subscription into
  account" (ADR 0020). A CHECKPOINT group keeps no broker cursor, so its members *report* the
  sealed segments they have delivered whole (``drained_segments`` of their registration, sent
  again whenever it grows; ADR 0057): a report is taken for a sealed segment of the layout that
  no other member holds, and children are handed out once every ancestor is reported, so a
  key's messages are delivered parent before child across the whole group. Reports live in
  memory: a new leader starts with none and members re-send theirs when they re-register
  (children wait meanwhile, which is safe). A membership change deals afresh (round-robin); a
  drain, a layout change or a seek deals stickily: consumers keep their segments and a newly
  readable segment goes to the consumer that drained its parent, counts within one (ADR 0043).
* **Pushes.** After every rebalance only the consumers whose segments changed are told, with the
  layout epoch, one push per consumer per change set; their registrations are rewritten shortly
  after (``REGISTRATION_SAVE_DELAY_S``, newest per consumer, so a walk's hand-overs share one
  write; writes never scale with liveness ticks). The push goes first: a registration is only
  what a new leader starts from, and it recomputes the assignment from the layout and the
  cursors anyway (ADR 0068). Each assigned segment names the broker serving it
  (:mod:`braid.scalable.segment_brokers`, looked up once while the segment stays assigned), so
  the consumer attaches without a lookup of its own (ADR 0073).

**Drained set** (ADR 0043). Read in full from the segment owners' cursors
(``SegmentAdmin.is_drained``) when the coordinator starts, after a seek (which can rewind the
subscription into drained segments) and when a new leader takes over. Between those it is kept
incrementally, so a hand-over costs the same on a DAG of ten segments or of thousands: a layout
change checks only the segments it sealed (an empty one, or one the subscription had already
consumed, is drained at once), and the broker's drain event for a segment checks only that
segment, and a :class:`~braid.core.drain.DrainFrontier` keeps the readable segments as they
drain (no pass over the whole DAG per hand-over, ADR 0068). Drain events are absorbed in
batches: events arriving while a rebalance runs are all handled by the next one, so a frontier
that opens up segment after segment (children already drained, or empty for this subscription)
is handed over in one push, never attached one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from braid.clock import Clock, TimerHandle
from braid.core.assignment import (
    SubscriptionAssignment,
    changed_consumers,
    compute_assignment,
)
from braid.core.bucket_sharing import bucket_ranges, share_buckets, shared_segments
from braid.core.drain import DrainFrontier, readable_segments
from braid.core.layout import SegmentLayout
from braid.core.names import SegmentTopicName, TopicName
from braid.core.ranges import HashRange
from braid.core.segment_info import SegmentInfo
from braid.scalable.errors import NotLeader
from braid.scalable.resources import (
    ConsumerRegistration,
    ScalableTopicResources,
    SubscriptionType,
)
from braid.scalable.segment_brokers import SegmentBroker, SegmentBrokers
from braid.scalable.segments import SegmentAdmin, SegmentTopic

log = logging.getLogger(__name__)

#: How long a changed registration waits before it is written, so the hand-overs of a walk
#: down a DAG (one every few milliseconds) share one metadata write instead of queueing one
#: each ahead of the cursor writes that drain the next segments (ADR 0068).
REGISTRATION_SAVE_DELAY_S = 0.25


@dataclass(frozen=True)
class AssignedSegment:
    """One segment handed to a consumer (PIP-468 ``AssignedSegment``)."""

    segment_id: int
    hash_start: int
    hash_end: int
    segment_topic: str
    #: Attach ahead: not readable yet; subscribe without permits until told otherwise.
    paused: bool = False
    #: Shared by entry bucket (PIP-486): the segment's whole boundary list; empty = sole owner.
    bucket_ranges: tuple[HashRange, ...] = ()
    #: The broker serving the segment, when it was found (ADR 0073); else the consumer looks.
    broker: SegmentBroker | None = None


@dataclass(frozen=True)
class ConsumerAssignmentView:
    """What a consumer is told: its segments, computed against ``layout_epoch``."""

    layout_epoch: int
    segments: tuple[AssignedSegment, ...]


class AssignmentTransport(Protocol):
    """The connection of a registered consumer, as the coordinator needs it."""

    @property
    def closed(self) -> bool: ...

    def send_assignment_update(self, consumer_id: int, assignment: ConsumerAssignmentView) -> None:
        """Push ``CommandScalableTopicAssignmentUpdate`` to the consumer."""
        ...


class ConsumerSession:
    """A registered consumer: durable name and assignment, in-memory liveness."""

    def __init__(self, name: str, segment_ids: tuple[int, ...] = ()) -> None:
        self.name = name
        self.consumer_id: int | None = None
        self.transport: AssignmentTransport | None = None
        self.segment_ids = segment_ids
        #: Whether the consumer understands paused segments, and the ones it may open ahead.
        self.attach_ahead = False
        self.ahead_ids: tuple[int, ...] = ()
        self.grace_timer: TimerHandle | None = None

    @property
    def connected(self) -> bool:
        return self.transport is not None and not self.transport.closed

    def attach(self, consumer_id: int, transport: AssignmentTransport) -> None:
        self.consumer_id = consumer_id
        self.transport = transport
        self.cancel_grace()

    def detach(self) -> None:
        self.consumer_id = None
        self.transport = None

    @property
    def in_grace_period(self) -> bool:
        return self.grace_timer is not None

    def cancel_grace(self) -> None:
        if self.grace_timer is not None:
            self.grace_timer.cancel()
            self.grace_timer = None


class SubscriptionCoordinator:
    """Consumers and assignments of one STREAM or CHECKPOINT subscription."""

    def __init__(
        self,
        topic: TopicName,
        subscription: str,
        sub_type: SubscriptionType,
        layout: SegmentLayout,
        *,
        resources: ScalableTopicResources,
        segments: SegmentAdmin,
        clock: Clock,
        grace_period_s: float,
        on_membership_change: Callable[[], None] | None = None,
        brokers: SegmentBrokers | None = None,
    ) -> None:
        self.topic = topic
        self.subscription = subscription
        self.sub_type = sub_type
        self._layout = layout
        self._resources = resources
        self._segments = segments
        self._brokers = brokers
        #: The brokers of assigned segments, found once while they stay assigned (ADR 0073).
        self._broker_of: dict[int, SegmentBroker] = {}
        self._clock = clock
        self._grace_s = grace_period_s
        self._on_membership_change = on_membership_change
        self._sessions: dict[str, ConsumerSession] = {}
        self._drained: frozenset[int] = frozenset()
        self._drained_known = False
        #: STREAM: readable and next segments kept as segments drain (rebuilt per layout).
        self._frontier: DrainFrontier | None = None
        #: CHECKPOINT: sealed segments members reported delivered whole.
        self._reported: frozenset[int] = frozenset()
        self._drain_events: set[int] = set()
        self._absorbing: asyncio.Task[None] | None = None
        self._unsaved: dict[str, ConsumerRegistration] = {}
        self._saver: asyncio.Task[None] | None = None
        self._save_timer: TimerHandle | None = None
        self._assignment: SubscriptionAssignment | None = None
        #: Segments several consumers share by bucket in the current assignment.
        self._shared: frozenset[int] = frozenset()
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # -- queries -------------------------------------------------------------------------------

    @property
    def consumer_names(self) -> list[str]:
        return sorted(self._sessions)

    @property
    def drained(self) -> frozenset[int]:
        if self.sub_type is SubscriptionType.CHECKPOINT:
            return self._reported
        return self._drained

    @property
    def pending_drains(self) -> frozenset[int]:
        """Segments reported drained and not handed over yet (absorbed by the next rebalance)."""
        return frozenset(self._drain_events)

    def session(self, name: str) -> ConsumerSession | None:
        return self._sessions.get(name)

    def assignment_of(self, name: str) -> ConsumerAssignmentView:
        session = self._sessions.get(name)
        if session is None:
            return self._view(())
        return self._view(session.segment_ids, session.ahead_ids)

    def stats(self) -> dict[str, object]:
        return {
            "type": self.sub_type.value,
            "drainedSegments": sorted(self.drained),
            "sharedSegments": sorted(self._shared),
            "consumers": {
                name: {
                    "connected": s.connected,
                    "assignedSegments": list(s.segment_ids),
                    "attachedAhead": list(s.ahead_ids),
                    "inGracePeriod": s.in_grace_period,
                }
                for name, s in sorted(self._sessions.items())
            },
        }

    # -- membership ----------------------------------------------------------------------------

    async def register(
        self,
        name: str,
        consumer_id: int,
        transport: AssignmentTransport,
        *,
        attach_ahead: bool = False,
        drained: Iterable[int] = (),
    ) -> ConsumerAssignmentView:
        """Register (or reconnect) ``name``; returns its assignment (also for a reconnect).

        ``attach_ahead``: the consumer understands paused segments (the next ones it will be
        given, listed so it can subscribe without permits ahead of time). ``drained``: a
        CHECKPOINT member's report of the sealed segments it delivered whole (module
        docstring); a report that unblocks segments rebalances and pushes at once."""
        async with self._lock:
            self._check_open()
            existing = self._sessions.get(name)
            reported = self._take_reports(name, drained)
            if existing is not None and reported:
                existing.attach(consumer_id, transport)
                await self._rebalance()
                return self._view(existing.segment_ids, existing.ahead_ids)
            if existing is not None:
                # Reconnect within grace (or a duplicate registration): same assignment, nobody
                # else is disturbed.
                existing.attach(consumer_id, transport)
                existing.attach_ahead = attach_ahead
                if not attach_ahead:
                    existing.ahead_ids = ()
                log.info(
                    "%s/%s: consumer %r reconnected; keeps segments %s",
                    self.topic,
                    self.subscription,
                    name,
                    list(existing.segment_ids),
                )
                await self._locate((*existing.segment_ids, *existing.ahead_ids))
                return self._view(existing.segment_ids, existing.ahead_ids)
            session = ConsumerSession(name)
            await self._resources.put_registration(
                self.topic, self.subscription, ConsumerRegistration(name, (), self._layout.epoch)
            )
            session.attach(consumer_id, transport)
            session.attach_ahead = attach_ahead
            self._sessions[name] = session
            log.info("%s/%s: consumer %r registered", self.topic, self.subscription, name)
            await self._rebalance(exclude_push=name, deal=True)
            await self._saves_done()  # a new member's registration names its segments
        self._membership_changed()
        return self._view(session.segment_ids, session.ahead_ids)

    def _take_reports(self, name: str, drained: Iterable[int]) -> bool:
        """Record a CHECKPOINT member's drained report; whether it added anything. Only a
        sealed segment of the layout that no other member holds counts (a member reporting from
        an old checkpoint cannot unblock a segment another member is still reading)."""
        if self.sub_type is not SubscriptionType.CHECKPOINT:
            return False
        held = {
            sid
            for other, session in self._sessions.items()
            if other != name
            for sid in session.segment_ids
        }
        segments = self._layout.segments
        taken = {
            sid
            for sid in drained
            if sid in segments and not segments[sid].is_active and sid not in held
        }
        added = taken - self._reported
        if added:
            self._reported = self._reported | added
        return bool(added)

    async def unregister(self, name: str) -> bool:
        """Remove ``name`` for good and rebalance at once; ``False`` if it was unknown."""
        async with self._lock:
            session = self._sessions.pop(name, None)
            if session is None:
                return False
            session.cancel_grace()
            await self._forget_unsaved(name)
            await self._resources.delete_registration(self.topic, self.subscription, name)
            log.info("%s/%s: consumer %r left", self.topic, self.subscription, name)
            await self._rebalance(deal=True)
        self._membership_changed()
        return True

    def find_by_consumer_id(self, transport: AssignmentTransport, consumer_id: int) -> str | None:
        for name, session in self._sessions.items():
            if session.transport is transport and session.consumer_id == consumer_id:
                return name
        return None

    def on_transport_closed(self, transport: AssignmentTransport) -> None:
        """The connection of some consumers dropped: start their grace periods."""
        for session in self._sessions.values():
            if session.transport is transport:
                session.detach()
                self._start_grace(session)

    def restore(self, registrations: Iterable[ConsumerRegistration]) -> None:
        """Install persisted registrations as just disconnected, each with a fresh grace period
        (a new leader after failover)."""
        for registration in registrations:
            if registration.consumer_name in self._sessions:
                continue
            session = ConsumerSession(registration.consumer_name, registration.segment_ids)
            self._sessions[session.name] = session
            self._start_grace(session)
        log.info(
            "%s/%s: restored %d consumer session(s), each with a %.0f s grace period",
            self.topic,
            self.subscription,
            len(self._sessions),
            self._grace_s,
        )

    def _start_grace(self, session: ConsumerSession) -> None:
        """Arm the session's grace timer now (its deadline counts from this moment)."""
        session.cancel_grace()
        if self._closed:
            return

        def expired() -> None:
            session.grace_timer = None
            task = asyncio.ensure_future(self._evict(session))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        session.grace_timer = self._clock.call_at(self._clock.monotonic() + self._grace_s, expired)

    async def _evict(self, session: ConsumerSession) -> None:
        async with self._lock:
            if self._closed or self._sessions.get(session.name) is not session:
                return
            if session.connected or session.in_grace_period:
                return  # it came back (and may have dropped again) meanwhile
            del self._sessions[session.name]
            log.info(
                "%s/%s: consumer %r did not come back within %.0f s; evicted",
                self.topic,
                self.subscription,
                session.name,
                self._grace_s,
            )
            try:
                await self._forget_unsaved(session.name)
                await self._resources.delete_registration(
                    self.topic, self.subscription, session.name
                )
                await self._rebalance(deal=True)
            except Exception:
                log.exception(
                    "%s/%s: rebalance after eviction failed", self.topic, self.subscription
                )
        self._membership_changed()

    def _membership_changed(self) -> None:
        if self._on_membership_change is not None:
            self._on_membership_change()

    # -- layout and drain ----------------------------------------------------------------------

    async def on_layout_change(self, layout: SegmentLayout) -> None:
        """A split, merge or prune happened: check the segments it sealed, recompute and push."""
        async with self._lock:
            if self._closed or layout.epoch < self._layout.epoch:
                return
            previous, self._layout = self._layout, layout
            if self._drained_known:
                newly_sealed = [
                    segment
                    for sid, segment in layout.segments.items()
                    if not segment.is_active
                    and (sid not in previous.segments or previous.segments[sid].is_active)
                ]
                kept = {sid for sid in self._drained if sid in layout.segments}
                self._drained = frozenset(kept | await self._drained_among(newly_sealed))
                self._frontier = None
            self._reported = frozenset(s for s in self._reported if s in layout.segments)
            await self._rebalance()

    async def refresh(self) -> None:
        """Re-read the whole drained state (after a seek, or a new leader) and push what
        changed."""
        async with self._lock:
            if self._closed:
                return
            self._drained_known = False
            await self._rebalance()

    def segment_drained(self, segment_id: int) -> None:
        """The broker saw this subscription reach the end of sealed segment ``segment_id``:
        hand over what that unblocks, together with every other drain reported meanwhile."""
        if self._closed or self.sub_type is not SubscriptionType.STREAM:
            return
        self._drain_events.add(segment_id)
        if self._absorbing is None:
            self._absorbing = asyncio.ensure_future(self._absorb_drain_events())
            self._tasks.add(self._absorbing)
            self._absorbing.add_done_callback(self._tasks.discard)

    async def _absorb_drain_events(self) -> None:
        try:
            while self._drain_events and not self._closed:
                async with self._lock:
                    events, self._drain_events = self._drain_events, set()
                    if self._closed:
                        return
                    if self._drained_known:
                        # A segment still active in this layout was sealed by a change this
                        # coordinator has not seen yet: that change checks it when it arrives.
                        sealed = [
                            self._layout.segments[sid]
                            for sid in sorted(events)
                            if sid in self._layout.segments
                            and not self._layout.segments[sid].is_active
                            and sid not in self._drained
                        ]
                        found = await self._drained_among(sealed)
                        if not found:
                            continue
                        self._drained = self._drained | found
                        if self._frontier is not None:
                            self._frontier.drain(found)
                    await self._rebalance()
        except Exception:
            log.exception("%s/%s: hand-over after a drain failed", self.topic, self.subscription)
        finally:
            self._absorbing = None

    async def _drained_among(self, segments: Iterable[SegmentInfo]) -> frozenset[int]:
        """The ids of ``segments`` (sealed) this subscription has drained; a check that fails
        counts as not drained (children wait, which is safe)."""
        drained = set()
        for segment in segments:
            name = segment_topic_name(self.topic, segment)
            try:
                if await self._segments.is_drained(name, self.subscription):
                    drained.add(segment.segment_id)
            except Exception as exc:
                log.warning(
                    "%s/%s: drain check of %s failed: %r", self.topic, self.subscription, name, exc
                )
        return frozenset(drained)

    async def _rebalance(self, exclude_push: str | None = None, *, deal: bool = False) -> None:
        """Recompute under the lock; push to the consumers whose segments changed, then persist
        their registrations. ``deal``: a membership change, dealt afresh round-robin; otherwise
        every consumer keeps its readable segments (sticky, ADR 0043)."""
        if self.sub_type is SubscriptionType.STREAM and not self._drained_known:
            self._drained = await self._drained_among(self._layout.sealed_segments)
            self._drained_known = True
            self._frontier = None
        before = {name: s.segment_ids for name, s in self._sessions.items()}
        previous = None if deal else {n: s.segment_ids for n, s in self._sessions.items()}
        assignment = compute_assignment(
            self._layout,
            self._sessions,
            self.drained,
            previous,
            readable=self._readable(),
            ahead={n: s.ahead_ids for n, s in self._sessions.items() if s.ahead_ids},
        )
        if self.sub_type is SubscriptionType.STREAM:
            # More consumers than readable segments: the idle ones share by bucket (PIP-486).
            assignment = share_buckets(assignment, self._layout)
        self._assignment = assignment
        changed = changed_consumers(before, assignment)
        shared, self._shared = self._shared, shared_segments(assignment)
        if shared != self._shared:
            # A segment that became shared (or sole-owned) changes its consumers' attach mode.
            flipped = shared ^ self._shared
            changed = tuple(
                name
                for name in assignment.consumer_names
                if name in changed or flipped.intersection(assignment.segments_of(name))
            )
        ahead = self._ahead(assignment)
        assigned = {
            sid for name in assignment.consumer_names for sid in assignment.segments_of(name)
        } | {sid for ids in ahead.values() for sid in ids}
        self._broker_of = {sid: b for sid, b in self._broker_of.items() if sid in assigned}
        await self._locate(assigned)
        for name, session in self._sessions.items():
            moved = name in changed
            session.segment_ids = assignment.segments_of(name)
            next_ids = ahead.get(name, ()) if session.attach_ahead else ()
            if not moved and next_ids == session.ahead_ids:
                continue
            session.ahead_ids = next_ids
            if name == exclude_push or not session.connected or session.consumer_id is None:
                continue
            assert session.transport is not None
            session.transport.send_assignment_update(
                session.consumer_id, self._view(session.segment_ids, session.ahead_ids)
            )
        if not changed:
            return
        self._save_later(changed)
        # A membership change is worth a line; a hand-over (one per segment walked) is not.
        log.log(
            logging.INFO if deal else logging.DEBUG,
            "%s/%s: assignment at epoch %d: %s",
            self.topic,
            self.subscription,
            self._layout.epoch,
            assignment.as_dict(),
        )

    # -- registrations -------------------------------------------------------------------------
    #
    # Rewritten after the push and outside the lock, by one task writing the newest registration
    # of each changed consumer, REGISTRATION_SAVE_DELAY_S after the first unsaved change (at
    # once when a registration or a removal waits for it): the next hand-over never waits for
    # a metadata write, and a walk's hand-overs share one write. A
    # registration is only what a new leader starts from (it recomputes the assignment from the
    # layout and the cursors), so a write that fails is logged and the next change rewrites it.

    def _save_later(self, names: Iterable[str]) -> None:
        for name in names:
            session = self._sessions.get(name)
            if session is not None:
                self._unsaved[name] = ConsumerRegistration(
                    name, session.segment_ids, self._layout.epoch
                )
        if self._saver is None and self._save_timer is None and self._unsaved:
            self._save_timer = self._clock.call_at(
                self._clock.monotonic() + REGISTRATION_SAVE_DELAY_S, self._start_saver
            )

    def _start_saver(self) -> None:
        """Write the pending registrations now (the delay ran out, or someone waits)."""
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        if self._saver is None and self._unsaved and not self._closed:
            self._saver = asyncio.ensure_future(self._save_registrations())
            self._tasks.add(self._saver)
            self._saver.add_done_callback(self._tasks.discard)

    async def _save_registrations(self) -> None:
        try:
            while self._unsaved:
                name = next(iter(self._unsaved))
                registration = self._unsaved.pop(name)
                try:
                    await self._resources.put_registration(
                        self.topic, self.subscription, registration
                    )
                except Exception as exc:
                    log.warning(
                        "%s/%s: saving the registration of %r failed: %r",
                        self.topic,
                        self.subscription,
                        name,
                        exc,
                    )
        finally:
            self._saver = None

    async def _saves_done(self) -> None:
        self._start_saver()
        saver = self._saver
        if saver is not None:
            await asyncio.wait([saver])

    async def _forget_unsaved(self, name: str) -> None:
        """Drop ``name``'s pending write and wait for one in flight (before deleting it, so
        no late write brings the registration back)."""
        self._unsaved.pop(name, None)
        await self._saves_done()

    def _ahead(self, assignment: SubscriptionAssignment) -> dict[str, tuple[int, ...]]:
        """Consumer -> the segments it may open ahead: those one step past the readable
        frontier (through empty drained segments) whose readable blockers are all this
        consumer's. The sticky deal gives such a segment to it once they drain (it opened it
        ahead), unless the counts must be evened."""
        if self.sub_type is not SubscriptionType.STREAM:
            return {}
        owner = {sid: c.consumer_name for c in assignment.consumers for sid in c.segment_ids}
        ahead: dict[str, list[int]] = {}
        frontier = self._current_frontier()
        for sid, blockers in frontier.next_segments().items():
            owners = {owner.get(p) for p in blockers}
            if len(owners) == 1:
                (name,) = owners
                if name is not None:
                    ahead.setdefault(name, []).append(sid)
        return {name: tuple(sorted(ids)) for name, ids in ahead.items()}

    def _current_frontier(self) -> DrainFrontier:
        """The STREAM frontier of the current layout and drained set (built in one pass when
        either was replaced; a drain event updates it incrementally)."""
        frontier = self._frontier
        if frontier is None or frontier.layout is not self._layout:
            frontier = self._frontier = DrainFrontier(self._layout, self._drained)
        return frontier

    def _readable(self) -> list[SegmentInfo]:
        if self.sub_type is SubscriptionType.STREAM:
            return self._current_frontier().readable
        return readable_segments(self._layout, self.drained)

    @property
    def _bucket_ranges(self) -> tuple[HashRange, ...]:
        return bucket_ranges(self._layout)

    def _view(
        self, segment_ids: Sequence[int], ahead_ids: Sequence[int] = ()
    ) -> ConsumerAssignmentView:
        segments = []
        for paused, ids in ((False, segment_ids), (True, ahead_ids)):
            for sid in ids:
                info = self._layout.segments.get(sid)
                if info is None:
                    continue
                segments.append(
                    AssignedSegment(
                        sid,
                        info.hash_range.start,
                        info.hash_range.end,
                        str(segment_topic_name(self.topic, info)),
                        paused,
                        self._bucket_ranges if sid in self._shared else (),
                        self._broker_of.get(sid),
                    )
                )
        return ConsumerAssignmentView(self._layout.epoch, tuple(segments))

    async def _locate(self, segment_ids: Iterable[int]) -> None:
        """Find the brokers of ``segment_ids`` not known yet (a rebalance forgets those of
        segments no longer assigned). Best effort: a segment whose lookup fails is sent without
        one, and its consumer looks it up (ADR 0073)."""
        if self._brokers is None:
            return
        missing = {
            sid: segment_topic_name(self.topic, info)
            for sid in sorted(set(segment_ids) - self._broker_of.keys())
            if (info := self._layout.segments.get(sid)) is not None
        }
        if not missing:
            return
        try:
            self._broker_of.update(await self._brokers.of(missing))
        except Exception as exc:
            log.info(
                "%s/%s: brokers of segments %s not found (%r); their consumers look them up",
                self.topic,
                self.subscription,
                sorted(missing),
                exc,
            )

    # -- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise NotLeader(f"the coordinator of {self.topic}/{self.subscription} is closed")

    def close(self) -> None:
        """Stop timers (leadership lost or topic deleted); registrations stay persisted."""
        self._closed = True
        if self._save_timer is not None:
            self._save_timer.cancel()
            self._save_timer = None
        for session in self._sessions.values():
            session.cancel_grace()
        for task in list(self._tasks):
            task.cancel()

    async def drop_all(self) -> None:
        """Delete every registration (the subscription is being deleted)."""
        async with self._lock:
            for name, session in list(self._sessions.items()):
                session.cancel_grace()
                await self._forget_unsaved(name)
                with contextlib.suppress(Exception):
                    await self._resources.delete_registration(self.topic, self.subscription, name)
            self._sessions.clear()
            self._closed = True


def segment_topic_name(topic: TopicName, segment: SegmentInfo) -> SegmentTopic:
    """The topic serving one segment of ``topic``: its ``segment://`` topic, or for a legacy root
    of a migrated topic (ADR 0063) the ``persistent://`` partition it wraps."""
    if segment.legacy_topic_name is not None:
        return TopicName.parse(segment.legacy_topic_name)
    return SegmentTopicName.of(topic, segment.hash_range, segment.segment_id)


__all__ = [
    "AssignedSegment",
    "AssignmentTransport",
    "ConsumerAssignmentView",
    "ConsumerSession",
    "SubscriptionCoordinator",
    "segment_topic_name",
]
