"""Typed builders for the commands Braid sends, and the one table that wraps them.

Every builder returns a ready ``pb.BaseCommand`` whose ``type`` matches the field that is set.
The pairing comes from one place, :func:`wrap`, which reads it off the schema: Pulsar gives each
inner command the ``BaseCommand`` field number equal to its ``Type`` value, so the table is
derived from the descriptor instead of being typed out (a unit test pins the rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from braid.protocol.errors import InvalidCommand
from braid.protocol.generated import PulsarApi_pb2 as pb

#: 2^64 - 1: the request id Pulsar uses for errors that answer no request (a refused CONNECT),
#: and the unsigned form of the ``-1`` in the earliest message id.
NO_REQUEST_ID = (1 << 64) - 1


def _build_tables() -> tuple[dict[str, FieldDescriptor], dict[int, FieldDescriptor]]:
    by_message: dict[str, FieldDescriptor] = {}
    by_type: dict[int, FieldDescriptor] = {}
    type_values = {v.number for v in pb.BaseCommand.DESCRIPTOR.enum_types_by_name["Type"].values}
    for field in pb.BaseCommand.DESCRIPTOR.fields:
        if field.message_type is None:
            continue
        if field.number not in type_values:
            raise RuntimeError(f"BaseCommand.{field.name} has no Type value {field.number}")
        by_message[field.message_type.full_name] = field
        by_type[field.number] = field
    return by_message, by_type


_FIELD_BY_MESSAGE, _FIELD_BY_TYPE = _build_tables()


def wrap(inner: Message) -> pb.BaseCommand:
    """Put an inner command (``pb.CommandSend``, ...) into a ``BaseCommand`` with the right type.

    Raises:
        InvalidCommand: ``inner`` is not one of the ``BaseCommand`` payload messages.
    """
    field = _FIELD_BY_MESSAGE.get(inner.DESCRIPTOR.full_name)
    if field is None:
        raise InvalidCommand(f"{inner.DESCRIPTOR.full_name} is not a BaseCommand payload")
    cmd = pb.BaseCommand()
    cmd.type = field.number  # type: ignore[assignment]  # number is a valid Type value by table
    getattr(cmd, field.name).CopyFrom(inner)
    return cmd


def field_name(command_type: int) -> str | None:
    """Name of the ``BaseCommand`` field carrying commands of ``command_type`` (None if unknown)."""
    field = _FIELD_BY_TYPE.get(command_type)
    return field.name if field is not None else None


def inner(cmd: pb.BaseCommand) -> Message | None:
    """The inner command that matches ``cmd.type``, or ``None`` when that field is not set."""
    field = _FIELD_BY_TYPE.get(cmd.type)
    if field is None or not cmd.HasField(field.name):  # type: ignore[arg-type]
        return None
    value: Message = getattr(cmd, field.name)
    return value


def type_name(command_type: int) -> str:
    """Readable name of a command type (``"SEND"``), also for numbers the schema lacks."""
    try:
        return pb.BaseCommand.Type.Name(command_type)  # type: ignore[arg-type]
    except ValueError:
        return f"UNKNOWN({command_type})"


def message_id(
    ledger_id: int,
    entry_id: int,
    *,
    partition: int | None = None,
    batch_index: int | None = None,
    batch_size: int | None = None,
) -> pb.MessageIdData:
    """A ``MessageIdData``; ``-1`` ids are stored as their unsigned 64-bit form."""
    mid = pb.MessageIdData(ledgerId=ledger_id & NO_REQUEST_ID, entryId=entry_id & NO_REQUEST_ID)
    if partition is not None:
        mid.partition = partition
    if batch_index is not None:
        mid.batch_index = batch_index
    if batch_size is not None:
        mid.batch_size = batch_size
    return mid


# --- handshake and keep-alive ---------------------------------------------------------------


def connect(
    client_version: str,
    protocol_version: int,
    *,
    auth_method_name: str | None = "none",
    auth_data: bytes | None = None,
    feature_flags: pb.FeatureFlags | None = None,
) -> pb.BaseCommand:
    """CONNECT, as a client sends it."""
    c = pb.CommandConnect(client_version=client_version, protocol_version=protocol_version)
    if auth_method_name is not None:
        c.auth_method_name = auth_method_name
    if auth_data is not None:
        c.auth_data = auth_data
    if feature_flags is not None:
        c.feature_flags.CopyFrom(feature_flags)
    return wrap(c)


def connected(
    server_version: str,
    protocol_version: int,
    max_message_size: int,
    feature_flags: pb.FeatureFlags | None = None,
) -> pb.BaseCommand:
    """CONNECTED: the broker's answer to CONNECT."""
    c = pb.CommandConnected(
        server_version=server_version,
        protocol_version=protocol_version,
        max_message_size=max_message_size,
    )
    if feature_flags is not None:
        c.feature_flags.CopyFrom(feature_flags)
    return wrap(c)


