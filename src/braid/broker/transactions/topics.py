"""Transactions on the topics this broker serves: the coordinators' participant, SEND and ACK in a
transaction, and attaching a topic's transaction buffer and pending acks when it loads.

:class:`BrokerTransactions` is built by the broker when ``transactionCoordinatorEnabled`` is on. It
owns the coordinators (:mod:`.coordinator`), makes sure the assign topic exists with one partition
per coordinator (as Pulsar's ``initialize-cluster-metadata`` and standalone do), and ends a
transaction on a topic or subscription for the coordinators: here when this broker serves it,
else over the binary protocol at the topic's owner, found by LOOKUP (:mod:`.peers`; on a cluster,
set up by :meth:`BrokerTransactions.serve_on_cluster`, which also places the coordinators by
bundle ownership, :mod:`.placement`; ADR 0070). The per-message paths
(:func:`publish_in_transaction`, the pending-ack path of an ACK) add no task or future per message:
a transactional SEND goes through the topic's ordinary append-callback pipeline with its
transaction on the receipt.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence

from braid.broker.broker_registry import BrokerRegistry
from braid.broker.bundles import NamespaceBundle
from braid.broker.cluster_tls import PeerTls
from braid.broker.config import BrokerConfig
from braid.broker.errors import (
    CoordinatorNotFound,
    InvalidMessage,
    NotSupported,
    TransactionsDisabled,
    to_server_error,
)
from braid.broker.ownership import BundleOwnership, LookupAnswer
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
from braid.broker.transactions.assignments import TcAssignments
from braid.broker.transactions.buffer import SnapshotPolicy, TransactionBuffer
from braid.broker.transactions.buffer_snapshot import BufferSnapshots
from braid.broker.transactions.coordinator import (
    ASSIGN_TOPIC,
    TransactionCoordinators,
)
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.peers import PeerConnections, find_owner
from braid.broker.transactions.pending_ack import SubscriptionView, TopicTransactions
from braid.broker.transactions.placement import BundleCoordinatorPlacement, CoordinatorKeeper
from braid.broker.transactions.sealed import SealedOutcomes
from braid.clock import Clock
from braid.core.errors import BraidError
from braid.core.names import TopicName
from braid.ledger.api import Position
from braid.metadata.api import MetadataStore
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.credentials import ClientCredentials

log = logging.getLogger(__name__)

_SHARED_TYPES = (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared)
#: Coordinators a standalone broker creates (the assign topic's partitions), as Pulsar's standalone.
STANDALONE_COORDINATORS = 1
#: Coordinators the first broker of a cluster creates when the assign topic does not exist yet
#: (Pulsar's ``initialize-cluster-metadata --num-transaction-coordinators`` default).
CLUSTER_COORDINATORS = 16


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
    type, and cumulative ones of one message (a whole entry, or with an ``ack_set`` a batch
    entry's messages up to it) on Exclusive/Failover."""
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
    if cumulative and (len(req.message_id) != 1 or pending.sub_type in _SHARED_TYPES):
        answer(NotSupported("a cumulative ack names one message, on Exclusive or Failover"))
        return
    refused = transactions.check(txn, subscription) if transactions is not None else None
    if refused is not None:
        answer(refused)
        return

    async def run() -> None:
        try:
            if cumulative:
                (mid,) = req.message_id
                words = batch_acks[0][1] if batch_acks else None
                await pending.acknowledge_cumulative(
                    txn, Position(mid.ledgerId, mid.entryId), words
                )
            else:
                await pending.acknowledge(txn, positions, batch_acks)
        except Exception as exc:
            answer(exc)
            return
        answer(None)

    channel.spawn(run())


def _request(
    message: pb.CommandEndTxnOnPartition | pb.CommandEndTxnOnSubscription,
) -> Callable[[int], pb.BaseCommand]:
    """``message`` as the command sent with request id ``rid``."""

    def make(rid: int) -> pb.BaseCommand:
        message.request_id = rid
        return commands.wrap(message)

    return make


