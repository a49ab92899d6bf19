"""A durable cursor over a managed ledger: a subscription's acknowledgements and read position.

State: the cumulative *mark-delete* position (everything at or before it is acknowledged), the
individually deleted ranges above it (a :class:`PositionRangeSet`), the batch entries acknowledged
only in part (PIP-54: per entry, the ack-set words of the messages still unacknowledged, the AND of
every partial acknowledgement; the entry counts as deleted once no bit is left), properties stored
with the mark-delete (the broker's deduplication state) and an in-memory read position.

Persistence (ADR 0012, ``cursor_store.py``): the state is a JSON snapshot appended to the cursor's
own ledger, which its metadata node points at. Acknowledgements are frequent, so writes are
coalesced: at most one write is in flight and it carries the latest state; a caller's
``mark_delete``/``delete`` returns once a write that includes its change is durable. A crash loses
at most the acknowledgements whose write had not completed - those messages are redelivered
(at-least-once), never lost. The in-memory state moves first, so a decision a restart must not
undo (a scalable topic's segment counted drained, its children handed out) asks
``state_written`` or awaits ``write_state`` rather than reading ``backlog()`` alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import Protocol

from braid.clock import Clock
from braid.core import ack_set
from braid.core.errors import BraidError, InvalidInputError
from braid.ledger.api import (
    EARLIEST,
    LATEST,
    Entry,
    InvalidPosition,
    ManagedLedgerClosed,
    ManagedLedgerFenced,
    ManagedLedgerTerminated,
    Position,
)
from braid.ledger.codec import ManagedCursorInfo
from braid.ledger.cursor_store import CursorStore, CursorStoreContext
from braid.ledger.range_set import PositionRangeSet

log = logging.getLogger(__name__)

#: Most individually deleted ranges a snapshot keeps (the node must stay well under 1 MB). Ranges
#: beyond are dropped from the snapshot: after a restart those messages are redelivered.
MAX_PERSISTED_RANGES = 10_000
#: Most partly acknowledged batch entries a snapshot keeps (Pulsar's
#: ``maxBatchDeletedIndexToPersist``); the others are redelivered whole after a restart.
MAX_PERSISTED_BATCH_INDEXES = 10_000


def _check_properties(properties: Mapping[str, int]) -> dict[str, int]:
    checked: dict[str, int] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"cursor property {key!r}={value!r} is not str -> int")
        checked[key] = value
    return checked


class CursorLedger(Protocol):
    """What a cursor may ask of the managed ledger it reads (``ManagedLedgerImpl``): positions,
    reads, and the hooks that let it persist and wait. It never changes the ledger's state."""

    @property
    def name(self) -> str: ...

    @property
    def is_terminated(self) -> bool: ...

    @property
    def last_confirmed_position(self) -> Position: ...

    @property
    def clock(self) -> Clock: ...

    def normalize(self, position: Position) -> Position:
        """The first position at or after ``position`` holding an entry (or next to write)."""
        ...

    def next_position(self, position: Position) -> Position: ...

    def first_position_marker(self) -> Position:
        """The mark-delete position of a cursor that has consumed nothing."""
        ...

    def count_after(self, position: Position) -> int: ...

    def is_acknowledgeable(self, position: Position) -> bool: ...

    async def read(self, position: Position, max_entries: int) -> list[Entry]: ...

    def wait_for_entries(self) -> Awaitable[None]:
        """Completes at the next append, termination, fencing or close."""
        ...

    def schedule_trim(self) -> None:
        """Trim acknowledged ledgers in the background (the mark-delete moved)."""
        ...

    def cursor_store_context(self) -> CursorStoreContext: ...

    def check_cursor_usable(self) -> None:
        """Raise if the ledger is fenced or closed (cursors share its fate)."""
        ...


