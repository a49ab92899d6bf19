"""The bookie: the storage engine of one storage node (journal + entry files + index).

See :mod:`braid.storage.bookie.engine` for the write/read paths and ADR 0011 for the design.
"""

from __future__ import annotations

from braid.storage.bookie.engine import MAX_ENTRY_SIZE, Bookie, LacInfo, StoredEntry

__all__ = ["MAX_ENTRY_SIZE", "Bookie", "LacInfo", "StoredEntry"]
