"""Connection state machines: handshake, keep-alive, payloads, violations, both ends together."""

from __future__ import annotations

import struct

import pytest

from braid.protocol import (
    FRAME_SIZE_PADDING,
    ConnectionClosedError,
    ConnectionStateError,
    FrameDecoder,
    commands,
    encode_command,
    encode_message_body,
    encode_payload_command,
    pb,
)
from braid.protocol.connection import (
    MAX_CONNECT_FRAME_SIZE,
    MAX_PROTOCOL_VERSION,
    SEPARATE_BODY_SIZE,
    ClientConnection,
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectionState,
    HandshakeTimeout,
    KeepAliveTimeout,
    ProtocolViolation,
    ServerConnected,
    ServerConnection,
    auth_method,
)

SERVER_VERSION = "Braid 0.1.0"


def _decode(data: bytes) -> list[pb.BaseCommand]:
    return [f.command for f in FrameDecoder(1 << 30).feed(data)]


def _official_client_connect(protocol_version: int) -> bytes:
    """CONNECT as the C++-based pulsar-client sends it with default (no) authentication."""
    connect = pb.CommandConnect(
        client_version="Pulsar-CPP-v3.7.0",
        protocol_version=protocol_version,
        auth_method_name="none",
        auth_data=b"",
    )
    connect.feature_flags.supports_auth_refresh = True
    connect.feature_flags.supports_broker_entry_metadata = True
    connect.feature_flags.supports_partial_producer = True
    raw = pb.BaseCommand(type=pb.BaseCommand.CONNECT, connect=connect).SerializeToString()
    return struct.pack(">II", 4 + len(raw), len(raw)) + raw


def _connected_server(now: float = 0.0, **kwargs: object) -> ServerConnection:
    server = ServerConnection(SERVER_VERSION, created_at=now, **kwargs)  # type: ignore[arg-type]
    events = server.receive_data(_official_client_connect(20), now)
    assert isinstance(events[0], Connected)
    server.data_to_send()
    return server


def _body(payload: bytes = b"payload") -> bytes:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    return encode_message_body(meta, payload)


# --- handshake ------------------------------------------------------------------------------


@pytest.mark.parametrize("client_version", [19, 20, 21, 22, 30])
def test_official_client_handshake_gets_connected_with_min_version(client_version: int) -> None:
    server = ServerConnection(SERVER_VERSION, created_at=0.0)
    [event] = server.receive_data(_official_client_connect(client_version), 0.0)
    expected = min(client_version, MAX_PROTOCOL_VERSION)
    assert event == Connected("Pulsar-CPP-v3.7.0", expected, server.peer_feature_flags)
    [reply] = _decode(server.data_to_send())
    assert reply.type == pb.BaseCommand.CONNECTED
    assert reply.connected.server_version == SERVER_VERSION
    assert reply.connected.protocol_version == expected
    assert reply.connected.max_message_size == 5 * 1024 * 1024
    assert server.state is ConnectionState.CONNECTED
    assert server.protocol_version == expected
    assert server.peer_supports_broker_entry_metadata is True
    assert server.peer_supports_scalable_topics is False


def test_connected_carries_the_brokers_feature_flags_and_limit() -> None:
    flags = pb.FeatureFlags(supports_scalable_topics=True)
    server = ServerConnection(SERVER_VERSION, max_message_size=1024, feature_flags=flags)
    server.receive_data(_official_client_connect(21), 0.0)
    [reply] = _decode(server.data_to_send())
    assert reply.connected.feature_flags.supports_scalable_topics is True
    assert reply.connected.max_message_size == 1024
    assert server.max_frame_size == 1024 + FRAME_SIZE_PADDING


def test_old_client_without_version_negotiates_zero() -> None:
    server = ServerConnection(SERVER_VERSION)
    [event] = server.receive_data(encode_command(commands.connect("old", 0)), 0.0)
    assert isinstance(event, Connected)
    assert event.protocol_version == 0


def test_anything_before_connect_is_a_violation_and_closes() -> None:
    server = ServerConnection(SERVER_VERSION)
    [event] = server.receive_data(encode_command(commands.lookup("persistent://a/b/c", 1)), 0.0)
    assert isinstance(event, ProtocolViolation)
    assert "expected CONNECT first, got LOOKUP" in event.reason
    assert server.state is ConnectionState.CLOSED
    assert server.data_to_send() == b""
    assert server.receive_data(_official_client_connect(21), 1.0) == []


