"""The topic commands of one connection: lookup, producers, consumers.

:class:`TopicCommands` is the per-connection session of the ``topics`` command family (see
:mod:`braid.broker.registry`) and the one owner of the connection's producers and consumers by
id: its handlers add and remove them, it detaches them all when the connection closes, and it is
the ``ProducerTransport``/``ConsumerTransport`` through which producers, consumers, topics and
dispatchers reach the client (closing a producer or consumer from the broker side drops it from
the maps here). It sees its connection only through the narrow
:class:`~braid.broker.registry.CommandChannel`, and the broker only through :class:`TopicService`.

Handlers that only touch in-memory state (SEND, FLOW, ACK bookkeeping, REDELIVER) run synchronously
in arrival order - SEND in particular must hand messages to the managed ledger in the order they
came. Handlers that wait (loading a topic, opening a cursor, seeking) run as tasks spawned on the
channel, so a failure becomes an ``ERROR`` for that request and never reaches the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from braid.broker.applied_policies import AppliedPolicyResolver
from braid.broker.client_quirks import (
    client_drops_connection_on_send_error,
    client_handles_end_of_topic,
)
from braid.broker.consumer import Consumer, Delivery, SubType
from braid.broker.errors import (
    ChecksumMismatch,
    DuplicateInFlight,
    InvalidMessage,
    NotSupported,
    ServerError,
    ServerErrorCode,
    TopicFenced,
    to_server_error,
)
from braid.broker.non_persistent import NonPersistentTopic
from braid.broker.non_persistent_subscription import NonPersistentSubscription
from braid.broker.ownership import AssignedBroker, LookupAnswer
from braid.broker.producer import PendingReceipt, Producer
from braid.broker.registry import CommandChannel, CommandFamily, CommandHandler, CommandType
from braid.broker.request_limits import LookupLimiter
from braid.broker.schemas.model import SchemaData
from braid.broker.schemas.topic_schemas import TopicSchemas
from braid.broker.send_validation import SendValidator
from braid.broker.sticky_keys import KeySharedPolicy
from braid.broker.subscription import BatchIndexAck, Subscription
from braid.broker.topic import PersistentTopic
from braid.broker.transactions.topics import ack_in_transaction, publish_in_transaction
from braid.core.errors import BraidError
from braid.core.names import TopicName
from braid.core.partitions import partition_index
from braid.ledger.api import EARLIEST, LATEST, Position
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.frames import SendReceiptEncoder
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authorization import TopicOperation

log = logging.getLogger(__name__)

#: A topic a producer or consumer attaches to (ADR 0062: stored or not), and its subscriptions.
ServedTopic = PersistentTopic | NonPersistentTopic
ServedSubscription = Subscription | NonPersistentSubscription

_INT64_MAX = 2**63 - 1


def _signed(value: int) -> int:
    """uint64 on the wire -> the signed id it stands for (``2^64 - 1`` is ``-1``)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def position_of(mid: pb.MessageIdData) -> Position:
    """The managed-ledger position a message id names (earliest/latest sentinels mapped)."""
    ledger_id, entry_id = _signed(mid.ledgerId), _signed(mid.entryId)
    if ledger_id < 0:
        return EARLIEST
    if ledger_id == _INT64_MAX:
        return LATEST
    return Position(ledger_id, entry_id)


def _fully_acked(mid: pb.MessageIdData) -> bool:
    """A batch-index ack (``ack_set`` with bits still set) acknowledges only part of an entry."""
    return not any(mid.ack_set)