def ping() -> pb.BaseCommand:
    """PING."""
    return wrap(pb.CommandPing())


def pong() -> pb.BaseCommand:
    """PONG."""
    return wrap(pb.CommandPong())


# --- generic replies ------------------------------------------------------------------------


def success(request_id: int) -> pb.BaseCommand:
    """SUCCESS for a request."""
    return wrap(pb.CommandSuccess(request_id=request_id))


def error(request_id: int, code: pb.ServerError.ValueType, message: str) -> pb.BaseCommand:
    """ERROR for a request (``message`` is required on the wire, so it is required here)."""
    return wrap(pb.CommandError(request_id=request_id, error=code, message=message))


# --- lookup ---------------------------------------------------------------------------------


def partitioned_metadata_response(
    request_id: int,
    partitions: int = 0,
    *,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """PARTITIONED_METADATA_RESPONSE: ``partitions`` (0 = not partitioned), or a failure."""
    r = pb.CommandPartitionedTopicMetadataResponse(request_id=request_id)
    if error is None:
        r.response = pb.CommandPartitionedTopicMetadataResponse.Success
        r.partitions = partitions
    else:
        r.response = pb.CommandPartitionedTopicMetadataResponse.Failed
        r.error = error
        r.message = message or ""
    return wrap(r)


def lookup_response(
    request_id: int,
    *,
    broker_service_url: str | None = None,
    broker_service_url_tls: str | None = None,
    redirect: bool = False,
    authoritative: bool = False,
    proxy_through_service_url: bool = False,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """LOOKUP_RESPONSE: Connect (or Redirect) to a broker URL, or Failed with an error."""
    r = pb.CommandLookupTopicResponse(request_id=request_id, authoritative=authoritative)
    if error is not None:
        r.response = pb.CommandLookupTopicResponse.Failed
        r.error = error
        r.message = message or ""
        return wrap(r)
    r.response = (
        pb.CommandLookupTopicResponse.Redirect
        if redirect
        else pb.CommandLookupTopicResponse.Connect
    )
    if broker_service_url is not None:
        r.brokerServiceUrl = broker_service_url
    if broker_service_url_tls is not None:
        r.brokerServiceUrlTls = broker_service_url_tls
    if proxy_through_service_url:
        r.proxy_through_service_url = True
    return wrap(r)


def topics_of_namespace_response(
    request_id: int,
    topics: Iterable[str],
    *,
    filtered: bool = False,
    topics_hash: str | None = None,
    changed: bool = True,
) -> pb.BaseCommand:
    """GET_TOPICS_OF_NAMESPACE_RESPONSE."""
    r = pb.CommandGetTopicsOfNamespaceResponse(
        request_id=request_id, topics=list(topics), filtered=filtered, changed=changed
    )
    if topics_hash is not None:
        r.topics_hash = topics_hash
    return wrap(r)


# --- producers ------------------------------------------------------------------------------


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int,
    schema_version: bytes | None = None,
    topic_epoch: int | None = None,
    producer_ready: bool = True,
) -> pb.BaseCommand:
    """PRODUCER_SUCCESS; ``last_sequence_id`` is -1 when the producer never stored anything."""
    r = pb.CommandProducerSuccess(
        request_id=request_id,
        producer_name=producer_name,
        last_sequence_id=last_sequence_id,
        producer_ready=producer_ready,
    )
    if schema_version is not None:
        r.schema_version = schema_version
    if topic_epoch is not None:
        r.topic_epoch = topic_epoch
    return wrap(r)


def send_receipt(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    highest_sequence_id: int | None = None,
) -> pb.BaseCommand:
    """SEND_RECEIPT carrying the stored position."""
    r = pb.CommandSendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=message_id(ledger_id, entry_id),
    )
    if highest_sequence_id is not None:
        r.highest_sequence_id = highest_sequence_id
    return wrap(r)


def send_error(
    producer_id: int, sequence_id: int, code: pb.ServerError.ValueType, message: str
) -> pb.BaseCommand:
    """SEND_ERROR (ChecksumError makes the client re-verify; other codes make it reconnect)."""
    return wrap(
        pb.CommandSendError(
            producer_id=producer_id, sequence_id=sequence_id, error=code, message=message
        )
    )


