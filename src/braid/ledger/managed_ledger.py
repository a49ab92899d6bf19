"""The managed ledger: a named log made of storage ledgers, listed in the metadata store.

One instance is the single owner of its log. It appends to one *current* ledger (created on the
active storage cluster), pipelining adds so several are in flight while their acknowledgements
come back in call order; it rolls over to a new ledger by entries / size / age, terminates (seals)
the log, trims ledgers every cursor has passed subject to retention, and reads any ledger through
the storage cluster stamped on it (PIP-470).

Ownership is enforced twice: every change of the ledger list is a compare-and-swap on the node's
version, and opening an existing log recovers - and so fences - its last ledger. An owner that
lost either race gets :class:`ManagedLedgerFenced` and stops. See ADR 0012.

This class decides when an append is issued and owns the ledger list, rollover, termination,
trimming, cursors and the log's lifecycle; the adds in flight on the current ledger are counted,
issued and reported in order by :class:`~braid.ledger.current_ledger.CurrentLedger`, and reads
across ledgers go through :class:`~braid.ledger.entry_reader.EntryReader`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from braid.clock import Clock
from braid.core.errors import BraidError, InvalidInputError
from braid.ledger import positions
from braid.ledger.api import (
    EARLIEST,
    LATEST,
    AppendCallback,
    CursorNotFound,
    Entry,
    InvalidPosition,
    LedgerInfo,
    ManagedCursor,
    ManagedLedgerClosed,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFenced,
    ManagedLedgerTerminated,
    Position,
)
from braid.ledger.codec import (
    ManagedLedgerInfo,
    encode_ledger_info,
)
from braid.ledger.current_ledger import CurrentLedger, PendingAdd, report
from braid.ledger.cursor import ManagedCursorImpl
from braid.ledger.cursor_store import CursorStoreContext
from braid.ledger.entry_reader import EntryReader
from braid.ledger.names import cursor_path, decode_segment, validate_cursor_name
from braid.ledger.retention import select_trimmable
from braid.ledger.routing import StorageRouting
from braid.ledger.storage_ops import (
    create_next_ledger,
    delete_quietly,
    ledger_info_of,
    recover_ledger,
)
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.storage.api import (
    LedgerFenced,
)

log = logging.getLogger(__name__)
_Ctx = TypeVar("_Ctx")
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _translate(exc: BaseException) -> BaseException:
    """Storage errors keep their Braid type, except fencing, which becomes the ledger's own."""
    if isinstance(exc, LedgerFenced | BadVersion):
        return ManagedLedgerFenced(f"another owner took over: {exc}")
    if isinstance(exc, BraidError | asyncio.CancelledError):
        return exc
    return ManagedLedgerError(f"unexpected storage failure: {exc!r}")


def _resolve(
    position: Position | None, error: BaseException | None, future: asyncio.Future[Position]
) -> None:
    """The callback of an awaited append: resolve its future (unless its caller gave up)."""
    if future.done():
        return  # a cancelled caller cancels only its own future; the append itself goes on
    if error is not None:
        future.set_exception(error)
    else:
        assert position is not None
        future.set_result(position)


