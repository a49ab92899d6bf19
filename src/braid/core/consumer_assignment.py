"""The client side of controller assignment for Stream and grouped Checkpoint consumers.

``docs/protocol.md#consumer-assignment``: an ordered consumer registers with the
topic's controller leader (``CommandScalableTopicSubscribe``) and is handed the segments it owns
(``ScalableConsumerAssignment``), later replaced by pushed ``CommandScalableTopicAssignmentUpdate``
commands. This module is the pure part:

* :class:`Assignment` / :class:`AssignedSegment` - one assignment, converted from the wire;
* :class:`AssignmentTracker` - applies an assignment only if its ``layout_epoch`` is at least the
  last applied one (stale pushes are dropped) and returns the :class:`AssignmentDiff` to act on:
  segments to attach, to detach, and to re-attach because their attach mode flipped between sole
  owner (Exclusive) and bucket-shared (Key_Shared, ``docs/protocol.md#entry-buckets``), and to
  resume because a segment opened ahead (paused, ADR 0043) became readable. Re-applying an
  identical assignment yields an empty diff, so nothing is disturbed;
* :class:`RegistrationState` - the session's life: register, registered, connection lost (keep
  the assignment, re-register: within the controller's grace period the same assignment comes
  back, past it the diff applies), leaving (a clean ``CommandScalableTopicUnsubscribe``), closed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from braid.core.errors import IllegalStateError, InvalidInputError
from braid.core.ranges import HashRange


@dataclass(frozen=True, slots=True)
class AssignedSegment:
    """One segment of an assignment.

    ``bucket_ranges`` empty = this consumer is the segment's sole owner (subscribe Exclusive);
    otherwise the segment's full bucket-boundary list, shared by entry bucket (Key_Shared).
    ``paused``: opened ahead - subscribed, but no permits until an assignment lists it unpaused.
    ``broker_url``: the broker the controller found serving the segment (ADR 0073), the URL of
    the client's scheme; ``None``: look the segment up. Advice, not part of what is assigned: an
    assignment that only names another broker changes nothing.
    """

    segment_id: int
    hash_range: HashRange
    segment_topic: str
    bucket_ranges: tuple[HashRange, ...] = ()
    paused: bool = False
    broker_url: str | None = field(default=None, compare=False)

    @property
    def shared(self) -> bool:
        """Whether the segment is shared by entry bucket."""
        return bool(self.bucket_ranges)


@dataclass(frozen=True)
class Assignment:
    """The segments a consumer owns, computed by the controller against ``layout_epoch``."""

    layout_epoch: int
    segments: Mapping[int, AssignedSegment] = field(default_factory=dict)

    def __post_init__(self) -> None:
        epoch = self.layout_epoch
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise InvalidInputError(f"assignment layout_epoch must be >= 0, got {epoch!r}")
        segments = dict(self.segments)
        for sid, seg in segments.items():
            if seg.segment_id != sid:
                raise InvalidInputError(f"assigned segment keyed {sid} is {seg.segment_id}")
        object.__setattr__(self, "segments", MappingProxyType(segments))

    @classmethod
    def of(cls, layout_epoch: int, segments: Iterable[AssignedSegment]) -> Assignment:
        """Build from a list of segments.

        Raises:
            InvalidInputError: a segment id appears twice.
        """
        by_id: dict[int, AssignedSegment] = {}
        for seg in segments:
            if seg.segment_id in by_id:
                raise InvalidInputError(f"segment {seg.segment_id} is assigned twice")
            by_id[seg.segment_id] = seg
        return cls(layout_epoch, by_id)


@dataclass(frozen=True)
class AssignmentDiff:
    """What to do to move from one assignment to the next.

    Attributes:
        attach: newly assigned segments.
        detach: ids of segments no longer assigned (drain, then close).
        reattach: segments whose attach mode flipped (drain, close, subscribe in the new mode),
            or that went back from readable to paused (a seek rewound the subscription).
        resume: segments opened ahead that are now readable (grant their permits).
    """

    attach: tuple[AssignedSegment, ...] = ()
    detach: tuple[int, ...] = ()
    reattach: tuple[AssignedSegment, ...] = ()
    resume: tuple[AssignedSegment, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether nothing changes."""
        return not (self.attach or self.detach or self.reattach or self.resume)


