"""Inclusive hash ranges on the 16-bit ring: what a segment owns.

A :class:`HashRange` ``[start, end]`` covers every ring position ``start <= h <= end`` within
``MIN_HASH..MAX_HASH``. Splitting cuts at ``mid = start + (end - start) // 2`` into ``[start, mid]``
and ``[mid + 1, end]`` (PIP-468); merging joins two ranges that touch. The hex form ``0000-7fff`` is
the one used in segment topic names (``docs/protocol.md#segment-topic-names``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from braid.core.errors import InvalidInputError

MIN_HASH = 0
MAX_HASH = 0xFFFF
RING_SIZE = MAX_HASH + 1

# Exactly four lowercase hex digits per bound: the canonical form written by ``to_hex``, so a parsed
# range always formats back to the same text (names built from it stay unique).
_HEX_RANGE = re.compile(r"([0-9a-f]{4})-([0-9a-f]{4})")


class InvalidHashRange(InvalidInputError):
    """A hash range is malformed, out of the ring, or cannot take the requested split/merge."""


def _check_bound(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidHashRange(f"hash range {name} must be an integer, got {value!r}")
    if not MIN_HASH <= value <= MAX_HASH:
        raise InvalidHashRange(
            f"hash range {name} {value} is outside the ring 0x{MIN_HASH:04x}-0x{MAX_HASH:04x}"
        )
    return value


@dataclass(frozen=True, order=True, slots=True)
class HashRange:
    """An inclusive range ``[start, end]`` of the hash ring, ordered by ``(start, end)``.

    Raises:
        InvalidHashRange: a bound is not an integer in ``0..0xFFFF``, or ``end < start``.
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        _check_bound("start", self.start)
        _check_bound("end", self.end)
        if self.end < self.start:
            raise InvalidHashRange(
                f"hash range end 0x{self.end:04x} is below its start 0x{self.start:04x}"
            )

    @classmethod
    def full(cls) -> HashRange:
        """The whole ring ``[0000, ffff]``."""
        return cls(MIN_HASH, MAX_HASH)

    @property
    def size(self) -> int:
        """Number of ring positions covered (``end - start + 1``)."""
        return self.end - self.start + 1

    def contains(self, item: int | HashRange) -> bool:
        """Whether a ring position, or a whole range, lies inside this range."""
        if isinstance(item, HashRange):
            return self.start <= item.start and item.end <= self.end
        if isinstance(item, bool) or not isinstance(item, int):
            raise InvalidHashRange(f"contains() needs a hash or a HashRange, got {item!r}")
        return self.start <= item <= self.end

    def overlaps(self, other: HashRange) -> bool:
        """Whether the two ranges share at least one ring position."""
        return self.start <= other.end and other.start <= self.end

    def split(self, at: int | None = None) -> tuple[HashRange, HashRange]:
        """Cut into ``[start, at - 1]`` and ``[at, end]``; ``at=None`` cuts at the midpoint
        (``[start, mid]`` and ``[mid + 1, end]``).

        ``at`` is the first hash of the upper half, as Kinesis' ``NewStartingHashKey``.

        Raises:
            InvalidHashRange: the range covers a single position, or ``at`` is not inside it with
                at least one position on each side (``start < at <= end``).
        """
        if self.size < 2:
            raise InvalidHashRange(f"cannot split {self}: a range of size 1 has no midpoint")
        if at is None:
            at = self.start + (self.end - self.start) // 2 + 1
        elif isinstance(at, bool) or not isinstance(at, int) or not self.start < at <= self.end:
            raise InvalidHashRange(
                f"cannot split {self} at {at!r}: the split hash must be in "
                f"0x{self.start + 1:04x}..0x{self.end:04x} (the first hash of the upper half)"
            )
        return HashRange(self.start, at - 1), HashRange(at, self.end)

    def is_adjacent_to(self, other: HashRange) -> bool:
        """Whether the ranges touch with no gap and no overlap, on either side."""
        return self.end + 1 == other.start or other.end + 1 == self.start

    def merge(self, other: HashRange) -> HashRange:
        """The range covering both, given in either order.

        Raises:
            InvalidHashRange: the ranges are not adjacent.
        """
        if not self.is_adjacent_to(other):
            raise InvalidHashRange(f"cannot merge {self} and {other}: the ranges are not adjacent")
        return HashRange(min(self.start, other.start), max(self.end, other.end))

    def to_hex(self) -> str:
        """The name form ``0000-7fff``."""
        return f"{self.start:04x}-{self.end:04x}"

    @classmethod
    def from_hex(cls, text: str) -> HashRange:
        """Parse the name form ``0000-7fff`` (four lowercase hex digits per bound).

        Raises:
            InvalidHashRange: the text is not in that form or the bounds are out of order.
        """
        if not isinstance(text, str):
            raise InvalidHashRange(f"a hex hash range must be a string, got {text!r}")
        match = _HEX_RANGE.fullmatch(text)
        if match is None:
            raise InvalidHashRange(
                f"invalid hex hash range {text!r}: expected 'ssss-eeee' with four lowercase hex "
                "digits per bound, e.g. '0000-7fff'"
            )
        return cls(int(match.group(1), 16), int(match.group(2), 16))

    def __str__(self) -> str:
        return f"[{self.start:04x}, {self.end:04x}]"


__all__ = ["MAX_HASH", "MIN_HASH", "RING_SIZE", "HashRange", "InvalidHashRange"]
