"""Property tests: random commands and bodies round-trip; any split of a stream decodes alike."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braid.protocol import (
    FrameDecoder,
    batch,
    commands,
    decode_message_body,
    encode_command,
    encode_message_body,
    encode_payload_command,
    pb,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
i64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
u32 = st.integers(min_value=0, max_value=(1 << 32) - 1)
text = st.text(max_size=40)
codes = st.sampled_from(list(pb.ServerError.values()))

simple_commands = st.one_of(
    st.builds(commands.ping),
    st.builds(commands.pong),
    st.builds(commands.success, u64),
    st.builds(commands.error, u64, codes, text),
    st.builds(commands.flow, u64, u32),
    st.builds(commands.producer_success, u64, text, i64),
    st.builds(commands.send_receipt, u64, u64, u64, u64),
    st.builds(commands.send_error, u64, u64, codes, text),
    st.builds(commands.lookup_response, u64, broker_service_url=text),
    st.builds(commands.partitioned_metadata_response, u64, u32),
    st.builds(commands.topics_of_namespace_response, u64, st.lists(text, max_size=5)),
    st.builds(commands.active_consumer_change, u64, st.booleans()),
    st.builds(commands.connected, text, st.integers(0, 21), st.integers(1, 1 << 30)),
    st.builds(commands.connect, text, st.integers(0, 21)),
)
payload_commands = st.one_of(
    st.builds(commands.send, u64, u64),
    st.builds(commands.message, u64, u64, u64, st.integers(0, 1000)),
)
metadata = st.builds(
    pb.MessageMetadata,
    producer_name=text,
    sequence_id=u64,
    publish_time=u64,
    partition_key=text,
)
bodies = st.builds(encode_message_body, metadata, st.binary(max_size=600))


@st.composite
def frame_streams(draw: st.DrawFn) -> tuple[list[tuple[pb.BaseCommand, bytes | None]], bytes]:
    items: list[tuple[pb.BaseCommand, bytes | None]] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            items.append((draw(simple_commands), None))
        else:
            items.append((draw(payload_commands), draw(bodies)))
    data = b"".join(
        encode_command(c) if b is None else encode_payload_command(c, b) for c, b in items
    )
    return items, data


@SETTINGS
@given(simple_commands)
def test_any_simple_command_round_trips(cmd: pb.BaseCommand) -> None:
    [frame] = FrameDecoder().feed(encode_command(cmd))
    assert frame.command == cmd
    assert commands.inner(frame.command) is not None


@SETTINGS
@given(payload_commands, bodies, st.booleans())
def test_any_payload_command_and_body_round_trip(
    cmd: pb.BaseCommand, body: bytes, checksum: bool
) -> None:
    [frame] = FrameDecoder().feed(encode_payload_command(cmd, body, checksum=checksum))
    assert (frame.command, frame.body) == (cmd, body)
    assert frame.checksum_valid is (True if checksum else None)
    meta, _payload = decode_message_body(body)
    assert meta.IsInitialized()


@SETTINGS
@given(frame_streams(), st.lists(st.integers(min_value=0), max_size=12))
def test_any_split_of_a_stream_yields_the_same_frames(
    stream: tuple[list[tuple[pb.BaseCommand, bytes | None]], bytes], cuts: list[int]
) -> None:
    items, data = stream
    points = sorted({c % (len(data) + 1) for c in cuts})
    decoder = FrameDecoder()
    frames = []
    start = 0
    for point in [*points, len(data)]:
        frames.extend(decoder.feed(data[start:point]))
        start = point
    assert [(f.command, f.body) for f in frames] == items
    assert all(f.checksum_valid in (None, True) for f in frames)
    assert decoder.buffered == 0


@SETTINGS
@given(
    st.lists(
        st.tuples(st.builds(pb.SingleMessageMetadata, partition_key=text), st.binary(max_size=200)),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD]),
)
def test_any_batch_round_trips_under_every_codec(
    messages: list[tuple[pb.SingleMessageMetadata, bytes]], codec: pb.CompressionType.ValueType
) -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    _metadata, read = batch.read_entry(batch.build_entry(meta, messages, compression=codec))
    assert [m.payload for m in read] == [p for _, p in messages]
    assert [m.single.partition_key for m in read if m.single] == [
        s.partition_key for s, _ in messages
    ]
