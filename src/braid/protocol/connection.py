"""Connection state machines for both ends of a Pulsar protocol connection (sans-I/O).

Modelled on h11 and aioquic: the adapter that owns the socket feeds received bytes to
:meth:`receive_data` and gets events back, queues commands with :meth:`send`, writes whatever
:meth:`data_to_send` returns (or the buffers :meth:`buffers_to_send` returns, in order: large
payload bodies are then written without a copy), and drives keep-alive by calling
:meth:`handle_timer` at :meth:`next_deadline`. Time is always passed in as ``now`` (seconds on a
monotonic clock); this module never reads a clock, opens a socket or touches an event loop.

States::

    server:  AWAITING_CONNECT   --CONNECT-->    CONNECTED --violation/timeout/EOF--> CLOSED
    client:  AWAITING_CONNECTED --CONNECTED-->  CONNECTED --violation/timeout/EOF--> CLOSED

Each machine answers the protocol's housekeeping itself - CONNECT with CONNECTED on the server,
PING with PONG on both sides, PING after a keep-alive interval of silence - and reports everything
else as :class:`~braid.protocol.events.CommandReceived`.

Keep-alive: after ``keepalive_interval_s`` without any byte from the peer the machine queues a
PING; after twice that it reports :class:`~braid.protocol.events.KeepAliveTimeout` and closes. This
matches the official clients, which ping every interval and give up when the next tick finds
their ping unanswered.

Handshake (server side): a client must complete CONNECT within ``handshake_timeout_s`` of the
connection's creation, however many bytes it sends meanwhile - a client trickling one byte a
second would otherwise keep resetting keep-alive forever - else the machine reports
:class:`~braid.protocol.events.HandshakeTimeout` and closes. Until then frames are limited to
``max_connect_frame_size`` (CONNECT is small), so a stranger cannot make the broker buffer a
message-sized frame. A closed machine drops its receive buffer at once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import NoReturn

from braid.protocol import commands
from braid.protocol.errors import ConnectionClosedError, ConnectionStateError
from braid.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    Event,
    HandshakeTimeout,
    KeepAliveTimeout,
    ProtocolViolation,
    ServerConnected,
)
from braid.protocol.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    FRAME_SIZE_PADDING,
    Frame,
    FrameDecoder,
    encode_command,
    encode_payload_head,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

#: The highest protocol version Braid speaks (see docs/decisions/0001-wire-protocol.md).
MAX_PROTOCOL_VERSION = 21
#: From this version on, payload commands carry magic 0x0e01 and a CRC32C.
CHECKSUM_MIN_VERSION = 6
#: What a broker answers a CONNECT whose credentials fail (Pulsar's wording: nothing more).
UNABLE_TO_AUTHENTICATE = "Unable to authenticate"
#: The largest frame a server accepts before the handshake: a CONNECT with room for auth data.
MAX_CONNECT_FRAME_SIZE = 64 * 1024
#: A payload body this large or larger is queued as its own buffer rather than copied into the
#: output bytes (:meth:`_Connection.buffers_to_send`): a broker dispatching 50 kB entries copied
#: each one twice before the socket did (docs/benchmarks.md, the Spark section).
SEPARATE_BODY_SIZE = 4096


#: Commands the machine answers itself once connected (the handshake's, and keep-alive).
_HOUSEKEEPING = frozenset(
    {pb.BaseCommand.PING, pb.BaseCommand.PONG, pb.BaseCommand.CONNECT, pb.BaseCommand.CONNECTED}
)


class ConnectionState(enum.Enum):
    """Where a connection is in its life."""

    AWAITING_CONNECT = "awaiting_connect"  # server: waiting for the client's CONNECT
    AWAITING_CONNECTED = "awaiting_connected"  # client: CONNECT sent, waiting for CONNECTED
    CONNECTED = "connected"
    CLOSED = "closed"


class _Connection:
    """What both ends share: decoding, the outgoing buffer, keep-alive, terminal states."""

    def __init__(
        self,
        *,
        state: ConnectionState,
        max_frame_size: int,
        keepalive_interval_s: float,
        created_at: float | None,
        first_frame_max_size: int | None = None,
    ) -> None:
        if keepalive_interval_s <= 0:
            raise ValueError("keepalive_interval_s must be positive")
        self._state = state
        self._decoder = FrameDecoder(max_frame_size, first_frame_max_size=first_frame_max_size)
        # Queued output: whole buffers (a large payload body stays the caller's object: never
        # copied here), then the bytes queued after the last of them.
        self._buffers: list[bytes] = []
        self._outgoing = bytearray()
        self._interval = keepalive_interval_s
        # None until the first call that carries `now`: the adapter may build the machine before
        # it has read its clock, and a deadline of 0.0 would time the connection out at once.
        self._last_received = created_at
        self._ping_outstanding = False
        self._protocol_version: int | None = None
        self._peer_flags = pb.FeatureFlags()

    # --- queries --------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The current state."""
        return self._state

    @property
    def closed(self) -> bool:
        """Whether the machine is closed (the adapter should close the socket)."""
        return self._state is ConnectionState.CLOSED

    @property
    def protocol_version(self) -> int | None:
        """The negotiated protocol version, ``None`` before the handshake completes."""
        return self._protocol_version

    @property
    def peer_feature_flags(self) -> pb.FeatureFlags:
        """The feature flags the peer advertised (empty before the handshake)."""
        return self._peer_flags

    @property
    def peer_supports_broker_entry_metadata(self) -> bool:
        """Whether the peer advertised ``supports_broker_entry_metadata``."""
        return self._peer_flags.supports_broker_entry_metadata

    @property
    def peer_supports_scalable_topics(self) -> bool:
        """Whether the peer advertised ``supports_scalable_topics``."""
        return self._peer_flags.supports_scalable_topics

    @property
    def max_frame_size(self) -> int:
        """The largest frame accepted from the peer, size prefix included."""
        return self._decoder.max_frame_size

    # --- input ----------------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Feed bytes read from the socket; ``b""`` means the peer closed its side.

        Returns the events these bytes complete. Never raises for any input: bad bytes become a
        :class:`ProtocolViolation` (after the events of any valid frames before them) and the
        machine closes. Bytes received after the machine closed are ignored.
        """
        if self._state is ConnectionState.CLOSED:
            return []
        if not data:
            self._close_machine()
            return [ConnectionClosed()]
        self._last_received = now
        self._ping_outstanding = False
        frames, error = self._decoder.feed_until_error(data)
        events: list[Event] = []
        for frame in frames:
            if self._state is ConnectionState.CONNECTED and frame.command.type not in _HOUSEKEEPING:
                # The common case: the decoded frame is the event (the decoder checked that the
                # command carries its body and every required field).
                events.append(frame)
                continue
            events.extend(self._handle_frame(frame))
            if self.closed:
                return events
        if error is not None:
            events.extend(self._violation(str(error)))
        return events

    def _handle_frame(self, frame: Frame) -> list[Event]:
        raise NotImplementedError  # pragma: no cover - each side implements it

    def _handle_connected_frame(self, frame: Frame) -> list[Event]:
        """Dispatch a frame once the handshake is done: keep-alive here, the rest upward."""
        cmd = frame.command
        if cmd.type == pb.BaseCommand.PING:
            self._outgoing += encode_command(commands.pong())
            return []
        if cmd.type == pb.BaseCommand.PONG:
            return []
        if cmd.type in (pb.BaseCommand.CONNECT, pb.BaseCommand.CONNECTED):
            return self._violation(f"{commands.type_name(cmd.type)} after the handshake")
        return [frame]

    def _violation(self, reason: str, reply: pb.BaseCommand | None = None) -> list[Event]:
        if reply is not None:
            self._outgoing += encode_command(reply)
        self._close_machine()
        return [ProtocolViolation(reason)]

    def _close_machine(self) -> None:
        # A partial frame may hold megabytes: a closed machine never needs it again.
        self._state = ConnectionState.CLOSED
        self._decoder.release()

    # --- output ---------------------------------------------------------------------------

    def send(
        self,
        cmd: pb.BaseCommand,
        body: bytes | None = None,
        *,
        broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
    ) -> None:
        """Queue a command; ``body`` (the stored form) makes it a payload command.

        Payload commands get magic 0x0e01 and a CRC32C only when the negotiated version is at
        least 6. ``broker_entry_metadata`` is added only if the peer advertised support for it.

        Raises:
            ConnectionStateError: the handshake is not complete.
            ConnectionClosedError: the machine is closed.
            InvalidCommand: a required field of ``cmd`` is not set.
        """
        if self._state is not ConnectionState.CONNECTED:
            self._refuse_send()
        if body is None:
            self._outgoing += encode_command(cmd)
            return
        version = self._protocol_version or 0
        self._outgoing += encode_payload_head(
            cmd,
            body,
            checksum=version >= CHECKSUM_MIN_VERSION,
            broker_entry_metadata=(
                broker_entry_metadata if self.peer_supports_broker_entry_metadata else None
            ),
        )
        if len(body) < SEPARATE_BODY_SIZE or type(body) is not bytes:
            self._outgoing += body  # (a mutable buffer is copied now: it may change later)
        else:
            self._buffers.append(bytes(self._outgoing))
            self._buffers.append(body)
            self._outgoing.clear()

    def send_frame(self, frame: bytes) -> None:
        """Queue a frame encoded by the caller (a SEND_RECEIPT from
        :class:`~braid.protocol.frames.SendReceiptEncoder`), under the rules of :meth:`send`.

        Raises:
            ConnectionStateError: the handshake is not complete.
            ConnectionClosedError: the machine is closed.
        """
        if self._state is not ConnectionState.CONNECTED:
            self._refuse_send()
        self._outgoing += frame

    def _refuse_send(self) -> NoReturn:
        """Why nothing can be sent in the current (not connected) state."""
        if self._state is ConnectionState.CLOSED:
            raise ConnectionClosedError("the connection is closed")
        raise ConnectionStateError(f"cannot send before the handshake ({self._state.value})")

    def data_to_send(self) -> bytes:
        """Take every byte queued for the peer (also after closing: a final ERROR, say)."""
        return b"".join(self.buffers_to_send())

    def buffers_to_send(self) -> list[bytes]:
        """Take every byte queued for the peer as buffers to write in order (a transport's
        ``writelines``): a ``bytes`` payload body of at least :data:`SEPARATE_BODY_SIZE` bytes is
        its own buffer - the object passed to :meth:`send`, not a copy."""
        buffers = self._buffers
        if self._outgoing:
            buffers.append(bytes(self._outgoing))
            self._outgoing.clear()
        self._buffers = []
        return buffers

    def close(self) -> None:
        """Close locally: the machine accepts nothing more and drops its receive buffer. Queued
        bytes can still be taken."""
        self._close_machine()

    # --- timers ---------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` should next run, or ``None`` when no timer is pending."""
        if self._state is ConnectionState.CLOSED or self._last_received is None:
            return None
        if self._state is ConnectionState.CONNECTED and not self._ping_outstanding:
            return self._last_received + self._interval
        return self._last_received + 2 * self._interval

    def handle_timer(self, now: float) -> list[Event]:
        """Run keep-alive at time ``now``: maybe queue a PING, maybe time the connection out."""
        if self._state is ConnectionState.CLOSED:
            return []
        if self._last_received is None:
            self._last_received = now
            return []
        silent = now - self._last_received
        if silent >= 2 * self._interval:
            self._close_machine()
            return [KeepAliveTimeout(silent)]
        if (
            silent >= self._interval
            and self._state is ConnectionState.CONNECTED
            and not self._ping_outstanding
        ):
            self._outgoing += encode_command(commands.ping())
            self._ping_outstanding = True
        return []


