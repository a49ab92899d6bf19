"""Typed errors of the protocol layer.

Everything the codec or a connection state machine rejects is a :class:`ProtocolError`, itself
an :class:`~braid.core.errors.InvalidInputError`: the bytes (or the command a caller asked to
encode) broke the wire rules. Callers that read from a socket catch :class:`ProtocolError` and
close that one connection; no other exception escapes the codec for any input.
"""

from __future__ import annotations

from braid.core.errors import AlreadyClosedError, IllegalStateError, InvalidInputError


class ProtocolError(InvalidInputError):
    """Root of every wire-protocol error (malformed bytes, oversize frames, bad commands)."""


class MalformedFrame(ProtocolError):
    """The peer sent bytes that are not a valid frame (bad sizes, unparseable command, ...)."""


class FrameTooLarge(ProtocolError):
    """A frame announced a size above the negotiated limit; it is refused before being buffered."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class InvalidCommand(ProtocolError):
    """A command could not be encoded: a required field is unset, or it is not a command."""


class CorruptPayload(ProtocolError):
    """A message body, batch or compressed payload does not decode."""


class UnsupportedCompression(ProtocolError):
    """The compression codec is unknown, or its library is not installed (SNAPPY)."""


class ConnectionStateError(IllegalStateError):
    """The local side used a connection in a state that forbids it (send before handshake)."""


class ConnectionClosedError(AlreadyClosedError):
    """The connection state machine is closed; nothing more can be sent on it."""


__all__ = [
    "ConnectionClosedError",
    "ConnectionStateError",
    "CorruptPayload",
    "FrameTooLarge",
    "InvalidCommand",
    "MalformedFrame",
    "ProtocolError",
    "UnsupportedCompression",
]