def _refuse_tokens(connect: pb.CommandConnect) -> str | None:
    return "bad token" if connect.auth_method_name == "token" else None


def test_refused_credentials_get_authentication_error_without_the_reason() -> None:
    server = ServerConnection(SERVER_VERSION, authenticate=_refuse_tokens)
    data = encode_command(commands.connect("c", 21, auth_method_name="token", auth_data=b"x"))
    [event] = server.receive_data(data, 0.0)
    assert isinstance(event, ProtocolViolation)
    assert "bad token" in event.reason
    [reply] = _decode(server.data_to_send())
    assert reply.type == pb.BaseCommand.ERROR
    assert reply.error.error == pb.AuthenticationError
    assert reply.error.request_id == commands.NO_REQUEST_ID
    assert reply.error.message == "Unable to authenticate"


def test_without_an_authenticator_any_credentials_are_accepted_as_pulsar_does() -> None:
    server = ServerConnection(SERVER_VERSION)
    data = encode_command(commands.connect("c", 21, auth_method_name="token", auth_data=b"x"))
    [event] = server.receive_data(data, 0.0)
    assert isinstance(event, Connected)
    assert server.state is ConnectionState.CONNECTED


def test_legacy_auth_method_enum_is_named_as_pulsar_names_it() -> None:
    connect = pb.CommandConnect(client_version="c", auth_method=pb.AuthMethodYcaV1)
    assert auth_method(connect) == "ycav1"
    assert auth_method(pb.CommandConnect(client_version="c")) == "none"


def test_second_connect_is_a_violation() -> None:
    server = _connected_server()
    [event] = server.receive_data(_official_client_connect(21), 1.0)
    assert isinstance(event, ProtocolViolation)
    assert server.closed


# --- commands and payloads ------------------------------------------------------------------


def test_ping_is_answered_with_pong_without_an_event() -> None:
    server = _connected_server()
    assert server.receive_data(encode_command(commands.ping()), 1.0) == []
    [reply] = _decode(server.data_to_send())
    assert reply.type == pb.BaseCommand.PONG


def test_send_with_body_is_reported_with_a_valid_checksum() -> None:
    server = _connected_server()
    body = _body()
    [event] = server.receive_data(encode_payload_command(commands.send(1, 5), body), 1.0)
    assert event == CommandReceived(commands.send(1, 5), body, True)


def test_bad_checksum_is_reported_per_command_and_keeps_the_connection() -> None:
    server = _connected_server()
    data = bytearray(encode_payload_command(commands.send(1, 5), _body()))
    data[-2] ^= 0xFF
    [event] = server.receive_data(bytes(data), 1.0)
    assert isinstance(event, CommandReceived)
    assert event.checksum_valid is False
    assert server.state is ConnectionState.CONNECTED
    [follow_up] = server.receive_data(encode_command(commands.flow(1, 10)), 2.0)
    assert isinstance(follow_up, CommandReceived)


def test_command_whose_type_does_not_match_its_body_is_a_violation() -> None:
    server = _connected_server()
    raw = pb.BaseCommand(type=pb.BaseCommand.SEND, ping=pb.CommandPing()).SerializeToString()
    [event] = server.receive_data(struct.pack(">II", 4 + len(raw), len(raw)) + raw, 1.0)
    assert isinstance(event, ProtocolViolation)
    assert "SEND command arrived without its body" in event.reason


def test_garbage_is_a_violation_and_later_bytes_are_ignored() -> None:
    server = _connected_server()
    [event] = server.receive_data(b"\x00\x00\x00\x06\x00\x00\x00\x02\xff\xff", 1.0)
    assert isinstance(event, ProtocolViolation)
    assert server.closed
    assert server.receive_data(encode_command(commands.ping()), 2.0) == []


def test_oversize_frame_is_a_violation_naming_the_limit() -> None:
    server = _connected_server(max_message_size=1000)
    [event] = server.receive_data(struct.pack(">I", 1000 + FRAME_SIZE_PADDING + 1), 1.0)
    assert isinstance(event, ProtocolViolation)
    assert "exceeds the limit" in event.reason


