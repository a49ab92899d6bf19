"""Ledger handles of :class:`~braid.storage.client.BookKeeperClient`: the writer and the reader.

A handle asks its client only what :class:`HandleClient` lists (bookies, health, placement,
metadata, reads) - it does not import the client.

The writer stripes entry ``e`` over its write set in the current fragment (positions
``(e + i) % E`` for ``i < write_quorum``, :mod:`braid.storage.distribution`) and acknowledges it
once ``ack_quorum`` of them have it durably (fsync'd) - and only after every lower entry was
acknowledged, so ``last_add_confirmed`` (LAC) only moves forward without gaps. Each add carries
the writer's LAC and running length so recovery can find both on the bookies (BookKeeper's
piggyback).

**Ensemble change** (BookKeeper's ``LedgerHandle.handleBookieFailure``): when a bookie of the
current ensemble fails an add - it is unreachable, timed out, its disk failed or turned
read-only (:func:`is_bookie_failure`) - the writer stops acknowledging, picks a replacement
(placement policy, never a bookie of the ensemble), and records a new fragment starting at
``LAC + 1`` in the ledger metadata with compare-and-swap (a conflict re-reads the document; a
ledger that is no longer OPEN - fenced by a recovery, closed - fails the handle with
:class:`LedgerFenced`). Only then does it re-send the unacknowledged entries whose write set
included the failed bookie to its replacement (an ack the failed bookie gave no longer counts)
and resume acknowledging in order. Every entry acknowledged so far is below the new fragment, so
no acknowledged entry ever changes fragment. With no replacement available the writer goes on
*degraded* while every write set can still reach an ack quorum (it retries the change on later
adds); otherwise it fails with :class:`~braid.storage.placement.NotEnoughBookies`.
A bookie that leaves the cluster's registry is moved off the same way without waiting for an add
(:meth:`LedgerWriter.bookies_changed`, ADR 0074), when every place can be filled.
``LedgerFenced`` / ``LedgerClosed`` from a bookie are not bookie failures: they break the handle
(the ledger has a new owner). An add that cannot reach an ack quorum of *writable* bookies and
has nowhere to move (a read-only bookie: its disk is full) is refused before anything is sent,
with ``StorageReadOnly``: no entry id is used, the handle stays intact.

Hot path (ADR 0014): one callback object per bookie of the ensemble (made at each ensemble
change, not per add), a precomputed write set per ``entry_id % E``, no task or future per add.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from braid.clock import Clock
from braid.storage.api import (
    AddCompletion,
    BookieUnavailable,
    InvalidEntryId,
    LedgerClosed,
    LedgerEntry,
    LedgerFenced,
    LedgerMetadata,
    LedgerState,
    StorageClosed,
    StorageError,
    StorageIOError,
    StorageReadOnly,
)
from braid.storage.bookie_client import BookieClient
from braid.storage.bookie_health import BookieHealth
from braid.storage.ledger_metadata import with_ensemble_change
from braid.storage.placement import NotEnoughBookies

log = logging.getLogger(__name__)
_Ctx = TypeVar("_Ctx")
#: One add in this many records its send time, so bookie latencies are sampled off the hot path.
LATENCY_SAMPLE_EVERY = 64
#: After an ensemble change found no replacement, try again on adds no sooner than this.
_DEGRADED_RETRY_S = 1.0


class HandleClient(Protocol):
    """What a ledger handle may ask of the client that opened it (``BookKeeperClient``)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def health(self) -> BookieHealth: ...

    def client_of(self, bookie_id: str) -> BookieClient | None:
        """The client of one bookie, or ``None`` when the cluster cannot name it any more."""
        ...

    def can_replace(self, ensemble: Sequence[str]) -> bool:
        """Whether some writable bookie outside ``ensemble`` could take a place in it."""
        ...

    def choose_replacements(
        self,
        ensemble: Sequence[str],
        indices: Sequence[int],
        write_quorum: int,
        exclude: Iterable[str] = (),
    ) -> dict[int, str]:
        """A replacement for the bookie at each of ``indices`` (raises ``NotEnoughBookies``)."""
        ...

    async def read_metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """The ledger's metadata and its version."""
        ...

    async def write_metadata(self, md: LedgerMetadata, version: int) -> bool:
        """CAS ``md`` over ``version``; ``False`` if the version moved."""
        ...

    async def read_range(
        self, md: LedgerMetadata, first: int, last: int, lac: int
    ) -> list[LedgerEntry]:
        """Entries ``first..last`` (<= ``lac``) of the ledger, from its bookies."""
        ...

    async def probe_lac(self, md: LedgerMetadata, known: int) -> int:
        """How far the writer of an open ledger got (for tailing readers)."""
        ...