class ServerConnection(_Connection):
    """The broker's end of one client connection.

    Args:
        server_version: sent in CONNECTED (required by the clients).
        max_message_size: advertised in CONNECTED; frames up to this plus
            :data:`~braid.protocol.frames.FRAME_SIZE_PADDING` are accepted.
        max_protocol_version: the highest version offered; CONNECTED carries
            ``min(client's, this)``.
        keepalive_interval_s: PING after this much silence, give up after twice this.
        feature_flags: what the broker advertises in CONNECTED.
        created_at: ``now`` at accept time, so a client that never speaks times out.
        handshake_timeout_s: CONNECT must arrive within this long of ``created_at`` (else
            :class:`HandshakeTimeout`); ``None`` leaves only keep-alive.
        max_connect_frame_size: the largest frame accepted before the handshake.
        authenticate: called with the CONNECT before it is accepted; returns ``None`` to accept
            it, or the reason (for the log) to refuse it with ``AuthenticationError`` and close.
            ``None`` (no callback) accepts every CONNECT whatever its credentials, as a Pulsar
            broker with authentication disabled does.
    """

    def __init__(
        self,
        server_version: str,
        *,
        max_message_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_protocol_version: int = MAX_PROTOCOL_VERSION,
        keepalive_interval_s: float = 30.0,
        feature_flags: pb.FeatureFlags | None = None,
        created_at: float | None = None,
        handshake_timeout_s: float | None = None,
        max_connect_frame_size: int = MAX_CONNECT_FRAME_SIZE,
        authenticate: Callable[[pb.CommandConnect], str | None] | None = None,
    ) -> None:
        if max_message_size <= 0:
            raise ValueError("max_message_size must be positive")
        if handshake_timeout_s is not None and handshake_timeout_s <= 0:
            raise ValueError("handshake_timeout_s must be positive")
        max_frame_size = max_message_size + FRAME_SIZE_PADDING
        super().__init__(
            state=ConnectionState.AWAITING_CONNECT,
            max_frame_size=max_frame_size,
            keepalive_interval_s=keepalive_interval_s,
            created_at=created_at,
            first_frame_max_size=min(max_connect_frame_size, max_frame_size),
        )
        self._handshake_timeout = handshake_timeout_s
        self._authenticate = authenticate
        self._handshake_started: float | None = created_at
        self.server_version = server_version
        self.max_message_size = max_message_size
        self.max_protocol_version = max_protocol_version
        self._own_flags = pb.FeatureFlags()
        if feature_flags is not None:
            self._own_flags.CopyFrom(feature_flags)
        self.client_version: str | None = None

    # --- the handshake deadline (keep-alive is the base class's) -----------------------------

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        if self._handshake_started is None:
            self._handshake_started = now
        return super().receive_data(data, now)

    def next_deadline(self) -> float | None:
        deadline = super().next_deadline()
        handshake = self._handshake_deadline()
        if handshake is None or deadline is None:
            return deadline
        return min(deadline, handshake)

    def handle_timer(self, now: float) -> list[Event]:
        if self._handshake_started is None:
            self._handshake_started = now
        handshake = self._handshake_deadline()
        if handshake is not None and now >= handshake:
            self._close_machine()
            assert self._handshake_started is not None
            return [HandshakeTimeout(now - self._handshake_started)]
        return super().handle_timer(now)

    def _handshake_deadline(self) -> float | None:
        if (
            self._state is not ConnectionState.AWAITING_CONNECT
            or self._handshake_timeout is None
            or self._handshake_started is None
        ):
            return None
        return self._handshake_started + self._handshake_timeout

    def _handle_frame(self, frame: Frame) -> list[Event]:
        if self._state is ConnectionState.AWAITING_CONNECT:
            if frame.command.type != pb.BaseCommand.CONNECT:
                name = commands.type_name(frame.command.type)
                return self._violation(f"expected CONNECT first, got {name}")
            return self._accept(frame.command.connect)
        return self._handle_connected_frame(frame)

    def _accept(self, connect: pb.CommandConnect) -> list[Event]:
        if self._authenticate is not None:
            refusal = self._authenticate(connect)
            if refusal is not None:
                reply = commands.error(
                    commands.NO_REQUEST_ID, pb.AuthenticationError, UNABLE_TO_AUTHENTICATE
                )
                return self._violation(f"authentication failed: {refusal}", reply)
        version = max(0, min(connect.protocol_version, self.max_protocol_version))
        self._outgoing += encode_command(
            commands.connected(self.server_version, version, self.max_message_size, self._own_flags)
        )
        self._state = ConnectionState.CONNECTED
        self._protocol_version = version
        self._peer_flags.CopyFrom(connect.feature_flags)
        self.client_version = connect.client_version
        return [Connected(connect.client_version, version, self._peer_flags)]


