"""A persistent topic's transaction buffer (Pulsar's ``TopicTransactionBuffer``; ADR 0065).

A message sent in a transaction is stored in the topic's managed ledger like any other message -
its ``MessageMetadata`` names the transaction - and is acknowledged to the producer once durable.
Ending the transaction on the topic appends a *marker* entry (``marker_type`` ``TXN_COMMIT`` or
``TXN_ABORT``, the transaction id in the metadata). Visibility is decided at dispatch:

* the **max read position** is the position just before the first entry of the oldest transaction
  still open on this topic (the last confirmed entry when none is open): no cursor reads past it,
  so neither an open transaction's messages nor anything stored after them is dispatched ahead of
  its outcome;
* entries of an **aborted** transaction and markers are never delivered (the dispatcher
  acknowledges them on every subscription so backlogs drain).

Invariants: the buffer is the one owner of the topic's transaction state; a transaction is *open*
here from its first SEND (its bound is then the last confirmed position, refined to the entry
before its first stored entry once that is known) until its marker is durable. The state is
rebuilt on load from the topic's last snapshot (:mod:`.buffer_snapshot`, ADR 0071) plus a replay
of the ledger from the entry after the snapshot's max read position (from the start without one),
so a crash loses nothing that was acknowledged. A snapshot is taken when
``transactionBufferSnapshotMaxTransactionCount`` transactions have ended on the topic since the
last one (before the END_TXN_ON_PARTITION answer), or ``transactionBufferSnapshotMinTimeInMillis``
after the last one when any ended meanwhile; an aborted transaction whose marker's ledger was
trimmed is then forgotten. An end for a transaction already ended here is answered again without a
second marker. A terminated ledger (a sealed segment) takes no marker: the outcome is recorded by
:class:`~braid.broker.transactions.sealed.SealedOutcomes` (ADR 0069), the ledger's last entry
standing for the marker's position.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from braid.broker.entries import CorruptEntry, parse_metadata
from braid.broker.errors import InvalidTxnStatus
from braid.broker.transactions.buffer_snapshot import BufferSnapshot, BufferSnapshots
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.sealed import SealedOutcomes
from braid.clock import Clock, TimerHandle
from braid.ledger.api import Entry, ManagedLedger, Position
from braid.metadata.api import BadVersion
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: Entries read per call while replaying the ledger on load.
_REPLAY_BATCH = 500
#: The producer name marker entries carry (they come from no client).
MARKER_PRODUCER = "__txn_marker"
_END_MARKERS = {
    pb.TxnAction.COMMIT: pb.MarkerType.TXN_COMMIT,
    pb.TxnAction.ABORT: pb.MarkerType.TXN_ABORT,
}


def is_txn_marker(meta: pb.MessageMetadata) -> bool:
    """Whether ``meta`` is a transaction marker's (never dispatched)."""
    return meta.HasField("marker_type") and meta.marker_type != pb.MarkerType.UNKNOWN_MARKER


def marker_entry(txn: TxnId, action: pb.TxnAction.ValueType, publish_time_ms: int) -> bytes:
    """The stored bytes of the marker that ends ``txn`` with ``action`` on a topic."""
    meta = pb.MessageMetadata(
        producer_name=MARKER_PRODUCER,
        sequence_id=0,
        publish_time=publish_time_ms,
        marker_type=_END_MARKERS[action],
        txnid_most_bits=txn.most_bits,
        txnid_least_bits=txn.least_bits,
    )
    return encode_message_body(meta, b"")


@dataclass(frozen=True)
class SnapshotPolicy:
    """When a buffer takes a snapshot (Pulsar's keys and defaults)."""

    #: ``transactionBufferSnapshotMaxTransactionCount``: ended transactions between snapshots.
    max_transactions: int = 1000
    #: ``transactionBufferSnapshotMinTimeInMillis``: the least time between two snapshots.
    min_interval_ms: int = 5000

    def __post_init__(self) -> None:
        if self.max_transactions < 1 or self.min_interval_ms < 0:
            raise ValueError(f"invalid transaction buffer snapshot policy: {self}")


