"""A set of positions kept as disjoint inclusive ranges: a cursor's individually deleted entries.

Consumers acknowledge messages out of order; a cursor remembers those acknowledgements above its
mark-delete position. Storing each position would grow without bound, so (as Pulsar's
``RangeSet<Position>``) adjacent positions collapse into ranges. Ranges never span two ledgers:
whether ``(L, last)`` and ``(L', 0)`` are adjacent depends on the ledger list, which this pure
structure does not know - the cursor merges across ledger boundaries when it advances its
mark-delete position. No I/O, no asyncio: unit-tested with hypothesis.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

from braid.ledger.api import InvalidPosition, Position

#: One range as ``(ledger_id, first_entry_id, last_entry_id)``, inclusive at both ends.
_Range = tuple[int, int, int]


class PositionRangeSet:
    """Disjoint, sorted, inclusive ranges of positions, each within one ledger."""

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Iterable[tuple[Position, Position]] = ()) -> None:
        self._ranges: list[_Range] = []
        for first, last in ranges:
            self.add_range(first, last)

    # -- queries -------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of ranges (not positions)."""
        return len(self._ranges)

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        for ledger, first, last in self._ranges:
            yield Position(ledger, first), Position(ledger, last)

    def __contains__(self, position: object) -> bool:
        return isinstance(position, Position) and self.range_containing(position) is not None

    def ranges(self) -> list[tuple[Position, Position]]:
        """Every range as inclusive ``(first, last)``, in order."""
        return list(self)

    def count(self) -> int:
        """Number of positions in the set."""
        return sum(last - first + 1 for _, first, last in self._ranges)

    def count_above(self, position: Position) -> int:
        """Number of positions in the set strictly greater than ``position``."""
        total = 0
        for ledger, first, last in self._ranges[max(0, self._index_after(position) - 1) :]:
            lo = first
            if (ledger, first) <= (position.ledger_id, position.entry_id):
                if ledger != position.ledger_id or last <= position.entry_id:
                    continue
                lo = position.entry_id + 1
            total += last - lo + 1
        return total

    def first(self) -> tuple[Position, Position] | None:
        """The lowest range, or ``None`` when empty."""
        if not self._ranges:
            return None
        ledger, first, last = self._ranges[0]
        return Position(ledger, first), Position(ledger, last)

    def range_containing(self, position: Position) -> tuple[Position, Position] | None:
        """The range holding ``position``, or ``None``."""
        i = self._index_after(position) - 1
        if i < 0:
            return None
        ledger, first, last = self._ranges[i]
        if ledger == position.ledger_id and first <= position.entry_id <= last:
            return Position(ledger, first), Position(ledger, last)
        return None

    # -- updates -------------------------------------------------------------------------------

    def add(self, position: Position) -> None:
        """Add one position."""
        self.add_range(position, position)

    def add_range(self, first: Position, last: Position) -> None:
        """Add every position ``first..last`` (same ledger, ``first <= last``), merging neighbours.

        Raises:
            InvalidPosition: the range spans ledgers, is reversed or has a negative entry id.
        """
        if first.ledger_id != last.ledger_id:
            raise InvalidPosition(f"range {first}..{last} spans two ledgers")
        if first.entry_id < 0 or last.entry_id < first.entry_id:
            raise InvalidPosition(f"invalid range {first}..{last}")
        ledger, lo, hi = first.ledger_id, first.entry_id, last.entry_id
        # Every existing range of the same ledger that overlaps or touches [lo, hi] is absorbed.
        start = bisect.bisect_left(self._ranges, (ledger, lo, lo))
        if start > 0:
            pl, _, plast = self._ranges[start - 1]
            if pl == ledger and plast >= lo - 1:
                start -= 1
        end = start
        while end < len(self._ranges):
            nl, nfirst, nlast = self._ranges[end]
            if nl != ledger or nfirst > hi + 1:
                break
            lo = min(lo, nfirst)
            hi = max(hi, nlast)
            end += 1
        self._ranges[start:end] = [(ledger, lo, hi)]

    def remove_up_to(self, position: Position) -> None:
        """Forget every position ``<= position`` (after the mark-delete position moved there)."""
        cut = self._index_after(position)
        keep = self._ranges[cut:]
        if cut > 0:
            ledger, _first, last = self._ranges[cut - 1]
            if ledger == position.ledger_id and last > position.entry_id:
                keep.insert(0, (ledger, position.entry_id + 1, last))
        self._ranges = keep

    def pop_first(self) -> tuple[Position, Position] | None:
        """Remove and return the lowest range."""
        head = self.first()
        if head is not None:
            del self._ranges[0]
        return head

    def clear(self) -> None:
        """Remove everything."""
        self._ranges.clear()

    def copy(self) -> PositionRangeSet:
        """An independent copy."""
        other = PositionRangeSet()
        other._ranges = list(self._ranges)
        return other

    def _index_after(self, position: Position) -> int:
        """Index of the first range whose start is greater than ``position``."""
        return bisect.bisect_right(self._ranges, (position.ledger_id, position.entry_id, 2**63))

    def __repr__(self) -> str:
        inner = ", ".join(f"{ledger}:{f}..{last}" for ledger, f, last in self._ranges)
        return f"PositionRangeSet([{inner}])"