def test_message_of_exactly_max_message_size_fits() -> None:
    server = _connected_server(max_message_size=4096)
    body = _body(b"x" * (4096 - len(_body(b""))))
    assert len(body) == 4096
    [event] = server.receive_data(encode_payload_command(commands.send(1, 1), body), 1.0)
    assert isinstance(event, CommandReceived)


def test_end_of_stream_reports_connection_closed() -> None:
    server = _connected_server()
    assert server.receive_data(b"", 1.0) == [ConnectionClosed()]
    assert server.closed


def test_payload_send_checksums_only_from_version_six() -> None:
    body = _body()
    for version, with_crc in [(5, False), (6, True), (21, True)]:
        server = ServerConnection(SERVER_VERSION)
        server.receive_data(encode_command(commands.connect("c", version)), 0.0)
        server.data_to_send()
        server.send(commands.message(1, 2, 3), body)
        [frame] = FrameDecoder().feed(server.data_to_send())
        assert frame.body == body
        assert frame.checksum_valid is (True if with_crc else None)


def test_broker_entry_metadata_goes_only_to_peers_that_support_it() -> None:
    bem = pb.BrokerEntryMetadata(broker_timestamp=5)
    supporting = _connected_server()  # the official client advertises support
    supporting.send(commands.message(1, 2, 3), _body(), broker_entry_metadata=bem)
    [frame] = FrameDecoder().feed(supporting.data_to_send())
    assert frame.broker_entry_metadata == bem
    plain = ServerConnection(SERVER_VERSION)
    plain.receive_data(encode_command(commands.connect("c", 21)), 0.0)
    plain.data_to_send()
    plain.send(commands.message(1, 2, 3), _body(), broker_entry_metadata=bem)
    [frame] = FrameDecoder().feed(plain.data_to_send())
    assert frame.broker_entry_metadata is None


def test_large_bodies_are_queued_as_their_own_buffers_in_order() -> None:
    """A body of SEPARATE_BODY_SIZE bytes or more reaches ``buffers_to_send`` as the very object
    passed to ``send`` (no copy), between the frames queued around it, and the bytes are exactly
    the frames ``encode_payload_command`` builds - an independent encoder of the same frames."""
    bem = pb.BrokerEntryMetadata(broker_timestamp=5)
    small, large, edge = _body(b"s"), _body(b"L" * 60_000), _body(b"e" * SEPARATE_BODY_SIZE)
    edge = edge[:SEPARATE_BODY_SIZE]  # exactly the threshold: still its own buffer
    below = _body(b"b" * 100)
    server = _connected_server()
    server.send(commands.message(1, 2, 3), small)
    server.send(commands.message(1, 2, 4), large, broker_entry_metadata=bem)
    server.send(commands.flow(9, 10))
    server.send(commands.message(1, 2, 5), edge)
    server.send(commands.message(1, 2, 6), below)
    expected = b"".join(
        [
            encode_payload_command(commands.message(1, 2, 3), small),
            encode_payload_command(commands.message(1, 2, 4), large, broker_entry_metadata=bem),
            encode_command(commands.flow(9, 10)),
            encode_payload_command(commands.message(1, 2, 5), edge),
            encode_payload_command(commands.message(1, 2, 6), below),
        ]
    )
    buffers = server.buffers_to_send()
    assert b"".join(buffers) == expected
    assert sum(b is large for b in buffers) == 1
    assert sum(b is edge for b in buffers) == 1
    assert not any(b is small or b is below for b in buffers)
    assert server.buffers_to_send() == []  # taken
    assert server.data_to_send() == b""


def test_a_large_mutable_body_is_copied_when_queued() -> None:
    """Only an immutable body may wait in the queue uncopied: a bytearray changed after ``send``
    must not change what is written."""
    body = bytearray(_body(b"M" * 10_000))
    expected = encode_payload_command(commands.message(1, 2, 3), bytes(body))
    server = _connected_server()
    server.send(commands.message(1, 2, 3), body)  # type: ignore[arg-type]
    body[-1] ^= 0xFF
    assert server.data_to_send() == expected


def test_data_to_send_joins_the_buffers() -> None:
    large = _body(b"L" * 10_000)
    server = _connected_server()
    server.send(commands.message(1, 2, 3), large)
    server.send(commands.flow(9, 10))
    frames = FrameDecoder().feed(server.data_to_send())
    assert [f.body for f in frames] == [large, None]