def _retained(position: Position, ledgers: list[int]) -> bool:
    """Whether ``position`` is in a ledger retention has not trimmed (``ledgers``: the retained
    ones, in order)."""
    return not ledgers or position.ledger_id >= ledgers[0]


def _before(position: Position) -> Position | None:
    """The entry position just before ``position`` in its ledger (``None`` at entry 0)."""
    if position.entry_id > 0:
        return Position(position.ledger_id, position.entry_id - 1)
    return None


class TransactionBuffer:
    """The transaction state of one persistent topic."""

    def __init__(
        self,
        topic_name: str,
        ledger: ManagedLedger,
        clock: Clock,
        snapshots: BufferSnapshots | None = None,
        policy: SnapshotPolicy | None = None,
    ) -> None:
        self.topic_name = topic_name
        self.ledger = ledger
        self.clock = clock
        self.snapshots = snapshots
        self._policy = policy or SnapshotPolicy()
        # Open transaction -> the highest position that may be read while it is open.
        self._open: dict[TxnId, Position] = {}
        # Open transactions whose bound is still the conservative one (first entry not stored).
        self._unrefined: set[TxnId] = set()
        # Ended transactions -> the position of their marker.
        self._aborted: dict[TxnId, Position] = {}
        self._committed: dict[TxnId, Position] = {}
        #: Called when the max read position may have moved (the topic wakes its dispatchers).
        self.listeners: list[Callable[[], None]] = []
        #: Whether this topic ever held a transactional entry or marker (else dispatch skips the
        #: per-entry check entirely).
        self.used = False
        #: Where outcomes go once the ledger is terminated (a sealed segment takes no marker:
        #: ADR 0069); set by the broker before :meth:`recover`.
        self.sealed: SealedOutcomes | None = None
        #: Entries the last load replayed, and whether it started from a snapshot.
        self.replayed_entries = 0
        self.recovered_from_snapshot = False
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        #: The last snapshot stored (or loaded), ``None`` before the first.
        self.snapshot: BufferSnapshot | None = None
        self._ended_since_snapshot = 0
        self._snapshot_lock = asyncio.Lock()
        self._snapshot_timer: TimerHandle | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._last_snapshot_at = clock.monotonic()
        self._deposed = False
        self._closed = False

    # -- load ----------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Rebuild the state: the last snapshot, then a replay of the entries after its max read
        position (of every retained entry without a snapshot), in order."""
        self.recover_start_ms = self.clock.now_ms()
        position = Position(0, 0)
        last = self.ledger.last_confirmed_position
        snapshot = await self.snapshots.load() if self.snapshots is not None else None
        if snapshot is not None and snapshot.position > last:
            log.warning(
                "transaction buffer snapshot of %s covers %s, past the ledger's end %s; ignored",
                self.topic_name,
                snapshot.position,
                last,
            )
            snapshot = None
        if snapshot is not None:
            self.snapshot = snapshot
            self.recovered_from_snapshot = True
            self.used = True
            self._aborted = snapshot.pruned(info.ledger_id for info in self.ledger.ledgers)
            position = self.ledger.next_position(snapshot.max_read_position)
        replayed = 0
        while last.entry_id >= 0 and position <= last:
            entries = await self.ledger.read(position, _REPLAY_BATCH)
            if not entries:
                break
            for entry in entries:
                self._replay(entry)
            replayed += len(entries)
            tail = entries[-1].position
            if tail >= last:
                break
            position = self.ledger.next_position(tail)
        self.replayed_entries = replayed
        if self._open and self.sealed is not None and self.ledger.is_terminated:
            # Ended after the seal: the outcome is recorded instead of a marker (ADR 0069); the
            # sealed ledger's last entry stands for the marker's position.
            end = self.ledger.last_confirmed_position
            for txn, aborted in (await self.sealed.outcomes(list(self._open))).items():
                self._ended(txn, aborted, end)
        self.recover_end_ms = self.clock.now_ms()
        if self.used:
            log.info(
                "transaction buffer of %s recovered from %s and %d entries: %d open, %d aborted",
                self.topic_name,
                "a snapshot" if snapshot is not None else "no snapshot",
                replayed,
                len(self._open),
                len(self._aborted),
            )

    def _replay(self, entry: Entry) -> None:
        try:
            meta = parse_metadata(entry.data)
        except CorruptEntry:
            return
        if not meta.HasField("txnid_most_bits"):
            return
        txn = TxnId.of(meta)
        self.used = True
        if is_txn_marker(meta):
            self._ended(txn, meta.marker_type == pb.MarkerType.TXN_ABORT, entry.position)
            return
        if txn in self._open or txn in self._aborted or txn in self._committed:
            return
        before = _before(entry.position)
        self._open[txn] = before if before is not None else Position(entry.position.ledger_id, -1)

    # -- sends ---------------------------------------------------------------------------------

    def check_send(self, txn: TxnId) -> InvalidTxnStatus | None:
        """Why a SEND in ``txn`` must be refused here (it already ended on this topic)."""
        if txn in self._aborted or txn in self._committed:
            return InvalidTxnStatus(f"transaction {txn} has already ended on {self.topic_name}")
        return None

    def on_send(self, txn: TxnId) -> None:
        """A SEND in ``txn`` is being appended: hold reads at the last confirmed position until
        its first entry's position is known."""
        self.used = True
        if txn not in self._open:
            self._open[txn] = self.ledger.last_confirmed_position
            self._unrefined.add(txn)

    def on_appended(self, txn: TxnId, position: Position) -> None:
        """``txn``'s entry is durable at ``position`` (called in ledger order)."""
        if txn not in self._unrefined:
            return
        self._unrefined.discard(txn)
        before = _before(position) or Position(position.ledger_id, -1)
        if txn in self._open and before > self._open[txn]:
            self._open[txn] = before
            self._notify()

    # -- ending --------------------------------------------------------------------------------

    async def end(self, txn: TxnId, action: pb.TxnAction.ValueType) -> None:
        """Append ``txn``'s commit or abort marker and apply it (END_TXN_ON_PARTITION); take a
        snapshot when ``max_transactions`` have ended since the last one.

        Raises:
            InvalidTxnStatus: it already ended here the other way.
        """
        aborting = action == pb.TxnAction.ABORT
        if txn in (self._committed if aborting else self._aborted):
            raise InvalidTxnStatus(
                f"transaction {txn} already ended on {self.topic_name} the other way"
            )
        if txn in (self._aborted if aborting else self._committed):
            return
        self.used = True
        if self.sealed is not None and self.ledger.is_terminated:
            await self.sealed.record(txn, aborting)  # a sealed ledger takes no marker (ADR 0069)
            position = self.ledger.last_confirmed_position  # stands for the marker's
        else:
            position = await self.ledger.append(marker_entry(txn, action, self.clock.now_ms()))
        self._ended(txn, aborting, position)
        self._notify()
        self._ended_since_snapshot += 1
        if self._ended_since_snapshot >= self._policy.max_transactions:
            await self.take_snapshot()
        else:
            self._arm_snapshot_timer()

    def _ended(self, txn: TxnId, aborted: bool, marker: Position) -> None:
        self._open.pop(txn, None)
        self._unrefined.discard(txn)
        (self._aborted if aborted else self._committed)[txn] = marker

    def _notify(self) -> None:
        for listener in self.listeners:
            listener()

    # -- snapshots -----------------------------------------------------------------------------

    async def take_snapshot(self) -> BufferSnapshot | None:
        """Store the current state as the topic's snapshot (forgetting ended transactions whose
        marker's ledger was trimmed); ``None`` when there is nowhere to store it or it failed
        (logged: the next load replays more, nothing is lost)."""
        if self.snapshots is None or self._deposed:
            return None
        async with self._snapshot_lock:
            retained = [info.ledger_id for info in self.ledger.ledgers]
            last = self.ledger.last_confirmed_position
            limit = self.max_read_position()
            pending = self._ended_since_snapshot
            limit = last if limit is None or limit > last else limit
            aborted = {t: at for t, at in self._aborted.items() if _retained(at, retained)}
            taken = BufferSnapshot(aborted, limit, last, self.clock.now_ms())
            try:
                stored = await self.snapshots.save(taken)
            except BadVersion:
                self._deposed = True
                log.warning(
                    "transaction buffer snapshot of %s was written by another owner",
                    self.topic_name,
                )
                return None
            except Exception as exc:
                log.warning("transaction buffer snapshot of %s failed: %s", self.topic_name, exc)
                return None
            self.snapshot = stored
            self._ended_since_snapshot = max(0, self._ended_since_snapshot - pending)
            self._last_snapshot_at = self.clock.monotonic()
            self._forget_trimmed(retained)
            return stored

    def _forget_trimmed(self, retained: list[int]) -> None:
        for ended in (self._aborted, self._committed):
            for txn in [t for t, at in ended.items() if not _retained(at, retained)]:
                del ended[txn]

    def _arm_snapshot_timer(self) -> None:
        if self._snapshot_timer is not None or self.snapshots is None or self._closed:
            return
        when = self._last_snapshot_at + self._policy.min_interval_ms / 1000
        self._snapshot_timer = self.clock.call_at(when, self._on_snapshot_timer)

    def _on_snapshot_timer(self) -> None:
        self._snapshot_timer = None
        if self._closed or self._ended_since_snapshot == 0:
            return
        if self._snapshot_task is not None and not self._snapshot_task.done():
            return
        self._snapshot_task = asyncio.ensure_future(self._timed_snapshot())

    async def _timed_snapshot(self) -> None:
        await self.take_snapshot()
        if self._ended_since_snapshot:
            self._arm_snapshot_timer()

    async def close(self) -> None:
        """The topic is unloading: stop the snapshot timer (a crash instead is what the snapshot
        and the replay after it are for)."""
        self._closed = True
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
            self._snapshot_timer = None
        task = self._snapshot_task
        if task is not None and not task.done():
            await asyncio.gather(task, return_exceptions=True)

    # -- what dispatch sees --------------------------------------------------------------------

    def max_read_position(self) -> Position | None:
        """The last position a cursor may read now (``None``: no transaction is open)."""
        if not self._open:
            return None
        return min(self._open.values())

    def is_aborted(self, txn: TxnId) -> bool:
        return txn in self._aborted

    def open_transactions(self) -> list[TxnId]:
        return sorted(self._open)

    def transaction_stats(self, txn: TxnId) -> dict[str, object] | None:
        """Pulsar's ``TransactionInBufferStats`` of ``txn`` here (``None``: unknown here)."""
        if txn in self._open:
            bound = self._open[txn]
            start = self.ledger.next_position(bound) if txn not in self._unrefined else None
            return {"startPosition": None if start is None else str(start), "aborted": False}
        if txn in self._aborted:
            return {"startPosition": None, "aborted": True}
        if txn in self._committed:
            return {"startPosition": None, "aborted": False}
        return None

    def stats(self) -> dict[str, object]:
        """Pulsar's ``TransactionBufferStats`` (plus Braid's recovery counters)."""
        limit = self.max_read_position()
        last = self.ledger.last_confirmed_position
        return {
            "state": "Ready" if self.used else "NoSnapshot",
            "maxReadPosition": str(limit if limit is not None else last),
            "lastSnapshotTimestamps": self.snapshot.timestamp_ms if self.snapshot else 0,
            "ongoingTxnSize": len(self._open),
            "recoverStartTime": self.recover_start_ms,
            "recoverEndTime": self.recover_end_ms,
            "snapshotStats": None,
            # Braid's additions (ADR 0071).
            "abortedTxnSize": len(self._aborted),
            "recoveredFromSnapshot": self.recovered_from_snapshot,
            "recoveryReplayedEntries": self.replayed_entries,
            "snapshotPosition": None if self.snapshot is None else str(self.snapshot.position),
        }