class BrokerTransactions:
    """This broker's coordinators and its topics' side of transactions."""

    def __init__(
        self,
        store: MetadataStore,
        clock: Clock,
        load_topic: Callable[[str], Awaitable[PersistentTopic]],
        *,
        own_urls: Callable[[], tuple[str, str]] = lambda: ("", ""),
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
        self._default_count = coordinators
        self.coordinators = TransactionCoordinators(
            store, self, clock, count=coordinators, max_active=max_active
        )
        #: Set by :meth:`serve_on_cluster` (``braid broker``); ``None`` on a standalone.
        self.placement: BundleCoordinatorPlacement | None = None
        self.keeper: CoordinatorKeeper | None = None
        self._ownership: BundleOwnership | None = None
        self._peers: PeerConnections | None = None
        self._lookup: Callable[[str], Awaitable[LookupAnswer]] | None = None
        #: The coordinator-assignment watches (WATCH_TC_ASSIGNMENTS).
        self.assignments = TcAssignments(self.coordinators, own_urls)

    def serve_on_cluster(
        self,
        ownership: BundleOwnership,
        registry: BrokerRegistry,
        lookup: Callable[[str], Awaitable[LookupAnswer]],
        credentials: ClientCredentials | None,
        *,
        tls: PeerTls | None = None,
        default_count: int = CLUSTER_COORDINATORS,
    ) -> None:
        """Run as one broker of a cluster: serve the coordinators whose assign partition's
        bundle this broker owns, and end transactions on other brokers' topics at their owner
        (``lookup``: this broker's LOOKUP; ``credentials``: what it presents to the others;
        ``tls``: how it reaches them when TLS between brokers is configured - at their
        ``pulsar+ssl://`` URLs from the registry)."""
        peers = PeerConnections(credentials, tls=tls, tls_url_of=registry.service_url_tls)
        self.placement = BundleCoordinatorPlacement(
            ownership, registry, lookup, functools.partial(find_owner, peers)
        )
        self.coordinators.placement = self.placement
        self.keeper = CoordinatorKeeper(self.coordinators, self.placement, self._store, self._clock)
        self.keeper.on_pass.append(self.assignments.changed)
        self.assignments.place_by(self.placement)
        self._ownership = ownership
        self._peers = peers
        self._lookup = lookup
        self._default_count = default_count

    def start_keeper(self) -> None:
        """Begin placing coordinators (once the broker is registered and owns bundles)."""
        if self.keeper is not None:
            self.keeper.start()

    def bundle_lost(self, bundle: NamespaceBundle) -> None:
        """The broker lost ``bundle``: fence the coordinators it held."""
        if self.keeper is not None:
            self.keeper.bundle_lost(bundle)

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
        count = await partitioned.partitions(assign)
        if count == 0:
            try:
                await partitioned.create(assign, self._default_count)
            except PartitionedTopicExists:
                pass
            count = await partitioned.partitions(assign)
        self.coordinators.count = count
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
        coordinator = self.coordinators.serving(txn.coordinator_id)
        if coordinator is None:
            if self.placement is not None:
                # Served by another broker: as in Pulsar, the topic does not ask it (ADR 0070).
                return None
            return CoordinatorNotFound(
                f"transaction coordinator {txn.coordinator_id} is not served here"
            )
        return coordinator.check_participant(txn, topic, subscription)

    # -- the coordinators' participant ---------------------------------------------------------

    async def _remote_owner(self, topic: str) -> str | None:
        """The service URL of the other broker serving ``topic``; ``None`` when it is this one."""
        if self._lookup is None or self._peers is None or self._ownership is None:
            return None
        answer = await self._lookup(topic)
        if answer.local:
            return None
        url = answer.service_url
        if answer.redirect:
            url = await find_owner(self._peers, url, topic, answer.authoritative)
        return None if url == self._ownership.me.native_url else url

    async def end_on_partition(
        self, topic: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        """END_TXN_ON_PARTITION wherever ``topic`` is served (for the coordinators)."""
        url = await self._remote_owner(topic)
        if url is None:
            await self.end_on_partition_here(topic, txn, action)
            return
        assert self._peers is not None
        end = pb.CommandEndTxnOnPartition(topic=topic, txn_action=action)
        end.txnid_most_bits, end.txnid_least_bits = txn.most_bits, txn.least_bits
        await self._peers.ask(url, _request(end), f"ending transaction {txn} on {topic}")

    async def end_on_subscription(
        self, topic: str, subscription: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        """END_TXN_ON_SUBSCRIPTION wherever ``topic`` is served (for the coordinators)."""
        url = await self._remote_owner(topic)
        if url is None:
            await self.end_on_subscription_here(topic, subscription, txn, action)
            return
        assert self._peers is not None
        end = pb.CommandEndTxnOnSubscription(
            subscription=pb.Subscription(topic=topic, subscription=subscription), txn_action=action
        )
        end.txnid_most_bits, end.txnid_least_bits = txn.most_bits, txn.least_bits
        what = f"ending transaction {txn} on {topic}/{subscription}"
        await self._peers.ask(url, _request(end), what)

    async def end_on_partition_here(
        self, topic: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        """Write ``txn``'s marker on ``topic``, served by this broker (``NotOwner`` else)."""
        loaded = await self._load_topic(topic)
        if loaded.transactions is None:
            raise TransactionsDisabled(f"topic {topic} has no transaction buffer")
        await loaded.transactions.buffer.end(txn, action)

    async def end_on_subscription_here(
        self, topic: str, subscription: str, txn: TxnId, action: pb.TxnAction.ValueType
    ) -> None:
        """Apply or release ``txn``'s pending acks on a subscription of a topic this broker
        serves (``NotOwner`` else)."""
        loaded = await self._load_topic(topic)
        if loaded.transactions is None:
            raise TransactionsDisabled(f"topic {topic} has no transaction buffer")
        pending = loaded.transactions.pending_of(subscription)
        if pending is None:
            log.info("transaction %s ends on %s/%s, which is gone", txn, topic, subscription)
            return
        await pending.end(txn, action)

    async def close(self) -> None:
        await self.assignments.close()
        if self.keeper is not None:
            await self.keeper.close()
        await self.coordinators.close()
        if self._peers is not None:
            self._peers.close()


def broker_transactions(
    config: BrokerConfig,
    store: MetadataStore,
    clock: Clock,
    load_topic: Callable[[str], Awaitable[PersistentTopic]],
    own_urls: Callable[[], tuple[str, str]] = lambda: ("", ""),
) -> BrokerTransactions | None:
    """The broker's transactions, or ``None`` while ``transactionCoordinatorEnabled`` is off."""
    if not config.transaction_coordinator_enabled:
        return None
    return BrokerTransactions(
        store,
        clock,
        load_topic,
        own_urls=own_urls,
        cluster=config.cluster_name,
        max_active=config.max_active_transactions_per_coordinator,
        snapshot_policy=SnapshotPolicy(
            config.transaction_buffer_snapshot_max_transaction_count,
            config.transaction_buffer_snapshot_min_time_in_millis,
        ),
    )
