"""A topic producer's sequence ids (C5): one counter, explicit ids, the broker's resume point."""

from __future__ import annotations

from braid.client.pending import PendingMessage
from braid.client.sequence_ids import SequenceIds


def _record(explicit: int | None = None) -> PendingMessage:
    return PendingMessage(b"v", None, None, None, explicit, None, -1, 0, 0.0)


def _assigned(ids: SequenceIds, *explicit: int | None) -> list[int]:
    records = [_record(e) for e in explicit]
    for record in records:
        ids.assign(record)
    return [r.seq for r in records]


def test_messages_are_numbered_from_zero_and_an_explicit_id_moves_the_counter_past_it() -> None:
    ids = SequenceIds(None)
    assert _assigned(ids, None, None, 10, None, 3, None) == [0, 1, 10, 11, 3, 12]
    assert ids.last == -1  # nothing confirmed yet


def test_an_unseeded_counter_resumes_after_the_brokers_last_sequence_id() -> None:
    ids = SequenceIds(None)
    ids.resume_after(41)
    assert ids.last == 41
    assert _assigned(ids, None) == [42]
    ids.resume_after(7)  # another segment's broker knows less: nothing moves back
    assert ids.last == 41 and _assigned(ids, None) == [43]


def test_an_application_seed_wins_over_the_broker() -> None:
    ids = SequenceIds(99)
    assert ids.last == 99
    ids.resume_after(500)
    assert ids.last == 99 and _assigned(ids, None) == [100]


def test_last_is_the_highest_confirmed_id() -> None:
    ids = SequenceIds(None)
    ids.confirmed(5)
    ids.confirmed(3)  # a receipt of a lower id (another segment) does not lower it
    assert ids.last == 5
