"""Frames captured from the official C++-based client (PyPI pulsar-client 3.13, C++ v4.2.0).

The bytes were recorded from a real client talking to Braid's codec; decoding them pins wire
compatibility without a broker: the handshake it expects, and an LZ4-compressed batch SEND with
its CRC32C. The client-side builders of ``braid.protocol.commands`` must produce the very bytes
the official client sends (a builder checked only against its own decoder can be wrong both ways),
and FLOW is also checked against an independent hand-written protobuf encoder for any value.
"""

from __future__ import annotations

import struct

from hypothesis import example, given
from hypothesis import strategies as st

from braid.protocol import FrameDecoder, batch, commands, encode_command, pb
from braid.protocol.connection import CommandReceived, Connected, ServerConnection

# CONNECT: client_version "Pulsar-CPP-v4.2.0", protocol_version 20, auth_method_name "none",
# feature flags supports_auth_refresh + supports_broker_entry_metadata.
OFFICIAL_CONNECT = bytes.fromhex(
    "0000002900000025080212210a1150756c7361722d4350502d76342e322e3020142a046e6f6e65520408011001"
)
# SEND of a batch of three keyed messages ("value-0".."value-2", keys "key-0".."key-2"),
# LZ4-compressed, with magic 0x0e01 and CRC32C.
OFFICIAL_LZ4_BATCH_SEND = bytes.fromhex(
    "0000006f0000000a080632060800100018030e018c028b5a000000240a0c736372617463682d70726f64100018d9"
    "c7c2a6a13432056b65792d30400148425803f6070000000b12056b65792d301807400076616c75652d3016005231"
    "18074001160016311600c0321807400276616c75652d32"
)

# Captured from the same client subscribing to persistent://public/default/capture-flow with the
# default receiver queue (loopback capture of its connection to `braid standalone`):
# PARTITIONED_METADATA request 1; FLOW consumer 0, 1000 permits; CLOSE_CONSUMER consumer 0,
# request 1.
OFFICIAL_PARTITIONED_METADATA = bytes.fromhex(
    "00000035000000310815aa012c0a2870657273697374656e743a2f2f7075626c69632f64656661756c742f6361"
    "70747572652d666c6f771001"
)
OFFICIAL_FLOW = bytes.fromhex("0000000d00000009080b5a05080010e807")
OFFICIAL_CLOSE_CONSUMER = bytes.fromhex("0000000d00000009081082010408001001")
CAPTURE_TOPIC = "persistent://public/default/capture-flow"


def test_client_builders_produce_the_official_clients_bytes() -> None:
    flags = pb.FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True)
    assert encode_command(commands.connect("Pulsar-CPP-v4.2.0", 20, feature_flags=flags)) == (
        OFFICIAL_CONNECT
    )
    assert encode_command(commands.partitioned_metadata(CAPTURE_TOPIC, 1)) == (
        OFFICIAL_PARTITIONED_METADATA
    )
    assert encode_command(commands.flow(0, 1000)) == OFFICIAL_FLOW
    assert encode_command(commands.close_consumer(0, 1)) == OFFICIAL_CLOSE_CONSUMER


def test_official_flow_grants_exactly_its_permits() -> None:
    [frame] = FrameDecoder().feed(OFFICIAL_FLOW)
    assert frame.command.type == pb.BaseCommand.FLOW
    assert (frame.command.flow.consumer_id, frame.command.flow.messagePermits) == (0, 1000)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | 0x80 if value else low)
        if not value:
            return bytes(out)


def _flow_frame_by_hand(consumer_id: int, permits: int) -> bytes:
    """FLOW per the protobuf wire format, written without protobuf or Braid's codec.

    BaseCommand{type(1)=FLOW(11), flow(11)=CommandFlow{consumer_id(1), messagePermits(2)}},
    framed as [totalSize][commandSize][command].
    """
    inner = b"\x08" + _varint(consumer_id) + b"\x10" + _varint(permits)
    command = b"\x08\x0b" + b"\x5a" + _varint(len(inner)) + inner
    return struct.pack(">II", len(command) + 4, len(command)) + command


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1))
@example(0, 1000)  # the official client's first FLOW
@example(0, 0)
@example(1, 1)
@example(2**64 - 1, 2**32 - 1)
def test_flow_matches_an_independent_encoder_for_any_permits(
    consumer_id: int, permits: int
) -> None:
    assert encode_command(commands.flow(consumer_id, permits)) == _flow_frame_by_hand(
        consumer_id, permits
    )


def test_official_client_connect_is_answered_with_connected() -> None:
    server = ServerConnection("Braid 0.1.0", created_at=0.0)
    [event] = server.receive_data(OFFICIAL_CONNECT, 0.0)
    assert isinstance(event, Connected)
    assert event.client_version == "Pulsar-CPP-v4.2.0"
    assert event.protocol_version == 20
    assert server.peer_supports_broker_entry_metadata
    [reply] = FrameDecoder().feed(server.data_to_send())
    assert reply.command.type == pb.BaseCommand.CONNECTED
    assert reply.command.connected.server_version == "Braid 0.1.0"
    assert reply.command.connected.protocol_version == 20
    assert reply.command.connected.max_message_size == 5 * 1024 * 1024


def test_official_client_lz4_batch_send_decodes_with_a_valid_checksum() -> None:
    server = ServerConnection("Braid 0.1.0", created_at=0.0)
    server.receive_data(OFFICIAL_CONNECT, 0.0)
    [event] = server.receive_data(OFFICIAL_LZ4_BATCH_SEND, 1.0)
    assert isinstance(event, CommandReceived)
    assert event.command.type == pb.BaseCommand.SEND
    assert event.command.send.num_messages == 3
    assert event.checksum_valid is True
    assert event.body is not None
    metadata, messages = batch.read_entry(event.body)
    assert metadata.compression == pb.LZ4
    assert metadata.num_messages_in_batch == 3
    assert batch.messages_in_entry(metadata) == 3
    assert [m.payload for m in messages] == [b"value-0", b"value-1", b"value-2"]
    assert [m.single.partition_key for m in messages if m.single] == ["key-0", "key-1", "key-2"]


def test_replaying_the_stored_body_reproduces_the_clients_checksum() -> None:
    [frame] = FrameDecoder().feed(OFFICIAL_LZ4_BATCH_SEND)
    assert frame.body is not None
    server = ServerConnection("Braid", created_at=0.0)
    server.receive_data(OFFICIAL_CONNECT, 0.0)
    server.data_to_send()
    server.send(commands.message(1, 7, 0), frame.body)
    out = server.data_to_send()
    [dispatched] = FrameDecoder().feed(out)
    assert dispatched.body == frame.body
    assert dispatched.checksum_valid is True
    # The magic + CRC32C the broker computes are the very bytes the client sent.
    client_magic_and_crc = OFFICIAL_LZ4_BATCH_SEND[18:24]
    assert client_magic_and_crc[:2] == b"\x0e\x01"
    assert out.endswith(client_magic_and_crc + frame.body)
