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
everything up to its message; a commit moves the mark-delete position there. One naming a message
of a batch entry (an ``ack_set``) holds the entries before it whole and that entry's messages up
to it per index; its commit moves the mark-delete position before the entry and acknowledges
those messages with the cursor's batch-index delete. A batch-index
acknowledgement (PIP-54 ``ack_set``) holds single messages of a batch entry
(:mod:`.batch_holds`; conflicts are per index); the entry's other messages are still delivered.
On Key_Shared, an abort hands the released messages back with their sticky-key hashes, so a newer
message of the same key does not overtake them from then on (ADR 0071).

:class:`TopicTransactions` is the one owner of a topic's :class:`TransactionBuffer` and of its
subscriptions' :class:`PendingAcks`; it gives each subscription the :class:`SubscriptionView` its
dispatchers read through.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from braid.broker.dispatcher import EntryVerdict
from braid.broker.entries import CorruptEntry, parse_metadata
from braid.broker.errors import InvalidMessage, NotSupported, TransactionConflict
from braid.broker.key_shared import KeySharedDispatcher
from braid.broker.subscription import Subscription
from braid.broker.transactions.batch_holds import BatchIndexHolds, acked_indexes, remaining_words
from braid.broker.transactions.buffer import TransactionBuffer, is_txn_marker
from braid.broker.transactions.ids import TxnId
from braid.core import ack_set
from braid.core.errors import BraidError
from braid.ledger.api import Entry, ManagedLedger, Position
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


