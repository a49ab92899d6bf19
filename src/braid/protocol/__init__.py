"""The Pulsar binary protocol, sans-I/O: schema, frame codec, batches and connection machines.

Nothing here touches a socket, a clock or an event loop. Bytes go in, frames and events come out,
and bytes to send are handed back; the broker's and the client's asyncio code are thin adapters.

* :mod:`braid.protocol.frames` - framing, CRC32C, the incremental :class:`FrameDecoder`.
* :mod:`braid.protocol.commands` - typed builders for every command Braid sends.
* :mod:`braid.protocol.batch` - batch payloads and compression codecs.
* :mod:`braid.protocol.connection` - the server and client connection state machines.
* ``pb`` - the generated protobuf module (``pb.BaseCommand``, ``pb.ServerError``, ...).
"""

from __future__ import annotations

from braid.protocol import batch, commands
from braid.protocol.connection import (
    MAX_PROTOCOL_VERSION,
    ClientConnection,
    ConnectionState,
    ServerConnection,
)
from braid.protocol.errors import (
    ConnectionClosedError,
    ConnectionStateError,
    CorruptPayload,
    FrameTooLarge,
    InvalidCommand,
    MalformedFrame,
    ProtocolError,
    UnsupportedCompression,
)
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
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    Frame,
    FrameDecoder,
    decode_message_body,
    encode_command,
    encode_message_body,
    encode_payload_command,
)
from braid.protocol.generated import PulsarApi_pb2 as pb

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FRAME_SIZE_PADDING",
    "MAGIC_BROKER_ENTRY_METADATA",
    "MAGIC_CRC32C",
    "MAX_PROTOCOL_VERSION",
    "ClientConnection",
    "CommandReceived",
    "Connected",
    "ConnectionClosed",
    "ConnectionClosedError",
    "ConnectionState",
    "ConnectionStateError",
    "CorruptPayload",
    "Event",
    "Frame",
    "FrameDecoder",
    "FrameTooLarge",
    "HandshakeTimeout",
    "InvalidCommand",
    "KeepAliveTimeout",
    "MalformedFrame",
    "ProtocolError",
    "ProtocolViolation",
    "ServerConnected",
    "ServerConnection",
    "UnsupportedCompression",
    "batch",
    "commands",
    "decode_message_body",
    "encode_command",
    "encode_message_body",
    "encode_payload_command",
    "pb",
]
