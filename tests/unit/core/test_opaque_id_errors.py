"""Typed errors of the opaque ids' encoding: each names the offending value or byte offset.

An application that stores message ids and checkpoints externally learns at restore time what
is wrong with the bytes it kept; a caller passing a bad position learns which part is bad.
"""

from __future__ import annotations

import pytest

from braid.core.errors import InvalidInputError
from braid.core.message_id import (
    MAX_INT,
    MAX_LONG,
    MessageId,
    MessagePosition,
    message_id_at,
)
from braid.core.varint import CorruptEncoding, decode_uvarint, encode_uvarint


@pytest.mark.parametrize(
    ("position", "message"),
    [
        (
            MessagePosition(-1, 0, 0),
            rf"message id segment id must be an integer in 0\.\.{MAX_LONG}: -1",
        ),
        (
            MessagePosition(0, -1, 0),
            rf"message id ledger id must be an integer in 0\.\.{MAX_LONG}: -1",
        ),
        (MessagePosition(0, 0, MAX_LONG + 1), rf"message id entry id must be .*: {MAX_LONG + 1}"),
        (
            MessagePosition(0, 0, 0, -2),
            rf"message id batch index must be an integer in -1\.\.{MAX_INT}: -2",
        ),
        (
            MessagePosition(0, 0, 0, 0, -1),
            rf"message id batch size must be an integer in 0\.\.{MAX_INT}: -1",
        ),
        (MessagePosition(True, 0, 0), "message id segment id must be an integer .*: True"),
        (MessagePosition(0, "1", 0), "message id ledger id must be an integer .*: '1'"),  # type: ignore[arg-type]
    ],
)
def test_an_out_of_range_position_part_is_named_with_its_value(
    position: MessagePosition, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        message_id_at(position)


def test_the_largest_parts_are_accepted() -> None:
    mid = message_id_at(MessagePosition(MAX_LONG, MAX_LONG, MAX_LONG, MAX_INT, MAX_INT))
    assert MessageId.from_bytes(mid.to_bytes()) == mid


def test_a_varint_out_of_range_is_refused_with_its_value() -> None:
    with pytest.raises(InvalidInputError, match=r"in 0\.\.2\*\*64-1, got -1$"):
        encode_uvarint(-1, bytearray())
    with pytest.raises(InvalidInputError, match=rf"got {2**64}$"):
        encode_uvarint(2**64, bytearray())


def test_corrupt_varints_name_the_byte_offset() -> None:
    with pytest.raises(CorruptEncoding, match=r"varint truncated at byte 4$"):
        decode_uvarint(b"\x00\x00\x80\x80", 2)
    with pytest.raises(CorruptEncoding, match="varint ending at byte 4 is not canonical"):
        decode_uvarint(b"\x00\x00\x80\x00", 2)
    with pytest.raises(CorruptEncoding, match="varint at byte 2 is longer than 10 bytes"):
        decode_uvarint(b"\x00\x00" + b"\x80" * 10 + b"\x01", 2)


def test_a_truncated_message_id_names_where_it_ends() -> None:
    with pytest.raises(CorruptEncoding, match=r"varint truncated at byte 3$"):
        MessageId.from_bytes(b"\x01\x00\x05")


@pytest.mark.parametrize(("data", "type_name"), [("0100", "str"), (None, "NoneType"), (7, "int")])
def test_restoring_from_something_that_is_not_bytes_names_its_type(
    data: object, type_name: str
) -> None:
    with pytest.raises(
        InvalidInputError, match=f"MessageId.from_bytes needs bytes, got {type_name}$"
    ):
        MessageId.from_bytes(data)  # type: ignore[arg-type]