@dataclass(frozen=True)
class _Record:
    """One transaction's pending acks on one subscription, as persisted."""

    individual: frozenset[Position] = frozenset()
    cumulative: Position | None = None
    #: Batch entries some of whose messages it holds: ``position -> (batch size, indexes)``.
    batches: Mapping[Position, tuple[int, frozenset[int]]] = field(default_factory=dict)

    def encode(self) -> bytes:
        upto = self.cumulative
        return json.dumps(
            {
                "individual": [[p.ledger_id, p.entry_id] for p in sorted(self.individual)],
                "cumulative": None if upto is None else [upto.ledger_id, upto.entry_id],
                "batches": [
                    [p.ledger_id, p.entry_id, count, sorted(indexes)]
                    for p, (count, indexes) in sorted(self.batches.items())
                ],
            }
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> _Record:
        raw = json.loads(data)
        upto = raw["cumulative"]
        return cls(
            frozenset(Position(int(ledger), int(entry)) for ledger, entry in raw["individual"]),
            None if upto is None else Position(int(upto[0]), int(upto[1])),
            {
                Position(int(ledger), int(entry)): (int(count), frozenset(map(int, indexes)))
                for ledger, entry, count, indexes in raw.get("batches", ())
            },
        )


class PendingAcks:
    """The pending acknowledgements of one subscription (owned by its topic's transactions)."""

    def __init__(
        self,
        topic: str,
        subscription: Subscription,
        store: MetadataStore,
        clock: Callable[[], int] = lambda: 0,
        ledger: ManagedLedger | None = None,
    ) -> None:
        self._topic = topic
        self._now_ms = clock
        self._ledger = ledger
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
        #: Messages of batch entries held by batch-index acks.
        self.batches = BatchIndexHolds()
        self._lock = asyncio.Lock()

    def holds(self, position: Position) -> bool:
        """Whether a pending ack holds ``position`` - all of it, for a batch entry - so that it
        is not dispatched meanwhile."""
        if position in self.held:
            return True
        if position in self.batches and self.batches.covers(
            position, self.subscription.cursor.batch_deleted_indexes(position)
        ):
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
            record = _Record.decode(found[0])
            self._by_txn[txn] = set(record.individual)
            if record.cumulative is not None:
                self._cumulative[txn] = record.cumulative
            for position, (count, indexes) in record.batches.items():
                self.batches.add(txn, position, count, indexes)
            self._versions[txn] = found[1].version
            for position in record.individual:
                self.held[position] = txn
        if self._by_txn:
            log.info(
                "recovered pending acks of %d transactions on %s/%s",
                len(self._by_txn),
                self._topic,
                self.subscription.name,
            )
        self.recover_end_ms = self._now_ms()

    def _check_whole(self, txn: TxnId, position: Position) -> None:
        where = f"{self._topic}/{self.subscription.name}"
        cursor = self.subscription.cursor
        holder = self.held.get(position) or self.batches.held_by_others(txn, position)
        if holder is not None and holder != txn:
            raise TransactionConflict(
                f"message {position} of {where} is acknowledged by transaction {holder} already"
            )
        if holder is None and (
            position <= cursor.mark_delete_position or cursor.is_deleted(position)
        ):
            raise TransactionConflict(f"message {position} of {where} is acknowledged already")

    async def _batch_size(self, position: Position) -> int:
        """How many messages the entry at ``position`` holds (read from the ledger)."""
        if self._ledger is None:
            raise NotSupported("batch-index acks in a transaction need the topic's ledger")
        entries = await self._ledger.read(position, 1)
        if not entries or entries[0].position != position:
            raise InvalidMessage(f"no entry at {position} on {self._topic}")
        try:
            meta = parse_metadata(entries[0].data)
        except CorruptEntry:
            return 1
        return max(meta.num_messages_in_batch, 1) if meta.HasField("num_messages_in_batch") else 1

    async def _batch_acks(
        self, txn: TxnId, batch_acks: Sequence[tuple[Position, Sequence[int]]]
    ) -> dict[Position, tuple[int, frozenset[int]]]:
        """The messages ``batch_acks`` hold, by entry, once every index is checked free."""
        if batch_acks and not self.subscription.settings.batch_index_ack:
            raise NotSupported("batch-index acks need acknowledgmentAtBatchIndexLevelEnabled=true")
        cursor = self.subscription.cursor
        wanted: dict[Position, tuple[int, frozenset[int]]] = {}
        for position, words in batch_acks:
            count = await self._batch_size(position)
            acked = acked_indexes(words, count)
            if not acked or self.held.get(position) == txn:
                continue
            where = f"{self._topic}/{self.subscription.name}"
            if position in self.held:
                raise TransactionConflict(
                    f"message {position} of {where} is acknowledged by transaction "
                    f"{self.held[position]} already"
                )
            if position <= cursor.mark_delete_position or cursor.is_deleted(position):
                raise TransactionConflict(f"message {position} of {where} is acknowledged already")
            before = wanted.get(position, (count, frozenset()))[1]
            refused = self.batches.conflict(
                txn, position, acked, cursor.batch_deleted_indexes(position)
            )
            if refused is not None:
                raise TransactionConflict(f"{refused} ({self._topic}/{self.subscription.name})")
            wanted[position] = (count, before | acked)
        return wanted

    async def acknowledge(
        self,
        txn: TxnId,
        positions: Sequence[Position],
        batch_acks: Sequence[tuple[Position, Sequence[int]]] = (),
    ) -> None:
        """Hold ``positions`` and the messages ``batch_acks`` name (PIP-54 words: the bits left
        set are the messages *not* acknowledged) for ``txn``, durably, before the ACK_RESPONSE.

        Raises:
            TransactionConflict: a message is acknowledged already or held by another txn.
        """
        async with self._lock:
            for position in positions:
                self._check_whole(txn, position)
            wanted = await self._batch_acks(txn, batch_acks)
            mine = self._by_txn.get(txn, set()) | set(positions)
            batches = self.batches.of(txn)
            for position, (count, acked) in wanted.items():
                batches[position] = (count, batches.get(position, (count, frozenset()))[1] | acked)
            await self._persist(txn, _Record(frozenset(mine), self._cumulative.get(txn), batches))
            self._by_txn[txn] = mine
            for position in positions:
                self.held[position] = txn
            for position, (count, acked) in wanted.items():
                self.batches.add(txn, position, count, acked)
        dispatcher = self.subscription.dispatcher
        if dispatcher is not None and positions:
            dispatcher.on_acked(positions)

    async def acknowledge_cumulative(
        self, txn: TxnId, position: Position, ack_set_words: Sequence[int] | None = None
    ) -> None:
        """Hold everything up to ``position`` for ``txn`` (a cumulative ack in a transaction,
        Exclusive/Failover), durably, before the ACK_RESPONSE. With ``ack_set_words`` (PIP-54
        words of a batch entry at ``position``: the bits left set are the messages *not*
        acknowledged) the entries before ``position`` are held whole and, of ``position``, the
        messages the words acknowledge - per index (:mod:`.batch_holds`), committed with the
        cursor's batch-index delete. Without ``acknowledgmentAtBatchIndexLevelEnabled`` the
        words are ignored, as a non-transactional cumulative ack's are: the entries before it
        are held.

        Raises:
            TransactionConflict: acknowledged already, or another transaction holds an ack there.
        """
        where = f"{self._topic}/{self.subscription.name}"
        partial = ack_set_words is not None
        upto: Position | None = position
        if partial:
            # The batch is acknowledged in part: everything before it is acknowledged whole.
            upto = Position(position.ledger_id, position.entry_id - 1)
            if position.entry_id == 0:  # nothing before it in its ledger (as without a txn)
                upto = None
        async with self._lock:
            mark = self.subscription.cursor.mark_delete_position
            if upto is not None and upto <= mark and (not partial or upto < mark):
                raise TransactionConflict(f"message {position} of {where} is acknowledged already")
            for other, held_upto in self._cumulative.items():
                if other != txn:
                    raise TransactionConflict(
                        f"transaction {other} holds a cumulative ack up to {held_upto} on {where}"
                    )
            if upto is not None:
                self._check_nothing_held_up_to(txn, upto, where)
            wanted: dict[Position, tuple[int, frozenset[int]]] = {}
            if ack_set_words is not None and self.subscription.settings.batch_index_ack:
                wanted = await self._batch_acks(txn, [(position, ack_set_words)])
            previous = self._cumulative.get(txn)
            if upto is not None and previous is not None:
                upto = max(upto, previous)
            elif upto is None:
                upto = previous
            batches = self.batches.of(txn)
            for at, (count, acked) in wanted.items():
                batches[at] = (count, batches.get(at, (count, frozenset()))[1] | acked)
            record = _Record(frozenset(self._by_txn.get(txn, ())), upto, batches)
            await self._persist(txn, record)
            if upto is not None:
                self._cumulative[txn] = upto
            for at, (count, acked) in wanted.items():
                self.batches.add(txn, at, count, acked)
        dispatcher = self.subscription.dispatcher
        if dispatcher is not None and upto is not None:
            dispatcher.on_acked_up_to(upto)

    def _check_nothing_held_up_to(self, txn: TxnId, upto: Position, where: str) -> None:
        """Refuse a cumulative ack up to ``upto`` when another transaction holds any message at
        or before it (a whole entry, or messages of a batch)."""
        for held, holder in self.held.items():
            if holder != txn and held <= upto:
                raise TransactionConflict(
                    f"message {held} of {where} is acknowledged by transaction {holder}"
                )
        for at in self.batches.positions():
            other = self.batches.held_by_others(txn, at)
            if at <= upto and other is not None:
                raise TransactionConflict(
                    f"messages of batch {at} of {where} are acknowledged by transaction {other}"
                )

    async def _persist(self, txn: TxnId, record: _Record) -> None:
        path = f"{self._path}/{txn.key}"
        stat = await self._store.put(path, record.encode(), self._versions.get(txn, -1))
        self._versions[txn] = stat.version

    async def end(self, txn: TxnId, action: pb.TxnAction.ValueType) -> None:
        """Commit (apply to the cursor) or abort (deliver again) ``txn``'s pending acks."""
        commit = action == pb.TxnAction.COMMIT
        async with self._lock:
            positions = sorted(self._by_txn.get(txn, ()))
            upto = self._cumulative.pop(txn, None)
            if upto is not None and commit:
                await self.subscription.mark_delete_up_to(upto)
            if upto is not None:
                positions.append(upto)
            batches = self.batches.of(txn)
            partial = [(p, remaining_words(acked, count)) for p, (count, acked) in batches.items()]
            if (positions or partial) and commit:
                await self.subscription.delete_positions(positions, partial)
            try:
                await self._store.delete(f"{self._path}/{txn.key}")
            except NodeNotFound:
                pass
            self._by_txn.pop(txn, None)
            self._versions.pop(txn, None)
            self.batches.release(txn)
            for position in positions:
                self.held.pop(position, None)
        released = sorted({*positions, *batches})
        if released and not commit:
            await self._deliver_again(released)

    async def _deliver_again(self, positions: list[Position]) -> None:
        """Hand released messages back to the dispatcher (Key_Shared: with their key hashes)."""
        dispatcher = self.subscription.dispatcher
        if dispatcher is None:
            return
        hashes: dict[Position, int] = {}
        if isinstance(dispatcher, KeySharedDispatcher) and self._ledger is not None:
            for position in positions:
                for entry in await self._ledger.read(position, 1):
                    if entry.position == position:
                        hashes[position] = dispatcher.key_hash(entry)
        dispatcher.requeue(positions, hashes)

    async def forget(self) -> None:
        """The subscription was deleted: drop its pending acks."""
        await self._store.delete_recursive(self._path)

    def stats(self) -> dict[str, object]:
        """Pulsar's ``TransactionPendingAckStats``."""
        ongoing = self._by_txn.keys() | self._cumulative.keys()
        return {
            "state": "Ready",
            "lowWaterMarks": None,
            "ongoingTxnSize": len(ongoing),
            "recoverStartTime": self.recover_start_ms,
            "recoverEndTime": self.recover_end_ms,
        }

    def transaction_stats(self, txn: TxnId) -> dict[str, object]:
        """Pulsar's ``TransactionInPendingAckStats`` of ``txn`` here."""
        upto = self._cumulative.get(txn)
        return {"cumulativeAckPosition": None if upto is None else str(upto)}

    def position_state(self, position: Position, batch_index: int | None = None) -> str:
        """Pulsar's ``PositionInPendingAckStats.State`` of a message on this subscription."""
        cursor = self.subscription.cursor
        if batch_index is not None and position in self.batches:
            mask = self.batches.mask(position, batch_index + 1)
            if mask is not None and not ack_set.is_set(mask, batch_index):
                return "PendingAck"
        if self.holds(position):
            return "PendingAck"
        if position <= cursor.mark_delete_position or cursor.is_deleted(position):
            return "MarkDelete"
        remaining = cursor.batch_deleted_indexes(position)
        if (
            batch_index is not None
            and remaining is not None
            and not ack_set.is_set(remaining, batch_index)
        ):
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

    def batch_mask(self, position: Position, count: int) -> ack_set.AckSet | None:
        if self._pending is None:
            return None
        return self._pending.batches.mask(position, count)

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
        pending = PendingAcks(
            self.topic, subscription, self._store, self.buffer.clock.now_ms, self.buffer.ledger
        )
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