def close_producer(
    producer_id: int,
    request_id: int,
    *,
    assigned_broker_service_url: str | None = None,
    assigned_broker_service_url_tls: str | None = None,
) -> pb.BaseCommand:
    """CLOSE_PRODUCER (broker to client: look the topic up again and reconnect)."""
    r = pb.CommandCloseProducer(producer_id=producer_id, request_id=request_id)
    if assigned_broker_service_url is not None:
        r.assignedBrokerServiceUrl = assigned_broker_service_url
    if assigned_broker_service_url_tls is not None:
        r.assignedBrokerServiceUrlTls = assigned_broker_service_url_tls
    return wrap(r)


# --- consumers ------------------------------------------------------------------------------


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    redelivery_count: int = 0,
    ack_set: Sequence[int] | None = None,
    *,
    consumer_epoch: int | None = None,
    partition: int | None = None,
) -> pb.BaseCommand:
    """MESSAGE: the command half of a dispatch; the stored body follows it in the frame.
    ``partition``: the topic's partition index (-1 for a topic that is not a partition)."""
    r = pb.CommandMessage(
        consumer_id=consumer_id,
        message_id=message_id(ledger_id, entry_id, partition=partition),
        redelivery_count=redelivery_count,
    )
    if ack_set:
        r.ack_set.extend(ack_set)
    if consumer_epoch is not None:
        r.consumer_epoch = consumer_epoch
    return wrap(r)


def close_consumer(
    consumer_id: int,
    request_id: int,
    *,
    assigned_broker_service_url: str | None = None,
    assigned_broker_service_url_tls: str | None = None,
) -> pb.BaseCommand:
    """CLOSE_CONSUMER (broker to client: resubscribe, e.g. after a seek)."""
    r = pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=request_id)
    if assigned_broker_service_url is not None:
        r.assignedBrokerServiceUrl = assigned_broker_service_url
    if assigned_broker_service_url_tls is not None:
        r.assignedBrokerServiceUrlTls = assigned_broker_service_url_tls
    return wrap(r)


def active_consumer_change(consumer_id: int, is_active: bool) -> pb.BaseCommand:
    """ACTIVE_CONSUMER_CHANGE (Failover subscriptions)."""
    return wrap(pb.CommandActiveConsumerChange(consumer_id=consumer_id, is_active=is_active))


def reached_end_of_topic(consumer_id: int) -> pb.BaseCommand:
    """REACHED_END_OF_TOPIC. Official C++ clients up to 4.2 close the connection on it."""
    return wrap(pb.CommandReachedEndOfTopic(consumer_id=consumer_id))


def get_last_message_id_response(
    request_id: int,
    last_message_id: pb.MessageIdData,
    consumer_mark_delete_position: pb.MessageIdData | None = None,
) -> pb.BaseCommand:
    """GET_LAST_MESSAGE_ID_RESPONSE (the mark-delete position drives hasMessageAvailable)."""
    r = pb.CommandGetLastMessageIdResponse(request_id=request_id)
    r.last_message_id.CopyFrom(last_message_id)
    if consumer_mark_delete_position is not None:
        r.consumer_mark_delete_position.CopyFrom(consumer_mark_delete_position)
    return wrap(r)


def ack_response(
    consumer_id: int,
    request_id: int,
    *,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """ACK_RESPONSE, owed only for acks that carried a ``request_id``."""
    r = pb.CommandAckResponse(consumer_id=consumer_id, request_id=request_id)
    if error is not None:
        r.error = error
        r.message = message or ""
    return wrap(r)


def consumer_stats_response(
    request_id: int,
    *,
    error_code: pb.ServerError.ValueType | None = None,
    error_message: str | None = None,
    consumer_name: str | None = None,
    subscription_type: str | None = None,
    available_permits: int | None = None,
    unacked_messages: int | None = None,
    msg_backlog: int | None = None,
) -> pb.BaseCommand:
    """CONSUMER_STATS_RESPONSE with the counters Braid tracks (rates are left unset)."""
    r = pb.CommandConsumerStatsResponse(request_id=request_id)
    if error_code is not None:
        r.error_code = error_code
        r.error_message = error_message or ""
    if consumer_name is not None:
        r.consumerName = consumer_name
    if subscription_type is not None:
        r.type = subscription_type
    if available_permits is not None:
        r.availablePermits = available_permits
    if unacked_messages is not None:
        r.unackedMessages = unacked_messages
    if msg_backlog is not None:
        r.msgBacklog = msg_backlog
    return wrap(r)


# --- client-side requests (the Python client and tests) -------------------------------------


def send(
    producer_id: int,
    sequence_id: int,
    *,
    num_messages: int | None = None,
    highest_sequence_id: int | None = None,
) -> pb.BaseCommand:
    """SEND: the command half; the body follows it in the frame."""
    r = pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id)
    if num_messages is not None:
        r.num_messages = num_messages
    if highest_sequence_id is not None:
        r.highest_sequence_id = highest_sequence_id
    return wrap(r)


