"""Where managed ledgers and their cursors live in the metadata store.

A managed-ledger name is a ``/``-separated string (``public/default/persistent/my-topic``). Each
name maps onto exactly one child of the factory's root, percent-encoded so that ``/`` inside the
name cannot create nesting: ``/managed-ledgers/public%2Fdefault%2Fpersistent%2Fmy-topic``. The
children of that node are the cursors, one node each, their names encoded the same way. A flat
layout keeps the mapping injective (no name can be mistaken for another's cursor) and makes
``list()`` a single ``children`` call.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from braid.ledger.api import InvalidCursorName, InvalidManagedLedgerName

#: Longest accepted name, in characters (Pulsar's topic names stay far below this).
MAX_NAME_LENGTH = 512


def _has_control_chars(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def validate_ledger_name(name: object) -> str:
    """Return ``name`` if it is a valid managed-ledger name.

    Raises:
        InvalidManagedLedgerName: not a string, empty, too long, an empty / ``.`` / ``..``
            segment, surrounding whitespace or control characters.
    """
    if not isinstance(name, str) or not name:
        raise InvalidManagedLedgerName(f"managed-ledger name must be a non-empty string: {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidManagedLedgerName(f"managed-ledger name longer than {MAX_NAME_LENGTH}")
    if _has_control_chars(name):
        raise InvalidManagedLedgerName(f"managed-ledger name has control characters: {name!r}")
    for segment in name.split("/"):
        if segment in ("", ".", "..") or segment != segment.strip():
            raise InvalidManagedLedgerName(f"bad segment {segment!r} in managed-ledger {name!r}")
    return name


def validate_cursor_name(name: object) -> str:
    """Return ``name`` if it is a valid cursor name.

    Raises:
        InvalidCursorName: not a string, empty, ``.``/``..``, too long or with control
            characters.
    """
    if not isinstance(name, str) or not name:
        raise InvalidCursorName(f"cursor name must be a non-empty string: {name!r}")
    if len(name) > MAX_NAME_LENGTH or _has_control_chars(name) or name in (".", ".."):
        raise InvalidCursorName(f"invalid cursor name: {name!r}")
    return name


def encode_segment(name: str) -> str:
    """Percent-encode ``name`` into one metadata path segment (only ``[A-Za-z0-9_.~-]`` and
    ``%XX`` remain)."""
    return quote(name, safe="")


def decode_segment(segment: str) -> str:
    """Inverse of :func:`encode_segment`."""
    return unquote(segment)


def ledger_path(root: str, name: str) -> str:
    """Metadata path of managed ledger ``name`` under ``root``."""
    return f"{root}/{encode_segment(validate_ledger_name(name))}"


def cursor_path(root: str, ledger_name: str, cursor_name: str) -> str:
    """Metadata path of cursor ``cursor_name`` of managed ledger ``ledger_name``."""
    return f"{ledger_path(root, ledger_name)}/{encode_segment(validate_cursor_name(cursor_name))}"