class TopicService(Protocol):
    """What the topic commands need from the broker (implemented by ``BrokerService``)."""

    async def lookup(
        self, name: str, listener: str | None = None, *, authoritative: bool = False
    ) -> LookupAnswer:
        """Where LOOKUP sends the client for ``name`` (for ``listener``, if named)."""
        ...

    def lookup_url_tls(self, listener: str | None = None) -> str | None:
        """``pulsar+ssl://host:port`` that LOOKUP answers with, when the broker has TLS."""
        ...

    async def check_topic(self, name: str) -> TopicName:
        """Validate a topic name and its namespace."""
        ...

    async def partitioned_metadata(self, name: str, *, auto_create: bool = True) -> int:
        """The topic's number of partitions (0: not partitioned), maybe auto-creating it."""
        ...

    async def serve_topic(self, name: str) -> ServedTopic:
        """The loaded topic, loading (and maybe creating) it on first use."""
        ...

    async def list_topics(self, namespace: str) -> list[str]:
        """Persistent topics of ``tenant/ns``."""
        ...

    def generate_producer_name(self) -> str:
        """A producer name unique across this broker's restarts."""
        ...

    def write_refusal(self) -> BraidError | None:
        """Why nothing can be stored now (storage is read-only: full disks), or ``None``."""
        ...

    async def check_producer_quota(self, topic: str) -> None:
        """Raise the quota's error while ``topic`` is over a backlog quota holding producers."""
        ...

    @property
    def schemas(self) -> TopicSchemas:
        """The schema rules PRODUCER and SUBSCRIBE apply."""
        ...

    @property
    def applied_policies(self) -> AppliedPolicyResolver:
        """The caps on producers and consumers in force per topic (topic, namespace, broker)."""
        ...

    @property
    def lookups(self) -> LookupLimiter:
        """``maxConcurrentLookupRequest``: every lookup holds a slot while it runs."""
        ...


class ConsumerBinding:
    """A consumer registered on a connection, with the subscription and topic it belongs to."""

    __slots__ = ("consumer", "partition", "subscription", "topic")

    def __init__(
        self, consumer: Consumer, subscription: ServedSubscription, topic: ServedTopic
    ) -> None:
        self.consumer = consumer
        self.subscription = subscription
        self.topic = topic
        #: The topic's partition index (-1: not a partition), stamped on every message id the
        #: broker sends this consumer, as Pulsar's does: the official client reports it as
        #: ``message_id().partition()`` and routes acknowledgements of a partitioned consumer by it.
        self.partition = partition_index(topic.name)  # a full name ends with its local name


#: Builds the refusal a command sends when it names a consumer this connection does not have.
_ConsumerRefusal = Callable[[ServerErrorCode, str], pb.BaseCommand]