def flow(consumer_id: int, permits: int) -> pb.BaseCommand:
    """FLOW: grant ``permits`` more messages."""
    return wrap(pb.CommandFlow(consumer_id=consumer_id, messagePermits=permits))


def producer(
    topic: str,
    producer_id: int,
    request_id: int,
    *,
    producer_name: str | None = None,
    access_mode: pb.ProducerAccessMode.ValueType = pb.Shared,
    epoch: int | None = None,
    schema: pb.Schema | None = None,
) -> pb.BaseCommand:
    """PRODUCER; ``epoch`` counts the client's reconnections of this producer (Pulsar's), and
    ``schema`` is the producer's (none: bytes)."""
    r = pb.CommandProducer(
        topic=topic,
        producer_id=producer_id,
        request_id=request_id,
        producer_access_mode=access_mode,
    )
    if epoch is not None:
        r.epoch = epoch
    if schema is not None:
        r.schema.CopyFrom(schema)
    if producer_name is not None:
        r.producer_name = producer_name
        r.user_provided_producer_name = True
    else:
        r.user_provided_producer_name = False
    return wrap(r)


def subscribe(
    topic: str,
    subscription: str,
    sub_type: pb.CommandSubscribe.SubType.ValueType,
    consumer_id: int,
    request_id: int,
    *,
    consumer_name: str | None = None,
    initial_position: pb.CommandSubscribe.InitialPosition.ValueType = pb.CommandSubscribe.Latest,
    durable: bool = True,
    start_message_id: pb.MessageIdData | None = None,
    key_shared_meta: pb.KeySharedMeta | None = None,
    schema: pb.Schema | None = None,
) -> pb.BaseCommand:
    """SUBSCRIBE; a reader is ``durable=False`` with an optional ``start_message_id``;
    ``schema`` is the consumer's (none: bytes)."""
    r = pb.CommandSubscribe(
        topic=topic,
        subscription=subscription,
        subType=sub_type,
        consumer_id=consumer_id,
        request_id=request_id,
        initialPosition=initial_position,
    )
    if consumer_name is not None:
        r.consumer_name = consumer_name
    if not durable:
        r.durable = False
    if start_message_id is not None:
        r.start_message_id.CopyFrom(start_message_id)
    if key_shared_meta is not None:
        r.keySharedMeta.CopyFrom(key_shared_meta)
    if schema is not None:
        r.schema.CopyFrom(schema)
    return wrap(r)


def ack(
    consumer_id: int,
    message_ids: Iterable[pb.MessageIdData],
    *,
    cumulative: bool = False,
    request_id: int | None = None,
) -> pb.BaseCommand:
    """ACK of one or more messages (individual), or up to one message (cumulative).

    ``request_id`` asks the broker for an ACK_RESPONSE receipt.
    """
    r = pb.CommandAck(
        consumer_id=consumer_id,
        ack_type=pb.CommandAck.Cumulative if cumulative else pb.CommandAck.Individual,
    )
    r.message_id.extend(message_ids)
    if request_id is not None:
        r.request_id = request_id
    return wrap(r)


def redeliver_unacknowledged_messages(
    consumer_id: int, message_ids: Iterable[pb.MessageIdData] = ()
) -> pb.BaseCommand:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES: these ids (Shared), or everything unacked (none)."""
    r = pb.CommandRedeliverUnacknowledgedMessages(consumer_id=consumer_id)
    r.message_ids.extend(message_ids)
    return wrap(r)


def get_last_message_id(consumer_id: int, request_id: int) -> pb.BaseCommand:
    """GET_LAST_MESSAGE_ID of the consumer's topic."""
    return wrap(pb.CommandGetLastMessageId(consumer_id=consumer_id, request_id=request_id))


