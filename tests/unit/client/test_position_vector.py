"""The Stream consumer's position vector: a cumulative ack advances every segment (C7)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from braid.core.position_vector import PositionVector


def test_cumulative_ack_advances_every_segment_to_what_was_delivered_before() -> None:
    v: PositionVector[str] = PositionVector()
    v.delivered(0, "a1")
    v.delivered(1, "b1")
    t = v.delivered(0, "a2")
    v.delivered(1, "b2")  # delivered after the acked message: not covered
    assert v.ack_up_to(t) == {0: "a2", 1: "b1"}
    assert v.pending(1) == 1 and v.pending(0) == 0


def test_acks_are_cumulative_and_never_go_back() -> None:
    v: PositionVector[int] = PositionVector()
    tokens = [v.delivered(i % 2, i) for i in range(6)]
    assert v.ack_up_to(tokens[3]) == {0: 2, 1: 3}
    assert v.ack_up_to(tokens[1]) == {}  # older ack: already covered
    assert v.ack_up_to(tokens[5]) == {0: 4, 1: 5}


def test_a_detached_segment_is_skipped() -> None:
    v: PositionVector[int] = PositionVector()
    v.delivered(7, 1)
    t = v.delivered(8, 1)
    v.forget_segment(7)
    assert v.ack_up_to(t) == {8: 1}


@given(st.lists(st.integers(0, 3), max_size=60), st.data())
def test_matches_a_literal_vector_snapshot(segments: list[int], data: st.DataObject) -> None:
    """Against the upstream client specification's definition: copy the whole vector at every
    delivery."""
    v: PositionVector[int] = PositionVector()
    latest: dict[int, int] = {}
    snapshots = []
    for i, sid in enumerate(segments):
        v.delivered(sid, i)
        latest[sid] = i
        snapshots.append(dict(latest))
    if not segments:
        return
    acked = data.draw(st.integers(0, len(segments) - 1))
    assert v.ack_up_to(acked) == snapshots[acked]


def test_take_up_to_lists_every_covered_position_for_individual_acks() -> None:
    v: PositionVector[str] = PositionVector()
    v.delivered(0, "a1")
    v.delivered(1, "b1")
    v.delivered(0, "a2")
    t = v.delivered(1, "b2")
    v.delivered(0, "a3")
    assert v.take_up_to(t) == {0: ["a1", "a2"], 1: ["b1", "b2"]}
    assert v.pending(0) == 1


def test_take_up_to_goes_past_a_segment_with_nothing_covered() -> None:
    v: PositionVector[str] = PositionVector()
    first = v.delivered(0, "a1")
    assert v.take_up_to(first) == {0: ["a1"]}  # segment 0 is known, with nothing pending
    t = v.delivered(1, "b1")
    v.delivered(0, "a2")  # after the token: not covered
    assert v.take_up_to(t) == {1: ["b1"]}
    assert (v.pending(0), v.pending(1)) == (1, 0)


def test_token_of_finds_a_pending_delivery() -> None:
    v: PositionVector[tuple[int, int]] = PositionVector()
    v.delivered(0, (1, 1))
    t = v.delivered(0, (1, 2))
    v.delivered(1, (9, 9))
    assert v.token_of(0, (1, 2)) == t
    assert v.token_of(0, (1, 3)) is None
    assert v.token_of(5, (1, 2)) is None
    v.ack_up_to(t)
    assert v.token_of(0, (1, 2)) is None


def test_forgetting_a_segment_drops_its_pending_deliveries_and_tolerates_unknown_ids() -> None:
    vector: PositionVector[int] = PositionVector()
    vector.delivered(1, 10)
    kept = vector.delivered(2, 20)
    vector.forget_segment(1)
    vector.forget_segment(99)  # never delivered: nothing to forget, no error
    assert vector.pending(1) == 0
    assert vector.token_of(1, 10) is None
    assert vector.token_of(2, 20) == kept
    assert vector.ack_up_to(kept) == {2: 20}
