"""Pins the key hash (ADR 0002, ``docs/protocol.md#routing-a-key``) against an independent Murmur3
implementation."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from braid.core.errors import InvalidInputError
from braid.core.hashing import (
    hash16,
    key_bytes,
    legacy_hash32,
    legacy_partition,
    murmur3_32,
    sign_safe_mod,
    sticky_key_hash,
)


def reference_murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """A deliberately plain transcription of Appleby's MurmurHash3_x86_32, for cross-checking."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = seed
    full = len(data) - len(data) % 4
    for i in range(0, full, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = rotl((k * c1) & mask, 15) * c2 & mask
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & mask
    tail = data[full:]
    if tail:
        k = int.from_bytes(tail, "little")
        h ^= rotl((k * c1) & mask, 15) * c2 & mask
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


# Published MurmurHash3_x86_32 test vectors (SMHasher's verification values and common examples).
KNOWN_VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
    (b"hello", 0, 0x248BFA47),
]


@pytest.mark.parametrize(("data", "seed", "expected"), KNOWN_VECTORS)
def test_murmur3_matches_published_vectors(data: bytes, seed: int, expected: int) -> None:
    assert reference_murmur3_x86_32(data, seed) == expected
    assert murmur3_32(data, seed) == expected


@settings(max_examples=200)
@given(st.binary(max_size=64), st.integers(0, 0xFFFFFFFF))
def test_murmur3_agrees_with_reference_for_any_bytes_and_seed(data: bytes, seed: int) -> None:
    assert murmur3_32(data, seed) == reference_murmur3_x86_32(data, seed)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("", 0x0000),  # empty key: murmur3("") == 0
        ("hello", 0x248B),  # ASCII
        ("my-key", 0x6DF0),
        ("key-1", 0x98B1),
        ("ключ", 0x9A59),  # Cyrillic, 2-byte UTF-8
        ("日本語", 0xA5A4),  # CJK, 3-byte UTF-8
        ("🙂", 0x3E22),  # astral plane, 4-byte UTF-8
    ],
)
def test_hash16_is_the_high_half_of_murmur3_of_utf8(key: str, expected: int) -> None:
    assert hash16(key) == expected
    assert hash16(key) == reference_murmur3_x86_32(key.encode("utf-8")) >> 16


def test_hash16_uses_the_high_bits_not_the_low_bits() -> None:
    # murmur3("my-key") = 0x6df0b931: the older spec pages' "& 0xFFFF" would give 0xb931.
    low_half = murmur3_32(b"my-key") & 0xFFFF
    assert (hash16("my-key"), low_half) == (0x6DF0, 0xB931)


@pytest.mark.parametrize("key", ["", "hello", "ключ", "日本語", "🙂"])
def test_hash16_of_str_equals_hash16_of_its_utf8_bytes(key: str) -> None:
    raw = key.encode("utf-8")
    assert hash16(key) == hash16(raw) == hash16(bytearray(raw)) == hash16(memoryview(raw))


@settings(max_examples=200)
@given(st.text(max_size=40))
def test_hash16_is_a_ring_position_for_any_text(key: str) -> None:
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(InvalidInputError):
            hash16(key)
        return
    value = hash16(key)
    assert 0 <= value <= 0xFFFF
    assert value == reference_murmur3_x86_32(raw) >> 16


def test_hash16_rejects_a_lone_surrogate_with_a_typed_error() -> None:
    with pytest.raises(InvalidInputError, match="UTF-8"):
        hash16("\ud800")


@pytest.mark.parametrize("bad", [123, None, 1.5, ["a"]])
def test_hash16_rejects_non_string_keys(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="str or bytes"):
        hash16(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [-1, 2**32, True, "0"])
def test_murmur3_rejects_a_seed_outside_32_bits(seed: object) -> None:
    with pytest.raises(InvalidInputError, match="seed"):
        murmur3_32(b"x", seed)  # type: ignore[arg-type]