def test_send_before_handshake_and_after_close_raise_typed_errors() -> None:
    server = ServerConnection(SERVER_VERSION)
    with pytest.raises(ConnectionStateError):
        server.send(commands.ping())
    server.close()
    with pytest.raises(ConnectionClosedError):
        server.send(commands.ping())


# --- keep-alive -----------------------------------------------------------------------------


def test_ping_after_one_interval_of_silence_then_timeout_after_two() -> None:
    server = _connected_server(now=100.0, keepalive_interval_s=30.0)
    assert server.next_deadline() == 130.0
    assert server.handle_timer(129.9) == []
    assert server.data_to_send() == b""
    assert server.handle_timer(130.0) == []
    [ping] = _decode(server.data_to_send())
    assert ping.type == pb.BaseCommand.PING
    assert server.next_deadline() == 160.0
    [event] = server.handle_timer(160.0)
    assert event == KeepAliveTimeout(60.0)
    assert server.closed
    assert server.next_deadline() is None


def test_any_received_bytes_reset_the_keepalive() -> None:
    server = _connected_server(now=0.0, keepalive_interval_s=10.0)
    server.handle_timer(10.0)
    assert _decode(server.data_to_send())[0].type == pb.BaseCommand.PING
    server.receive_data(encode_command(commands.pong()), 15.0)
    assert server.next_deadline() == 25.0
    assert server.handle_timer(24.0) == []
    assert not server.closed


def test_a_client_that_never_sends_connect_times_out() -> None:
    server = ServerConnection(SERVER_VERSION, keepalive_interval_s=5.0, created_at=0.0)
    assert server.next_deadline() == 10.0
    assert server.handle_timer(5.0) == []
    assert server.data_to_send() == b""  # no PING before the handshake
    [event] = server.handle_timer(10.0)
    assert isinstance(event, KeepAliveTimeout)


def test_keepalive_clock_starts_at_the_first_call_when_not_given() -> None:
    server = ServerConnection(SERVER_VERSION, keepalive_interval_s=5.0)
    assert server.next_deadline() is None
    assert server.handle_timer(1000.0) == []
    assert server.next_deadline() == 1010.0


# --- handshake deadline and pre-handshake limits ----------------------------------------------


def test_a_silent_client_is_closed_at_the_handshake_deadline() -> None:
    server = ServerConnection(
        SERVER_VERSION, keepalive_interval_s=30.0, handshake_timeout_s=4.0, created_at=100.0
    )
    assert server.next_deadline() == 104.0
    assert server.handle_timer(103.9) == []
    [event] = server.handle_timer(104.0)
    assert event == HandshakeTimeout(4.0)
    assert server.closed and server.next_deadline() is None


def test_a_client_trickling_bytes_does_not_move_the_handshake_deadline() -> None:
    server = ServerConnection(
        SERVER_VERSION, keepalive_interval_s=2.0, handshake_timeout_s=10.0, created_at=0.0
    )
    connect = _official_client_connect(20)
    for second in range(1, 10):  # one byte a second: keep-alive alone would never fire
        assert server.receive_data(connect[second - 1 : second], float(second)) == []
        assert server.next_deadline() == min(second + 4.0, 10.0)
        assert server.handle_timer(float(second)) == []
    [event] = server.handle_timer(10.0)
    assert isinstance(event, HandshakeTimeout)
    assert server.receive_data(connect[9:], 10.5) == []  # too late: closed


def test_a_connect_in_time_ends_the_handshake_deadline() -> None:
    server = ServerConnection(
        SERVER_VERSION, keepalive_interval_s=30.0, handshake_timeout_s=5.0, created_at=0.0
    )
    [connected] = server.receive_data(_official_client_connect(20), 4.0)
    assert isinstance(connected, Connected)
    assert server.next_deadline() == 34.0
    assert server.handle_timer(6.0) == []
    assert not server.closed


def test_the_handshake_clock_starts_at_the_first_call_when_not_given() -> None:
    server = ServerConnection(SERVER_VERSION, handshake_timeout_s=3.0)
    assert server.receive_data(b"\x00", 50.0) == []
    assert server.next_deadline() == 53.0