def diff_assignments(old: Assignment | None, new: Assignment) -> AssignmentDiff:
    """The diff from ``old`` (``None`` = nothing attached) to ``new``."""
    before = old.segments if old is not None else {}
    attach = tuple(seg for sid, seg in sorted(new.segments.items()) if sid not in before)
    detach = tuple(sorted(sid for sid in before if sid not in new.segments))
    reattach = tuple(
        seg
        for sid, seg in sorted(new.segments.items())
        if sid in before and _mode_changed(before[sid], seg)
    )
    resume = tuple(
        seg
        for sid, seg in sorted(new.segments.items())
        if sid in before
        and before[sid].paused
        and not seg.paused
        and not _mode_changed(before[sid], seg)
    )
    return AssignmentDiff(attach, detach, reattach, resume)


def _mode_changed(old: AssignedSegment, new: AssignedSegment) -> bool:
    if new.paused and not old.paused:
        return True  # readable -> paused: what was delivered must be drained first
    return (old.bucket_ranges, old.segment_topic) != (new.bucket_ranges, new.segment_topic)


class AssignmentTracker:
    """The last applied assignment; applies by ``layout_epoch`` >= the last applied."""

    def __init__(self) -> None:
        self._current: Assignment | None = None

    @property
    def current(self) -> Assignment | None:
        """The last applied assignment."""
        return self._current

    def apply(self, new: Assignment) -> AssignmentDiff | None:
        """Apply ``new`` unless it is stale; return its diff, or ``None`` when it was dropped."""
        if self._current is not None and new.layout_epoch < self._current.layout_epoch:
            return None
        diff = diff_assignments(self._current, new)
        self._current = new
        return diff


class RegistrationPhase(enum.Enum):
    """Where a controller registration is in its life."""

    UNREGISTERED = "unregistered"
    REGISTERING = "registering"
    REGISTERED = "registered"
    DISCONNECTED = "disconnected"
    LEAVING = "leaving"
    CLOSED = "closed"


class RegistrationState:
    """The state of one consumer's registration with a controller (no I/O).

    The shell calls :meth:`registering` before sending ``CommandScalableTopicSubscribe``,
    :meth:`registered` / :meth:`assignment_pushed` with what arrives, :meth:`connection_lost` when
    the controller connection drops, and :meth:`leaving` / :meth:`closed` on close. Every method
    that delivers an assignment returns the diff to apply (or ``None`` for a stale one).
    """

    def __init__(self) -> None:
        self.phase = RegistrationPhase.UNREGISTERED
        self.tracker = AssignmentTracker()
        self.registrations = 0

    @property
    def needs_registration(self) -> bool:
        """Whether the shell should (re-)send a registration now."""
        return self.phase in (RegistrationPhase.UNREGISTERED, RegistrationPhase.DISCONNECTED)

    def registering(self) -> None:
        """A registration request is about to be sent.

        Raises:
            IllegalStateError: the registration is leaving or closed.
        """
        if self.phase in (RegistrationPhase.LEAVING, RegistrationPhase.CLOSED):
            raise IllegalStateError(f"cannot register while {self.phase.value}")
        self.phase = RegistrationPhase.REGISTERING

    def registered(self, assignment: Assignment) -> AssignmentDiff | None:
        """The controller answered the registration with ``assignment``."""
        if self.phase is not RegistrationPhase.REGISTERING:
            return None
        self.phase = RegistrationPhase.REGISTERED
        self.registrations += 1
        return self.tracker.apply(assignment)

    def registration_failed(self) -> None:
        """The registration request failed (the shell decides whether to retry)."""
        if self.phase is RegistrationPhase.REGISTERING:
            self.phase = RegistrationPhase.DISCONNECTED

    def assignment_pushed(self, assignment: Assignment) -> AssignmentDiff | None:
        """A pushed assignment update arrived."""
        if self.phase in (RegistrationPhase.LEAVING, RegistrationPhase.CLOSED):
            return None
        return self.tracker.apply(assignment)

    def connection_lost(self) -> None:
        """The controller connection dropped; the assignment is kept until the next one."""
        if self.phase in (RegistrationPhase.REGISTERING, RegistrationPhase.REGISTERED):
            self.phase = RegistrationPhase.DISCONNECTED

    def leaving(self) -> bool:
        """Close began; return whether a clean unsubscribe should be sent (registered now)."""
        was_registered = self.phase is RegistrationPhase.REGISTERED
        if self.phase is not RegistrationPhase.CLOSED:
            self.phase = RegistrationPhase.LEAVING
        return was_registered

    def closed(self) -> None:
        """The registration is over."""
        self.phase = RegistrationPhase.CLOSED


__all__ = [
    "AssignedSegment",
    "Assignment",
    "AssignmentDiff",
    "AssignmentTracker",
    "RegistrationPhase",
    "RegistrationState",
    "diff_assignments",
]
