"""The bookie wire protocol's frames and messages: golden bytes, round trips, bad frames."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from braid.storage.api import (
    BookieUnavailable,
    EntryTooLarge,
    InvalidEntryId,
    InvalidLedgerId,
    LedgerFenced,
    NoSuchEntry,
    NoSuchLedger,
    StorageClosed,
    StorageError,
    StorageIOError,
    StorageReadOnly,
)
from braid.storage.bookie import wire
from braid.storage.bookie.wire import BadFrame, FrameDecoder, bpb

pytestmark = pytest.mark.unit


def _crc32c_reference(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit: an independent check."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_an_add_request_frame_has_the_documented_bytes() -> None:
    frame = wire.add_request(5, 3, 7, b"abc", 6, 42, False)
    body = bytes.fromhex(
        "0a06080110011805"  # header {version: 1, operation: ADD_ENTRY, txn_id: 5}
        "a2060d"  # field 100 (add_request), 13 bytes
        "0803"
        "1007"
        "1806"
        "202a"  # ledger 3, entry 7, lac 6, length 42
        "2a03616263"  # body "abc"
    )
    assert frame == struct.pack(">II", len(body), _crc32c_reference(body)) + body


def test_the_recovery_flag_is_sent_only_for_recovery_adds() -> None:
    plain = wire.parse_request(wire.add_request(1, 1, 0, b"", -1, 0, False)[8:])
    recovery = wire.parse_request(wire.add_request(1, 1, 0, b"", -1, 0, True)[8:])
    assert not plain.add_request.HasField("flag")
    assert recovery.add_request.flag == bpb.AddRequest.RECOVERY_ADD


@given(
    txn=st.integers(0, 2**64 - 1),
    ledger=st.integers(0, 2**63 - 1),
    entry=st.integers(0, 2**62 - 1),
    lac=st.integers(-1, 2**62 - 1),
    length=st.integers(0, 2**62),
    data=st.binary(max_size=2048),
    recovery=st.booleans(),
)
def test_add_requests_round_trip_through_frames(
    txn: int, ledger: int, entry: int, lac: int, length: int, data: bytes, recovery: bool
) -> None:
    frame = wire.add_request(txn, ledger, entry, data, lac, length, recovery)
    (body,) = list(FrameDecoder().feed(frame))
    request = wire.parse_request(body)
    add = request.add_request
    assert request.header.txn_id == txn and request.header.operation == bpb.ADD_ENTRY
    assert (add.ledger_id, add.entry_id, add.last_add_confirmed, add.length, add.body) == (
        ledger,
        entry,
        lac,
        length,
        data,
    )
    assert add.HasField("flag") == recovery


@given(
    adds=st.lists(
        st.tuples(
            st.integers(0, 2**64 - 1),
            st.integers(0, 2**63 - 1),
            st.integers(0, 2**62 - 1),
            st.binary(max_size=200),
            st.integers(-1, 2**62 - 1),
            st.integers(0, 2**62),
            st.booleans(),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_a_batch_of_adds_round_trips_each_add_with_its_own_transaction(
    adds: list[wire.BatchedAdd],
) -> None:
    (body,) = FrameDecoder().feed(wire.add_entries_request(adds))
    request = wire.parse_request(body)
    assert request.header.operation == bpb.ADD_ENTRIES
    got = [
        (
            a.txn_id,
            a.ledger_id,
            a.entry_id,
            a.body,
            a.last_add_confirmed,
            a.length,
            a.HasField("flag"),
        )
        for a in request.add_entries_request.adds
    ]
    assert got == adds
    # The message object is reused: a second, smaller batch carries only its own adds.
    (again,) = FrameDecoder().feed(wire.add_entries_request(adds[:1]))
    assert len(wire.parse_request(again).add_entries_request.adds) == 1


@given(st.lists(st.integers(0, 2**64 - 1), max_size=300))
def test_a_batch_of_acknowledgements_names_each_transaction_in_order(txns: list[int]) -> None:
    (body,) = FrameDecoder().feed(wire.add_entries_response(txns))
    response = wire.parse_response(body)
    assert response.header.operation == bpb.ADD_ENTRIES and response.status == bpb.EOK
    assert list(response.add_entries_response.txn_ids) == txns


@given(frames=st.lists(st.binary(max_size=300), max_size=8), cuts=st.lists(st.integers(0, 3000)))
def test_the_decoder_yields_the_same_bodies_however_the_stream_is_split(
    frames: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(wire.encode_frame(f) for f in frames)
    points = sorted({c for c in cuts if c < len(stream)} | {0, len(stream)})
    decoder = FrameDecoder()
    got = [body for a, b in itertools.pairwise(points) for body in decoder.feed(stream[a:b])]
    assert got == frames
    assert decoder.buffered == 0


def test_a_frame_over_the_limit_is_refused_before_its_body_arrives() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(BadFrame, match="exceeds the limit"):
        list(decoder.feed(struct.pack(">II", 1025, 0)))


def test_a_frame_with_a_wrong_checksum_is_refused() -> None:
    frame = bytearray(wire.encode_frame(b"hello"))
    frame[-1] ^= 0x01
    with pytest.raises(BadFrame, match="CRC32C"):
        list(FrameDecoder().feed(bytes(frame)))


@given(garbage=st.binary(min_size=1, max_size=200))
def test_garbage_bodies_are_bad_frames_never_crashes(garbage: bytes) -> None:
    try:
        request = wire.parse_request(garbage)
    except BadFrame:
        return
    assert request.IsInitialized()


@pytest.mark.parametrize(
    "error",
    [
        NoSuchLedger("x"),
        NoSuchEntry("x"),
        StorageIOError("x"),
        LedgerFenced("x"),
        StorageReadOnly("x"),
        EntryTooLarge("x"),
        InvalidLedgerId("x"),
        InvalidEntryId("x"),
    ],
)
def test_every_storage_error_crosses_the_wire_as_its_own_type(error: StorageError) -> None:
    header = bpb.PacketHeader(version=bpb.VERSION_ONE, operation=bpb.READ_ENTRY, txn_id=9)
    response = wire.parse_response(wire.error_response(header, error)[8:])
    back = wire.error_for_status(response.status, response.error_message)
    assert type(back) is type(error) and str(back) == "x"
    assert response.header.txn_id == 9


def test_a_closing_bookie_is_unavailable_to_its_clients() -> None:
    header = bpb.PacketHeader(version=bpb.VERSION_ONE, operation=bpb.ADD_ENTRY, txn_id=1)
    response = wire.parse_response(wire.error_response(header, StorageClosed("closing"))[8:])
    assert response.status == bpb.ESHUTDOWN
    back = wire.error_for_status(response.status, response.error_message)
    assert type(back) is BookieUnavailable


def test_status_codes_keep_bookkeepers_numbers() -> None:
    assert (bpb.ENOLEDGER, bpb.ENOENTRY, bpb.EBADREQ, bpb.EIO, bpb.EFENCED, bpb.EREADONLY) == (
        402,
        403,
        404,
        501,
        504,
        505,
    )
