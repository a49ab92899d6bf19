"""Received messages: :class:`Message` and the decoding of a dispatched entry into messages.

A broker dispatches *entries*: one message, or a batch (``num_messages_in_batch`` present),
possibly compressed as a whole (``braid.protocol.batch`` holds the codecs). :func:`decode_entry`
turns one into :class:`Message` objects cheaply - the outer metadata is parsed once and shared,
each batched message parses only its small ``SingleMessageMetadata`` - and the rest is computed
on access: properties become a dict, the :class:`~braid.core.message_id.MessageId` is built,
only when the application asks.

A :class:`Message` is immutable to the application
(``docs/client.md#messages-ids-and-checkpoints``). Internally it remembers the per-segment consumer
that delivered it, so an acknowledgment is routed to the right segment without a lookup, and the
delivery token of the Stream consumer's position vector. Those internals are read and written only
here: the consumers use the functions at the end of this module (:func:`delivered_by`,
:func:`position_of`, :func:`stamp_delivery_tokens`, ...), never a message's private slots.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from braid.core.message_id import MessageId, unchecked_message_id
from braid.protocol.batch import decompress
from braid.protocol.errors import CorruptPayload
from braid.protocol.frames import decode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb

if TYPE_CHECKING:
    from braid.client.schema import PayloadDecoder

_U32 = int.from_bytes
_UNDECODED = object()


class Message:
    """One message received from a topic.

    Attributes (read-only): ``value`` (the payload decoded with the consumer's schema; the
    payload bytes with the default bytes schema) and ``data`` (the payload bytes), ``key``,
    ``properties``, ``message_id``, ``publish_time`` and ``event_time`` (milliseconds since
    the Unix epoch; ``event_time`` is ``None`` when unset), ``sequence_id``,
    ``producer_name``, ``topic``, ``redelivery_count``, ``size``, ``replicated_from``,
    ``schema_version``.
    """

    __slots__ = (
        "_batch_index",
        "_batch_size",
        "_decoder",
        "_entry_id",
        "_ledger_id",
        "_meta",
        "_owner",
        "_payload",
        "_props",
        "_redelivery",
        "_segment_id",
        "_single",
        "_token",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        payload: bytes,
        meta: pb.MessageMetadata,
        single: pb.SingleMessageMetadata | None,
        topic: str,
        segment_id: int,
        ledger_id: int,
        entry_id: int,
        batch_index: int,
        batch_size: int,
        redelivery: int,
        owner: Any = None,
        decoder: PayloadDecoder | None = None,
    ) -> None:
        self._payload = payload
        self._decoder = decoder
        self._value: Any = _UNDECODED
        self._meta = meta
        self._single = single
        self._topic = topic
        self._segment_id = segment_id
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._batch_index = batch_index
        self._batch_size = batch_size
        self._redelivery = redelivery
        self._owner = owner
        self._token = -1
        self._props: dict[str, str] | None = None

    @property
    def value(self) -> Any:
        """The payload decoded with the consumer's schema (decoded once, on first access; the
        payload bytes themselves with the bytes schema).

        Raises:
            SchemaSerializationError: the payload does not decode with the schema.
        """
        decoder = self._decoder
        if decoder is None:
            return self._payload
        value = self._value
        if value is _UNDECODED:
            value = self._value = decoder.decode(self._payload, self._wire_schema_version)
        return value

    @property
    def schema_version(self) -> int | None:
        """The version of the topic's schema the message was written with (``None``: written
        without a schema)."""
        raw = self._wire_schema_version
        return None if raw is None else int.from_bytes(raw, "big", signed=True)

    @property
    def _wire_schema_version(self) -> bytes | None:
        """The schema version as the broker sent it (opaque bytes, Pulsar's wire form)."""
        meta = self._meta
        return meta.schema_version or None if meta.HasField("schema_version") else None

    @property
    def data(self) -> bytes:
        """The raw payload bytes."""
        return self._payload

    @property
    def size(self) -> int:
        """Uncompressed payload size in bytes."""
        return len(self._payload)

    @property
    def key(self) -> str | None:
        """The message key, or ``None`` for a keyless message."""
        single = self._single
        if single is not None:
            return single.partition_key if single.HasField("partition_key") else None
        meta = self._meta
        return meta.partition_key if meta.HasField("partition_key") else None

    @property
    def properties(self) -> dict[str, str]:
        """Application properties (a fresh copy; possibly empty)."""
        if self._props is None:
            source = self._single if self._single is not None else self._meta
            self._props = {kv.key: kv.value for kv in source.properties}
        return dict(self._props)

    @property
    def message_id(self) -> MessageId:
        """The message's identifier."""
        return unchecked_message_id(
            self._segment_id, self._ledger_id, self._entry_id, self._batch_index, self._batch_size
        )

    @property
    def publish_time(self) -> int:
        """Broker-side publish timestamp (ms since the epoch)."""
        return int(self._meta.publish_time)

    @property
    def event_time(self) -> int | None:
        """Producer-assigned event time (ms since the epoch), or ``None``."""
        single = self._single
        value = single.event_time if single is not None else self._meta.event_time
        return int(value) if value else None

    @property
    def sequence_id(self) -> int:
        """The producer-assigned sequence id."""
        single = self._single
        if single is not None and single.HasField("sequence_id"):
            return int(single.sequence_id)
        return int(self._meta.sequence_id) + max(self._batch_index, 0)

    @property
    def producer_name(self) -> str:
        """Name of the producer that published the message."""
        return self._meta.producer_name

    @property
    def topic(self) -> str:
        """The canonical topic the message belongs to."""
        return self._topic

    @property
    def redelivery_count(self) -> int:
        """How many times the message was delivered before (0 on first delivery)."""
        return self._redelivery

    @property
    def replicated_from(self) -> str | None:
        """The source cluster of a geo-replicated message, else ``None``."""
        meta = self._meta
        return meta.replicated_from if meta.HasField("replicated_from") else None

    def __repr__(self) -> str:
        return f"Message(topic={self._topic!r}, key={self.key!r}, size={len(self._payload)})"


def decode_entry(
    body: bytes,
    *,
    topic: str,
    segment_id: int,
    ledger_id: int,
    entry_id: int,
    redelivery: int,
    owner: Any,
    decoder: PayloadDecoder | None = None,
) -> tuple[list[Message], int]:
    """The messages of one dispatched entry, in batch order (compacted-out ones skipped), and
    how many messages the entry holds (what the broker counted against the flow permits).

    Raises:
        MalformedFrame, CorruptPayload, UnsupportedCompression: the entry does not decode.
    """
    meta, payload = decode_message_body(body)
    if meta.compression != pb.NONE:
        payload = decompress(meta.compression, payload, meta.uncompressed_size)
    if not meta.HasField("num_messages_in_batch"):
        return [
            Message(
                payload,
                meta,
                None,
                topic,
                segment_id,
                ledger_id,
                entry_id,
                -1,
                1,
                redelivery,
                owner,
                decoder,
            )
        ], 1
    count = meta.num_messages_in_batch
    if count < 0:
        raise CorruptPayload(f"negative batch size {count}")
    out: list[Message] = []
    pos = 0
    end = len(payload)
    parse = pb.SingleMessageMetadata.FromString
    for index in range(count):
        if end - pos < 4:
            raise CorruptPayload(f"batch ends before message {index} of {count}")
        size = _U32(payload[pos : pos + 4], "big")
        pos += 4
        if size > end - pos:
            raise CorruptPayload(f"metadata of message {index} overruns the batch")
        try:
            single = parse(payload[pos : pos + size])
        except Exception as exc:  # protobuf's DecodeError; translated once, here
            raise CorruptPayload(f"metadata of message {index} does not parse: {exc}") from exc
        pos += size
        length = single.payload_size
        if length < 0 or pos + length > end:
            raise CorruptPayload(f"payload of message {index} overruns the batch")
        data = payload[pos : pos + length]
        pos += length
        if single.compacted_out:
            continue
        out.append(
            Message(
                data,
                meta,
                single,
                topic,
                segment_id,
                ledger_id,
                entry_id,
                index,
                count,
                redelivery,
                owner,
                decoder,
            )
        )
    return out, count


# -- the consumers' view of a delivered message (never the application's) ----------------------

#: Where a message sits in its segment: (ledger id, entry id, batch index, batch size).
MessagePosition = tuple[int, int, int, int]


def delivered_by(message: Message) -> Any:
    """The per-segment consumer that delivered ``message`` (``None``: none did)."""
    return message._owner


def position_of(message: Message) -> MessagePosition:
    """Where ``message`` sits in its segment (batch index -1 and size 1: not in a batch)."""
    return (message._ledger_id, message._entry_id, message._batch_index, message._batch_size)


def wire_schema_version(message: Message) -> bytes | None:
    """The schema version ``message`` was written with, as the broker sent it."""
    return message._wire_schema_version


def delivery_token(message: Message) -> int:
    """The token :func:`stamp_delivery_tokens` gave ``message`` (-1: none yet)."""
    return message._token


def stamp_delivery_tokens(
    messages: Iterable[Message], token_for: Callable[[int, MessagePosition], int]
) -> None:
    """Give each message the delivery token ``token_for(segment_id, position)`` returns (the
    Stream consumer's position vector records each delivery this way, under its lock)."""
    for m in messages:
        m._token = token_for(
            m._segment_id, (m._ledger_id, m._entry_id, m._batch_index, m._batch_size)
        )


def last_positions(messages: Sequence[Message]) -> dict[int, tuple[int, int, int]]:
    """Per segment, (ledger id, entry id, batch index) of the last of ``messages`` in it."""
    return {m._segment_id: (m._ledger_id, m._entry_id, m._batch_index) for m in messages}


def count_by_owner(messages: Iterable[Message]) -> dict[Any, int]:
    """How many of ``messages`` each per-segment consumer delivered (in first-seen order)."""
    counts: dict[Any, int] = {}
    for m in messages:
        owner = m._owner
        counts[owner] = counts.get(owner, 0) + 1
    return counts


__all__ = [
    "Message",
    "MessagePosition",
    "count_by_owner",
    "decode_entry",
    "delivered_by",
    "delivery_token",
    "last_positions",
    "position_of",
    "stamp_delivery_tokens",
    "wire_schema_version",
]
