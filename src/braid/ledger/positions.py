"""Position arithmetic over a managed ledger's list of ledgers (pure: no I/O, no asyncio).

A position ``(ledger, entry)`` only has a successor relative to the ledger list: the entry after
the last one of a closed ledger is the first entry of the next non-empty ledger. ``open_id`` is the
ledger currently being written (``None`` when there is none): positions just past its end are
valid - they name the next entry to be written.
"""

from __future__ import annotations

from collections.abc import Sequence

from braid.ledger.api import EARLIEST, LATEST, LedgerInfo, Position


def last_confirmed(view: Sequence[LedgerInfo]) -> Position:
    """The last entry of the log; ``(last ledger, -1)`` when it has none; ``EARLIEST`` if no
    ledger exists."""
    for info in reversed(view):
        if info.entries > 0:
            return Position(info.ledger_id, info.entries - 1)
    return Position(view[-1].ledger_id, -1) if view else EARLIEST


def normalize(view: Sequence[LedgerInfo], open_id: int | None, position: Position) -> Position:
    """The first position at or after ``position`` that holds an entry or is the next one to be
    written; ``position`` itself when it lies beyond everything."""
    for info in view:
        if info.ledger_id < position.ledger_id:
            continue
        if info.ledger_id == position.ledger_id:
            if position.entry_id < info.entries or info.ledger_id == open_id:
                return Position(info.ledger_id, max(position.entry_id, 0))
            continue
        if info.entries > 0 or info.ledger_id == open_id:
            return Position(info.ledger_id, 0)
    return position


def next_position(view: Sequence[LedgerInfo], open_id: int | None, position: Position) -> Position:
    """The position that follows ``position``, crossing into the next ledger when needed."""
    if position == LATEST:
        position = last_confirmed(view)
    return normalize(view, open_id, Position(position.ledger_id, position.entry_id + 1))


def first_marker(view: Sequence[LedgerInfo]) -> Position:
    """The mark-delete position of a cursor that has consumed nothing: ``(first ledger, -1)``."""
    return Position(view[0].ledger_id, -1) if view else EARLIEST


def count_after(view: Sequence[LedgerInfo], position: Position) -> int:
    """Number of entries strictly after ``position``."""
    total = 0
    for info in view:
        if info.ledger_id > position.ledger_id:
            total += info.entries
        elif info.ledger_id == position.ledger_id:
            total += max(0, info.entries - (position.entry_id + 1))
    return total


def is_acknowledgeable(view: Sequence[LedgerInfo], position: Position) -> bool:
    """True for a position a cursor may acknowledge: an entry written so far, ``(ledger, -1)`` of
    a listed ledger, or anything in a ledger already trimmed away (a no-op)."""
    if position.entry_id < -1 or not view or position.ledger_id > view[-1].ledger_id:
        return False
    if position.ledger_id < view[0].ledger_id:
        return True
    for info in view:
        if info.ledger_id == position.ledger_id:
            return position.entry_id < info.entries
    return position.entry_id == -1  # a ledger id between two of ours holds no entries
