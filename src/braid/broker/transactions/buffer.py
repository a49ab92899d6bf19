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
before its first stored entry once that is known) until its marker is durable; the state is
rebuilt on load by replaying the retained ledger from its start (no snapshot yet: ADR 0065), so a
crash loses nothing that was acknowledged. An end for a transaction already ended here is answered
again without a second marker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from braid.broker.entries import CorruptEntry, parse_metadata
from braid.broker.errors import InvalidTxnStatus
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.sealed import SealedOutcomes
from braid.clock import Clock
from braid.ledger.api import Entry, ManagedLedger, Position
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


def _before(position: Position) -> Position | None:
    """The entry position just before ``position`` in its ledger (``None`` at entry 0)."""
    if position.entry_id > 0:
        return Position(position.ledger_id, position.entry_id - 1)
    return None


class TransactionBuffer:
    """The transaction state of one persistent topic."""

    def __init__(self, topic_name: str, ledger: ManagedLedger, clock: Clock) -> None:
        self.topic_name = topic_name
        self.ledger = ledger
        self._clock = clock
        # Open transaction -> the highest position that may be read while it is open.
        self._open: dict[TxnId, Position] = {}
        # Open transactions whose bound is still the conservative one (first entry not stored).
        self._unrefined: set[TxnId] = set()
        self._aborted: set[TxnId] = set()
        self._committed: set[TxnId] = set()
        #: Called when the max read position may have moved (the topic wakes its dispatchers).
        self.listeners: list[Callable[[], None]] = []
        #: Whether this topic ever held a transactional entry or marker (else dispatch skips the
        #: per-entry check entirely).
        self.used = False
        #: Where outcomes go once the ledger is terminated (a sealed segment takes no marker:
        #: ADR 0069); set by the broker before :meth:`recover`.
        self.sealed: SealedOutcomes | None = None

    # -- load ----------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Rebuild the state by replaying every retained entry of the ledger, in order."""
        position = Position(0, 0)
        last = self.ledger.last_confirmed_position
        replayed = 0
        while last.entry_id >= 0:
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
        if self._open and self.sealed is not None and self.ledger.is_terminated:
            # Ended after the seal: the outcome is recorded instead of a marker (ADR 0069).
            for txn, aborted in (await self.sealed.outcomes(list(self._open))).items():
                self._ended(txn, aborted)
        if self.used:
            log.info(
                "transaction buffer of %s recovered from %d entries: %d open, %d aborted",
                self.topic_name,
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
            self._ended(txn, meta.marker_type == pb.MarkerType.TXN_ABORT)
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
        """Append ``txn``'s commit or abort marker and apply it (END_TXN_ON_PARTITION).

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
        else:
            await self.ledger.append(marker_entry(txn, action, self._clock.now_ms()))
        self._ended(txn, aborting)
        self._notify()

    def _ended(self, txn: TxnId, aborted: bool) -> None:
        self._open.pop(txn, None)
        self._unrefined.discard(txn)
        (self._aborted if aborted else self._committed).add(txn)

    def _notify(self) -> None:
        for listener in self.listeners:
            listener()

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

    def stats(self) -> dict[str, object]:
        """Pulsar's ``transactionBuffer`` internal stats, in part."""
        limit = self.max_read_position()
        return {
            "ongoingTxnSize": len(self._open),
            "abortedTxnSize": len(self._aborted),
            "maxReadPosition": str(
                limit if limit is not None else self.ledger.last_confirmed_position
            ),
        }
