"""Unsigned LEB128 varints: the integer encoding of Braid's own serialized client values.

:class:`~braid.core.message_id.MessageId` and :class:`~braid.core.checkpoint.Checkpoint` bytes are
a leading format-version byte followed by varints (the same base-128 encoding protobuf uses for
``uint64``), so a value costs as many bytes as it needs. Decoding is strict: a truncated varint,
one longer than ten bytes or one above ``2**64 - 1`` is refused with :class:`CorruptEncoding`, so
a decoder fed arbitrary bytes either returns a value or raises that error.
"""

from __future__ import annotations

from braid.core.errors import InvalidInputError

MAX_UINT64 = (1 << 64) - 1
_MAX_VARINT_BYTES = 10


class CorruptEncoding(InvalidInputError):
    """Serialized bytes are truncated, overlong or otherwise not a valid encoding."""


def encode_uvarint(value: int, out: bytearray) -> None:
    """Append ``value`` (``0..2**64-1``) to ``out`` as an unsigned LEB128 varint.

    Raises:
        InvalidInputError: ``value`` is not an integer in range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UINT64:
        raise InvalidInputError(f"varint value must be an integer in 0..2**64-1, got {value!r}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def decode_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Read one varint at ``data[pos:]``; return ``(value, next_pos)``.

    Raises:
        CorruptEncoding: the varint is truncated, longer than ten bytes, or above ``2**64-1``.
    """
    result = 0
    shift = 0
    for count in range(_MAX_VARINT_BYTES):
        if pos >= len(data):
            raise CorruptEncoding(f"varint truncated at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result > MAX_UINT64 or (count and byte == 0):
                # A zero final byte after continuation bytes is a non-canonical (padded) form;
                # refusing it keeps one value = one encoding.
                raise CorruptEncoding(f"varint ending at byte {pos} is not canonical")
            return result, pos
        shift += 7
    raise CorruptEncoding(f"varint at byte {pos - _MAX_VARINT_BYTES} is longer than 10 bytes")


def read_header(
    data: object, what: str, version: int, sentinels: tuple[int, ...]
) -> tuple[bytes, int]:
    """Check the ``[format version][kind]`` header of a serialized value; return the bytes and kind.

    A sentinel kind must be the whole value (two bytes).

    Raises:
        InvalidInputError: ``data`` is not bytes-like.
        CorruptEncoding: too short, another format version, or bytes after a sentinel.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInputError(f"{what}.from_bytes needs bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) < 2:
        raise CorruptEncoding(f"a serialized {what} has at least 2 bytes, got {len(raw)}")
    if raw[0] != version:
        raise CorruptEncoding(
            f"unknown {what} format version {raw[0]} (this client reads {version})"
        )
    kind = raw[1]
    if kind in sentinels and len(raw) != 2:
        raise CorruptEncoding(f"{len(raw) - 2} unexpected bytes after a sentinel {what}")
    return raw, kind


__all__ = ["MAX_UINT64", "CorruptEncoding", "decode_uvarint", "encode_uvarint", "read_header"]
