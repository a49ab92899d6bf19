"""Argument checks shared by the bookie and the client, so both reject bad ids the same way."""

from __future__ import annotations

from braid.storage.api import InvalidEntryId, InvalidLedgerId

#: Ledger ids are signed 64-bit in BookKeeper and Pulsar; Braid keeps them non-negative.
MAX_LEDGER_ID = 2**63 - 1
#: Entry ids fit comfortably below this (index offsets are entry_id * slot size in 64 bits).
MAX_ENTRY_ID = 2**62 - 1


def validate_ledger_id(ledger_id: int) -> int:
    """Return ``ledger_id`` if it is an int in ``0..2**63-1``, else raise ``InvalidLedgerId``."""
    if type(ledger_id) is not int:  # exact type: rejects bool, and is the cheapest check
        raise InvalidLedgerId(f"ledger id must be an int, got {ledger_id!r}")
    if not 0 <= ledger_id <= MAX_LEDGER_ID:
        raise InvalidLedgerId(f"ledger id must be in 0..2^63-1, got {ledger_id}")
    return ledger_id


def validate_entry_id(entry_id: int) -> int:
    """Return ``entry_id`` if it is an int in ``0..2**62-1``, else raise ``InvalidEntryId``."""
    if type(entry_id) is not int:
        raise InvalidEntryId(f"entry id must be an int, got {entry_id!r}")
    if not 0 <= entry_id <= MAX_ENTRY_ID:
        raise InvalidEntryId(f"entry id must be in 0..2^62-1, got {entry_id}")
    return entry_id