def test_murmur3_rejects_text_input() -> None:
    with pytest.raises(InvalidInputError, match="bytes"):
        murmur3_32("text")  # type: ignore[arg-type]


def test_key_bytes_encodes_text_as_utf8() -> None:
    assert key_bytes("é") == b"\xc3\xa9"
    assert key_bytes(b"\xff") == b"\xff"


def java_sign_safe_mod(dividend: int, divisor: int) -> int:
    """Java semantics spelled out: ``%`` truncates toward zero, then a negative result is lifted."""
    quotient = abs(dividend) // divisor * (1 if dividend >= 0 else -1)
    mod = dividend - quotient * divisor
    return mod + divisor if mod < 0 else mod


@pytest.mark.parametrize(
    ("dividend", "divisor", "expected"),
    [(7, 3, 1), (-1, 3, 2), (-3, 3, 0), (-7, 3, 2), (0, 5, 0), (-(2**31), 7, 5)],
)
def test_sign_safe_mod_never_returns_a_negative_remainder(
    dividend: int, divisor: int, expected: int
) -> None:
    assert sign_safe_mod(dividend, divisor) == expected


@settings(max_examples=200)
@given(st.integers(-(2**63), 2**63 - 1), st.integers(1, 2**31 - 1))
def test_sign_safe_mod_matches_java_semantics(dividend: int, divisor: int) -> None:
    assert sign_safe_mod(dividend, divisor) == java_sign_safe_mod(dividend, divisor)


@pytest.mark.parametrize("divisor", [0, -3, True])
def test_sign_safe_mod_rejects_a_non_positive_divisor(divisor: int) -> None:
    with pytest.raises(InvalidInputError, match="divisor"):
        sign_safe_mod(5, divisor)


def test_legacy_partition_masks_the_sign_bit_like_pulsar_v4_clients() -> None:
    # murmur3("k1") = 4257636394 has the top bit set; Pulsar's Java and C++ clients mask it off
    # (``& Integer.MAX_VALUE``) before the modulo, which moves this key from partition 4 to 2.
    raw = murmur3_32(b"k1")
    assert raw == 4257636394
    assert legacy_hash32("k1") == raw & 0x7FFFFFFF
    assert legacy_partition("k1", 7) == 2
    assert raw % 7 == 4


@settings(max_examples=100)
@given(st.text(st.characters(exclude_categories=["Cs"]), max_size=20), st.integers(1, 64))
def test_legacy_partition_is_in_range_and_deterministic(key: str, partitions: int) -> None:
    first = legacy_partition(key, partitions)
    assert 0 <= first < partitions
    assert legacy_partition(key.encode("utf-8"), partitions) == first


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: murmur3_32("key"), "murmur3_32 needs bytes, got str"),
        (lambda: key_bytes(7), "a key must be str or bytes, got int"),
        (lambda: sign_safe_mod(7.5, 3), "dividend must be an integer, got 7.5"),
        (lambda: sign_safe_mod(True, 3), "dividend must be an integer, got True"),
    ],
)
def test_bad_hash_input_is_refused_word_for_word(build: Callable[[], object], message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        build()
    assert str(info.value) == message


def test_sticky_key_hash_is_pulsars_key_shared_hash() -> None:
    # (murmur3 & Integer.MAX_VALUE) % 65536 over the reference implementation, 0 mapped to 1.
    for key in ["", "a", "key-1", "orders/42", "ключ", "x" * 37]:
        raw = reference_murmur3_x86_32(key.encode())
        expected = (raw & 0x7FFFFFFF) % 65536 or 1
        assert sticky_key_hash(key) == expected
        assert sticky_key_hash(key) == (raw & 0xFFFF or 1)  # the low half hash16 leaves free


def test_sticky_key_hash_never_returns_the_reserved_zero() -> None:
    # "k179888" is a key whose raw hash has a zero low half: it maps to 1, not 0.
    assert reference_murmur3_x86_32(b"k179888") & 0xFFFF == 0
    assert sticky_key_hash("k179888") == 1
