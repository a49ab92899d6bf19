"""Pending acknowledgements of a subscription, and a topic's transactions as dispatch sees them.

An individual acknowledgement inside a transaction (CommandAck with a transaction id) is *pending*:
it is persisted - one metadata-store node per (subscription, transaction), CAS'd, before the
ACK_RESPONSE - and taken off the delivery books, so the message is neither redelivered nor
acknowledged by anyone else meanwhile. A second acknowledgement of the same message, by another
transaction or of a message already acknowledged, is refused with ``TransactionConflict`` (Pulsar's
rule). When the transaction ends on the subscription (END_TXN_ON_SUBSCRIPTION): a commit applies
the acks to the cursor, an abort releases them and the messages are delivered again. A topic
loaded after a crash reads the nodes back (:meth:`PendingAcks.recover`), so an acknowledged pending
ack is never lost. A cumulative acknowledgement in a transaction (Exclusive/Failover) holds
everything up to its message; a commit moves the mark-delete position there.

:class:`TopicTransactions` is the one owner of a topic's :class:`TransactionBuffer` and of its
subscriptions' :class:`PendingAcks`; it gives each subscription the :class:`SubscriptionView` its
dispatchers read through.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from urllib.parse import quote

from braid.broker.dispatcher import EntryVerdict
from braid.broker.entries import CorruptEntry, parse_metadata
from braid.broker.errors import TransactionConflict
from braid.broker.subscription import Subscription
from braid.broker.transactions.buffer import TransactionBuffer, is_txn_marker
from braid.broker.transactions.ids import TxnId
from braid.core.errors import BraidError
from braid.ledger.api import Entry, Position
from braid.metadata.api import MetadataStore, NodeNotFound
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

#: ``(txn, topic, subscription or None) -> why it is refused``: the coordinator's word on whether
#: a transaction may produce to a topic / acknowledge on a subscription.
ParticipantCheck = Callable[[TxnId, str, str | None], BraidError | None]

#: Where pending acks are kept: ``<root>/<topic>/<subscription>/<most>-<least>``.
PENDING_ACKS_ROOT = "/transactions/pending-acks"
#: Entries GET_LAST_MESSAGE_ID looks back over for one that is not a marker or aborted.
_LAST_READABLE_SCAN = 1000


def _subscription_path(topic: str, subscription: str) -> str:
    return f"{PENDING_ACKS_ROOT}/{quote(topic, safe='')}/{quote(subscription, safe='')}"


def _encode(positions: Sequence[Position], cumulative: Position | None) -> bytes:
    return json.dumps(
        {
            "individual": [[p.ledger_id, p.entry_id] for p in sorted(positions)],
            "cumulative": None
            if cumulative is None
            else [cumulative.ledger_id, cumulative.entry_id],
        }
    ).encode()


def _decode(data: bytes) -> tuple[list[Position], Position | None]:
    raw = json.loads(data)
    cumulative = raw["cumulative"]
    return (
        [Position(int(ledger), int(entry)) for ledger, entry in raw["individual"]],
        None if cumulative is None else Position(int(cumulative[0]), int(cumulative[1])),
    )


class PendingAcks:
    """The pending acknowledgements of one subscription (owned by its topic's transactions)."""

    def __init__(
        self,
        topic: str,
        subscription: Subscription,
        store: MetadataStore,
        clock: Callable[[], int] = lambda: 0,
    ) -> None:
        self._topic = topic
        self._now_ms = clock
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self.subscription = subscription
        self._store = store
        self._path = _subscription_path(topic, subscription.name)
        self._by_txn: dict[TxnId, set[Position]] = {}
        self._versions: dict[TxnId, int] = {}
        #: Position -> the transaction holding it.
        self.held: dict[Position, TxnId] = {}
        #: A transaction's cumulative ack (Exclusive/Failover): everything up to it is held.
        self._cumulative: dict[TxnId, Position] = {}
        self._lock = asyncio.Lock()

    def holds(self, position: Position) -> bool:
        """Whether a pending ack holds ``position`` (not to be dispatched meanwhile)."""
        if position in self.held:
            return True
        return any(position <= upto for upto in self._cumulative.values())

    async def recover(self) -> None:
        """Read back the pending acks persisted for this subscription."""
        self.recover_start_ms = self._now_ms()
        for key in await self._store.children(self._path):
            found = await self._store.get(f"{self._path}/{key}")
            if found is None:
                continue
            txn = TxnId.from_key(key)
            individual, cumulative = _decode(found[0])
            positions = set(individual)
            self._by_txn[txn] = positions
            if cumulative is not None:
                self._cumulative[txn] = cumulative
            self._versions[txn] = found[1].version
            for position in positions:
                self.held[position] = txn
        if self._by_txn:
            log.info(
                "recovered pending acks of %d transactions on %s/%s",
                len(self._by_txn),
                self._topic,
                self.subscription.name,
            )
        self.recover_end_ms = self._now_ms()

    async def acknowledge(self, txn: TxnId, positions: Sequence[Position]) -> None:
        """Hold ``positions`` for ``txn``, durably, before the ACK_RESPONSE.

        Raises:
            TransactionConflict: a position is acknowledged already or held by another txn.
        """
        cursor = self.subscription.cursor
        async with self._lock:
            for position in positions:
                holder = self.held.get(position)
                if holder is not None and holder != txn:
                    raise TransactionConflict(
                        f"message {position} of {self._topic}/{self.subscription.name} is "
                        f"acknowledged by transaction {holder} already"
                    )
                if holder is None and (
                    position <= cursor.mark_delete_position or cursor.is_deleted(position)
                ):
                    raise TransactionConflict(
                        f"message {position} of {self._topic}/{self.subscription.name} is "
                        "acknowledged already"
                    )
            mine = self._by_txn.get(txn, set()) | set(positions)
            await self._persist(txn, mine, self._cumulative.get(txn))
            self._by_txn[txn] = mine
            for position in positions:
                self.held[position] = txn
        dispatcher = self.subscription.dispatcher
        if dispatcher is not None:
            dispatcher.on_acked(positions)

    async def acknowledge_cumulative(self, txn: TxnId, position: Position) -> None:
        """Hold everything up to ``position`` for ``txn`` (a cumulative ack in a transaction,
        Exclusive/Failover), durably, before the ACK_RESPONSE.

        Raises:
            TransactionConflict: acknowledged already, or another transaction holds an ack there.
        """
        where = f"{self._topic}/{self.subscription.name}"
        async with self._lock:
            if position <= self.subscription.cursor.mark_delete_position:
                raise TransactionConflict(f"message {position} of {where} is acknowledged already")
            for other, upto in self._cumulative.items():
                if other != txn:
                    raise TransactionConflict(
                        f"transaction {other} holds a cumulative ack up to {upto} on {where}"
                    )
            for held, holder in self.held.items():
                if holder != txn and held <= position:
                    raise TransactionConflict(
                        f"message {held} of {where} is acknowledged by transaction {holder}"
                    )
            upto = max(position, self._cumulative.get(txn, position))
            await self._persist(txn, self._by_txn.get(txn, set()), upto)
            self._cumulative[txn] = upto
        dispatcher = self.subscription.dispatcher
        if dispatcher is not None:
            dispatcher.on_acked_up_to(position)

    async def _persist(self, txn: TxnId, positions: set[Position], upto: Position | None) -> None:
        path = f"{self._path}/{txn.key}"
        stat = await self._store.put(
            path, _encode(list(positions), upto), self._versions.get(txn, -1)
        )
        self._versions[txn] = stat.version

    async def end(self, txn: TxnId, action: pb.TxnAction.ValueType) -> None:
        """Commit (apply to the cursor) or abort (deliver again) ``txn``'s pending acks."""
        async with self._lock:
            positions = sorted(self._by_txn.get(txn, ()))
            upto = self._cumulative.pop(txn, None)
            if upto is not None and action == pb.TxnAction.COMMIT:
                await self.subscription.mark_delete_up_to(upto)
            if upto is not None:
                positions.append(upto)
            if positions and action == pb.TxnAction.COMMIT:
                await self.subscription.delete_positions(positions)
            try:
                await self._store.delete(f"{self._path}/{txn.key}")
            except NodeNotFound:
                pass
            self._by_txn.pop(txn, None)
            self._versions.pop(txn, None)
            for position in positions:
                self.held.pop(position, None)
        if positions and action == pb.TxnAction.ABORT:
            dispatcher = self.subscription.dispatcher
            if dispatcher is not None:
                dispatcher.requeue(positions)

    async def forget(self) -> None:
        """The subscription was deleted: drop its pending acks."""
        await self._store.delete_recursive(self._path)

    def stats(self) -> dict[str, object]:
        """Pulsar's ``TransactionPendingAckStats``."""
        return {
            "state": "Ready",
            "lowWaterMarks": None,
            "ongoingTxnSize": len(self._by_txn.keys() | self._cumulative.keys()),
            "recoverStartTime": self.recover_start_ms,
            "recoverEndTime": self.recover_end_ms,
        }

    def transaction_stats(self, txn: TxnId) -> dict[str, object]:
        """Pulsar's ``TransactionInPendingAckStats`` of ``txn`` here."""
        upto = self._cumulative.get(txn)
        return {"cumulativeAckPosition": None if upto is None else str(upto)}

    def position_state(self, position: Position, batch_index: int | None = None) -> str:
        """Pulsar's ``PositionInPendingAckStats.State`` of a message on this subscription."""
        if self.holds(position):
            return "PendingAck"
        cursor = self.subscription.cursor
        if position <= cursor.mark_delete_position or cursor.is_deleted(position):
            return "MarkDelete"
        return "NotInPendingAck"

    @property
    def sub_type(self) -> int | None:
        return self.subscription.sub_type


class SubscriptionView:
    """What one subscription's dispatchers (or, without pending acks, the topic's compaction)
    see of the topic's transactions."""

    def __init__(self, buffer: TransactionBuffer, pending: PendingAcks | None) -> None:
        self._buffer = buffer
        self._pending = pending

    def read_limit(self) -> Position | None:
        return self._buffer.max_read_position()

    def verdict(self, entry: Entry) -> EntryVerdict:
        if self._pending is not None and self._pending.holds(entry.position):
            return EntryVerdict.HOLD
        if not self._buffer.used:
            return EntryVerdict.DELIVER
        try:
            meta = parse_metadata(entry.data)
        except CorruptEntry:
            return EntryVerdict.DELIVER
        if not meta.HasField("txnid_most_bits"):
            return EntryVerdict.DELIVER
        if is_txn_marker(meta) or self._buffer.is_aborted(TxnId.of(meta)):
            return EntryVerdict.SKIP
        return EntryVerdict.DELIVER


class TopicTransactions:
    """A persistent topic's transaction buffer and its subscriptions' pending acks."""

    def __init__(
        self,
        topic: str,
        buffer: TransactionBuffer,
        store: MetadataStore,
        check: ParticipantCheck | None = None,
    ) -> None:
        self.topic = topic
        self.buffer = buffer
        self._store = store
        self.pending: dict[str, PendingAcks] = {}
        self._check = check

    def check(self, txn: TxnId, subscription: str | None = None) -> BraidError | None:
        """Why a SEND (an ACK on ``subscription``) in ``txn`` must be refused here, if it must."""
        if subscription is None:
            refused = self.buffer.check_send(txn)
            if refused is not None:
                return refused
        return self._check(txn, self.topic, subscription) if self._check is not None else None

    def adopt(self, subscription: Subscription) -> PendingAcks:
        """Give ``subscription`` its pending acks and its dispatchers the transaction view."""
        pending = PendingAcks(self.topic, subscription, self._store, self.buffer.clock.now_ms)
        self.pending[subscription.name] = pending
        subscription.entry_filter = SubscriptionView(self.buffer, pending)
        if subscription.dispatcher is not None:
            subscription.dispatcher.entry_filter = subscription.entry_filter
        return pending

    async def recover(self, subscriptions: Sequence[Subscription]) -> None:
        """Rebuild the buffer from the ledger and every subscription's pending acks."""
        await self.buffer.recover()
        for subscription in subscriptions:
            await self.adopt(subscription).recover()

    def pending_of(self, subscription: str) -> PendingAcks | None:
        return self.pending.get(subscription)

    async def close(self) -> None:
        """The topic is unloading (its buffer's snapshot timer stops)."""
        await self.buffer.close()

    async def delete(self) -> None:
        """The topic is being deleted: drop its buffer snapshot and every pending ack."""
        await self.close()
        if self.buffer.snapshots is not None:
            await self.buffer.snapshots.delete()
        for subscription in list(self.pending):
            await self.forget(subscription)

    async def forget(self, subscription: str) -> None:
        """``subscription`` was deleted: drop its pending acks."""
        pending = self.pending.pop(subscription, None)
        if pending is not None:
            await pending.forget()

    async def last_readable(self, last: Position) -> Position:
        """What GET_LAST_MESSAGE_ID answers instead of ``last``: not past the max read
        position, and stepping back (within the ledger, up to a bound) over markers and aborted
        entries, so a reader's ``hasMessageAvailable`` does not wait for what never comes."""
        limit = self.buffer.max_read_position()
        if limit is not None and limit < last:
            last = limit
        if not self.buffer.used or last.entry_id < 0:
            return last
        first = max(0, last.entry_id - _LAST_READABLE_SCAN + 1)
        entries = await self.buffer.ledger.read(
            Position(last.ledger_id, first), last.entry_id - first + 1
        )
        for entry in reversed([e for e in entries if e.position <= last]):
            if self._readable(entry):
                return entry.position
        return Position(last.ledger_id, first - 1)

    def _readable(self, entry: Entry) -> bool:
        try:
            meta = parse_metadata(entry.data)
        except CorruptEntry:
            return True
        if not meta.HasField("txnid_most_bits"):
            return True
        return not (is_txn_marker(meta) or self.buffer.is_aborted(TxnId.of(meta)))