def test_a_frame_larger_than_a_connect_is_refused_before_the_handshake() -> None:
    server = ServerConnection(SERVER_VERSION, created_at=0.0)
    header = struct.pack(">II", 5 * 1024 * 1024, 100)
    [event] = server.receive_data(header, 0.0)
    assert isinstance(event, ProtocolViolation)
    assert f"limit of {MAX_CONNECT_FRAME_SIZE} bytes" in event.reason
    # After CONNECT the same header is the start of an ordinary large frame.
    connected = _connected_server()
    assert connected.receive_data(header + b"\0" * 1000, 0.0) == []
    assert not connected.closed


def test_closing_drops_a_partial_frame_at_once() -> None:
    for close in ("local", "eof", "violation", "timeout"):
        server = _connected_server(keepalive_interval_s=1.0)
        partial = struct.pack(">II", 4 * 1024 * 1024, 100) + b"\0" * 100_000
        assert server.receive_data(partial, 0.0) == []
        assert server._decoder.buffered == len(partial)
        if close == "local":
            server.close()
        elif close == "eof":
            server.receive_data(b"", 0.0)
        elif close == "violation":
            server.receive_data(b"\xff" * 4 * 1024 * 1024, 0.0)  # completes it as garbage
        else:
            server.handle_timer(10.0)
        assert server.closed, close
        assert server._decoder.buffered == 0, close


# --- both ends ------------------------------------------------------------------------------


def _pair(now: float = 0.0) -> tuple[ClientConnection, ServerConnection]:
    client = ClientConnection("braid-client", created_at=now)
    server = ServerConnection(SERVER_VERSION, max_message_size=2048, created_at=now)
    [connected] = server.receive_data(client.data_to_send(), now)
    assert isinstance(connected, Connected)
    [answer] = client.receive_data(server.data_to_send(), now)
    assert answer == ServerConnected(SERVER_VERSION, MAX_PROTOCOL_VERSION, 2048, pb.FeatureFlags())
    return client, server


def test_client_and_server_exchange_payloads_with_checksums() -> None:
    client, server = _pair()
    body = _body(b"to the broker")
    client.send(commands.send(7, 1), body)
    [received] = server.receive_data(client.data_to_send(), 1.0)
    assert isinstance(received, CommandReceived)
    assert (received.body, received.checksum_valid) == (body, True)
    server.send(commands.message(3, 10, 11), body)
    [delivered] = client.receive_data(server.data_to_send(), 1.0)
    assert isinstance(delivered, CommandReceived)
    assert delivered.command.message.message_id.entryId == 11
    assert delivered.checksum_valid is True


def test_client_adopts_the_brokers_max_message_size() -> None:
    client, _server = _pair()
    assert client.max_message_size == 2048
    assert client.max_frame_size == 2048 + FRAME_SIZE_PADDING


def test_client_pings_and_answers_pings() -> None:
    client, server = _pair()
    client.handle_timer(30.0)
    assert server.receive_data(client.data_to_send(), 30.0) == []
    assert client.receive_data(server.data_to_send(), 30.0) == []  # the PONG
    server.handle_timer(60.0)
    client.receive_data(server.data_to_send(), 60.0)
    assert [c.type for c in _decode(client.data_to_send())] == [pb.BaseCommand.PONG]


def test_client_reports_a_refused_handshake() -> None:
    client = ClientConnection("c", auth_method_name="token")
    server = ServerConnection(SERVER_VERSION, authenticate=_refuse_tokens)
    server.receive_data(client.data_to_send(), 0.0)
    [event] = client.receive_data(server.data_to_send(), 0.0)
    assert isinstance(event, ProtocolViolation)
    assert "AuthenticationError" in event.reason
    assert client.closed


def test_client_refuses_anything_but_connected_during_handshake() -> None:
    client = ClientConnection("c")
    [event] = client.receive_data(encode_command(commands.success(1)), 0.0)
    assert isinstance(event, ProtocolViolation)
    assert "expected CONNECTED, got SUCCESS" in event.reason


def test_keepalive_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ServerConnection(SERVER_VERSION, keepalive_interval_s=0)


def test_valid_commands_before_garbage_in_one_chunk_are_still_delivered() -> None:
    server = _connected_server()
    chunk = encode_command(commands.flow(1, 10)) + b"\x00\x00\x00\x06\x00\x00\x00\x02\xff\xff"
    events = server.receive_data(chunk, 1.0)
    assert [type(e) for e in events] == [CommandReceived, ProtocolViolation]
    assert server.closed
