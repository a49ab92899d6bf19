"""Assignment application by layout_epoch and the registration session state (C7,
``docs/protocol.md#consumer-assignment``)."""

from __future__ import annotations

import pytest

from braid.core.consumer_assignment import (
    AssignedSegment,
    Assignment,
    AssignmentTracker,
    RegistrationPhase,
    RegistrationState,
    diff_assignments,
)
from braid.core.errors import IllegalStateError, InvalidInputError
from braid.core.ranges import HashRange


def seg(sid: int, *buckets: tuple[int, int]) -> AssignedSegment:
    return AssignedSegment(
        sid,
        HashRange(0, 0xFFFF),
        f"segment://t/n/x/0000-ffff-{sid}",
        tuple(HashRange(a, b) for a, b in buckets),
    )


def paused(sid: int) -> AssignedSegment:
    return AssignedSegment(sid, HashRange(0, 0xFFFF), f"segment://t/n/x/0000-ffff-{sid}", (), True)


def test_a_segment_attached_ahead_resumes_when_it_becomes_readable() -> None:
    # ADR 0043: the controller lists the next segments paused; the consumer subscribes without
    # permits, and the hand-over is a resume (FLOW), not a detach and a new attach.
    ahead = diff_assignments(None, Assignment.of(3, [seg(0), paused(1), paused(2)]))
    assert [s.segment_id for s in ahead.attach] == [0, 1, 2]
    assert [s.paused for s in ahead.attach] == [False, True, True]
    handed = diff_assignments(
        Assignment.of(3, [seg(0), paused(1), paused(2)]), Assignment.of(3, [seg(1), seg(2)])
    )
    assert handed.detach == (0,) and handed.attach == () and handed.reattach == ()
    assert [s.segment_id for s in handed.resume] == [1, 2] and not handed.empty


def test_a_readable_segment_listed_paused_again_is_drained_and_reattached() -> None:
    # A seek rewound the subscription into the parent: what was delivered from the child must
    # be acknowledged before it waits again, so it is a reattach, never a silent pause.
    diff = diff_assignments(Assignment.of(3, [seg(1)]), Assignment.of(3, [seg(0), paused(1)]))
    assert [s.segment_id for s in diff.reattach] == [1] and diff.resume == ()
    assert diff.reattach[0].paused


def test_first_assignment_attaches_everything() -> None:
    diff = AssignmentTracker().apply(Assignment.of(3, [seg(0), seg(1)]))
    assert diff is not None
    assert [s.segment_id for s in diff.attach] == [0, 1] and not diff.detach


def test_stale_assignments_are_dropped_and_equal_epochs_apply() -> None:
    tracker = AssignmentTracker()
    tracker.apply(Assignment.of(5, [seg(0)]))
    assert tracker.apply(Assignment.of(4, [seg(1)])) is None
    assert tracker.current is not None and set(tracker.current.segments) == {0}
    # A rebalance without a layout change keeps the epoch: it must still apply (>=).
    diff = tracker.apply(Assignment.of(5, [seg(1)]))
    assert diff is not None
    assert [s.segment_id for s in diff.attach] == [1] and diff.detach == (0,)


def test_reapplying_the_same_assignment_changes_nothing() -> None:
    tracker = AssignmentTracker()
    tracker.apply(Assignment.of(1, [seg(0, (0, 0x7FFF), (0x8000, 0xFFFF))]))
    diff = tracker.apply(Assignment.of(1, [seg(0, (0, 0x7FFF), (0x8000, 0xFFFF))]))
    assert diff is not None and diff.empty


def test_mode_flip_between_exclusive_and_bucket_shared_reattaches() -> None:
    old = Assignment.of(1, [seg(0), seg(1, (0, 0xFFFF))])
    new = Assignment.of(2, [seg(0, (0, 0x7FFF), (0x8000, 0xFFFF)), seg(1), seg(2)])
    diff = diff_assignments(old, new)
    assert [s.segment_id for s in diff.reattach] == [0, 1]
    assert [s.segment_id for s in diff.attach] == [2]
    assert diff.reattach[0].shared and not diff.reattach[1].shared


def test_an_assignment_lists_each_segment_once() -> None:
    with pytest.raises(InvalidInputError):
        Assignment.of(1, [seg(0), seg(0)])
    with pytest.raises(InvalidInputError):
        Assignment(-1)


def test_registration_lifecycle_with_reconnect_and_clean_leave() -> None:
    state = RegistrationState()
    assert state.needs_registration
    state.registering()
    diff = state.registered(Assignment.of(1, [seg(0), seg(1)]))
    assert diff is not None and len(diff.attach) == 2
    assert state.phase is RegistrationPhase.REGISTERED and not state.needs_registration
    state.connection_lost()
    assert state.needs_registration and state.tracker.current is not None  # kept
    state.registering()
    # Within the grace period the controller returns the same assignment: nothing moves.
    again = state.registered(Assignment.of(1, [seg(0), seg(1)]))
    assert again is not None and again.empty
    assert state.registrations == 2
    pushed = state.assignment_pushed(Assignment.of(2, [seg(1)]))
    assert pushed is not None and pushed.detach == (0,)
    assert state.leaving() is True  # registered: send CommandScalableTopicUnsubscribe
    assert state.assignment_pushed(Assignment.of(3, [seg(2)])) is None
    state.closed()
    with pytest.raises(IllegalStateError, match=r"^cannot register while closed$"):
        state.registering()


def test_leaving_while_disconnected_sends_no_unsubscribe() -> None:
    state = RegistrationState()
    state.registering()
    state.registration_failed()
    assert state.needs_registration
    assert state.leaving() is False


def test_layout_epoch_zero_is_valid_and_a_negative_or_boolean_epoch_is_refused() -> None:
    assert Assignment(0).layout_epoch == 0
    for bad in (-1, True, 1.0):
        with pytest.raises(InvalidInputError) as refused:
            Assignment(bad)  # type: ignore[arg-type]
        assert str(refused.value) == f"assignment layout_epoch must be >= 0, got {bad!r}"


def test_an_assignment_names_a_segment_filed_under_the_wrong_id_or_given_twice() -> None:
    with pytest.raises(InvalidInputError, match=r"^assigned segment keyed 4 is 3$"):
        Assignment(1, {4: seg(3)})
    with pytest.raises(InvalidInputError, match=r"^segment 3 is assigned twice$"):
        Assignment.of(1, [seg(3), seg(3)])


def test_an_assignments_segments_cannot_be_changed_after_it_is_built() -> None:
    given_segments = {3: seg(3)}
    assignment = Assignment(1, given_segments)
    given_segments[4] = seg(4)  # the caller's dict is copied, not kept
    assert list(assignment.segments) == [3]
    with pytest.raises(TypeError):
        assignment.segments[5] = seg(5)  # type: ignore[index]
