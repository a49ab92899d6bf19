"""Which ledgers a trim may delete: consumed by every cursor and released by retention (pure).

Rules (ADR 0012, Pulsar's): only a prefix of the list, oldest first; never the last ledger (the
current one, or a terminated log's tail); a ledger qualifies when every cursor's mark-delete
position is at or past its last entry (with no cursors, retention alone decides) and retention
lets it go - its age since close reached ``retention_time_s`` *or* the log would still be larger
than ``retention_size_bytes`` without it. ``-1`` disables a limit; ``0`` frees consumed ledgers
at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from braid.ledger.api import LedgerInfo, ManagedLedgerConfig, Position


def is_consumed(info: LedgerInfo, slowest_mark_delete: Position | None) -> bool:
    """True when a cursor whose mark-delete is ``slowest_mark_delete`` has passed all of
    ``info``'s entries (``None``: there are no cursors)."""
    if slowest_mark_delete is None:
        return True
    if info.ledger_id < slowest_mark_delete.ledger_id:
        return True
    return (
        info.ledger_id == slowest_mark_delete.ledger_id
        and slowest_mark_delete.entry_id >= info.entries - 1
    )


def select_trimmable(
    view: Sequence[LedgerInfo],
    *,
    slowest_mark_delete: Position | None,
    config: ManagedLedgerConfig,
    now_ms: int,
) -> list[LedgerInfo]:
    """The oldest ledgers of ``view`` (all but its last) that may be deleted now, in order."""
    total = sum(info.size for info in view)
    chosen: list[LedgerInfo] = []
    freed = 0
    for info in view[:-1]:
        if not is_consumed(info, slowest_mark_delete):
            break
        expired = (
            config.retention_time_s >= 0
            and now_ms - info.timestamp_ms >= config.retention_time_s * 1000
        )
        over_size = config.retention_size_bytes >= 0 and total - freed > config.retention_size_bytes
        if not (expired or over_size):
            break
        chosen.append(info)
        freed += info.size
    return chosen
