"""Opening a managed ledger: create it, or take it over from a previous (crashed) owner.

Taking over = open the last ledger with recovery, which fences the previous writer and tells how
many entries it really holds; record that in the ledger list; create a new ledger on the active
cluster; CAS the list. A lost CAS means another opener raced, so the open starts over. Finally
every cursor is restored and claimed. See ADR 0012.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from braid.clock import Clock
from braid.ledger.api import (
    LedgerInfo,
    ManagedLedgerConfig,
    ManagedLedgerFenced,
    ManagedLedgerNotFound,
)
from braid.ledger.codec import ManagedLedgerInfo, decode_ledger_info, encode_ledger_info
from braid.ledger.current_ledger import CurrentLedger
from braid.ledger.managed_ledger import ManagedLedgerImpl
from braid.ledger.routing import StorageRouting
from braid.ledger.storage_ops import (
    create_next_ledger,
    delete_quietly,
    ledger_info_of,
    recover_ledger,
)
from braid.metadata.api import BadVersion, MetadataStore

#: How often an open retries after losing a compare-and-swap race with a concurrent opener.
OPEN_ATTEMPTS = 8


async def open_managed_ledger(
    *,
    name: str,
    path: str,
    root: str,
    config: ManagedLedgerConfig,
    metadata: MetadataStore,
    storage: StorageRouting,
    clock: Clock,
    create_if_missing: bool,
    on_gone: Callable[[ManagedLedgerImpl], None],
) -> ManagedLedgerImpl:
    """Create the log at ``path``, or take it over.

    Raises:
        ManagedLedgerNotFound: it does not exist and ``create_if_missing`` is false.
        ManagedLedgerMetadataError: its node (or a cursor's) is corrupt.
        ManagedLedgerFenced: concurrent openers kept winning the race.
    """

    def build(
        info: ManagedLedgerInfo, version: int, current: CurrentLedger | None
    ) -> ManagedLedgerImpl:
        return ManagedLedgerImpl(
            name=name,
            path=path,
            root=root,
            config=config,
            metadata=metadata,
            storage=storage,
            clock=clock,
            info=info,
            version=version,
            current=current,
            on_gone=on_gone,
        )

    last_error: BaseException | None = None
    for _ in range(OPEN_ATTEMPTS):
        got = await metadata.get(path)
        if got is None:
            if not create_if_missing:
                raise ManagedLedgerNotFound(f"managed ledger {name!r} does not exist")
            handle = await create_next_ledger(storage, config, name, -1)
            first = CurrentLedger(handle, clock.now_ms(), clock.monotonic())
            created = ManagedLedgerInfo(ledgers=(first.info(),))
            try:
                stat = await metadata.put(path, encode_ledger_info(created), expected_version=-1)
            except BadVersion as exc:  # created concurrently: take it over instead
                last_error = exc
                await delete_quietly(storage.active, handle.ledger_id)
                continue
            return build(ManagedLedgerInfo(), stat.version, first)

        data, stat = got
        info = decode_ledger_info(data)
        if info.terminated:
            # Sealed: terminate() closed its last ledger; nothing to recover, nothing to write.
            ml = build(info, stat.version, None)
            await ml.load_cursors()
            return ml

        ledgers = list(info.ledgers)
        empty_tail: LedgerInfo | None = None
        if ledgers:
            md = await recover_ledger(storage, ledgers[-1])  # fences the previous owner
            recovered = ledger_info_of(md, clock.now_ms())
            if recovered.entries == 0:
                # An empty tail ledger holds nothing: drop it instead of keeping it listed.
                empty_tail = ledgers.pop()
            else:
                ledgers[-1] = recovered
        after_id = info.ledgers[-1].ledger_id if info.ledgers else -1
        current: CurrentLedger | None = None
        if storage.active.write_refusal(config.ack_quorum) is None:
            handle = await create_next_ledger(storage, config, name, after_id)
            current = CurrentLedger(handle, clock.now_ms(), clock.monotonic())
        # else storage takes no entries now (its bookies are read-only: full disks): the log is
        # taken over without a ledger to write to. Reads go on; appends are refused with the
        # reason until space comes back, and the first one after that creates the ledger.
        new_ledgers = (*ledgers, current.info()) if current is not None else tuple(ledgers)
        taken_over = replace(info, ledgers=new_ledgers)
        try:
            stat = await metadata.put(
                path, encode_ledger_info(taken_over), expected_version=stat.version
            )
        except BadVersion as exc:  # another owner opened it meanwhile: start over
            last_error = exc
            if current is not None:
                await delete_quietly(storage.active, current.handle.ledger_id)
            continue
        if empty_tail is not None:
            await delete_quietly(
                storage.client_for(empty_tail.bookie_cluster_name), empty_tail.ledger_id
            )
        ml = build(replace(info, ledgers=tuple(ledgers)), stat.version, current)
        await ml.load_cursors()
        return ml
    raise ManagedLedgerFenced(f"could not open {name!r}: concurrent owners ({last_error})")
