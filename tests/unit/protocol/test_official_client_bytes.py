"""Frames captured from the official C++-based client (PyPI pulsar-client 3.13, C++ v4.2.0).

The bytes were recorded from a real client talking to Braid's codec; decoding them pins wire
compatibility without a broker: the handshake it expects, and an LZ4-compressed batch SEND with
its CRC32C.
"""

from __future__ import annotations

from braid.protocol import FrameDecoder, batch, commands, pb
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
