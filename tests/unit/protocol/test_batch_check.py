"""``check_batch``: the broker's walk of a batch payload agrees with the full decoder.

The scanner reads ``payload_size`` without protobuf, so it is held against an independent
implementation: :func:`decode_batch`, which parses every ``SingleMessageMetadata`` with protobuf.
For any bytes and any count >= 1, one raises exactly when the other does. The compiled walk
(``_batch_walk.c``) and the pure-Python one (:func:`check_batch_python`) must moreover agree on
every outcome to the letter of the error (ADR 0032).
"""

from __future__ import annotations

import shutil
import struct
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.protocol.batch import (
    NATIVE_BATCH_WALK,
    check_batch,
    check_batch_python,
    decode_batch,
    encode_batch,
)
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


def _outcome(check: object, data: bytes, count: int) -> str | None:
    try:
        check(data, count)  # type: ignore[operator]
    except CorruptPayload as exc:
        return str(exc)
    return None


def _agree(data: bytes, count: int) -> None:
    try:
        decode_batch(data, count)
        decoded = True
    except CorruptPayload:
        decoded = False
    checked = _outcome(check_batch, data, count)
    assert (checked is None) == decoded, (data, count, checked)
    # The compiled walk and the pure-Python one: the same outcome, the same words.
    assert _outcome(check_batch_python, data, count) == checked, (data, count)


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


def _can_compile() -> bool:
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(sysconfig.get_config_var("CC").split()[0] or "cc") is not None and (
        headers.exists()
    )


@pytest.mark.skipif(not _can_compile(), reason="no C compiler or Python headers here")
def test_an_install_that_can_compile_builds_the_compiled_walk() -> None:
    # setup.py compiles it wherever a C compiler and the Python headers are (CI has both); an
    # install without it is correct but ~40 x slower on batches, so it must not go missing quietly.
    assert NATIVE_BATCH_WALK


def test_the_walk_hands_odd_messages_back_and_resumes_after_them() -> None:
    # Compiled-walk shapes around ones it leaves to the Python walk (a key length in a longer
    # form than needed; an unknown field) and an error after them: the hand-over in both
    # directions keeps positions and indexes.
    odd = b"\x12\x82\x00ab"  # partition_key "ab", its length in two bytes
    unknown = b"\x18\x02\x78\x05"  # payload_size 2, then field 15 (varint) nobody writes
    parts = [
        _raw_message(b"\x18\x01", b"a"),
        _raw_message(odd + b"\x18\x03", b"abc"),
        _raw_message(b"\x18\x00\x40\x07", b""),
        _raw_message(unknown, b"xy"),
        _raw_message(b"\x12\x03key\x18\x02", b"zz"),
    ]
    data = b"".join(parts)
    check_batch(data, 5)
    _agree(data, 5)
    for count in (1, 2, 3, 4, 6, 7):
        _agree(data, count)
    for cut in range(len(data)):
        _agree(data[:cut], 5)
    # A lying count whose missing messages sit after a handed-over one.
    with pytest.raises(CorruptPayload, match="ends before message 5 of 6"):
        check_batch(data, 6)


@pytest.mark.skipif(not NATIVE_BATCH_WALK, reason="the compiled walk is not installed")
def test_the_compiled_walk_stops_where_it_cannot_decide() -> None:
    from braid.protocol._batch_walk import walk

    clean = _raw_message(b"\x18\x01", b"a")
    odd = _raw_message(b"\x78\x00\x18\x01", b"b")  # an unknown field: protobuf's call
    data = clean + clean + odd + clean
    assert walk(data, 4, 0, 0) == (2, 2 * len(clean))
    assert walk(data, 4, 3, len(data) - len(clean)) == (4, len(data))
    assert walk(memoryview(data), 2, 0, 0) == (2, 2 * len(clean))
    assert walk(data[:-1], 4, 3, len(data) - len(clean)) == (3, len(data) - len(clean))
    with pytest.raises(ValueError):
        walk(data, 4, 0, len(data) + 1)


_odd_fields = st.sampled_from(
    [
        b"",
        b"\x20\x01",  # deprecated_properties-era varints clients still write
        b"\x28\xff\xff\xff\xff\x0f",  # event_time, 5 bytes
        b"\x30\x01",  # null_value
        b"\x3a\x02ok",  # ordering_key
        b"\x48\x05",
        b"\x50\x01",
        b"\x78\x01",  # an unknown varint field
        b"\x18\xff\xff\xff\xff\x0f",  # payload_size -1 as an int32
        b"\x18\x80\x80\x80\x80\x10",  # payload_size 2**32: low 32 bits, 0
        b"\x12\x80\x01" + b"k" * 128,  # a key of two-byte length
        b"\x0a\x06\x0a\x01a\x12\x01b",  # one property
        b"\x0a\x03\x0a\x01a",  # a property without its required value
        b"\x12\x04ab",  # a key longer than what follows it: may run past the metadata
        b"\x40\xff",  # a varint that runs on into what follows
        b"\x12\x81\x00k",  # a key length in a longer form than needed
        b"\x0a\x02\x18\x01",  # a property holding an unknown varint field
        b"\x0a\x05\x0a\x09abc",  # a property whose key runs past it
        b"\x0a\x04\x0b\x01ab",  # a property with a field of an invalid wire type
        b"\x0a\x81\x01\x0a\x7f" + b"p" * 127,  # a property of 129 bytes
    ]
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(_odd_fields, st.integers(0, 300), _odd_fields, st.binary(max_size=300)),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 8),
    st.integers(-3, 3),
)
def test_hand_built_metadata_agrees_across_walks_and_the_decoder(
    messages: list[tuple[bytes, int, bytes, bytes]], count: int, trim: int
) -> None:
    # Metadata as raw fields around a payload_size that may lie about its payload's length.
    data = b"".join(
        _raw_message(before + b"\x18" + _varint(size) + after, payload)
        for before, size, after, payload in messages
    )
    if trim > 0:
        data = data[:-trim]
    elif trim < 0:
        data += b"\x00" * -trim
    _agree(data, count)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