def is_bookie_failure(exc: BaseException) -> bool:
    """Whether an add's error means its bookie should be replaced (ensemble change): it is
    unreachable or timed out, its disk failed or filled, or it shut down. Fencing and closing
    are not: the ledger has a new owner."""
    return isinstance(exc, BookieUnavailable | StorageReadOnly | StorageIOError | StorageClosed)


class _InFlight:
    """One add between send and confirmation."""

    __slots__ = ("acked", "callback", "ctx", "data", "length", "mask", "ok", "sent_at")

    def __init__(self, callback: AddCompletion[Any], ctx: Any, data: bytes, length: int) -> None:
        self.callback = callback
        self.ctx = ctx
        self.data = data  # kept to re-send it after an ensemble change
        self.length = length  # the running length piggybacked with it
        self.ok = 0
        self.mask = 0  # ensemble positions whose bookie has it durably
        self.acked = False  # reached the ack quorum (confirmed once every lower entry is)
        self.sent_at: float | None = None  # latency sample


class _Slot:
    """One position of the current ensemble: its bookie and the callback its answers come to.

    A slot object lives as long as its bookie holds the position: answers from a replaced
    bookie arrive at a slot that is no longer current and are ignored.
    """

    __slots__ = ("answer", "bookie_id", "client", "failed", "index")

    def __init__(
        self, writer: LedgerWriter, index: int, bookie_id: str, client: BookieClient | None
    ) -> None:
        self.index = index
        self.bookie_id = bookie_id
        self.client = client
        self.failed = client is None  # waiting for a replacement: adds skip it meanwhile
        self.answer: Callable[[int, StorageError | None], None] = functools.partial(
            writer._on_answer, self
        )


def _report(add: _InFlight, entry_id: int, error: BaseException | None) -> None:
    try:
        add.callback(entry_id, error, add.ctx)
    except Exception:  # one broken callback must not stop the adds confirmed after it
        log.exception("add completion callback failed")


def _resolve(entry_id: int, error: BaseException | None, waiter: asyncio.Future[int]) -> None:
    """The completion of an awaited add: resolve its future (unless its caller gave up)."""
    if waiter.done():
        return  # the caller was cancelled; the add itself went on
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(entry_id)


