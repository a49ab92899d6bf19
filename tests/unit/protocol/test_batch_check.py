"""``check_batch``: the broker's walk of a batch payload agrees with the full decoder.

The scanner reads ``payload_size`` without protobuf, so it is held against an independent
implementation: :func:`decode_batch`, which parses every ``SingleMessageMetadata`` with protobuf.
For any bytes and any count >= 1, one raises exactly when the other does.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.protocol.batch import check_batch, decode_batch, encode_batch
from braid.protocol.errors import CorruptPayload
from braid.protocol.generated import PulsarApi_pb2 as pb


def _single(**fields: object) -> pb.SingleMessageMetadata:
    single = pb.SingleMessageMetadata()
    for name, value in fields.items():
        if name == "properties":
            for key, val in value:  # type: ignore[attr-defined]
                single.properties.add(key=key, value=val)
        else:
            setattr(single, name, value)
    return single


def _raw_message(metadata: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(metadata)) + metadata + payload


def test_batches_as_the_clients_build_them_pass() -> None:
    messages = [
        (_single(), b""),
        (_single(partition_key="key-1", sequence_id=7), b"v" * 200),
        (_single(properties=[("a", "b"), ("c", "d")], event_time=123), b"x" * 130),
        (_single(ordering_key=b"ok", null_value=True), b"y"),
    ]
    check_batch(encode_batch(messages), 4)


def test_a_count_the_payload_does_not_hold_is_refused() -> None:
    data = encode_batch([(_single(), b"a"), (_single(), b"b")])
    with pytest.raises(CorruptPayload, match="ends before message 2 of 3"):
        check_batch(data, 3)
    with pytest.raises(CorruptPayload, match="left after 1 batched messages"):
        check_batch(data, 1)
    with pytest.raises(CorruptPayload, match="at least one message"):
        check_batch(data, 0)


def test_the_last_payload_size_wins_as_in_protobuf() -> None:
    # payload_size 1, then 3: a parser keeping the first would accept a batch the clients split
    # differently (and read past its end).
    data = _raw_message(b"\x18\x01\x18\x03", b"abc")
    check_batch(data, 1)
    with pytest.raises(CorruptPayload):
        check_batch(_raw_message(b"\x18\x03\x18\x01", b"abc"), 1)


def test_payload_size_keeps_the_low_32_bits_of_its_varint() -> None:
    # 2**32 + 2 encoded as a varint: protobuf's int32 reads it as 2.
    varint = bytes([0x82, 0x80, 0x80, 0x80, 0x10])
    check_batch(_raw_message(b"\x18" + varint, b"ab"), 1)
    assert decode_batch(_raw_message(b"\x18" + varint, b"ab"), 1)[0].payload == b"ab"


@pytest.mark.parametrize("length", range(1, 12))
@pytest.mark.parametrize("tag", [0x18, 0x40])
def test_varints_of_every_length_agree_with_the_decoder(tag: int, length: int) -> None:
    # A varint of ``length`` bytes (values with high bits set, and one byte more than protobuf
    # allows at 11), in payload_size or in sequence_id.
    for last in (0x00, 0x01, 0x7F):
        varint = b"\xff" * (length - 1) + bytes([last])
        meta = (b"\x18\x01" + bytes([tag]) + varint) if tag != 0x18 else b"\x18" + varint
        for payload in (b"", b"a", b"ab"):
            for count in (1, 2):
                _agree(_raw_message(meta, payload), count)


def test_a_negative_or_missing_payload_size_is_refused() -> None:
    negative = _single(payload_size=-1).SerializeToString()
    with pytest.raises(CorruptPayload, match="no valid payload_size"):
        check_batch(_raw_message(negative, b""), 1)
    with pytest.raises(CorruptPayload, match="no valid payload_size"):
        check_batch(_raw_message(b"\x12\x01k", b""), 1)  # partition_key only


def test_metadata_that_is_not_protobuf_is_refused() -> None:
    with pytest.raises(CorruptPayload, match="does not parse"):
        check_batch(_raw_message(b"\x18", b""), 1)


def _agree(data: bytes, count: int) -> None:
    try:
        decode_batch(data, count)
        decoded = True
    except CorruptPayload:
        decoded = False
    try:
        check_batch(data, count)
        checked = True
    except CorruptPayload:
        checked = False
    assert checked == decoded, (data, count)


_metadata = st.builds(
    lambda key, seq, props, event_time: _single(
        **{
            k: v
            for k, v in (
                ("partition_key", key),
                ("sequence_id", seq),
                ("properties", props),
                ("event_time", event_time),
            )
            if v is not None
        }
    ),
    st.none() | st.text(max_size=40),
    st.none() | st.integers(0, 2**63 - 1),
    st.none() | st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3),
    st.none() | st.integers(0, 2**64 - 1),
)
_batches = st.lists(st.tuples(_metadata, st.binary(max_size=300)), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(_batches, st.integers(-2, 10))
def test_valid_batches_agree_with_the_decoder_for_any_count(
    messages: list[tuple[pb.SingleMessageMetadata, bytes]], count: int
) -> None:
    data = encode_batch(messages)
    if count >= 1:
        _agree(data, count)
    if count == len(messages):
        check_batch(data, count)


@settings(max_examples=500, deadline=None)
@given(_batches, st.data())
def test_corrupted_batches_agree_with_the_decoder(
    messages: list[tuple[pb.SingleMessageMetadata, bytes]], data: st.DataObject
) -> None:
    raw = bytearray(encode_batch(messages))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    _agree(bytes(raw), data.draw(st.integers(1, len(messages) + 1)))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(1, 3))
def test_arbitrary_bytes_agree_with_the_decoder(data: bytes, count: int) -> None:
    _agree(data, count)
