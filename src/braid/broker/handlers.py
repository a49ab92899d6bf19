"""One handler per Pulsar command the broker serves.

Handlers that only touch in-memory state (SEND, FLOW, ACK bookkeeping, REDELIVER) run synchronously
in arrival order - SEND in particular must hand messages to the managed ledger in the order they
came. Handlers that wait (loading a topic, opening a cursor, seeking) run as tasks guarded by the
connection, so a failure becomes an ``ERROR`` for that request and never reaches the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from braid.broker.consumer import Consumer, SubType
from braid.broker.errors import (
    ChecksumMismatch,
    ConsumerNotFound,
    NotSupported,
    ServerError,
    to_server_error,
)
from braid.broker.producer import Producer
from braid.broker.subscription import Subscription
from braid.broker.topic import PersistentTopic
from braid.ledger.api import EARLIEST, LATEST, Position
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from braid.broker.connection import BrokerConnection

log = logging.getLogger(__name__)

_T = pb.BaseCommand
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


class ConsumerBinding:
    """A consumer registered on a connection, with the subscription and topic it belongs to."""

    __slots__ = ("consumer", "subscription", "topic")

    def __init__(
        self, consumer: Consumer, subscription: Subscription, topic: PersistentTopic
    ) -> None:
        self.consumer = consumer
        self.subscription = subscription
        self.topic = topic


def _fully_acked(mid: pb.MessageIdData) -> bool:
    """A batch-index ack (``ack_set`` with bits still set) acknowledges only part of an entry."""
    return not any(mid.ack_set)


class CommandHandlers:
    """The command table of one connection."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.service = conn.service
        self._table: dict[int, Callable[[pb.BaseCommand, bytes | None, bool | None], None]] = {
            _T.PARTITIONED_METADATA: self._partitioned_metadata,
            _T.LOOKUP: self._lookup,
            _T.PRODUCER: self._producer,
            _T.SEND: self._send,
            _T.CLOSE_PRODUCER: self._close_producer,
            _T.SUBSCRIBE: self._subscribe,
            _T.FLOW: self._flow,
            _T.ACK: self._ack,
            _T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._redeliver,
            _T.UNSUBSCRIBE: self._unsubscribe,
            _T.CLOSE_CONSUMER: self._close_consumer,
            _T.SEEK: self._seek,
            _T.GET_LAST_MESSAGE_ID: self._get_last_message_id,
            _T.CONSUMER_STATS: self._consumer_stats,
            _T.GET_TOPICS_OF_NAMESPACE: self._topics_of_namespace,
        }

    def dispatch(
        self, cmd: pb.BaseCommand, body: bytes | None, checksum_valid: bool | None
    ) -> None:
        handler = self._table.get(cmd.type)
        if handler is not None:
            handler(cmd, body, checksum_valid)
            return
        inner = commands.inner(cmd)
        request_id = getattr(inner, "request_id", None) if inner is not None else None
        if isinstance(request_id, int):
            self.conn.send(
                commands.error(
                    request_id,
                    ServerError.NotAllowedError,
                    f"command {commands.type_name(cmd.type)} is not supported by this broker",
                )
            )

    # -- lookup --------------------------------------------------------------------------------

    def _partitioned_metadata(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.partitionMetadata

        async def run() -> None:
            try:
                await self.service.check_topic(req.topic)
            except Exception as exc:
                code, message = to_server_error(exc)
                self.conn.send(
                    commands.partitioned_metadata_response(
                        req.request_id,
                        error=code,
                        message=message,
                    )
                )
                return
            # Braid has no partitioned topics: 0 tells the client to use the topic as it is.
            self.conn.send(commands.partitioned_metadata_response(req.request_id, 0))

        self.conn.spawn(run(), request_id=req.request_id)

    def _lookup(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.lookupTopic

        async def run() -> None:
            try:
                await self.service.check_topic(req.topic)
            except Exception as exc:
                code, message = to_server_error(exc)
                if code in (ServerError.ServiceNotReady, ServerError.TooManyRequests):
                    # The C++ client drops the whole connection on these two in a lookup.
                    code = ServerError.MetadataError
                self.conn.send(
                    commands.lookup_response(
                        req.request_id,
                        error=code,
                        message=message,
                    )
                )
                return
            self.conn.send(
                commands.lookup_response(
                    req.request_id,
                    broker_service_url=self.service.service_url,
                    authoritative=True,
                )
            )

        self.conn.spawn(run(), request_id=req.request_id)

    def _topics_of_namespace(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.getTopicsOfNamespace

        async def run() -> None:
            topics = await self.service.list_topics(req.namespace)
            self.conn.send(commands.topics_of_namespace_response(req.request_id, topics))

        self.conn.spawn(run(), request_id=req.request_id)

    # -- producers -----------------------------------------------------------------------------

    def _producer(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.producer
        conn = self.conn
        existing = conn.producers.get(req.producer_id)
        if existing is not None:
            # The client retried a request we already served.
            producer, topic = existing
            conn.send(
                commands.producer_success(
                    req.request_id, producer.name, topic.last_sequence_id(producer.name)
                )
            )
            return
        if req.producer_id in conn.pending_producers:
            return

        async def run() -> None:
            topic = await self.service.get_or_create_topic(req.topic)
            user_named = req.HasField("producer_name") and bool(req.producer_name)
            name = req.producer_name if user_named else self.service.generate_producer_name()
            producer = Producer(
                req.producer_id,
                name,
                req.producer_access_mode,
                conn,
                user_provided_name=user_named,
            )

            def waiting() -> None:
                conn.send(commands.producer_success(req.request_id, name, -1, producer_ready=False))

            await topic.add_producer(producer, waiting)
            if conn.closed:
                topic.remove_producer(producer)
                return
            conn.producers[req.producer_id] = (producer, topic)
            conn.send(commands.producer_success(req.request_id, name, topic.last_sequence_id(name)))

        task = asyncio.ensure_future(run())
        conn.pending_producers[req.producer_id] = task

        async def guarded() -> None:
            try:
                await task
            finally:
                conn.pending_producers.pop(req.producer_id, None)

        conn.spawn(guarded(), request_id=req.request_id)

    def _send(self, cmd: pb.BaseCommand, body: bytes | None, checksum_valid: bool | None) -> None:
        req = cmd.send
        conn = self.conn
        entry = conn.producers.get(req.producer_id)
        if entry is None:
            # Sends that were in flight when the broker closed this producer: the client
            # resends them once it has re-created the producer. An error here would make the
            # C++ client drop the whole connection.
            log.debug("dropping SEND for closed producer %s on %s", req.producer_id, conn)
            return
        producer, topic = entry
        sequence_id = req.sequence_id
        highest = max(req.highest_sequence_id, sequence_id + max(req.num_messages, 1) - 1)
        loop = asyncio.get_running_loop()
        if checksum_valid is False or body is None:
            failed: asyncio.Future[Position | None] = loop.create_future()
            failed.set_exception(
                ChecksumMismatch(
                    f"message {sequence_id} of producer {producer.name!r} failed its checksum"
                    if body is not None
                    else f"message {sequence_id} of producer {producer.name!r} has no payload"
                )
            )
            producer.track(sequence_id, req.highest_sequence_id, failed)
            return
        producer.track(
            sequence_id,
            req.highest_sequence_id,
            topic.publish(producer, sequence_id, highest, body),
        )

    def _close_producer(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.close_producer
        conn = self.conn
        pending = conn.pending_producers.pop(req.producer_id, None)
        if pending is not None:
            pending.cancel()
        entry = conn.producers.pop(req.producer_id, None)
        if entry is not None:
            producer, topic = entry
            topic.remove_producer(producer)
        conn.send(commands.success(req.request_id))

    # -- consumers -----------------------------------------------------------------------------

    def _subscribe(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.subscribe
        conn = self.conn
        if req.consumer_id in conn.consumers:
            conn.send(commands.success(req.request_id))
            return

        async def run() -> None:
            if not req.subscription:
                raise NotSupported("a subscription name is required")
            topic = await self.service.get_or_create_topic(req.topic)
            consumer = Consumer(
                req.consumer_id,
                req.consumer_name or f"consumer-{req.consumer_id}",
                req.subType,
                req.priority_level,
                conn,
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
            if conn.closed:
                subscription.remove_consumer(consumer)
                return
            conn.consumers[req.consumer_id] = ConsumerBinding(consumer, subscription, topic)
            conn.send(commands.success(req.request_id))

        conn.spawn(run(), request_id=req.request_id)

    def _binding(self, consumer_id: int) -> ConsumerBinding | None:
        return self.conn.consumers.get(consumer_id)

    def _flow(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.flow
        binding = self._binding(req.consumer_id)
        if binding is not None:
            binding.subscription.flow(binding.consumer, req.messagePermits)

    def _ack(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.ack
        conn = self.conn
        binding = self._binding(req.consumer_id)
        has_request = req.HasField("request_id")
        if binding is None:
            if has_request:
                conn.send(
                    commands.ack_response(
                        req.consumer_id,
                        req.request_id,
                        error=ServerError.ConsumerNotFound,
                        message=f"consumer {req.consumer_id} is not connected",
                    )
                )
            return
        cumulative = req.ack_type == pb.CommandAck.Cumulative
        positions: list[Position] = []
        for mid in req.message_id:
            pos = position_of(mid)
            if _fully_acked(mid):
                positions.append(pos)
            elif cumulative and pos.entry_id > 0:
                # Part of this batch is still unacknowledged: everything before it is done.
                positions.append(Position(pos.ledger_id, pos.entry_id - 1))
        if not positions:
            if has_request:
                conn.send(commands.ack_response(req.consumer_id, req.request_id))
            return

        async def run() -> None:
            try:
                await binding.subscription.acknowledge(binding.consumer, positions, cumulative)
            except Exception as exc:
                if not has_request:
                    raise
                code, message = to_server_error(exc)
                conn.send(
                    commands.ack_response(
                        req.consumer_id,
                        req.request_id,
                        error=code,
                        message=message,
                    )
                )
                return
            if has_request:
                conn.send(commands.ack_response(req.consumer_id, req.request_id))

        conn.spawn(run())

    def _redeliver(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.redeliverUnacknowledgedMessages
        binding = self._binding(req.consumer_id)
        if binding is None:
            return
        positions = [position_of(mid) for mid in req.message_ids] if req.message_ids else None
        binding.subscription.redeliver(binding.consumer, positions)

    def _unsubscribe(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.unsubscribe
        conn = self.conn
        binding = self._binding(req.consumer_id)
        if binding is None:
            conn.send(self._no_consumer(req.request_id, req.consumer_id))
            return

        async def run() -> None:
            await binding.topic.unsubscribe(binding.subscription.name, binding.consumer)
            conn.consumers.pop(req.consumer_id, None)
            conn.send(commands.success(req.request_id))

        conn.spawn(run(), request_id=req.request_id)

    def _close_consumer(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.close_consumer
        binding = self.conn.consumers.pop(req.consumer_id, None)
        if binding is not None:
            binding.subscription.remove_consumer(binding.consumer)
        self.conn.send(commands.success(req.request_id))

    def _seek(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.seek
        conn = self.conn
        binding = self._binding(req.consumer_id)
        if binding is None:
            conn.send(self._no_consumer(req.request_id, req.consumer_id))
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
            conn.send(commands.success(req.request_id))

        conn.spawn(run(), request_id=req.request_id)

    def _get_last_message_id(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.getLastMessageId
        conn = self.conn
        binding = self._binding(req.consumer_id)
        if binding is None:
            conn.send(self._no_consumer(req.request_id, req.consumer_id))
            return

        async def run() -> None:
            last, batch_index = await binding.topic.last_message_position()
            mark = binding.subscription.cursor.mark_delete_position
            conn.send(
                commands.get_last_message_id_response(
                    req.request_id,
                    commands.message_id(
                        last.ledger_id,
                        last.entry_id,
                        partition=-1,
                        batch_index=batch_index,
                    ),
                    commands.message_id(mark.ledger_id, mark.entry_id, partition=-1),
                )
            )

        conn.spawn(run(), request_id=req.request_id)

    def _consumer_stats(self, cmd: pb.BaseCommand, _b: bytes | None, _c: bool | None) -> None:
        req = cmd.consumerStats
        binding = self._binding(req.consumer_id)
        if binding is None:
            self.conn.send(
                commands.consumer_stats_response(
                    req.request_id,
                    error_code=ServerError.ConsumerNotFound,
                    error_message=f"consumer {req.consumer_id} is not connected",
                )
            )
            return
        consumer = binding.consumer
        self.conn.send(
            commands.consumer_stats_response(
                req.request_id,
                consumer_name=consumer.consumer_name,
                subscription_type=SubType.Name(consumer.sub_type),
                available_permits=max(consumer.permits, 0),
                unacked_messages=sum(consumer.pending.values()),
                msg_backlog=binding.subscription.cursor.backlog(),
            )
        )

    def _no_consumer(self, request_id: int, consumer_id: int) -> pb.BaseCommand:
        return commands.error(
            request_id,
            ConsumerNotFound.code,
            f"consumer {consumer_id} is not connected",
        )
