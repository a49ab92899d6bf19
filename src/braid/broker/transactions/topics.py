"""Transactions on the topics this broker serves: the coordinators' participant, SEND and ACK in a
transaction, and attaching a topic's transaction buffer and pending acks when it loads.

:class:`BrokerTransactions` is built by the broker when ``transactionCoordinatorEnabled`` is on. It
owns the coordinators (:mod:`.coordinator`), makes sure the assign topic exists with one partition
per coordinator (as Pulsar's ``initialize-cluster-metadata`` and standalone do), and ends a
transaction on a topic or subscription of this broker for the coordinators. The per-message paths
(:func:`publish_in_transaction`, the pending-ack path of an ACK) add no task or future per message:
a transactional SEND goes through the topic's ordinary append-callback pipeline with its
transaction on the receipt.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from braid.broker.config import BrokerConfig
from braid.broker.errors import (
    InvalidMessage,
    NotSupported,
    TransactionsDisabled,
    to_server_error,
)
from braid.broker.partitions import PartitionedTopicExists, PartitionedTopics
from braid.broker.producer import PendingReceipt
from braid.broker.registry import CommandChannel
from braid.broker.resources import (
    BrokerResources,
    NamespaceAlreadyExists,
    TenantAlreadyExists,
    TenantInfo,
)
from braid.broker.topic import PersistentTopic
from braid.broker.transactions.buffer import SnapshotPolicy, TransactionBuffer
from braid.broker.transactions.buffer_snapshot import BufferSnapshots
from braid.broker.transactions.coordinator import (
    ASSIGN_TOPIC,
    TransactionCoordinators,
)
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.pending_ack import SubscriptionView, TopicTransactions
from braid.broker.transactions.sealed import SealedOutcomes
from braid.clock import Clock
from braid.core.errors import BraidError
from braid.core.names import TopicName
from braid.ledger.api import Position
from braid.metadata.api import MetadataStore
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

log = logging.getLogger(__name__)

_SHARED_TYPES = (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared)
#: Coordinators a standalone broker creates (the assign topic's partitions), as Pulsar's standalone.
STANDALONE_COORDINATORS = 1


def publish_in_transaction(
    topic: object,
    receipt: PendingReceipt,
    body: bytes,
    metadata: pb.MessageMetadata,
    req: pb.CommandSend,
) -> None:
    """Store a SEND in a transaction through the topic's transaction buffer (the receipt is
    answered by the topic's append callback), or refuse it on its receipt."""
    refused = _publish_in_transaction(topic, receipt, body, metadata, TxnId.of(req))
    if refused is not None:
        receipt.producer.complete(receipt, None, refused)


def _publish_in_transaction(
    topic: object,
    receipt: PendingReceipt,
    body: bytes,
    metadata: pb.MessageMetadata,
    txn: TxnId,
) -> BraidError | None:
    if not isinstance(topic, PersistentTopic):
        return NotSupported("transactions need a persistent topic")
    transactions = topic.transactions
    if transactions is None:
        return TransactionsDisabled(
            "transactions are not enabled on this broker (transactionCoordinatorEnabled=false)"
        )
    if not metadata.HasField("txnid_most_bits") or TxnId.of(metadata) != txn:
        return InvalidMessage(
            f"a SEND in transaction {txn} must carry the same transaction id in its metadata"
        )
    refused = transactions.check(txn)
    if refused is not None:
        return refused
    transactions.buffer.on_send(txn)
    receipt.txn = txn
    topic.publish(receipt, body, metadata)
    return None


def ack_in_transaction(
    channel: CommandChannel,
    topic: object,
    subscription: str,
    req: pb.CommandAck,
    positions: Sequence[Position],
) -> None:
    """An ACK carrying a transaction id: held as a pending ack until the transaction ends, and
    answered (when it asks) with an ACK_RESPONSE naming the transaction. Individual acks (of
    whole entries or, with an ``ack_set``, of messages of batch entries) on every subscription
    type, and cumulative ones of one whole entry on Exclusive/Failover."""
    txn = TxnId.of(req)

    def answer(error: BaseException | None) -> None:
        if not req.HasField("request_id"):
            if error is not None:
                log.info("ack in transaction %s refused: %s", txn, error)
            return
        response = pb.CommandAckResponse(
            consumer_id=req.consumer_id,
            request_id=req.request_id,
            txnid_most_bits=txn.most_bits,
            txnid_least_bits=txn.least_bits,
        )
        if error is not None:
            response.error, response.message = to_server_error(error)
        channel.send(commands.wrap(response))

    transactions = topic.transactions if isinstance(topic, PersistentTopic) else None
    pending = transactions.pending_of(subscription) if transactions is not None else None
    if pending is None:
        answer(TransactionsDisabled("transactions are not enabled for this subscription"))
        return
    cumulative = req.ack_type == pb.CommandAck.Cumulative
    batch_acks = [
        (Position(mid.ledgerId, mid.entryId), tuple(mid.ack_set))
        for mid in req.message_id
        if any(mid.ack_set)
    ]
    if cumulative and (batch_acks or len(positions) != 1 or pending.sub_type in _SHARED_TYPES):
        answer(NotSupported("a cumulative ack names one message, on Exclusive or Failover"))
        return
    refused = transactions.check(txn, subscription) if transactions is not None else None
    if refused is not None:
        answer(refused)
        return

    async def run() -> None:
        try:
            if cumulative:
                await pending.acknowledge_cumulative(txn, positions[0])
            else:
                await pending.acknowledge(txn, positions, batch_acks)
        except Exception as exc:
            answer(exc)
            return
        answer(None)

    channel.spawn(run())