class TopicCommands:
    """One connection's producers and consumers, and the handlers of the topic commands."""

    def __init__(
        self, channel: CommandChannel, service: TopicService, validator: SendValidator
    ) -> None:
        self._channel = channel
        self._service = service
        self._validator = validator
        # The session opens on the first command, after the handshake: the version is known.
        self._end_of_topic_supported = client_handles_end_of_topic(channel.client_version)
        self._close_on_terminated = client_drops_connection_on_send_error(channel.client_version)
        self._producers: dict[int, tuple[Producer, ServedTopic]] = {}
        self._pending_producers: dict[int, asyncio.Task[None]] = {}
        self._consumers: dict[int, ConsumerBinding] = {}
        self._closed = False
        # One SEND_RECEIPT per stored entry: encoded from one reused command, straight to bytes.
        self._receipts = SendReceiptEncoder()

    # -- transport for producers and consumers ------------------------------------------------

    @property
    def remote_address(self) -> str:
        return self._channel.remote_address

    @property
    def closed(self) -> bool:
        return self._closed or self._channel.closed

    def send_receipt(
        self, producer_id: int, sequence_id: int, highest_sequence_id: int, position: Position
    ) -> None:
        self._channel.send_frame(
            self._receipts.encode(
                producer_id,
                sequence_id,
                position.ledger_id,
                position.entry_id,
                highest_sequence_id,
            )
        )

    def send_publish_error(self, producer_id: int, sequence_id: int, exc: BaseException) -> None:
        code, message = to_server_error(exc)
        if code == ServerError.PersistenceError or isinstance(exc, TopicFenced):
            # Not stored (storage failed or is full, or another writer took the ledger over),
            # or the first copy of a resend is still being written (Pulsar's
            # MessageDupUnknownException): close the producer, so the client resends once it
            # reconnects. A SEND_ERROR would make the official clients
            # drop the whole connection - this client's consumers with it - and resend at once,
            # in a loop; a reconnecting producer is refused while storage is read-only instead
            # (on_producer), and its sends time out as they should.
            if not isinstance(exc, DuplicateInFlight):
                log.info(
                    "closing producer %s on %s: message %s not stored: %s",
                    producer_id,
                    self.remote_address,
                    sequence_id,
                    message,
                )
            entry = self._producers.pop(producer_id, None)
            if entry is not None:
                producer, topic = entry
                topic.remove_producer(producer)
            self._channel.send(commands.close_producer(producer_id, commands.NO_REQUEST_ID))
            return
        self._channel.send(commands.send_error(producer_id, sequence_id, code, message))

    def send_close_producer(self, producer_id: int, assigned: AssignedBroker | None = None) -> None:
        self._producers.pop(producer_id, None)
        self._channel.send(
            commands.close_producer(
                producer_id,
                commands.NO_REQUEST_ID,
                assigned_broker_service_url=assigned.service_url if assigned else None,
                assigned_broker_service_url_tls=assigned.service_url_tls if assigned else None,
            )
        )

    def send_messages(self, consumer_id: int, deliveries: Sequence[Delivery]) -> None:
        send = self._channel.send
        binding = self._consumers.get(consumer_id)
        partition = -1 if binding is None else binding.partition
        for d in deliveries:
            pos = d.entry.position
            send(
                commands.message(
                    consumer_id,
                    pos.ledger_id,
                    pos.entry_id,
                    d.redelivery_count,
                    d.ack_set,
                    partition=partition,
                ),
                d.entry.data,
            )

    def send_close_consumer(self, consumer_id: int, assigned: AssignedBroker | None = None) -> None:
        self._consumers.pop(consumer_id, None)
        self._channel.send(
            commands.close_consumer(
                consumer_id,
                commands.NO_REQUEST_ID,
                assigned_broker_service_url=assigned.service_url if assigned else None,
                assigned_broker_service_url_tls=assigned.service_url_tls if assigned else None,
            )
        )

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        self._channel.send(commands.active_consumer_change(consumer_id, is_active))

    def send_reached_end_of_topic(self, consumer_id: int) -> bool:
        if not self._end_of_topic_supported:
            return False
        self._channel.send(commands.reached_end_of_topic(consumer_id))
        return True

    # -- lifecycle -----------------------------------------------------------------------------

    async def close(self) -> None:
        """Detach every producer and consumer of this connection (the connection is closing)."""
        self._closed = True
        for task in list(self._pending_producers.values()):
            task.cancel()
        for producer, topic in list(self._producers.values()):
            topic.remove_producer(producer)
        self._producers.clear()
        for binding in list(self._consumers.values()):
            binding.subscription.remove_consumer(binding.consumer)
        self._consumers.clear()

    # -- lookup --------------------------------------------------------------------------------

    def on_partitioned_metadata(self, event: CommandReceived) -> None:
        req = event.command.partitionMetadata

        async def run() -> None:
            try:
                await self._channel.authorize(TopicOperation.LOOKUP, req.topic)
                with self._service.lookups.slot():
                    partitions = await self._service.partitioned_metadata(
                        req.topic, auto_create=req.metadata_auto_creation_enabled
                    )
            except Exception as exc:
                code, message = to_server_error(exc)
                self._channel.send(
                    commands.partitioned_metadata_response(
                        req.request_id, error=code, message=message
                    )
                )
                return
            # 0 tells the client to use the topic as it is; N to use its N partitions.
            self._channel.send(commands.partitioned_metadata_response(req.request_id, partitions))

        self._channel.spawn(run(), request_id=req.request_id)

    def on_lookup(self, event: CommandReceived) -> None:
        req = event.command.lookupTopic

        async def run() -> None:
            try:
                await self._channel.authorize(TopicOperation.LOOKUP, req.topic)
                with self._service.lookups.slot():
                    answer = await self._service.lookup(
                        req.topic,
                        req.advertised_listener_name or None,
                        authoritative=req.authoritative,
                    )
            except Exception as exc:
                code, message = to_server_error(exc)
                if code in (ServerError.ServiceNotReady, ServerError.TooManyRequests):
                    # The C++ client drops the whole connection on these two in a lookup.
                    code = ServerError.MetadataError
                self._channel.send(
                    commands.lookup_response(req.request_id, error=code, message=message)
                )
                return
            # Pulsar's answers: Connect (authoritative) to the owner, or Redirect with
            # authoritative=true to the broker chosen to take an unowned bundle.
            self._channel.send(
                commands.lookup_response(
                    req.request_id,
                    broker_service_url=answer.service_url,
                    broker_service_url_tls=(
                        self._service.lookup_url_tls(req.advertised_listener_name or None)
                        if answer.local
                        else None
                    ),
                    redirect=answer.redirect,
                    authoritative=answer.authoritative,
                )
            )

        self._channel.spawn(run(), request_id=req.request_id)

    # -- producers -----------------------------------------------------------------------------

    def on_producer(self, event: CommandReceived) -> None:
        req = event.command.producer
        channel = self._channel
        existing = self._producers.get(req.producer_id)
        if existing is not None:
            # The client retried a request we already served.
            producer, topic = existing
            channel.send(
                commands.producer_success(
                    req.request_id,
                    producer.name,
                    topic.last_sequence_id(producer.name),
                    schema_version=producer.schema_version,
                )
            )
            return
        if req.producer_id in self._pending_producers:
            return

        async def run() -> None:
            await channel.authorize(TopicOperation.PRODUCE, req.topic)
            topic = await self._service.serve_topic(req.topic)
            # This request is among the pending ones: the others are what the connection holds.
            limits = await self._service.applied_policies.client_limits(topic.name)
            limits.check_producer(
                topic.name,
                len(topic.producers),
                len(self._producers) + len(self._pending_producers) - 1,
            )
            # Over a backlog quota that holds producers: refused with the policy's error.
            await self._service.check_producer_quota(topic.name)
            refusal = self._service.write_refusal()
            if refusal is not None and isinstance(topic, PersistentTopic):
                # Nothing could be stored: refuse (PersistenceError, with the reason) rather than
                # take sends only to close the producer again - a reconnecting client backs off,
                # and its pending sends time out instead of cycling. (A non-persistent topic
                # stores nothing: it keeps serving.)
                raise refusal
            schema_version = await self._service.schemas.for_producer(
                TopicName.parse(topic.name), _schema_of(req)
            )
            user_named = req.HasField("producer_name") and bool(req.producer_name)
            name = req.producer_name if user_named else self._service.generate_producer_name()
            producer = Producer(
                req.producer_id,
                name,
                req.producer_access_mode,
                self,
                user_provided_name=user_named,
            )
            producer.schema_version = schema_version
            producer.close_when_terminated = self._close_on_terminated

            def waiting() -> None:
                channel.send(
                    commands.producer_success(req.request_id, name, -1, producer_ready=False)
                )

            await topic.add_producer(producer, waiting)
            if self.closed:
                topic.remove_producer(producer)
                return
            self._producers[req.producer_id] = (producer, topic)
            channel.send(
                commands.producer_success(
                    req.request_id,
                    name,
                    topic.last_sequence_id(name),
                    schema_version=schema_version,
                )
            )

        task = asyncio.ensure_future(run())
        self._pending_producers[req.producer_id] = task

        async def guarded() -> None:
            try:
                await task
            finally:
                self._pending_producers.pop(req.producer_id, None)

        channel.spawn(guarded(), request_id=req.request_id)

    def on_send(self, event: CommandReceived) -> None:
        req = event.command.send
        body = event.body
        entry = self._producers.get(req.producer_id)
        if entry is None:
            # Sends that were in flight when the broker closed this producer: the client
            # resends them once it has re-created the producer. An error here would make the
            # C++ client drop the whole connection.
            log.debug(
                "dropping SEND for closed producer %s on %s", req.producer_id, self.remote_address
            )
            return
        producer, topic = entry
        sequence_id = req.sequence_id
        highest = req.highest_sequence_id
        # The last sequence id the SEND covers: a batch of n from s covers s + n - 1.
        count = req.num_messages
        last = sequence_id + count - 1 if count > 1 else sequence_id
        if highest > last:
            last = highest
        receipt = producer.expect(sequence_id, highest, last)
        if event.checksum_valid is False or body is None:
            producer.complete(
                receipt,
                None,
                ChecksumMismatch(
                    f"message {sequence_id} of producer {producer.name!r} failed its checksum"
                    if body is not None
                    else f"message {sequence_id} of producer {producer.name!r} has no payload"
                ),
            )
            return
        try:
            metadata = self._validator.validate(body)
        except InvalidMessage as exc:
            self._refuse(producer, receipt, exc)
            return
        if req.HasField("txnid_most_bits"):  # through the topic's transaction buffer
            publish_in_transaction(topic, receipt, body, metadata, req)
        else:  # the metadata serves a key sampler within publish; it is not kept
            topic.publish(receipt, body, metadata)

    def _refuse(self, producer: Producer, receipt: PendingReceipt, exc: InvalidMessage) -> None:
        """Answer a poison SEND with its SEND_ERROR; logged once per producer (a client sending
        nothing but poison must not flood the log), counted in the producer's stats."""
        refused = producer.count_refused()
        error = InvalidMessage(
            f"message {receipt.sequence_id} of producer {producer.name!r} refused: {exc}"
        )
        if refused == 1:
            log.warning(
                "%s (from %s; later refusals of this producer are only counted)",
                error,
                self.remote_address,
            )
        producer.complete(receipt, None, error)

    def on_close_producer(self, event: CommandReceived) -> None:
        req = event.command.close_producer
        pending = self._pending_producers.pop(req.producer_id, None)
        if pending is not None:
            pending.cancel()
        entry = self._producers.pop(req.producer_id, None)
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        self._channel.send(commands.success(req.request_id))

    # -- consumers -----------------------------------------------------------------------------

    def _consumer(
        self, consumer_id: int, refusal: _ConsumerRefusal | None
    ) -> ConsumerBinding | None:
        """The consumer ``consumer_id`` of this connection; when it has none, ``refusal`` (if
        given) builds the answer, which is sent, and ``None`` is returned."""
        binding = self._consumers.get(consumer_id)
        if binding is None and refusal is not None:
            self._channel.send(
                refusal(ServerError.ConsumerNotFound, f"consumer {consumer_id} is not connected")
            )
        return binding

    def on_subscribe(self, event: CommandReceived) -> None:
        req = event.command.subscribe
        if req.consumer_id in self._consumers:
            self._channel.send(commands.success(req.request_id))
            return

        async def run() -> None:
            if not req.subscription:
                raise NotSupported("a subscription name is required")
            await self._channel.authorize(TopicOperation.CONSUME, req.topic, req.subscription)
            topic = await self._service.serve_topic(req.topic)
            existing = topic.subscriptions.get(req.subscription)
            limits = await self._service.applied_policies.client_limits(topic.name)
            limits.check_consumer(
                topic.name,
                req.subscription,
                topic.connected_clients()[1],
                len(existing.consumers) if existing is not None else 0,
                len(self._consumers),
            )
            await self._service.schemas.for_consumer(
                TopicName.parse(topic.name), _schema_of(req), topic_in_use=_in_use(topic)
            )
            consumer = Consumer(
                req.consumer_id,
                req.consumer_name or f"consumer-{req.consumer_id}",
                req.subType,
                req.priority_level,
                self,
                read_compacted=req.read_compacted,
                key_shared=(
                    KeySharedPolicy.from_meta(
                        req.keySharedMeta if req.HasField("keySharedMeta") else None
                    )
                    if req.subType == SubType.Key_Shared
                    else None
                ),
            )
            subscription = await topic.subscribe(
                req.subscription,
                consumer,
                initial_earliest=req.initialPosition == pb.CommandSubscribe.Earliest,
                durable=req.durable,
                start=(
                    position_of(req.start_message_id)
                    if not req.durable and req.HasField("start_message_id")
                    else None
                ),
            )
            if self.closed:
                subscription.remove_consumer(consumer)
                return
            self._consumers[req.consumer_id] = ConsumerBinding(consumer, subscription, topic)
            self._channel.send(commands.success(req.request_id))

        self._channel.spawn(run(), request_id=req.request_id)

    def on_flow(self, event: CommandReceived) -> None:
        req = event.command.flow
        binding = self._consumer(req.consumer_id, None)
        if binding is not None:
            binding.subscription.flow(binding.consumer, req.messagePermits)

    def on_ack(self, event: CommandReceived) -> None:
        req = event.command.ack
        channel = self._channel
        has_request = req.HasField("request_id")

        def ack_refused(code: ServerErrorCode, message: str) -> pb.BaseCommand:
            return commands.ack_response(
                req.consumer_id, req.request_id, error=code, message=message
            )

        binding = self._consumer(req.consumer_id, ack_refused if has_request else None)
        if binding is None:
            return
        cumulative = req.ack_type == pb.CommandAck.Cumulative
        positions: list[Position] = []
        partial: list[BatchIndexAck] = []
        for mid in req.message_id:
            pos = position_of(mid)
            if _fully_acked(mid):
                positions.append(pos)
                continue
            # A batch-index ack (PIP-54): the set bits are the messages still unacknowledged.
            partial.append((pos, tuple(mid.ack_set)))
            if cumulative and pos.entry_id > 0:
                # Part of this batch is still unacknowledged: everything before it is done.
                positions.append(Position(pos.ledger_id, pos.entry_id - 1))
        if req.HasField("txnid_most_bits"):  # held until the transaction ends
            ack_in_transaction(channel, binding.topic, binding.subscription.name, req, positions)
            return
        if not positions and not partial:
            if has_request:
                channel.send(commands.ack_response(req.consumer_id, req.request_id))
            return

        binding.subscription.record_acks(binding.consumer, positions, cumulative)

        async def run() -> None:
            try:
                await binding.subscription.acknowledge(
                    binding.consumer, positions, cumulative, partial
                )
            except Exception as exc:
                if not has_request:
                    raise
                channel.send(ack_refused(*to_server_error(exc)))
                return
            if has_request:
                channel.send(commands.ack_response(req.consumer_id, req.request_id))

        channel.spawn(run())

    def on_redeliver(self, event: CommandReceived) -> None:
        req = event.command.redeliverUnacknowledgedMessages
        binding = self._consumer(req.consumer_id, None)
        if binding is None:
            return
        positions = [position_of(mid) for mid in req.message_ids] if req.message_ids else None
        binding.subscription.redeliver(binding.consumer, positions)

    def on_unsubscribe(self, event: CommandReceived) -> None:
        req = event.command.unsubscribe
        binding = self._consumer(req.consumer_id, _error_for(req.request_id))
        if binding is None:
            return

        async def run() -> None:
            await binding.topic.unsubscribe(binding.subscription.name, binding.consumer)
            self._consumers.pop(req.consumer_id, None)
            self._channel.send(commands.success(req.request_id))

        self._channel.spawn(run(), request_id=req.request_id)

    def on_close_consumer(self, event: CommandReceived) -> None:
        req = event.command.close_consumer
        binding = self._consumers.pop(req.consumer_id, None)
        if binding is not None:
            binding.subscription.remove_consumer(binding.consumer)
        self._channel.send(commands.success(req.request_id))

    def on_seek(self, event: CommandReceived) -> None:
        req = event.command.seek
        binding = self._consumer(req.consumer_id, _error_for(req.request_id))
        if binding is None:
            return

        async def run() -> None:
            if req.HasField("message_publish_time"):
                position = await binding.topic.find_position_by_publish_time(
                    req.message_publish_time
                )
            elif req.HasField("message_id"):
                position = position_of(req.message_id)
            else:
                raise NotSupported("SEEK needs a message id or a publish time")
            # Closes the subscription's consumers first (they re-subscribe at the new position).
            await binding.subscription.reset_cursor(position)
            self._channel.send(commands.success(req.request_id))

        self._channel.spawn(run(), request_id=req.request_id)

    def on_get_last_message_id(self, event: CommandReceived) -> None:
        req = event.command.getLastMessageId
        binding = self._consumer(req.consumer_id, _error_for(req.request_id))
        if binding is None:
            return

        async def run() -> None:
            last, batch_index = await binding.topic.last_message_position(
                compacted=binding.consumer.read_compacted
            )
            assert isinstance(binding.subscription, Subscription)  # else refused just above
            mark = binding.subscription.cursor.mark_delete_position
            self._channel.send(
                commands.get_last_message_id_response(
                    req.request_id,
                    commands.message_id(
                        last.ledger_id,
                        last.entry_id,
                        partition=binding.partition,
                        batch_index=batch_index,
                    ),
                    commands.message_id(mark.ledger_id, mark.entry_id, partition=binding.partition),
                )
            )

        self._channel.spawn(run(), request_id=req.request_id)

    def on_consumer_stats(self, event: CommandReceived) -> None:
        req = event.command.consumerStats

        def stats_refused(code: ServerErrorCode, message: str) -> pb.BaseCommand:
            return commands.consumer_stats_response(
                req.request_id, error_code=code, error_message=message
            )

        binding = self._consumer(req.consumer_id, stats_refused)
        if binding is None:
            return
        consumer = binding.consumer
        self._channel.send(
            commands.consumer_stats_response(
                req.request_id,
                consumer_name=consumer.consumer_name,
                subscription_type=SubType.Name(consumer.sub_type),
                available_permits=max(consumer.permits, 0),
                unacked_messages=consumer.unacked_messages,
                msg_backlog=binding.subscription.msg_backlog,
            )
        )