def get_schema(topic: str, request_id: int, schema_version: bytes | None = None) -> pb.BaseCommand:
    """GET_SCHEMA: the topic's schema at ``schema_version`` (none: the latest)."""
    r = pb.CommandGetSchema(request_id=request_id, topic=topic)
    if schema_version is not None:
        r.schema_version = schema_version
    return wrap(r)


def get_or_create_schema(topic: str, request_id: int, schema: pb.Schema) -> pb.BaseCommand:
    """GET_OR_CREATE_SCHEMA: register ``schema`` on the topic (or find it) under the topic's
    compatibility rules, as a PRODUCER with it would."""
    return wrap(pb.CommandGetOrCreateSchema(request_id=request_id, topic=topic, schema=schema))


def unsubscribe(consumer_id: int, request_id: int) -> pb.BaseCommand:
    """UNSUBSCRIBE: delete the consumer's subscription."""
    return wrap(pb.CommandUnsubscribe(consumer_id=consumer_id, request_id=request_id))


def seek(
    consumer_id: int,
    request_id: int,
    *,
    message_id: pb.MessageIdData | None = None,
    publish_time: int | None = None,
) -> pb.BaseCommand:
    """SEEK the consumer's subscription to a message id or a publish time (ms)."""
    r = pb.CommandSeek(consumer_id=consumer_id, request_id=request_id)
    if message_id is not None:
        r.message_id.CopyFrom(message_id)
    if publish_time is not None:
        r.message_publish_time = publish_time
    return wrap(r)


def lookup(topic: str, request_id: int, *, authoritative: bool = False) -> pb.BaseCommand:
    """LOOKUP."""
    return wrap(
        pb.CommandLookupTopic(topic=topic, request_id=request_id, authoritative=authoritative)
    )


def partitioned_metadata(topic: str, request_id: int) -> pb.BaseCommand:
    """PARTITIONED_METADATA."""
    return wrap(pb.CommandPartitionedTopicMetadata(topic=topic, request_id=request_id))


# --- scalable topics (docs/protocol.md#commands-70-82) -----------------------------------------


def scalable_topic_lookup(session_id: int, topic: str) -> pb.BaseCommand:
    """SCALABLE_TOPIC_LOOKUP: open a DAG-watch session (client to broker)."""
    return wrap(pb.CommandScalableTopicLookup(session_id=session_id, topic=topic))


