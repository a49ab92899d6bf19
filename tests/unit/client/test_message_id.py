"""MessageId: opaque, totally ordered within a topic, versioned bytes (C10)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.message_id import (
    MessageId,
    MessagePosition,
    message_id_at,
    message_position,
)
from braid.core.varint import CorruptEncoding

LONG = st.integers(0, 2**63 - 1)
positions = st.builds(
    MessagePosition, LONG, LONG, LONG, st.integers(-1, 2**31 - 1), st.integers(0, 2**31 - 1)
)


def _id(seg: int, ledger: int, entry: int, batch: int = -1, size: int = 0) -> MessageId:
    return message_id_at(MessagePosition(seg, ledger, entry, batch, size))


# Golden bytes of format version 1: changing them breaks ids applications have stored.
GOLDEN = [
    (MessageId.earliest(), "0101"),
    (MessageId.latest(), "0102"),
    (_id(0, 7, 3), "0100000703" + "0000"),
    (_id(5, 300, 0, 2, 10), "010005ac020003" + "0a"),
    (
        _id(2**63 - 1, 1, 1, 2**31 - 1, 2**31 - 1),
        "0100" + "ffffffffffffffff7f" + "0101" + "8080808008" + "ffffffff07",
    ),
]


@pytest.mark.parametrize(("mid", "hex_bytes"), GOLDEN)
def test_golden_encoding(mid: MessageId, hex_bytes: str) -> None:
    assert mid.to_bytes().hex() == hex_bytes
    assert MessageId.from_bytes(bytes.fromhex(hex_bytes)) == mid


@given(positions)
def test_round_trip(pos: MessagePosition) -> None:
    mid = message_id_at(pos)
    back = MessageId.from_bytes(mid.to_bytes())
    assert back == mid
    assert message_position(back) == pos
    assert pickle.loads(pickle.dumps(mid)) == mid


@given(st.binary(max_size=40))
def test_decoding_arbitrary_bytes_yields_an_id_or_a_typed_error(data: bytes) -> None:
    try:
        mid = MessageId.from_bytes(data)
    except CorruptEncoding:
        return
    assert mid.to_bytes() == data  # one encoding per value: anything accepted is canonical


def test_order_is_total_and_sentinels_bound_everything() -> None:
    ids = [
        _id(0, 5, 9),
        _id(0, 6, 0),
        _id(0, 6, 0, 0),
        _id(0, 6, 0, 1),
        _id(1, 0, 0),
        _id(3, 0, 0),
    ]
    assert sorted(reversed(ids)) == ids
    assert all(MessageId.earliest() < m < MessageId.latest() for m in ids)
    assert MessageId.earliest() <= MessageId.earliest() and MessageId.latest() >= ids[0]


def test_child_segment_ids_order_after_parents() -> None:
    # A split's children get larger ids; a key's later messages land there, so they sort after.
    parent_msg, child_msg = _id(0, 90, 900), _id(2, 1, 0)
    assert parent_msg < child_msg


def test_batch_size_is_not_part_of_identity() -> None:
    assert _id(0, 1, 2, 3, 10) == _id(0, 1, 2, 3, 0)
    assert hash(_id(0, 1, 2, 3, 10)) == hash(_id(0, 1, 2, 3, 0))


def test_ids_are_opaque() -> None:
    with pytest.raises(TypeError):
        MessageId()
    mid = _id(1, 2, 3)
    assert "ledger" not in repr(mid) and "segment" not in repr(mid)
    assert not [a for a in dir(mid) if not a.startswith("_") and "ledger" in a]
    assert message_position(MessageId.latest()) is None


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "01",
        "0201",
        "0103",
        "010100",
        "0100000703",  # truncated
        "01000007030000ff",  # trailing byte
        "0100" + "ff" * 10 + "01" + "00000000",  # varint too long
        "01008000000000",  # non-canonical varint
    ],
)
def test_corrupt_bytes_are_refused(bad: str) -> None:
    with pytest.raises(CorruptEncoding):
        MessageId.from_bytes(bytes.fromhex(bad))


def test_out_of_range_parts_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        _id(-1, 0, 0)
    with pytest.raises(InvalidInputError):
        _id(0, 0, 0, -2)
    with pytest.raises(CorruptEncoding) as caught:
        MessageId.from_bytes(bytes.fromhex("0100" + "ffffffffffffffffff01" + "00000000"))
    assert str(caught.value) == (
        "message id out of range: message id segment id must be an integer in "
        "0..9223372036854775807: 18446744073709551615"
    )


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("01", "a serialized MessageId has at least 2 bytes, got 1"),
        ("0201", "unknown MessageId format version 2 (this client reads 1)"),
        ("0103", "unknown message id kind 3"),
        ("010100", "1 unexpected bytes after a sentinel MessageId"),
        ("01000007030000ffff", "2 unexpected bytes after a message id"),
    ],
)
def test_a_refused_encoding_says_what_is_wrong(bad: str, reason: str) -> None:
    with pytest.raises(CorruptEncoding) as caught:
        MessageId.from_bytes(bytes.fromhex(bad))
    assert str(caught.value) == reason
