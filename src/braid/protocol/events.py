"""Events a connection state machine reports to its adapter.

Each is a frozen dataclass, except :class:`CommandReceived`, which the frame decoder builds once
per frame (a frozen dataclass's ``__init__`` costs 2.5 times as much; nobody changes one).
``Connected``/``ServerConnected`` mark the end of the handshake, ``CommandReceived`` carries
every other command, and the terminal events
(``ProtocolViolation``, ``KeepAliveTimeout``, ``HandshakeTimeout``, ``ConnectionClosed``) mean the
machine is now ``CLOSED``: the adapter flushes the machine's
:meth:`~braid.protocol.connection.ServerConnection.data_to_send` and closes the socket.
"""

from __future__ import annotations

from dataclasses import dataclass

from braid.protocol.generated import PulsarApi_pb2 as pb


@dataclass(frozen=True, slots=True)
class Connected:
    """Server side: the client's CONNECT was accepted and CONNECTED is queued."""

    client_version: str
    protocol_version: int
    feature_flags: pb.FeatureFlags


@dataclass(frozen=True, slots=True)
class ServerConnected:
    """Client side: the broker answered CONNECTED."""

    server_version: str
    protocol_version: int
    max_message_size: int | None
    feature_flags: pb.FeatureFlags


@dataclass(slots=True)
class CommandReceived:
    """A command for the layer above (anything but the handshake and keep-alive); also the frame
    decoder's output (:data:`braid.protocol.frames.Frame`), passed up as it is.

    ``body`` is the stored form ``[u32 metadataSize][MessageMetadata][payload]`` for SEND and
    MESSAGE. ``checksum_valid`` is ``False`` when the CRC32C did not match: the broker answers
    such a SEND with SEND_ERROR ChecksumError instead of storing it; the connection stays open.
    """

    command: pb.BaseCommand
    body: bytes | None = None
    checksum_valid: bool | None = None
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The peer broke the protocol; the machine is closed (an ERROR may be queued first)."""

    reason: str


@dataclass(frozen=True, slots=True)
class KeepAliveTimeout:
    """Nothing arrived from the peer for two keep-alive intervals; the machine is closed."""

    silent_for_s: float


@dataclass(frozen=True, slots=True)
class HandshakeTimeout:
    """Server side: no CONNECT completed the handshake within its deadline, however many bytes
    trickled in meanwhile (a slow or silent client); the machine is closed."""

    waited_s: float


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed its side (end of stream); the machine is closed."""

    reason: str = "peer closed the connection"


Event = (
    Connected
    | ServerConnected
    | CommandReceived
    | ProtocolViolation
    | KeepAliveTimeout
    | HandshakeTimeout
    | (ConnectionClosed)
)

__all__ = [
    "CommandReceived",
    "Connected",
    "ConnectionClosed",
    "Event",
    "HandshakeTimeout",
    "KeepAliveTimeout",
    "ProtocolViolation",
    "ServerConnected",
]