class LedgerWriter:
    """The single writer of a ledger (implements :class:`~braid.storage.api.WriteHandle`)."""

    def __init__(
        self,
        client: HandleClient,
        md: LedgerMetadata,
        version: int,
        *,
        explicit_entry_ids: bool,
    ) -> None:
        self._client = client
        self._md = md
        self._version = version
        #: Made by ``create_ledger_adv``: entries come with their ids (``add_entry_with_id``).
        self._explicit_entry_ids = explicit_entry_ids
        self._ack_quorum = md.ack_quorum
        self._next_id = 0
        self._lac = -1
        self._length = 0
        self._pending_length = 0
        self._loop = asyncio.get_running_loop()
        # Every add not yet confirmed or failed, by entry id.
        self._inflight: dict[int, _InFlight] = {}
        self._slots: list[_Slot] = []
        self._sets: list[list[_Slot]] = []  # write set of entry e: self._sets[e % E]
        self._set_slots(md.ensemble)
        self._changing = False  # an ensemble change is being recorded: acks are held
        self._change_task: asyncio.Task[None] | None = None
        self._retry_change_at = 0.0
        self.ensemble_changes = 0
        self._idle: asyncio.Event | None = None
        self._error: StorageError | None = None
        self._closing = False
        self._closed_md: LedgerMetadata | None = None

    def _set_slots(self, ensemble: Sequence[str]) -> None:
        old = {s.bookie_id: s for s in self._slots}
        slots = []
        for index, bookie_id in enumerate(ensemble):
            kept = old.get(bookie_id)
            if kept is not None and kept.index == index:
                slots.append(kept)
            else:
                slots.append(_Slot(self, index, bookie_id, self._client.client_of(bookie_id)))
        size, quorum = len(slots), self._md.write_quorum
        self._slots = slots
        self._sets = [[slots[(e + i) % size] for i in range(quorum)] for e in range(size)]

    @property
    def ledger_id(self) -> int:
        return self._md.ledger_id

    @property
    def cluster_name(self) -> str:
        return self._md.cluster_name

    @property
    def metadata(self) -> LedgerMetadata:
        """The metadata as last written by this writer (with its fragments), or as closed."""
        return self._closed_md or self._md

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._length

    def _check_writable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closing:
            raise LedgerClosed(f"ledger {self.ledger_id} is closed")

    async def add_entry(self, data: bytes) -> int:
        """Append ``data``; returns its entry id once an ack quorum has it durably."""
        self._check_writable()
        return await self._awaited(self._next_id, data)

    def add_entry_with_callback(
        self, data: bytes, callback: AddCompletion[_Ctx], ctx: _Ctx
    ) -> None:
        """Append ``data``; ``callback(entry_id, None, ctx)`` once an ack quorum has it durably,
        in entry-id order (or ``callback(-1, error, ctx)``). The managed ledger's hot path."""
        if self._error is not None or self._closing:
            self._check_writable()  # raises
        self._add(self._next_id, data, callback, ctx)

    async def add_entry_with_id(self, entry_id: int, data: bytes) -> int:
        """Append with an explicit id (``create_ledger_adv`` ledgers only), in order 0, 1, 2..."""
        self._check_writable()
        if not self._explicit_entry_ids:
            raise InvalidEntryId(
                f"ledger {self.ledger_id}: explicit entry ids need a ledger from create_ledger_adv"
            )
        if entry_id != self._next_id:
            raise InvalidEntryId(
                f"ledger {self.ledger_id}: expected entry id {self._next_id}, got {entry_id}"
            )
        return await self._awaited(entry_id, data)

    async def _awaited(self, entry_id: int, data: bytes) -> int:
        waiter: asyncio.Future[int] = self._loop.create_future()
        self._add(entry_id, data, _resolve, waiter)
        return await waiter

    # -- the add path ---------------------------------------------------------------------------
    def _add(self, entry_id: int, data: bytes, callback: AddCompletion[Any], ctx: Any) -> None:
        slots = self._sets[entry_id % len(self._sets)]
        for slot in slots:
            if slot.failed or slot.client.read_only_reason is not None:  # type: ignore[union-attr]
                self._unready(slots)  # may refuse (raises) or start an ensemble change
                break
        data = bytes(data)
        self._next_id = entry_id + 1
        self._pending_length += len(data)
        add = _InFlight(callback, ctx, data, self._pending_length)
        if not entry_id % LATENCY_SAMPLE_EVERY:
            add.sent_at = self._client.clock.monotonic()
        self._inflight[entry_id] = add
        # Callbacks, not a task per add: the bookie answers the writer directly, so a cancelled
        # caller can never leave a hole that stalls later adds.
        lid, lac, length = self._md.ledger_id, self._lac, self._pending_length
        for slot in slots:
            if slot.failed:
                continue  # sent to its replacement once the ensemble change is recorded
            try:
                slot.client.send_add(lid, entry_id, data, slot.answer, lac, length)  # type: ignore[union-attr]
            except StorageError as exc:
                slot.answer(entry_id, exc)

    def _unready(self, slots: list[_Slot]) -> None:
        """The slow path of an add whose write set has a failed or read-only bookie: move off
        read-only bookies when there is somewhere to go; refuse (nothing sent, nothing used) when
        no ack quorum of writable bookies is left and no ensemble change can fix that."""
        for slot in slots:
            client = slot.client
            if slot.failed or client is None or client.read_only_reason is None:
                continue
            if self._client.can_replace(self._md.ensemble):
                log.info(
                    "ledger %d: bookie %s is read-only (%s): moving off it",
                    self.ledger_id,
                    slot.bookie_id,
                    client.read_only_reason,
                )
                self._slot_failed(slot)
        if any(s.failed for s in slots):
            if self._change_task is None and (
                self._client.clock.monotonic() >= self._retry_change_at
            ):
                self._start_change()
            if self._change_task is not None:
                return  # the change sends this entry to the replacement
        refusals = [
            f"{s.bookie_id}: {'unreachable' if s.failed else s.client.read_only_reason}"  # type: ignore[union-attr]
            for s in slots
            if s.failed or s.client.read_only_reason is not None  # type: ignore[union-attr]
        ]
        if len(slots) - len(refusals) < self._ack_quorum:
            raise StorageReadOnly(
                f"ledger {self.ledger_id}: fewer than {self._ack_quorum} writable bookies "
                f"({'; '.join(refusals)})"
            )

    def _on_answer(self, slot: _Slot, entry_id: int, error: StorageError | None) -> None:
        """A bookie's answer to an add (called by the bookie client, on the loop)."""
        add = self._inflight.get(entry_id)
        if add is None or self._slots[slot.index] is not slot:
            return  # decided already, the handle failed, or an answer of a replaced bookie
        if error is None:
            bit = 1 << slot.index
            if add.mask & bit:
                return
            add.mask |= bit
            add.ok += 1
            if add.sent_at is not None:
                self._client.health.record_latency(
                    slot.bookie_id, self._client.clock.monotonic() - add.sent_at
                )
            if add.ok >= self._ack_quorum and not add.acked:
                add.acked = True
                if entry_id == self._lac + 1 and not self._changing:
                    self._advance()
            return
        if not is_bookie_failure(error):
            self._fail(error)  # fenced or closed: the ledger has a new owner
            return
        self._client.health.record_failure(slot.bookie_id)
        if not slot.failed:
            log.warning(
                "ledger %d: bookie %s failed entry %d: %s",
                self.ledger_id,
                slot.bookie_id,
                entry_id,
                error,
            )
            self._slot_failed(slot)
            self._start_change()

    def _slot_failed(self, slot: _Slot) -> None:
        slot.failed = True
        # Its acks no longer count: they are re-earned by the replacement (or the other bookies).
        bit = 1 << slot.index
        for add in self._inflight.values():
            if add.mask & bit:
                add.mask &= ~bit
                add.ok -= 1
                add.acked = add.ok >= self._ack_quorum

    def _advance(self) -> None:
        # Confirm in id order: an entry acked early waits for every lower one.
        inflight = self._inflight
        while True:
            add = inflight.get(self._lac + 1)
            if add is None or not add.acked:
                break
            del inflight[self._lac + 1]
            self._lac += 1
            self._length += len(add.data)
            try:  # inlined _report: this loop runs once per entry
                add.callback(self._lac, None, add.ctx)
            except Exception:  # one broken callback must not stop the adds confirmed after it
                log.exception("add completion callback failed")
        if not inflight and self._idle is not None and not self._changing:
            self._idle.set()

    def _fail(self, exc: StorageError) -> None:
        if self._error is None:
            self._error = exc
        # Nothing above the LAC can be confirmed any more: fail every waiting add, in order.
        failed = list(self._inflight.values())
        self._inflight.clear()
        for add in failed:
            _report(add, -1, self._error)
        if self._idle is not None:
            self._idle.set()

    # -- ensemble change ------------------------------------------------------------------------
    def bookies_changed(self, members: Container[str]) -> None:
        """The cluster's bookie registry changed; ``members`` are the bookies in it now (writable
        or read-only). Move off the bookies of the current ensemble that left it, without waiting
        for an add to time out on them (ADR 0074): an idle open ledger would otherwise name a
        departed bookie for as long as it stays idle, since auto-recovery leaves an open
        ledger's last fragment to its writer. A degraded writer (an earlier change found no
        replacement) retries at once, as a bookie may just have joined.

        Nothing happens unless every place can be filled now: with nowhere to go the writer
        stays as it is (the bookie may come back), and a failed add decides later.
        """
        if self._error is not None or self._closing:
            return
        failed = [s for s in self._slots if s.failed or s.bookie_id not in members]
        gone = [s for s in failed if not s.failed]
        if not failed or (not gone and self._change_task is not None):
            return
        try:
            self._client.choose_replacements(
                self._md.ensemble, [s.index for s in failed], self._md.write_quorum
            )
        except NotEnoughBookies:
            return
        for slot in gone:
            log.info(
                "ledger %d: bookie %s left the cluster: moving off it",
                self.ledger_id,
                slot.bookie_id,
            )
            self._slot_failed(slot)
        self._start_change()

    def _start_change(self) -> None:
        if self._change_task is None and self._error is None:
            self._changing = True
            self._change_task = self._loop.create_task(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        try:
            while self._error is None:
                failed = [s for s in self._slots if s.failed]
                if not failed:
                    break
                if not await self._record_change(failed):
                    break
        except StorageError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug must not leave adds hanging
            log.exception("ledger %d: ensemble change failed", self.ledger_id)
            self._fail(BookieUnavailable(f"ledger {self.ledger_id}: ensemble change failed: {exc}"))
        finally:
            self._change_task = None
            self._changing = False
            if self._error is None:
                self._advance()

    async def _record_change(self, failed: list[_Slot]) -> bool:
        """Replace the ``failed`` slots' bookies in a new fragment at LAC + 1 (CAS), then re-send.
        Returns ``False`` when it found no replacement and went on degraded."""
        ensemble = list(self._md.ensemble)
        try:
            replacements = self._client.choose_replacements(
                ensemble, [s.index for s in failed], self._md.write_quorum
            )
        except NotEnoughBookies as exc:
            return self._go_degraded(exc)
        for index, bookie_id in replacements.items():
            ensemble[index] = bookie_id
        md, version = self._md, self._version
        while True:
            start = self._lac + 1  # acks are held, so this cannot move while we write
            new_md = with_ensemble_change(md, start, tuple(ensemble))
            if await self._client.write_metadata(new_md, version):
                break
            md, version = await self._client.read_metadata(self.ledger_id)
            self._check_still_ours(md)
        if self._error is not None:
            return False
        self._md, self._version = new_md, version + 1
        self.ensemble_changes += 1
        log.info(
            "ledger %d: ensemble change at entry %d: %s -> %s",
            self.ledger_id,
            start,
            [s.bookie_id for s in failed],
            [replacements[s.index] for s in failed],
        )
        self._set_slots(ensemble)
        self._resend([s.index for s in failed])
        return True

    def _check_still_ours(self, md: LedgerMetadata) -> None:
        """After a CAS conflict: the ledger must still be OPEN with our last fragment (others may
        only have re-replicated earlier fragments)."""
        if md.state is not LedgerState.OPEN:
            raise LedgerFenced(
                f"ledger {self.ledger_id} is {md.state.value} (another client recovered it): "
                "this writer must stop"
            )
        if (
            md.last_fragment_start != self._md.last_fragment_start
            or md.ensemble != self._md.ensemble
        ):
            raise LedgerFenced(
                f"ledger {self.ledger_id}: its last fragment was changed by another client"
            )

    def _go_degraded(self, exc: NotEnoughBookies) -> bool:
        short = [
            positions
            for positions in self._sets
            if sum(1 for s in positions if not s.failed) < self._ack_quorum
        ]
        if short:
            self._fail(exc)
        else:
            log.warning(
                "ledger %d: %s; writing on with %d of %d copies until a bookie is available",
                self.ledger_id,
                exc,
                self._md.write_quorum - 1,
                self._md.write_quorum,
            )
            self._retry_change_at = self._client.clock.monotonic() + _DEGRADED_RETRY_S
        return False

    def _resend(self, indices: list[int]) -> None:
        """Send every unconfirmed entry whose write set holds a replaced position to its new
        bookie."""
        lid, lac = self._md.ledger_id, self._lac
        size = len(self._slots)
        for entry_id, add in list(self._inflight.items()):
            positions = self._sets[entry_id % size]
            for slot in positions:
                if slot.index not in indices or slot.failed:
                    continue
                try:
                    slot.client.send_add(  # type: ignore[union-attr]
                        lid, entry_id, add.data, slot.answer, lac, add.length
                    )
                except StorageError as exc:
                    slot.answer(entry_id, exc)

    # -- reading and closing --------------------------------------------------------------------
    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]:
        """Read confirmed entries ``first..last``."""
        return await self._client.read_range(self._md, first, last, self._lac)

    async def close(self) -> LedgerMetadata:
        """Wait for adds in flight, then record last entry id and length (CAS). Idempotent.

        Raises:
            LedgerFenced: another client is recovering the ledger.
        """
        if self._closed_md is not None:
            return self._closed_md
        self._closing = True
        while self._inflight or self._change_task is not None:
            # Wait until every add in flight is confirmed or failed (even if its caller left).
            if self._change_task is not None:
                await asyncio.shield(self._change_task)
                continue
            self._idle = asyncio.Event()
            await self._idle.wait()
        while True:
            md, version = await self._client.read_metadata(self.ledger_id)
            if md.state is LedgerState.CLOSED:
                # Recovered and closed by a new owner: its view is the ledger's final state.
                self._closed_md = md
                return md
            if md.state is LedgerState.IN_RECOVERY:
                raise LedgerFenced(f"ledger {self.ledger_id} is being recovered by another client")
            closed = dataclasses.replace(
                md, state=LedgerState.CLOSED, last_entry_id=self._lac, length=self._length
            )
            if await self._client.write_metadata(closed, version):
                self._closed_md = closed
                return closed


class LedgerReader:
    """A reader of a ledger (implements :class:`~braid.storage.api.ReadHandle`)."""

    def __init__(self, client: HandleClient, md: LedgerMetadata, lac: int) -> None:
        self._client = client
        self._md = md
        self._lac = lac
        self._closed = False

    @property
    def ledger_id(self) -> int:
        return self._md.ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._md

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    async def read_entries(self, first: int, last: int) -> list[LedgerEntry]:
        """Read entries ``first..last`` (at most :attr:`last_add_confirmed`)."""
        if self._closed:
            raise LedgerClosed(f"read handle of ledger {self.ledger_id} is closed")
        return await self._client.read_range(self._md, first, last, self._lac)

    async def refresh_last_add_confirmed(self) -> int:
        """Learn how far the writer got: from the metadata once closed, else from the bookies."""
        if self._md.state is LedgerState.CLOSED:
            return self._lac
        md, _ = await self._client.read_metadata(self.ledger_id)
        self._md = md
        if md.state is LedgerState.CLOSED:
            self._lac = md.last_entry_id
        else:
            self._lac = max(self._lac, await self._client.probe_lac(md, self._lac))
        return self._lac

    async def close(self) -> None:
        self._closed = True