class ManagedLedgerImpl:
    """The single-owner implementation of :class:`braid.ledger.api.ManagedLedger`.

    Made by :func:`braid.ledger.opening.open_managed_ledger` (the factory calls it).
    """

    def __init__(
        self,
        *,
        name: str,
        path: str,
        root: str,
        config: ManagedLedgerConfig,
        metadata: MetadataStore,
        storage: StorageRouting,
        clock: Clock,
        info: ManagedLedgerInfo,
        version: int,
        current: CurrentLedger | None,
        on_gone: Callable[[ManagedLedgerImpl], None],
    ) -> None:
        self._name = name
        self._path = path
        self._root = root
        self.config = config
        self._metadata = metadata
        self._storage = storage
        self._clock = clock
        self._version = version
        self._closed_ledgers: list[LedgerInfo] = list(info.ledgers)
        self._current = current
        self._properties = dict(info.properties)
        self._terminated = info.terminated
        self._terminated_position = info.terminated_position
        self._on_gone = on_gone

        self._waiting: deque[tuple[bytes, AppendCallback[Any], Any]] = deque()
        self._control: asyncio.Task[None] | None = None
        self._terminate_requested = False
        self._terminate_future: asyncio.Future[Position] | None = None
        self._meta_lock = asyncio.Lock()
        self._trim_lock = asyncio.Lock()
        self._cursor_lock = asyncio.Lock()
        self._cursors: dict[str, ManagedCursorImpl] = {}
        self._reader = EntryReader(storage, self._view, lambda: self._current)
        self._entry_waiters: list[asyncio.Future[None]] = []
        self._trim_task: asyncio.Task[None] | None = None
        self._trim_again = False
        self._fenced = False
        self._closing = False
        self._closed = False
        self._rollover_requested = False
        # PIP-470: roll the current ledger over even though it is not full (storage switch).
        self._roll_now = False
        self._age_task: asyncio.Task[None] | None = None
        if current is not None:
            self._watch_age(current)

    # -- opening ---------------------------------------------------------------------------------

    async def load_cursors(self) -> None:
        """Restore (and claim) every cursor stored under the log's node."""
        for child in await self._metadata.children(self._path):
            cursor_name = decode_segment(child)
            cursor = await ManagedCursorImpl.load(
                self, cursor_name, cursor_path(self._root, self._name, cursor_name)
            )
            if cursor is not None:
                self._cursors[cursor_name] = cursor

    # -- read-only state -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_terminated(self) -> bool:
        return self._terminated

    @property
    def is_fenced(self) -> bool:
        """True once another owner took over this log."""
        return self._fenced

    @property
    def ledgers(self) -> Sequence[LedgerInfo]:
        """Every ledger, oldest first; the current one with its live counts."""
        return self._view()

    @property
    def number_of_entries(self) -> int:
        return sum(info.entries for info in self._view())

    @property
    def total_size(self) -> int:
        return sum(info.size for info in self._view())

    @property
    def storage(self) -> StorageRouting:
        """The storage clusters this log's ledgers live on."""
        return self._storage

    @property
    def properties(self) -> Mapping[str, str]:
        """The log's stored properties."""
        return dict(self._properties)

    @property
    def last_confirmed_position(self) -> Position:
        return positions.last_confirmed(self._view())

    @property
    def cursors(self) -> Mapping[str, ManagedCursor]:
        return dict(self._cursors)

    def _view(self) -> list[LedgerInfo]:
        view = list(self._closed_ledgers)
        if self._current is not None:
            view.append(self._current.info())
        return view

    # -- position arithmetic over the ledger list (see positions.py) ----------------------------

    def _open_id(self) -> int | None:
        return self._current.ledger_id if self._current is not None else None

    def normalize(self, position: Position) -> Position:
        """The first position at or after ``position`` holding an entry (or next to write)."""
        return positions.normalize(self._view(), self._open_id(), position)

    def next_position(self, position: Position) -> Position:
        """The position that follows ``position`` (crossing into the next ledger when needed)."""
        return positions.next_position(self._view(), self._open_id(), position)

    def first_position_marker(self) -> Position:
        """The mark-delete position of a cursor that has consumed nothing: ``(first, -1)``."""
        return positions.first_marker(self._view())

    def count_after(self, position: Position) -> int:
        """Entries strictly after ``position``."""
        return positions.count_after(self._view(), position)

    def is_acknowledgeable(self, position: Position) -> bool:
        """A position a cursor may acknowledge (an entry so far, or ``(ledger, -1)``)."""
        return positions.is_acknowledgeable(self._view(), position)

    # -- appending -------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._fenced:
            raise ManagedLedgerFenced(f"managed ledger {self._name!r} was taken over")
        if self._closing or self._closed:
            raise ManagedLedgerClosed(f"managed ledger {self._name!r} is closed")
        if self._terminated or self._terminate_requested:
            raise ManagedLedgerTerminated(f"managed ledger {self._name!r} is terminated")

    def _is_full(self, cur: CurrentLedger) -> bool:
        cfg = self.config
        if cur.issued_entries >= cfg.max_entries_per_ledger:
            return True
        if cur.issued_size >= cfg.max_size_per_ledger:
            return True
        age = self._clock.monotonic() - cur.created_mono
        return cur.issued_entries > 0 and age >= cfg.max_ledger_age_s

    async def append(self, data: bytes) -> Position:
        """Append ``data``; returns its position once durable. Concurrent calls keep call order.

        The awaitable form of :meth:`append_with_callback` (one future per call).

        Raises:
            ManagedLedgerTerminated: the log is sealed.
            ManagedLedgerFenced: another owner took over.
            ManagedLedgerClosed: this instance was closed.
        """
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self.append_with_callback(data, _resolve, future)
        return await future

    def append_with_callback(self, data: bytes, callback: AppendCallback[_Ctx], ctx: _Ctx) -> None:
        """Append ``data``; ``callback(position, None, ctx)`` once durable or ``callback(None,
        error, ctx)``, once, in call order. The broker's publish path: no task, future or
        closure per entry.

        Raises:
            InvalidInputError: ``data`` is not bytes.
            ManagedLedgerTerminated, ManagedLedgerFenced, ManagedLedgerClosed: as :meth:`append`.
        """
        if type(data) is not bytes and not isinstance(data, _BYTES_LIKE):
            raise InvalidInputError(f"entry data must be bytes, got {type(data).__name__}")
        self._check_writable()
        payload = bytes(data)
        cur = self._current
        if (
            cur is not None
            and not cur.broken
            and not self._waiting
            and self._control is None
            and not self._is_full(cur)
        ):
            cur.issue(payload, callback, ctx, self._added)
            return
        if not self._waiting and self._control is None:
            # A rollover (or the recovery of a broken ledger, or the first ledger of a log taken
            # over while storage was read-only) is due. While storage cannot take entries (its
            # bookies are read-only: full disks) it would only create ledgers nobody can write
            # to, once per append: refuse now, in order; the next append after space comes back
            # rolls over.
            refusal = self._storage.active.write_refusal(self.config.ack_quorum)
            if refusal is not None:
                if cur is None:  # nothing issued is pending: this append is next in order
                    report(callback, ctx, None, refusal)
                else:
                    cur.refuse(len(payload), callback, ctx, refusal)
                return
        # A rollover (or recovery) must run first; it issues queued appends in order.
        self._waiting.append((payload, callback, ctx))
        self._ensure_control()

    def _added(self, entry_id: int, error: BaseException | None, op: PendingAdd) -> None:
        """Storage finished ``op`` (called from the bookie's group-commit completion)."""
        cur = op.ledger
        if error is not None:
            op.error = _translate(error)
            cur.broken = True
            cur.first_failure = min(cur.first_failure, op.expected_entry_id)
            if isinstance(op.error, ManagedLedgerFenced):
                self._on_fenced()
        else:
            op.entry_id = entry_id
            if entry_id != op.expected_entry_id:
                cur.broken = True
                cur.first_failure = min(cur.first_failure, op.expected_entry_id)
                op.error = ManagedLedgerError(
                    f"storage acknowledged entry {entry_id}, expected {op.expected_entry_id}"
                )
        op.done = True
        if cur.complete_in_order() and self._entry_waiters:
            self._notify_entries()

    def _ensure_control(self) -> None:
        if self._control is None:
            self._control = asyncio.create_task(self._control_loop())

    async def _control_loop(self) -> None:
        """Runs rollovers and termination, issuing queued appends in order between them."""
        try:
            while True:
                if self._fenced:
                    raise ManagedLedgerFenced(f"managed ledger {self._name!r} was taken over")
                if self._closed:
                    raise ManagedLedgerClosed(f"managed ledger {self._name!r} is closed")
                if self._waiting or self._rollover_requested:
                    self._rollover_requested = False
                    cur = self._current
                    roll_now, self._roll_now = self._roll_now, False
                    if (
                        cur is None
                        or cur.broken
                        or self._is_full(cur)
                        or (roll_now and cur.issued_entries > 0)
                    ):
                        await self._rollover()
                        continue
                    while self._waiting and not self._is_full(cur):
                        data, callback, ctx = self._waiting.popleft()
                        cur.issue(data, callback, ctx, self._added)
                    continue
                if self._terminate_requested and not self._terminated:
                    position = await self._do_terminate()
                    if self._terminate_future is not None and not self._terminate_future.done():
                        self._terminate_future.set_result(position)
                return
        except BaseException as exc:
            error = _translate(exc)
            if isinstance(error, ManagedLedgerFenced):
                self._on_fenced()
            self._fail_waiting(error)
            if self._terminate_future is not None and not self._terminate_future.done():
                self._terminate_future.set_exception(error)
                self._terminate_requested = self._terminated
                self._terminate_future = None
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._control = None

    def _watch_age(self, cur: CurrentLedger) -> None:
        """Roll ``cur`` over when it reaches the maximum age even if no append arrives, so an
        idle log's consumed data becomes trimmable (Pulsar's periodic roll check)."""
        if self._age_task is not None:
            self._age_task.cancel()
        self._age_task = asyncio.create_task(self._age_watch(cur))

    async def _age_watch(self, cur: CurrentLedger) -> None:
        max_age = self.config.max_ledger_age_s
        if max_age <= 0:
            return
        while True:
            remaining = cur.created_mono + max_age - self._clock.monotonic()
            # An empty ledger is not rolled: look again one period later.
            await self._clock.sleep(remaining if remaining > 0 else max_age)
            if self._current is not cur or self._closing or self._closed or self._fenced:
                return
            if cur.issued_entries > 0 and self._is_full(cur):
                self._rollover_requested = True
                self._ensure_control()
                return

    def request_rollover(self) -> None:
        """Roll the current ledger over now, full or not (an empty one is left alone), so the
        next entries go to a ledger of the active storage cluster (PIP-470: after a switch,
        a log's writes move to the new cluster without waiting for its ledger to fill)."""
        if self._closed or self._closing or self._fenced or self._terminated:
            return
        self._roll_now = True
        self._rollover_requested = True
        self._ensure_control()

    async def _drain(self, cur: CurrentLedger) -> None:
        """Wait until every add issued to ``cur`` has finished (acknowledged or failed)."""
        while cur.pending:
            if cur.drained is None or cur.drained.done():
                cur.drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(cur.drained)

    def _fail_waiting(self, error: BaseException) -> None:
        """Fail every append queued behind a rollover (they were never issued)."""
        while self._waiting:
            _, callback, ctx = self._waiting.popleft()
            report(callback, ctx, None, error)

    async def _finish_current(self) -> None:
        """Drain and close the current ledger, moving it to the closed list (memory only)."""
        cur = self._current
        if cur is None:
            return
        await self._drain(cur)
        if cur.broken:
            # Its content is uncertain: recovery tells what storage really holds.
            md = await recover_ledger(self._storage, cur.info())
        else:
            md = await cur.handle.close()
            self._reader.keep_closed(cur.handle)
        self._current = None
        if self._age_task is not None:
            self._age_task.cancel()  # it watched the ledger just closed
        self._closed_ledgers.append(ledger_info_of(md, self._clock.now_ms()))

    async def _rollover(self) -> None:
        async with self._meta_lock:
            try:
                await self._finish_current()
                view = self._view()
                after_id = view[-1].ledger_id if view else -1
                handle = await create_next_ledger(self._storage, self.config, self._name, after_id)
            except BaseException as exc:
                if isinstance(_translate(exc), ManagedLedgerFenced):
                    self._on_fenced()
                raise
            current = CurrentLedger(handle, self._clock.now_ms(), self._clock.monotonic())
            try:
                await self._write_info([*self._closed_ledgers, current.info()])
            except BaseException:
                await delete_quietly(self._storage.active, handle.ledger_id)
                raise
            self._current = current
            self._watch_age(current)
        self.schedule_trim()

    async def _write_info(
        self,
        ledgers: Sequence[LedgerInfo],
        *,
        terminated: bool = False,
        terminated_position: Position | None = None,
    ) -> None:
        """CAS the node; a lost race means another owner exists, so this one is fenced."""
        info = ManagedLedgerInfo(
            ledgers=tuple(ledgers),
            terminated=terminated,
            terminated_position=terminated_position,
            properties=self._properties,
        )
        try:
            stat = await self._metadata.put(
                self._path, encode_ledger_info(info), expected_version=self._version
            )
        except (BadVersion, NodeNotFound) as exc:
            self._on_fenced()
            raise ManagedLedgerFenced(f"ledger list of {self._name!r} changed: {exc}") from exc
        self._version = stat.version

    # -- termination -----------------------------------------------------------------------------

    async def terminate(self) -> Position:
        """Seal the log after every append already called; returns the last position.

        Idempotent; the termination (and its position) is stored and survives reopening.
        """
        if self._terminated and self._terminated_position is not None:
            return self._terminated_position
        if self._fenced:
            raise ManagedLedgerFenced(f"managed ledger {self._name!r} was taken over")
        if self._closing or self._closed:
            raise ManagedLedgerClosed(f"managed ledger {self._name!r} is closed")
        self._terminate_requested = True
        if self._terminate_future is None:
            self._terminate_future = asyncio.get_running_loop().create_future()
        future = self._terminate_future
        self._ensure_control()
        return await asyncio.shield(future)

    async def _do_terminate(self) -> Position:
        async with self._meta_lock:
            await self._finish_current()
            position = self.last_confirmed_position
            await self._write_info(
                self._closed_ledgers, terminated=True, terminated_position=position
            )
            self._terminated = True
            self._terminated_position = position
        self._notify_entries()
        return position

    # -- reading ---------------------------------------------------------------------------------

    async def read(self, position: Position, max_entries: int) -> list[Entry]:
        """Read up to ``max_entries`` entries from ``position`` (inclusive), across ledgers.

        A position in a trimmed ledger starts at the first ledger still present.
        """
        if max_entries < 1:
            raise InvalidInputError(f"max_entries must be positive, got {max_entries}")
        if self._closed:
            raise ManagedLedgerClosed(f"managed ledger {self._name!r} is closed")
        return await self._reader.read(position, max_entries)

    def wait_for_entries(self) -> asyncio.Future[None]:
        """A future completed at the next append, termination, fencing or close."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._entry_waiters.append(future)
        return future

    def _notify_entries(self) -> None:
        waiters, self._entry_waiters = self._entry_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    # -- cursors ---------------------------------------------------------------------------------

    async def open_cursor(self, name: str, initial_position: Position = LATEST) -> ManagedCursor:
        """Open cursor ``name``, creating it at ``initial_position`` when it does not exist.

        ``EARLIEST`` delivers from the first entry, ``LATEST`` from the next append, and a
        position delivers from that position on (everything before it counts as acknowledged).
        """
        validate_cursor_name(name)
        self._check_usable()
        async with self._cursor_lock:
            existing = self._cursors.get(name)
            if existing is not None:
                return existing
            if initial_position == EARLIEST:
                mark_delete = self.first_position_marker()
            elif initial_position == LATEST:
                mark_delete = self.last_confirmed_position
            else:
                if initial_position.entry_id < 0 or initial_position.ledger_id < 0:
                    raise InvalidPosition(f"invalid initial position {initial_position}")
                mark_delete = Position(initial_position.ledger_id, initial_position.entry_id - 1)
                if not self.is_acknowledgeable(mark_delete):
                    raise InvalidPosition(
                        f"initial position {initial_position} is beyond the end of {self._name!r}"
                    )
            cursor = await ManagedCursorImpl.create(
                self, name, cursor_path(self._root, self._name, name), mark_delete
            )
            self._cursors[name] = cursor
            return cursor

    async def delete_cursor(self, name: str) -> None:
        """Delete cursor ``name`` and its stored state. Raises :class:`CursorNotFound`."""
        validate_cursor_name(name)
        self._check_usable()
        async with self._cursor_lock:
            cursor = self._cursors.pop(name, None)
            if cursor is None:
                raise CursorNotFound(f"cursor {name!r} of {self._name!r} does not exist")
            await cursor.delete_state()
        self.schedule_trim()

    def _check_usable(self) -> None:
        if self._fenced:
            raise ManagedLedgerFenced(f"managed ledger {self._name!r} was taken over")
        if self._closed or self._closing:
            raise ManagedLedgerClosed(f"managed ledger {self._name!r} is closed")

    # -- trimming --------------------------------------------------------------------------------

    def schedule_trim(self) -> None:
        """Trim in the background (coalesced); cursor moves and rollovers call this."""
        if self._closed or self._closing or self._fenced:
            return
        if self._trim_task is not None:
            self._trim_again = True
            return
        self._trim_task = asyncio.create_task(self._background_trim())

    async def _background_trim(self) -> None:
        try:
            while True:
                self._trim_again = False
                try:
                    await self.trim()
                except ManagedLedgerError:
                    return
                except BraidError as exc:
                    log.warning("trimming %s failed: %r", self._name, exc)
                    return
                if not self._trim_again or self._closing:
                    return
        finally:
            self._trim_task = None

    def _deletable_ledgers(self) -> list[LedgerInfo]:
        """Oldest ledgers every cursor has passed and retention lets go (never the current)."""
        # The current ledger is always last in the view, and select_trimmable never takes the last.
        return select_trimmable(
            self._view(),
            slowest_mark_delete=min(
                (c.mark_delete_position for c in self._cursors.values()), default=None
            ),
            config=self.config,
            now_ms=self._clock.now_ms(),
        )

    async def trim(self) -> int:
        """Delete ledgers every cursor has passed and retention allows; returns how many.

        The ledger list is updated (CAS) before any ledger is deleted from storage, so a crash in
        between leaks storage at worst and never leaves the list pointing at a deleted ledger.
        """
        self._check_usable()
        # One trim at a time, storage deletions included, so a caller's trim() returns only
        # once a concurrent background trim has finished deleting too.
        async with self._trim_lock:
            return await self._trim_locked()

    async def _trim_locked(self) -> int:
        async with self._meta_lock:
            chosen = self._deletable_ledgers()
            if not chosen:
                return 0
            gone = {info.ledger_id for info in chosen}
            remaining = [info for info in self._closed_ledgers if info.ledger_id not in gone]
            view_rest = [*remaining] + ([self._current.info()] if self._current else [])
            await self._write_info(
                view_rest,
                terminated=self._terminated,
                terminated_position=self._terminated_position,
            )
            self._closed_ledgers = remaining
        for info in chosen:
            await self._reader.drop(info.ledger_id)
            await delete_quietly(self._storage.client_for(info.bookie_cluster_name), info.ledger_id)
        return len(chosen)

    # -- lifecycle -------------------------------------------------------------------------------

    def _on_fenced(self) -> None:
        if self._fenced:
            return
        self._fenced = True
        if self._age_task is not None:
            self._age_task.cancel()
        log.info("managed ledger %s was fenced by another owner", self._name)
        error = ManagedLedgerFenced(f"managed ledger {self._name!r} was taken over")
        if self._current is not None:
            # Ownership is checked before any receipt: an add storage acknowledged but not yet
            # reported may be on a ledger the new owner closed before it (ADR 0040).
            self._current.fail_unreported(error)
        self._fail_waiting(error)
        self._notify_entries()
        self._on_gone(self)

    async def _quiesce(self) -> None:
        """Stop accepting work and let queued appends, terminate and trims finish."""
        self._closing = True
        if self._age_task is not None:
            self._age_task.cancel()
            await asyncio.gather(self._age_task, return_exceptions=True)
        if self._control is not None:
            await asyncio.gather(self._control, return_exceptions=True)
        if self._trim_task is not None:
            await asyncio.gather(self._trim_task, return_exceptions=True)

    async def close(self) -> None:
        """Finish pending appends, flush every cursor, close the current ledger. Idempotent."""
        if self._closed:
            return
        await self._quiesce()
        for cursor in list(self._cursors.values()):
            if self._fenced:
                break  # the new owner has the cursors now
            try:
                await cursor.flush()
            except BraidError as exc:
                log.warning("flushing cursor %s of %s: %r", cursor.name, self._name, exc)
        if not self._fenced:
            async with self._meta_lock:
                try:
                    await self._finish_current()
                except BraidError as exc:
                    log.warning("closing the current ledger of %s: %r", self._name, exc)
        await self._release()

    async def _release(self) -> None:
        self._closed = True
        for cursor in self._cursors.values():
            cursor.mark_closed()
        await self._reader.close()
        self._notify_entries()
        self._on_gone(self)

    async def delete(self) -> None:
        """Delete every ledger, cursor and the metadata of this log."""
        self._check_usable()
        await self._quiesce()
        async with self._meta_lock:
            cur = self._current
            if cur is not None:
                await self._drain(cur)
            ledgers = self._view()
            # Metadata first: a crash afterwards leaks ledgers but never leaves dangling ones.
            await self._metadata.delete_recursive(self._path)
            self._current = None
            self._closed_ledgers = []
        await self._release()
        for cursor in self._cursors.values():
            await cursor.drop_storage()
        for info in ledgers:
            await delete_quietly(self._storage.client_for(info.bookie_cluster_name), info.ledger_id)

    # -- hooks used by cursors -------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The injected clock (cursors stamp ``lastActive`` with it)."""
        return self._clock

    def cursor_store_context(self) -> CursorStoreContext:
        """How this log's cursors persist their snapshots."""
        return CursorStoreContext(
            metadata=self._metadata,
            storage=self._storage,
            ledger_name=self._name,
            on_fenced=self.on_cursor_fenced,
            max_entries=self.config.max_entries_per_cursor_ledger,
            ensemble=self.config.ensemble,
            write_quorum=self.config.write_quorum,
            ack_quorum=self.config.ack_quorum,
            node_snapshots=self.config.cursor_node_snapshots,
        )

    def on_cursor_fenced(self) -> None:
        """A cursor's CAS lost: another owner has the log."""
        self._on_fenced()

    def check_cursor_usable(self) -> None:
        """Raise if this log is fenced or closed (cursors share its fate)."""
        self._check_usable()

    def __repr__(self) -> str:
        return f"ManagedLedgerImpl({self._name!r}, ledgers={len(self._view())})"
