"""Key hashing: the one function that maps a message key onto the 16-bit hash ring.

Every producer, broker and connector routes keys through :func:`hash16`, so this module is part of
the wire contract (``docs/protocol.md#routing-a-key``, ADR 0002): the ring position is the
**high** 16 bits of the raw, unsigned 32-bit Murmur3 (x86_32, seed 0) of the key's UTF-8 bytes.
The low 16 bits stay free for the entry-bucket hash of scalable Key-Shared.

The legacy helpers reproduce Pulsar v4's partitioned-topic routing with the Murmur3 hashing scheme,
used while a migrated ``persistent://`` topic is wrapped in a synthetic layout.
"""

from __future__ import annotations

import mmh3

from braid.core.errors import InvalidInputError

_U32_MASK = 0xFFFFFFFF
# Pulsar's Java and C++ clients mask the Murmur3 hash with Integer.MAX_VALUE before taking the
# partition modulo; legacy routing must do the same to keep a key on its v4 partition.
_INT32_MAX = 0x7FFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Return the MurmurHash3 x86_32 of ``data`` as an unsigned 32-bit integer.

    Raises:
        InvalidInputError: ``data`` is not bytes-like or ``seed`` is not in ``0..2**32-1``.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInputError(f"murmur3_32 needs bytes, got {type(data).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _U32_MASK:
        raise InvalidInputError(f"murmur3 seed must be an integer in 0..{_U32_MASK}, got {seed!r}")
    return int(mmh3.hash(bytes(data), seed, signed=False))


def key_bytes(key: str | bytes | bytearray | memoryview) -> bytes:
    """Return the bytes a key is hashed as: UTF-8 for ``str``, the bytes themselves otherwise.

    Raises:
        InvalidInputError: the key is neither ``str`` nor bytes-like, or is a ``str`` that cannot be
            encoded as UTF-8 (a lone surrogate).
    """
    if isinstance(key, str):
        try:
            return key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"key is not valid Unicode (cannot encode as UTF-8): {exc.reason}"
            ) from exc
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise InvalidInputError(f"a key must be str or bytes, got {type(key).__name__}")


def hash16(key: str | bytes | bytearray | memoryview) -> int:
    """Return the key's position on the 16-bit hash ring (``0..0xFFFF``).

    ``murmur3_32(utf8(key), seed 0) >> 16``: the high half of the raw hash, so
    ``hash16("k") == hash16(b"k")``.
    """
    return murmur3_32(key_bytes(key)) >> 16


#: Key_Shared hashes keys onto ``0..KEY_SHARED_HASH_RANGE - 1`` (Pulsar's ``DEFAULT_RANGE_SIZE``).
KEY_SHARED_HASH_RANGE = 1 << 16


def sticky_key_hash(key: str | bytes | bytearray | memoryview) -> int:
    """The Key_Shared hash of a message's sticky key, as Pulsar's broker computes it.

    ``(murmur3_32(key) & 0x7FFFFFFF) % 65536`` (``StickyKeyConsumerSelectorUtils``), which is the
    *low* 16 bits of the raw hash - the half :func:`hash16` leaves free - except that 0 becomes 1,
    because Pulsar's dispatchers reserve 0 for "no hash". Consumers' STICKY ``hashRanges`` are
    ranges of these values.
    """
    value = (murmur3_32(key_bytes(key)) & _INT32_MAX) % KEY_SHARED_HASH_RANGE
    return value or 1


def sign_safe_mod(dividend: int, divisor: int) -> int:
    """Pulsar's ``MathUtils.signSafeMod``: a remainder in ``0..divisor-1`` even for negative input.

    Java's ``%`` truncates toward zero and Pulsar adds ``divisor`` to a negative remainder; for a
    positive divisor that is exactly the floored modulo Python's ``%`` computes.

    Raises:
        InvalidInputError: ``divisor`` is not a positive integer.
    """
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 1:
        raise InvalidInputError(f"divisor must be a positive integer, got {divisor!r}")
    if isinstance(dividend, bool) or not isinstance(dividend, int):
        raise InvalidInputError(f"dividend must be an integer, got {dividend!r}")
    return dividend % divisor


def legacy_hash32(key: str | bytes) -> int:
    """Pulsar v4's Murmur3 key hash: ``murmur3_32(utf8(key)) & 0x7FFFFFFF`` (never negative)."""
    return murmur3_32(key_bytes(key)) & _INT32_MAX


def legacy_partition(key: str | bytes, num_partitions: int) -> int:
    """The v4 partition of ``key`` among ``num_partitions`` (Murmur3 hashing scheme).

    Used for all-legacy layouts (rule 3 of ``docs/protocol.md#routing-a-key``) so a migrated
    partitioned topic keeps every key on the partition it had.
    """
    return sign_safe_mod(legacy_hash32(key), num_partitions)


__all__ = [
    "KEY_SHARED_HASH_RANGE",
    "hash16",
    "key_bytes",
    "legacy_hash32",
    "legacy_partition",
    "murmur3_32",
    "sign_safe_mod",
    "sticky_key_hash",
]
