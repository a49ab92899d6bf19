"""The storage calls a managed ledger makes: create its next ledger, recover one, delete one.

New ledgers go to the router's *active* cluster; an existing ledger is reached through the
cluster stamped on it (PIP-470 read routing).
"""

from __future__ import annotations

import logging

from braid.core.errors import BraidError
from braid.ledger.api import LedgerIdNotIncreasing, LedgerInfo, ManagedLedgerConfig
from braid.ledger.routing import StorageRouting
from braid.storage.api import (
    BookieUnavailable,
    InvalidQuorum,
    LedgerMetadata,
    NoSuchLedger,
    StorageClient,
    WriteHandle,
)

log = logging.getLogger(__name__)


def ledger_info_of(md: LedgerMetadata, timestamp_ms: int) -> LedgerInfo:
    """The ``LedgerInfo`` of a closed ledger from its storage metadata."""
    return LedgerInfo(
        ledger_id=md.ledger_id,
        entries=md.last_entry_id + 1,
        size=md.length,
        timestamp_ms=timestamp_ms,
        bookie_cluster_name=md.cluster_name,
    )


async def create_next_ledger(
    storage: StorageRouting, config: ManagedLedgerConfig, name: str, after_id: int
) -> WriteHandle:
    """Create the next ledger of ``name`` on the active cluster; its id must exceed ``after_id``.

    Raises:
        LedgerIdNotIncreasing: the active cluster's id generator is behind (PIP-470 I11).
        BookieUnavailable, InvalidQuorum: the ensemble and quorums cannot be met; the message
            names the settings that asked for them.
    """
    client = storage.active
    try:
        handle = await client.create_ledger(
            ensemble=config.ensemble,
            write_quorum=config.write_quorum,
            ack_quorum=config.ack_quorum,
            custom_metadata={"component": b"managed-ledger", "managed-ledger": name.encode()},
        )
    except (BookieUnavailable, InvalidQuorum) as exc:
        raise type(exc)(f"{name}: {quorum_settings(config)}: {exc}") from exc
    if handle.ledger_id <= after_id:
        await delete_quietly(client, handle.ledger_id)
        raise LedgerIdNotIncreasing(
            f"cluster {handle.cluster_name!r} created ledger {handle.ledger_id} for {name!r}, "
            f"not above its last ledger {after_id}: advance that cluster's id generator"
        )
    return handle


def quorum_settings(config: ManagedLedgerConfig) -> str:
    """The settings a ledger's ensemble and quorums come from, for error messages."""
    return (
        f"ensemble {config.ensemble}, write quorum {config.write_quorum}, ack quorum "
        f"{config.ack_quorum} (managedLedgerDefaultEnsembleSize/WriteQuorum/AckQuorum, or the "
        "namespace's persistence policies bookkeeperEnsemble/WriteQuorum/AckQuorum)"
    )


async def recover_ledger(storage: StorageRouting, info: LedgerInfo) -> LedgerMetadata:
    """Open ``info``'s ledger with recovery: fences its writer, closes it, returns its metadata."""
    handle = await storage.client_for(info.bookie_cluster_name).open_ledger(
        info.ledger_id, recovery=True
    )
    try:
        return handle.metadata
    finally:
        await handle.close()


async def delete_quietly(client: StorageClient, ledger_id: int) -> None:
    """Delete a ledger; it being gone already is fine, other failures are logged (a leak)."""
    try:
        await client.delete_ledger(ledger_id)
    except NoSuchLedger:
        pass
    except BraidError as exc:
        log.warning("could not delete ledger %s: %r", ledger_id, exc)
