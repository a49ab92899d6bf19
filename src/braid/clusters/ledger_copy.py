"""Copying a ledger to another storage cluster with the same ledger id and the same entry ids
(PIP-470's ``LedgerCopyUtil``; invariant I10, ``docs/storage-switching.md``).

The copy is made with ``create_ledger_adv(ledger_id)`` and ``add_entry_with_id`` for every entry
``0..last``, with the source's quorum sizes and custom metadata, and then closed. If the id is
already taken on the target (``LedgerExists``: a BUILD retried after a crash or a partial run)
the existing copy is compared with the source: a closed copy with the same last entry id and
length is an idempotent success (counted as an id conflict); a copy left open by an interrupted
copy is deleted and made again (no reader can see it: attribution still names the source); a
closed copy that differs is a failure and the attribution stays on the source.
"""

from __future__ import annotations

import dataclasses

from braid.storage.api import (
    LedgerExists,
    LedgerMetadata,
    LedgerState,
    NoSuchLedger,
    ReadHandle,
    StorageClient,
    StorageError,
)

_READ_BATCH = 64


@dataclasses.dataclass(frozen=True, slots=True)
class CopyResult:
    """How a copy ended: ``copied_last_entry`` is the last entry id now on the target."""

    ok: bool
    copied_last_entry: int
    conflict: bool = False
    reason: str = ""


async def _source_handle(source: StorageClient, ledger_id: int, recover: bool) -> ReadHandle:
    handle = await source.open_ledger(ledger_id, recovery=recover)
    if not recover and handle.metadata.state is not LedgerState.CLOSED:
        await handle.refresh_last_add_confirmed()
    return handle


async def copy_ledger_preserving_ids(
    ledger_id: int, source: StorageClient, target: StorageClient, *, recover: bool = False
) -> CopyResult:
    """Copy ledger ``ledger_id`` of ``source`` into ``target`` under the same id and entry ids.

    ``recover`` opens the source with recovery (fencing its writer): only for a ledger nobody
    writes any more. Without it an open ledger is copied up to its last add confirmed.
    Failures are returned, not raised (``ok=False`` with the reason).
    """
    try:
        src = await _source_handle(source, ledger_id, recover)
    except StorageError as exc:
        return CopyResult(False, -1, reason=f"source ledger {ledger_id} unreadable: {exc}")
    try:
        md = src.metadata
        last = src.last_add_confirmed
        for attempt in range(2):
            try:
                return await _write_copy(src, md, last, target)
            except LedgerExists:
                verdict = await _verify_existing(target, ledger_id, md, last, src)
                if verdict is not None:
                    return verdict
                if attempt:
                    break
                await target.delete_ledger(ledger_id)  # an interrupted copy: make it again
        return CopyResult(False, -1, reason=f"ledger {ledger_id}: copy kept being replaced")
    except StorageError as exc:
        return CopyResult(False, -1, reason=f"copying ledger {ledger_id} failed: {exc}")
    finally:
        await src.close()


async def _write_copy(
    src: ReadHandle, md: LedgerMetadata, last: int, target: StorageClient
) -> CopyResult:
    dst = await target.create_ledger_adv(
        md.ledger_id,
        ensemble=len(md.ensemble),
        write_quorum=md.write_quorum,
        ack_quorum=md.ack_quorum,
        custom_metadata=dict(md.custom_metadata),
    )
    try:
        first = 0
        while first <= last:
            upto = min(last, first + _READ_BATCH - 1)
            for entry in await src.read_entries(first, upto):
                await dst.add_entry_with_id(entry.entry_id, entry.data)
            first = upto + 1
    finally:
        await dst.close()
    return CopyResult(True, last)


async def _verify_existing(
    target: StorageClient, ledger_id: int, md: LedgerMetadata, last: int, src: ReadHandle
) -> CopyResult | None:
    """A verdict on an existing copy, or ``None`` when it is an unfinished copy to redo."""
    try:
        existing = await target.get_ledger_metadata(ledger_id)
    except NoSuchLedger:
        return None
    if existing.state is not LedgerState.CLOSED:
        return None
    length = md.length if md.state is LedgerState.CLOSED else None
    if length is None and last >= 0:
        length = sum(len(e.data) for e in await src.read_entries(0, last))
    if existing.last_entry_id == last and existing.length == (length or 0):
        return CopyResult(True, last, conflict=True)
    return CopyResult(
        False,
        -1,
        conflict=True,
        reason=f"ledger {ledger_id} exists on {target.cluster_name} with last entry "
        f"{existing.last_entry_id} and length {existing.length}, the source has {last} and "
        f"{length}",
    )


__all__ = ["CopyResult", "copy_ledger_preserving_ids"]
