"""Fuzzing: random, truncated and mutated bytes only ever produce frames, events or typed errors.

Hypothesis drives the inputs. Any exception other than a ProtocolError (from the codec) or any
exception at all (from the connection machine, which turns bad input into events) fails the test.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braid.protocol import (
    FrameDecoder,
    ProtocolError,
    batch,
    commands,
    decode_message_body,
    encode_command,
    encode_message_body,
    encode_payload_command,
    pb,
)
from braid.protocol.connection import (
    ClientConnection,
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectionState,
    KeepAliveTimeout,
    ProtocolViolation,
    ServerConnection,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid_frames() -> list[bytes]:
    meta = pb.MessageMetadata(producer_name="fuzz", sequence_id=3, publish_time=4)
    body = encode_message_body(meta, b"payload-bytes" * 4)
    return [
        encode_command(commands.connect("fuzz-client", 21)),
        encode_command(commands.producer("persistent://public/default/t", 1, 1)),
        encode_payload_command(commands.send(1, 3), body),
        encode_command(commands.ping()),
        encode_command(commands.flow(2, 100)),
    ]


FRAMES = _valid_frames()
VALID = b"".join(FRAMES)
BOUNDARIES = [sum(len(f) for f in FRAMES[: i + 1]) for i in range(len(FRAMES))]
EVENT_TYPES = (Connected, CommandReceived, ProtocolViolation, KeepAliveTimeout, ConnectionClosed)


def _decode_all(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame_size=64 * 1024)
    try:
        for i in range(0, len(data), chunk):
            for frame in decoder.feed(data[i : i + chunk]):
                assert frame.command.IsInitialized()
    except ProtocolError:
        pass


@SETTINGS
@given(st.binary(max_size=2048), st.integers(1, 64))
def test_random_bytes_give_frames_or_protocol_errors(data: bytes, chunk: int) -> None:
    _decode_all(data, chunk)


@SETTINGS
@given(st.integers(0, len(VALID)))
def test_truncated_streams_decode_a_prefix_and_buffer_the_rest(cut: int) -> None:
    decoder = FrameDecoder()
    frames = decoder.feed(VALID[:cut])
    complete = [b for b in BOUNDARIES if b <= cut]
    assert len(frames) == len(complete)
    assert decoder.buffered == cut - (complete[-1] if complete else 0)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6))
def test_mutated_streams_give_frames_or_protocol_errors(mutations: list[tuple[int, int]]) -> None:
    data = bytearray(VALID)
    for index, value in mutations:
        data[index] = value
    _decode_all(bytes(data), 17)


@SETTINGS
@given(st.binary(max_size=512))
def test_random_message_bodies_give_metadata_or_protocol_errors(body: bytes) -> None:
    try:
        decode_message_body(body)
    except ProtocolError:
        pass
    try:
        batch.read_entry(body)
    except ProtocolError:
        pass


@SETTINGS
@given(
    st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD]),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_compressed_batches_give_messages_or_protocol_errors(
    codec: pb.CompressionType.ValueType, mutations: list[tuple[int, int]]
) -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    singles = [(pb.SingleMessageMetadata(partition_key=str(i)), b"v" * i) for i in range(5)]
    data = bytearray(batch.build_entry(meta, singles, compression=codec))
    for index, value in mutations:
        data[index % len(data)] = value
    try:
        batch.read_entry(bytes(data))
    except ProtocolError:
        pass


@SETTINGS
@given(st.booleans(), st.lists(st.binary(max_size=300), max_size=6))
def test_server_connection_never_raises_on_any_input(
    handshake_first: bool, chunks: list[bytes]
) -> None:
    server = ServerConnection("braid-fuzz", max_message_size=4096, created_at=0.0)
    now = 0.0
    if handshake_first:
        server.receive_data(encode_command(commands.connect("c", 21)), now)
    for chunk in chunks:
        now += 1.0
        for event in server.receive_data(chunk, now):
            assert isinstance(event, EVENT_TYPES)
            if isinstance(event, ProtocolViolation | ConnectionClosed):
                assert server.state is ConnectionState.CLOSED
        server.handle_timer(now)
        server.data_to_send()
    server.handle_timer(now + 1000.0)
    # Whatever happened, a long silence leaves the machine closed.
    assert server.state is ConnectionState.CLOSED


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=4))
def test_server_connection_survives_mutated_client_streams(
    mutations: list[tuple[int, int]],
) -> None:
    data = bytearray(VALID)
    for index, value in mutations:
        data[index] = value
    server = ServerConnection("braid-fuzz", created_at=0.0)
    events = server.receive_data(bytes(data), 1.0)
    assert all(isinstance(e, EVENT_TYPES) for e in events)
    violated = any(isinstance(e, ProtocolViolation) for e in events)
    assert violated == (server.state is ConnectionState.CLOSED)


@SETTINGS
@given(st.binary(max_size=400))
def test_client_connection_never_raises_on_any_input(data: bytes) -> None:
    client = ClientConnection("braid-fuzz", created_at=0.0)
    client.receive_data(data, 1.0)
    client.handle_timer(100.0)


def test_a_garbage_connection_closes_while_another_keeps_working() -> None:
    good = ServerConnection("braid", created_at=0.0)
    bad = ServerConnection("braid", created_at=0.0)
    good.receive_data(encode_command(commands.connect("good", 21)), 0.0)
    bad.receive_data(encode_command(commands.connect("bad", 21)), 0.0)
    [violation] = bad.receive_data(b"\x00\x00\x00\x05garbage!", 1.0)
    assert isinstance(violation, ProtocolViolation)
    assert bad.state is ConnectionState.CLOSED
    [event] = good.receive_data(encode_command(commands.flow(1, 5)), 1.0)
    assert isinstance(event, CommandReceived)
    assert good.state is ConnectionState.CONNECTED