def _schema_of(req: pb.CommandProducer | pb.CommandSubscribe) -> SchemaData | None:
    """The schema a PRODUCER or SUBSCRIBE carries, if any."""
    return SchemaData.from_wire(req.schema) if req.HasField("schema") else None


def _in_use(topic: ServedTopic) -> bool:
    """Producers, consumers or messages: a consumer's schema may no longer define the topic's."""
    stored = isinstance(topic, PersistentTopic) and topic.ledger.number_of_entries > 0
    return stored or bool(topic.producers) or any(s.consumers for s in topic.subscriptions.values())


def _error_for(request_id: int) -> _ConsumerRefusal:
    """The refusal of a request that has no response command of its own: an ``ERROR``."""

    def refusal(code: ServerErrorCode, message: str) -> pb.BaseCommand:
        return commands.error(request_id, code, message)

    return refusal


#: The topic commands and their handlers: data, like the protocol's command table.
_HANDLERS: dict[CommandType, CommandHandler[TopicCommands]] = {
    pb.BaseCommand.PARTITIONED_METADATA: TopicCommands.on_partitioned_metadata,
    pb.BaseCommand.LOOKUP: TopicCommands.on_lookup,
    pb.BaseCommand.PRODUCER: TopicCommands.on_producer,
    pb.BaseCommand.SEND: TopicCommands.on_send,
    pb.BaseCommand.CLOSE_PRODUCER: TopicCommands.on_close_producer,
    pb.BaseCommand.SUBSCRIBE: TopicCommands.on_subscribe,
    pb.BaseCommand.FLOW: TopicCommands.on_flow,
    pb.BaseCommand.ACK: TopicCommands.on_ack,
    pb.BaseCommand.REDELIVER_UNACKNOWLEDGED_MESSAGES: TopicCommands.on_redeliver,
    pb.BaseCommand.UNSUBSCRIBE: TopicCommands.on_unsubscribe,
    pb.BaseCommand.CLOSE_CONSUMER: TopicCommands.on_close_consumer,
    pb.BaseCommand.SEEK: TopicCommands.on_seek,
    pb.BaseCommand.GET_LAST_MESSAGE_ID: TopicCommands.on_get_last_message_id,
    pb.BaseCommand.CONSUMER_STATS: TopicCommands.on_consumer_stats,
}


def topic_commands(service: TopicService, validator: SendValidator) -> CommandFamily[TopicCommands]:
    """The ``topics`` command family, served for ``service``; every SEND is checked by
    ``validator`` before it is stored."""
    return CommandFamily(
        name="topics",
        open_session=lambda channel: TopicCommands(channel, service, validator),
        handlers=_HANDLERS,
    )