class BrokerTransactions:
    """This broker's coordinators and its topics' side of transactions."""

    def __init__(
        self,
        store: MetadataStore,
        clock: Clock,
        load_topic: Callable[[str], Awaitable[PersistentTopic]],
        *,
        cluster: str = "standalone",
        coordinators: int = STANDALONE_COORDINATORS,
        max_active: int = 0,
        snapshot_policy: SnapshotPolicy | None = None,
    ) -> None:
        self._store = store
        self._snapshot_policy = snapshot_policy or SnapshotPolicy()
        self._clock = clock
        self._load_topic = load_topic
        self._cluster = cluster
        self.coordinators = TransactionCoordinators(
            store, self, clock, count=coordinators, max_active=max_active
        )

    async def start(self, partitioned: PartitionedTopics, resources: BrokerResources) -> None:
        """Create ``pulsar/system`` and the assign topic if missing, then recover every
        coordinator."""
        assign = TopicName.parse(ASSIGN_TOPIC)
        try:
            await resources.create_tenant(assign.tenant, TenantInfo((), (self._cluster,)))
        except TenantAlreadyExists:
            pass
        try:
            await resources.create_namespace(assign.tenant, assign.namespace)
        except NamespaceAlreadyExists:
            pass
        try:
            await partitioned.create(assign, self.coordinators.count)
        except PartitionedTopicExists:
            pass
        await self.coordinators.start()

    async def attach(self, topic: PersistentTopic) -> None:
        """Rebuild ``topic``'s transaction buffer and pending acks (on load)."""
        buffer = TransactionBuffer(
            topic.name,
            topic.ledger,
            self._clock,
            BufferSnapshots(self._store, topic.name),
            self._snapshot_policy,
        )
        buffer.sealed = SealedOutcomes(self._store, topic.name)
        transactions = TopicTransactions(topic.name, buffer, self._store, self._check_participant)
        await transactions.recover(list(topic.subscriptions.values()))
        buffer.listeners.append(topic.wake_dispatchers)
        topic.compaction.entry_filter = SubscriptionView(buffer, None)
        topic.transactions = transactions

    def _check_participant(
        self, txn: TxnId, topic: str, subscription: str | None
    ) -> BraidError | None:
        try:
            coordinator = self.coordinators.of(txn)
        except BraidError as exc:
            return exc
        return coordinator.check_participant(txn, topic, subscription)

    # -- the coordinators' participant ---------------------------------------------------------

    async def end_on_partition(
        self, topic: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        loaded = await self._load_topic(topic)
        if loaded.transactions is None:
            raise TransactionsDisabled(f"topic {topic} has no transaction buffer")
        await loaded.transactions.buffer.end(txn, action)

    async def end_on_subscription(
        self, topic: str, subscription: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        loaded = await self._load_topic(topic)
        if loaded.transactions is None:
            raise TransactionsDisabled(f"topic {topic} has no transaction buffer")
        pending = loaded.transactions.pending_of(subscription)
        if pending is None:
            log.info("transaction %s ends on %s/%s, which is gone", txn, topic, subscription)
            return
        await pending.end(txn, action)

    async def close(self) -> None:
        await self.coordinators.close()


def broker_transactions(
    config: BrokerConfig,
    store: MetadataStore,
    clock: Clock,
    load_topic: Callable[[str], Awaitable[PersistentTopic]],
) -> BrokerTransactions | None:
    """The broker's transactions, or ``None`` while ``transactionCoordinatorEnabled`` is off."""
    if not config.transaction_coordinator_enabled:
        return None
    return BrokerTransactions(
        store,
        clock,
        load_topic,
        cluster=config.cluster_name,
        max_active=config.max_active_transactions_per_coordinator,
        snapshot_policy=SnapshotPolicy(
            config.transaction_buffer_snapshot_max_transaction_count,
            config.transaction_buffer_snapshot_min_time_in_millis,
        ),
    )
