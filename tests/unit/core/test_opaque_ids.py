"""The two opaque values applications hold - :class:`MessageId` and :class:`Checkpoint` -
refuse direct construction with a message that teaches the way in, order totally and
consistently with equality, and hash by value."""

from __future__ import annotations

import itertools
import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.checkpoint import Checkpoint, SegmentCursor, checkpoint_of
from braid.core.message_id import MessageId, MessagePosition, message_id_at, message_position

_positions = st.builds(
    MessagePosition,
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(-1, 2),
    st.integers(0, 3),
)
_ids = st.one_of(
    st.just(MessageId.earliest()), st.just(MessageId.latest()), _positions.map(message_id_at)
)


def test_a_message_id_cannot_be_constructed_and_the_error_says_how_to_get_one() -> None:
    with pytest.raises(TypeError) as refused:
        MessageId()
    assert str(refused.value) == (
        "MessageId is opaque: take one from a message or a send, or use "
        "MessageId.earliest(), MessageId.latest() or MessageId.from_bytes()"
    )


def test_a_checkpoint_cannot_be_constructed_and_the_error_says_how_to_get_one() -> None:
    with pytest.raises(TypeError) as refused:
        Checkpoint()
    assert str(refused.value) == (
        "Checkpoint is opaque: use Checkpoint.earliest(), Checkpoint.latest(), "
        "a consumer's checkpoint() or Checkpoint.from_bytes()"
    )


def _key(mid: MessageId) -> tuple[int, ...]:
    if mid.is_earliest:
        return (0,)
    if mid.is_latest:
        return (2,)
    position = message_position(mid)
    assert position is not None
    # The order the docs promise: earliest, then by segment, ledger, entry, batch index, latest.
    return (1, position.segment_id, position.ledger_id, position.entry_id, position.batch_index)


@given(_ids, _ids)
def test_message_ids_order_like_their_positions_and_agree_with_equality(
    a: MessageId, b: MessageId
) -> None:
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq):
        assert op(a, b) == op(_key(a), _key(b)), op
    if a == b:
        assert hash(a) == hash(b)


def test_an_id_compared_with_itself_is_equal_not_smaller() -> None:
    mid = message_id_at(MessagePosition(1, 2, 3))
    assert not mid < mid and mid <= mid and not mid > mid and mid >= mid


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge])
def test_ordering_a_message_id_against_another_type_is_a_type_error(
    op: object,
) -> None:
    mid = message_id_at(MessagePosition(0, 1, 1))
    with pytest.raises(TypeError):
        op(mid, (0, 1, 1))  # type: ignore[operator]
    assert mid != (0, 1, 1)


def test_distinct_message_ids_spread_over_hash_values() -> None:
    ids = [
        message_id_at(MessagePosition(s, ledger, entry))
        for s, ledger, entry in itertools.product(range(3), range(3), range(3))
    ]
    assert len({hash(mid) for mid in ids}) > len(ids) // 2
    assert len(set(ids)) == len(ids)


def test_checkpoints_hash_by_value() -> None:
    after = SegmentCursor.after(5, 7, -1)
    one = checkpoint_of(3, {1: after})
    same = Checkpoint.from_bytes(one.to_bytes())
    assert one == same and hash(one) == hash(same)
    others = [
        checkpoint_of(e, {s: SegmentCursor.after(5, e, -1)}) for e in range(4) for s in (1, 2)
    ]
    assert len({hash(cp) for cp in others}) > len(others) // 2


def test_the_sentinels_repr_as_the_call_that_makes_them() -> None:
    namespace = {"MessageId": MessageId, "Checkpoint": Checkpoint}
    for value, text in (
        (MessageId.earliest(), "MessageId.earliest()"),
        (MessageId.latest(), "MessageId.latest()"),
        (Checkpoint.earliest(), "Checkpoint.earliest()"),
        (Checkpoint.latest(), "Checkpoint.latest()"),
    ):
        assert repr(value) == text
        assert eval(text, namespace) == value  # the repr names the call that makes it