class ManagedCursorImpl:
    """The implementation of :class:`braid.ledger.api.ManagedCursor`; made by the ledger."""

    def __init__(
        self,
        ml: CursorLedger,
        name: str,
        info: ManagedCursorInfo,
        store: CursorStore,
    ) -> None:
        self._ml = ml
        self._name = name
        self._store = store
        self._mark_delete = info.mark_delete
        self._deleted = PositionRangeSet(info.individually_deleted)
        self._batch_deleted: dict[Position, ack_set.AckSet] = dict(info.batch_deleted_indexes)
        self._properties = dict(info.properties)
        self._read_position = ml.next_position(self._mark_delete)
        # Bumped by seek/reset/rewind so a read in flight does not overwrite a new position.
        self._read_epoch = 0
        self._dirty_gen = 0
        self._persisted_gen = 0
        self._persist_task: asyncio.Task[None] | None = None
        self._persist_waiters: list[tuple[int, asyncio.Future[None]]] = []
        # Serialises store writes with PIP-470 re-attribution (PIP-470's cursor lock).
        self._store_lock = asyncio.Lock()
        self._closed = False
        self._advance_mark_delete()

    # -- creation and loading --------------------------------------------------------------------

    @classmethod
    async def create(
        cls, ml: CursorLedger, name: str, path: str, mark_delete: Position
    ) -> ManagedCursorImpl:
        """Create the cursor's node at ``mark_delete``; an existing node is taken over instead."""
        info = ManagedCursorInfo(mark_delete=mark_delete, last_active_ms=ml.clock.now_ms())
        store = await CursorStore.create(ml.cursor_store_context(), name, path, info)
        if store is None:
            existing = await cls.load(ml, name, path)
            if existing is None:
                raise ManagedLedgerFenced(f"cursor {name!r} changed while it was created")
            return existing
        return cls(ml, name, info, store)

    @classmethod
    async def load(cls, ml: CursorLedger, name: str, path: str) -> ManagedCursorImpl | None:
        """Restore the cursor from its node (and cursor ledger) and claim it, so an earlier
        owner's next write fails. ``None`` if the node is gone."""
        loaded = await CursorStore.load(ml.cursor_store_context(), name, path)
        if loaded is None:
            return None
        store, info = loaded
        return cls(ml, name, info, store)

    # -- state -----------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def mark_delete_position(self) -> Position:
        return self._mark_delete

    @property
    def read_position(self) -> Position:
        self._read_position = self._ml.normalize(self._read_position)
        return self._read_position

    @property
    def properties(self) -> Mapping[str, int]:
        return dict(self._properties)

    @property
    def individually_deleted(self) -> Sequence[tuple[Position, Position]]:
        return self._deleted.ranges()

    def batch_deleted_indexes(self, position: Position) -> ack_set.AckSet | None:
        """The ack-set words of a batch entry acknowledged in part (bits set: messages still to
        deliver), or ``None`` when no message of it was acknowledged on its own."""
        return self._batch_deleted.get(position)

    def is_deleted(self, position: Position) -> bool:
        """True when ``position`` is acknowledged (cumulatively or individually)."""
        return position <= self._mark_delete or position in self._deleted

    def backlog(self) -> int:
        """Entries after the mark-delete position that are not individually acknowledged."""
        return self._ml.count_after(self._mark_delete) - self._deleted.count_above(
            self._mark_delete
        )

    def has_more_entries(self) -> bool:
        """True when entries exist at or after the read position (acknowledged ones included)."""
        position = self.read_position
        return self._ml.count_after(Position(position.ledger_id, position.entry_id - 1)) > 0

    def _check_usable(self) -> None:
        self._ml.check_cursor_usable()
        if self._closed:
            raise ManagedLedgerClosed(f"cursor {self._name!r} is closed")

    # -- reading ---------------------------------------------------------------------------------

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` unacknowledged entries from the read position."""
        if max_entries < 1:
            raise InvalidInputError(f"max_entries must be positive, got {max_entries}")
        self._check_usable()
        epoch = self._read_epoch
        position = self.read_position
        result: list[Entry] = []
        while len(result) < max_entries:
            position = self._skip_deleted(position)
            batch = await self._ml.read(position, max_entries - len(result))
            if not batch:
                break
            result.extend(e for e in batch if not self.is_deleted(e.position))
            position = self._ml.next_position(batch[-1].position)
        if epoch == self._read_epoch and position > self._read_position:
            self._read_position = position
        return result

    def _skip_deleted(self, position: Position) -> Position:
        """Jump over acknowledged positions without reading them."""
        position = self._ml.normalize(position)
        if position <= self._mark_delete:
            position = self._ml.next_position(self._mark_delete)
        while True:
            span = self._deleted.range_containing(position)
            if span is None:
                return position
            position = self._ml.next_position(span[1])

    async def read_entries_or_wait(self, max_entries: int) -> list[Entry]:
        """Like :meth:`read_entries`, but wait (without polling) until an entry arrives.

        Raises:
            ManagedLedgerTerminated: the log is terminated and this cursor has read all of it.
        """
        while True:
            entries = await self.read_entries(max_entries)
            if entries:
                return entries
            if self.has_more_entries():
                continue
            if self._ml.is_terminated:
                raise ManagedLedgerTerminated(
                    f"cursor {self._name!r} reached the end of terminated {self._ml.name!r}"
                )
            self._check_usable()
            await self._ml.wait_for_entries()

    # -- acknowledging ---------------------------------------------------------------------------

    async def mark_delete(
        self, position: Position, properties: Mapping[str, int] | None = None
    ) -> None:
        """Acknowledge everything up to and including ``position`` and store ``properties``.

        Raises:
            InvalidPosition: ``position`` is before the current mark-delete position or beyond
                the last entry.
        """
        self._check_usable()
        if position < self._mark_delete:
            raise InvalidPosition(
                f"mark-delete {position} is before the current mark-delete {self._mark_delete}"
            )
        if not self._ml.is_acknowledgeable(position):
            raise InvalidPosition(f"mark-delete {position} is beyond the last entry")
        checked = _check_properties(properties) if properties is not None else None
        previous = self._mark_delete
        self._mark_delete = position
        if checked is not None:
            self._properties = checked
        self._advance_mark_delete()
        self._after_move(previous)
        await self._persist()

    async def delete(self, positions: Sequence[Position]) -> None:
        """Acknowledge individual positions; a contiguous prefix advances the mark-delete."""
        self._check_usable()
        for position in positions:
            if position.entry_id < 0 or not self._ml.is_acknowledgeable(position):
                raise InvalidPosition(f"cannot acknowledge {position}: no such entry")
        previous = self._mark_delete
        for position in positions:
            if position > self._mark_delete:
                self._deleted.add(position)
                self._batch_deleted.pop(position, None)
        self._advance_mark_delete()
        self._after_move(previous)
        await self._persist()

    async def delete_batch_indexes(self, acks: Sequence[tuple[Position, Sequence[int]]]) -> None:
        """Acknowledge messages of batch entries (PIP-54): each ``(position, words)`` keeps set
        only the bits of the messages still unacknowledged; the entry's stored set becomes the AND
        of everything acknowledged so far, and the entry is deleted once no bit is left.

        Raises:
            InvalidPosition: a position that names no entry.
            InvalidInputError: a word that is not a signed 64-bit integer.
        """
        self._check_usable()
        checked = [(position, ack_set.check_words(words)) for position, words in acks]
        for position, _ in checked:
            if position.entry_id < 0 or not self._ml.is_acknowledgeable(position):
                raise InvalidPosition(f"cannot acknowledge {position}: no such entry")
        previous = self._mark_delete
        for position, words in checked:
            if self.is_deleted(position):
                continue
            held = self._batch_deleted.get(position)
            remaining = words if held is None else ack_set.intersect(held, words)
            if ack_set.is_empty(remaining):
                self._batch_deleted.pop(position, None)
                self._deleted.add(position)
            else:
                self._batch_deleted[position] = remaining
        self._advance_mark_delete()
        self._after_move(previous)
        await self._persist()

    def _advance_mark_delete(self) -> None:
        """Drop ranges below the mark-delete; absorb ranges that continue it (across ledgers)."""
        self._deleted.remove_up_to(self._mark_delete)
        while True:
            head = self._deleted.first()
            if head is None or head[0] != self._ml.next_position(self._mark_delete):
                break
            self._mark_delete = head[1]
            self._deleted.pop_first()
        if self._batch_deleted:
            for position in [p for p in self._batch_deleted if p <= self._mark_delete]:
                del self._batch_deleted[position]
        if self._read_position <= self._mark_delete:
            self._read_position = self._ml.next_position(self._mark_delete)

    def _after_move(self, previous: Position) -> None:
        if self._mark_delete.ledger_id != previous.ledger_id:
            self._ml.schedule_trim()

    # -- moving the read position ----------------------------------------------------------------

    async def seek(self, position: Position) -> None:
        """Move the read position, between the first unacknowledged entry and the next entry to
        be written; acknowledgements are kept."""
        self._check_usable()
        if position == LATEST:
            target = self._ml.next_position(self._ml.last_confirmed_position)
        elif position == EARLIEST:
            target = self._ml.next_position(self._mark_delete)
        else:
            # Clamped to the next entry to be written: a read position beyond it names nothing.
            end = self._ml.next_position(self._ml.last_confirmed_position)
            target = min(self._ml.normalize(position), end)
        first_unacked = self._ml.next_position(self._mark_delete)
        self._read_position = max(target, first_unacked)
        self._read_epoch += 1

    async def reset(self, position: Position) -> None:
        """Make ``position`` the next entry delivered: move mark-delete to just before it and
        forget individual acknowledgements (Pulsar's reset cursor)."""
        self._check_usable()
        if position == EARLIEST:
            mark_delete = self._ml.first_position_marker()
        elif position == LATEST:
            mark_delete = self._ml.last_confirmed_position
        else:
            if position.entry_id < 0 or position.ledger_id < 0:
                raise InvalidPosition(f"cannot reset to {position}")
            mark_delete = Position(position.ledger_id, position.entry_id - 1)
            if not self._ml.is_acknowledgeable(mark_delete):
                raise InvalidPosition(f"cannot reset to {position}: beyond the last entry")
        previous = self._mark_delete
        self._mark_delete = mark_delete
        self._deleted.clear()
        self._batch_deleted.clear()
        self._read_position = self._ml.next_position(mark_delete)
        self._read_epoch += 1
        self._after_move(previous)
        await self._persist()

    def rewind(self) -> None:
        """Read again from the first unacknowledged entry."""
        self._read_position = self._ml.next_position(self._mark_delete)
        self._read_epoch += 1

    # -- persistence -----------------------------------------------------------------------------

    def _snapshot(self) -> ManagedCursorInfo:
        return ManagedCursorInfo(
            mark_delete=self._mark_delete,
            individually_deleted=tuple(self._deleted.ranges()[:MAX_PERSISTED_RANGES]),
            batch_deleted_indexes=tuple(
                sorted(self._batch_deleted.items())[:MAX_PERSISTED_BATCH_INDEXES]
            ),
            properties=dict(self._properties),
            last_active_ms=self._ml.clock.now_ms(),
        )

    @property
    def state_written(self) -> bool:
        return self._persisted_gen >= self._dirty_gen

    @property
    def write_in_flight(self) -> bool:
        return self._persist_task is not None

    async def write_state(self) -> None:
        if self._persisted_gen >= self._dirty_gen:
            return
        if self._persist_task is None:
            await self._persist()  # the last write failed: write the state again
            return
        await self._written(self._dirty_gen)

    async def _persist(self) -> None:
        """Wait until a write containing the current state has succeeded (coalesced)."""
        self._dirty_gen += 1
        if self._persist_task is None:
            self._persist_task = asyncio.create_task(self._persist_loop())
        await self._written(self._dirty_gen)

    async def _written(self, generation: int) -> None:
        """Wait until the write loop has written ``generation`` (or failed)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._persist_waiters.append((generation, future))
        await asyncio.shield(future)

    async def _persist_loop(self) -> None:
        try:
            while self._persisted_gen < self._dirty_gen:
                generation = self._dirty_gen
                try:
                    await self._write(self._snapshot())
                except BaseException as exc:
                    error = exc if isinstance(exc, BraidError) else BraidError(repr(exc))
                    waiters, self._persist_waiters = self._persist_waiters, []
                    for _, future in waiters:
                        if not future.done():
                            future.set_exception(error)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    return
                self._persisted_gen = generation
                keep: list[tuple[int, asyncio.Future[None]]] = []
                for gen, future in self._persist_waiters:
                    if gen <= generation:
                        if not future.done():
                            future.set_result(None)
                    else:
                        keep.append((gen, future))
                self._persist_waiters = keep
        finally:
            self._persist_task = None

    async def _write(self, info: ManagedCursorInfo) -> None:
        async with self._store_lock:
            await self._store.write(info)

    @property
    def cursors_ledger_id(self) -> int:
        """The ledger the cursor's snapshots go to now (-1: none)."""
        return self._store.cursors_ledger_id

    async def reattribute_storage(
        self, expected_ledger_id: int, copied_last_entry: int, from_cluster: str, to_cluster: str
    ) -> bool:
        """PIP-470 PROMOTE / ROLLBACK of this cursor, under the cursor's write lock.

        Re-points the node at the copy of ``expected_ledger_id`` on ``to_cluster`` when the
        cursor has not written since it was copied (``True``); otherwise rolls the cursor over to
        a new ledger on the active cluster and returns ``False`` (promoted via rollover).

        Raises:
            ManagedLedgerFenced: another owner took the cursor over.
        """
        self._check_usable()
        async with self._store_lock:
            if await self._store.reattribute(
                expected_ledger_id, copied_last_entry, from_cluster, to_cluster
            ):
                return True
            if self._store.cursors_ledger_id == expected_ledger_id:
                self._store.request_rollover()
                await self._store.write(self._snapshot())
            return False

    async def flush(self) -> None:
        """Write the final state into the node and drop the cursor ledger (the log's close)."""
        if self._persist_task is not None:
            await asyncio.gather(self._persist_task, return_exceptions=True)
        async with self._store_lock:  # not between a PIP-470 re-attribution's read and CAS
            await self._store.close(self._snapshot())
        self._persisted_gen = self._dirty_gen

    async def delete_state(self) -> None:
        """Remove the cursor's node (``delete_cursor``)."""
        self._closed = True
        if self._persist_task is not None:
            await asyncio.gather(self._persist_task, return_exceptions=True)
        await self._store.delete()

    async def drop_storage(self) -> None:
        """Delete the cursor's ledgers (its node is deleted with the log's)."""
        if self._persist_task is not None:
            await asyncio.gather(self._persist_task, return_exceptions=True)
        await self._store.drop_ledgers()

    def mark_closed(self) -> None:
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"ManagedCursorImpl({self._name!r}, mark_delete={self._mark_delete}, "
            f"read={self._read_position}, ranges={len(self._deleted)})"
        )