def scalable_topic_update(
    session_id: int,
    dag: pb.ScalableTopicDAG | None = None,
    *,
    resolved_topic_name: str | None = None,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """SCALABLE_TOPIC_UPDATE: a layout (first answer or pushed change), or the session's error."""
    r = pb.CommandScalableTopicUpdate(session_id=session_id)
    if dag is not None:
        r.dag.CopyFrom(dag)
    if resolved_topic_name is not None:
        r.resolved_topic_name = resolved_topic_name
    if error is not None:
        r.error = error
        r.message = message or ""
    return wrap(r)


def scalable_topic_close(session_id: int) -> pb.BaseCommand:
    """SCALABLE_TOPIC_CLOSE: end a DAG-watch session."""
    return wrap(pb.CommandScalableTopicClose(session_id=session_id))


def scalable_topic_subscribe(
    request_id: int,
    topic: str,
    subscription: str,
    consumer_name: str,
    consumer_id: int,
    consumer_type: pb.ScalableConsumerType.ValueType = pb.STREAM,
    *,
    initial_earliest: bool | None = None,
    attach_ahead: bool = False,
    drained_segments: Sequence[int] = (),
) -> pb.BaseCommand:
    """SCALABLE_TOPIC_SUBSCRIBE: register a Stream/Checkpoint consumer with the controller.

    ``initial_earliest`` sets where a subscription this registration creates starts (``None``
    leaves the field out: the broker's default, Latest). ``attach_ahead``: the consumer
    understands paused segments in its assignments (left out when false).
    ``drained_segments``: a checkpoint group member's sealed segments it delivered whole.
    """
    r = pb.CommandScalableTopicSubscribe(
        request_id=request_id,
        topic=topic,
        subscription=subscription,
        consumer_name=consumer_name,
        consumer_id=consumer_id,
        consumer_type=consumer_type,
    )
    if initial_earliest is not None:
        r.initial_position = (
            pb.CommandSubscribe.Earliest if initial_earliest else pb.CommandSubscribe.Latest
        )
    if attach_ahead:
        r.attach_ahead = True
    if drained_segments:
        r.drained_segments.extend(sorted(drained_segments))
    return wrap(r)


def scalable_topic_subscribe_response(
    request_id: int,
    assignment: pb.ScalableConsumerAssignment | None = None,
    *,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """SCALABLE_TOPIC_SUBSCRIBE_RESPONSE: the initial assignment, or an error."""
    r = pb.CommandScalableTopicSubscribeResponse(request_id=request_id)
    if assignment is not None:
        r.assignment.CopyFrom(assignment)
    if error is not None:
        r.error = error
        r.message = message or ""
    return wrap(r)


def scalable_topic_assignment_update(
    consumer_id: int, assignment: pb.ScalableConsumerAssignment
) -> pb.BaseCommand:
    """SCALABLE_TOPIC_ASSIGNMENT_UPDATE: push a new assignment after a rebalance."""
    r = pb.CommandScalableTopicAssignmentUpdate(consumer_id=consumer_id)
    r.assignment.CopyFrom(assignment)
    return wrap(r)


def scalable_topic_unsubscribe(request_id: int, consumer_id: int) -> pb.BaseCommand:
    """SCALABLE_TOPIC_UNSUBSCRIBE: leave a subscription cleanly (answered with SUCCESS)."""
    return wrap(pb.CommandScalableTopicUnsubscribe(request_id=request_id, consumer_id=consumer_id))


def watch_scalable_topics(
    watch_id: int,
    namespace: str,
    property_filters: Mapping[str, str] | None = None,
    current_hash: str | None = None,
) -> pb.BaseCommand:
    """WATCH_SCALABLE_TOPICS: open a namespace membership watch (client to broker)."""
    r = pb.CommandWatchScalableTopics(watch_id=watch_id, namespace=namespace)
    for key, value in sorted((property_filters or {}).items()):
        r.property_filters.add(key=key, value=value)
    if current_hash is not None:
        r.current_hash = current_hash
    return wrap(r)


def watch_scalable_topics_close(watch_id: int) -> pb.BaseCommand:
    """WATCH_SCALABLE_TOPICS_CLOSE: end a namespace watch."""
    return wrap(pb.CommandWatchScalableTopicsClose(watch_id=watch_id))


def watch_scalable_topics_update(
    watch_id: int,
    *,
    snapshot: Iterable[str] | None = None,
    added: Iterable[str] | None = None,
    removed: Iterable[str] | None = None,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """WATCH_SCALABLE_TOPICS_UPDATE: a snapshot, a diff (``added``/``removed``), or an error."""
    r = pb.CommandWatchScalableTopicsUpdate(watch_id=watch_id)
    if snapshot is not None:
        r.snapshot.topics.extend(snapshot)
    elif added is not None or removed is not None:
        r.diff.added.extend(added or ())
        r.diff.removed.extend(removed or ())
    if error is not None:
        r.error = error
        r.message = message or ""
    return wrap(r)


def watch_tc_assignments_update(
    watch_id: int,
    snapshot: pb.TcAssignmentsSnapshot | None = None,
    *,
    error: pb.ServerError.ValueType | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """WATCH_TC_ASSIGNMENTS_UPDATE: the full coordinator map, or an error."""
    r = pb.CommandWatchTcAssignmentsUpdate(watch_id=watch_id)
    if snapshot is not None:
        r.snapshot.CopyFrom(snapshot)
    if error is not None:
        r.error = error
        r.message = message or ""
    return wrap(r)


__all__ = [
    "NO_REQUEST_ID",
    "ack",
    "ack_response",
    "active_consumer_change",
    "close_consumer",
    "close_producer",
    "connect",
    "connected",
    "consumer_stats_response",
    "error",
    "field_name",
    "flow",
    "get_last_message_id",
    "get_last_message_id_response",
    "get_or_create_schema",
    "get_schema",
    "inner",
    "lookup",
    "lookup_response",
    "message",
    "message_id",
    "partitioned_metadata",
    "partitioned_metadata_response",
    "ping",
    "pong",
    "producer",
    "producer_success",
    "reached_end_of_topic",
    "redeliver_unacknowledged_messages",
    "scalable_topic_assignment_update",
    "scalable_topic_close",
    "scalable_topic_lookup",
    "scalable_topic_subscribe",
    "scalable_topic_subscribe_response",
    "scalable_topic_unsubscribe",
    "scalable_topic_update",
    "seek",
    "send",
    "send_error",
    "send_receipt",
    "subscribe",
    "success",
    "topics_of_namespace_response",
    "type_name",
    "unsubscribe",
    "watch_scalable_topics",
    "watch_scalable_topics_close",
    "watch_scalable_topics_update",
    "watch_tc_assignments_update",
    "wrap",
]