def auth_method(connect: pb.CommandConnect) -> str:
    """The method a CONNECT asks for: the name if given, else the deprecated enum."""
    if connect.HasField("auth_method_name"):
        return connect.auth_method_name
    if connect.HasField("auth_method") and connect.auth_method != pb.AuthMethodNone:
        return pb.AuthMethod.Name(connect.auth_method)[len("AuthMethod") :].lower()
    return "none"


class ClientConnection(_Connection):
    """The client's end of a connection: queues CONNECT at once and expects CONNECTED.

    Args:
        client_version: sent in CONNECT.
        protocol_version: the version offered.
        feature_flags: what the client advertises in CONNECT.
        keepalive_interval_s: PING after this much silence, give up after twice this.
        max_frame_size: accepted until CONNECTED advertises the broker's max message size.
        auth_method_name: sent in CONNECT (``"none"`` by default).
        auth_data: sent in CONNECT when given.
        created_at: ``now`` when the socket connected.
    """

    def __init__(
        self,
        client_version: str,
        *,
        protocol_version: int = MAX_PROTOCOL_VERSION,
        feature_flags: pb.FeatureFlags | None = None,
        keepalive_interval_s: float = 30.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE + FRAME_SIZE_PADDING,
        auth_method_name: str = "none",
        auth_data: bytes | None = None,
        created_at: float | None = None,
    ) -> None:
        super().__init__(
            state=ConnectionState.AWAITING_CONNECTED,
            max_frame_size=max_frame_size,
            keepalive_interval_s=keepalive_interval_s,
            created_at=created_at,
        )
        self.client_version = client_version
        self.offered_protocol_version = protocol_version
        self.server_version: str | None = None
        self.max_message_size: int | None = None
        #: The broker's ERROR answering CONNECT (``AuthenticationError`` ...), if it refused.
        self.refusal: pb.CommandError | None = None
        self._outgoing += encode_command(
            commands.connect(
                client_version,
                protocol_version,
                auth_method_name=auth_method_name,
                auth_data=auth_data,
                feature_flags=feature_flags,
            )
        )

    def _handle_frame(self, frame: Frame) -> list[Event]:
        if self._state is not ConnectionState.AWAITING_CONNECTED:
            return self._handle_connected_frame(frame)
        cmd = frame.command
        if cmd.type == pb.BaseCommand.ERROR:
            self.refusal = cmd.error
            code = pb.ServerError.Name(cmd.error.error)
            return self._violation(f"broker refused the connection: {code}: {cmd.error.message}")
        if cmd.type != pb.BaseCommand.CONNECTED:
            return self._violation(f"expected CONNECTED, got {commands.type_name(cmd.type)}")
        c = cmd.connected
        version = max(0, min(c.protocol_version, self.offered_protocol_version))
        self._protocol_version = version
        self._peer_flags.CopyFrom(c.feature_flags)
        self.server_version = c.server_version
        if c.HasField("max_message_size") and c.max_message_size > 0:
            self.max_message_size = c.max_message_size
            self._decoder.max_frame_size = c.max_message_size + FRAME_SIZE_PADDING
        self._state = ConnectionState.CONNECTED
        return [ServerConnected(c.server_version, version, self.max_message_size, self._peer_flags)]


# The events are re-exported so an adapter can import the machine and its events together.
__all__ = [
    "CHECKSUM_MIN_VERSION",
    "MAX_CONNECT_FRAME_SIZE",
    "MAX_PROTOCOL_VERSION",
    "SEPARATE_BODY_SIZE",
    "ClientConnection",
    "CommandReceived",
    "Connected",
    "ConnectionClosed",
    "ConnectionState",
    "Event",
    "HandshakeTimeout",
    "KeepAliveTimeout",
    "ProtocolViolation",
    "ServerConnected",
    "ServerConnection",
]
