"""LEB128 varints of the client encodings: canonical, bounded, strict."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.varint import MAX_UINT64, CorruptEncoding, decode_uvarint, encode_uvarint


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (MAX_UINT64, "ff" * 9 + "01"),
    ],
)
def test_golden(value: int, hex_bytes: str) -> None:
    out = bytearray()
    encode_uvarint(value, out)
    assert out.hex() == hex_bytes
    assert decode_uvarint(bytes(out), 0) == (value, len(out))


@given(st.integers(0, MAX_UINT64))
def test_round_trip(value: int) -> None:
    out = bytearray(b"x")
    encode_uvarint(value, out)
    assert decode_uvarint(bytes(out), 1) == (value, len(out))


@pytest.mark.parametrize("bad", ["", "80", "8000", "ff" * 10 + "01", "ff" * 9 + "02"])
def test_invalid(bad: str) -> None:
    with pytest.raises(CorruptEncoding):
        decode_uvarint(bytes.fromhex(bad), 0)


def test_out_of_range_values_cannot_be_encoded() -> None:
    for v in (-1, MAX_UINT64 + 1, True, 1.0):
        with pytest.raises(InvalidInputError):
            encode_uvarint(v, bytearray())  # type: ignore[arg-type]
