"""Reading a loaded topic for an operator, without consuming it: Pulsar's ``internalStats``,
``peek-messages``, ``examine-message`` and ``get-message-by-id``.

* :func:`internal_stats` is Pulsar's ``PersistentTopicInternalStats`` of the topic's managed
  ledger: entry counts and sizes, the ledger list, and one ``CursorStats`` per cursor (mark-delete
  and read positions, individually deleted ranges, backlog), with Pulsar's field names.
* :func:`peek_entry` is the ``n``-th entry (1-based) a subscription has not acknowledged, skipping
  individually acknowledged ones (``peekNthMessage``); :func:`examine_entry` the ``n``-th from the
  topic's first (``earliest``) or last (``latest``, counting backwards) entry; :func:`entry_at` the
  entry at a message id.
* :func:`message_headers` is what Pulsar's REST answer carries about an entry (``X-Pulsar-*``
  headers), :func:`entry_payload` its body: the uncompressed payload - a whole batch, split by
  the client with ``X-Pulsar-num-batch-message``, as Pulsar's admin client does.

Nothing here changes a cursor; reads go through the managed ledger (its cache, then storage).
"""

from __future__ import annotations

import datetime
from typing import Any

from braid.broker.entries import parse_metadata
from braid.broker.errors import BrokerError, ServerError, SubscriptionNotFound
from braid.broker.subscription import Subscription
from braid.broker.topic import SYSTEM_CURSORS, PersistentTopic
from braid.core.errors import NotFoundError
from braid.ledger.api import Entry, Position
from braid.protocol.batch import decompress
from braid.protocol.frames import decode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb

#: Entries read per storage call while walking a cursor's backlog.
_READ_BATCH = 100


class MessageNotFound(BrokerError, NotFoundError):
    """No entry at the requested place (past the end, trimmed, or never written): HTTP 404."""

    code = ServerError.UnknownError


def internal_stats(topic: PersistentTopic) -> dict[str, Any]:
    """Pulsar's ``PersistentTopicInternalStats`` of ``topic`` (its managed ledger and cursors)."""
    ledger = topic.ledger
    ledgers = list(ledger.ledgers)
    last = ledger.last_confirmed_position
    current = ledgers[-1] if ledgers else None
    return {
        "entriesAddedCounter": topic.counters.messages_in,
        "numberOfEntries": ledger.number_of_entries,
        "totalSize": ledger.total_size,
        "currentLedgerEntries": current.entries if current is not None else 0,
        "currentLedgerSize": current.size if current is not None else 0,
        "lastLedgerCreatedTimestamp": _iso(current.timestamp_ms) if current is not None else "",
        "waitingCursorsCount": 0,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": str(last),
        "state": "Terminated" if ledger.is_terminated else "LedgerOpened",
        "ledgers": [
            {
                "ledgerId": info.ledger_id,
                "entries": info.entries,
                "size": info.size,
                "offloaded": False,
                "underReplicated": False,
                "timestamp": info.timestamp_ms,
                "bookieClusterName": info.bookie_cluster_name,
            }
            for info in ledgers
        ],
        "cursors": {
            name: _cursor_stats(topic, name)
            for name in ledger.cursors
            if name not in SYSTEM_CURSORS or name in topic.subscriptions
        },
        "compactedLedger": topic.compaction.stats(),
    }


def _cursor_stats(topic: PersistentTopic, name: str) -> dict[str, Any]:
    cursor = topic.ledger.cursors[name]
    sub = topic.subscriptions.get(name)
    ranges = [f"({lo}..{hi}]" for lo, hi in cursor.individually_deleted]
    return {
        "markDeletePosition": str(cursor.mark_delete_position),
        "readPosition": str(cursor.read_position),
        "waitingReadOp": False,
        "pendingReadOps": 0,
        "messagesConsumedCounter": 0,
        "individuallyDeletedMessages": "[" + ",".join(ranges) + "]",
        "totalNonContiguousDeletedMessagesRange": len(ranges),
        "numberOfEntriesSinceFirstNotAckedMessage": cursor.backlog(),
        "state": "Open",
        "active": bool(sub is not None and sub.consumers),
        "properties": dict(cursor.properties),
    }


async def peek_entry(topic: PersistentTopic, subscription: str, n: int) -> Entry:
    """The ``n``-th (1-based) entry the subscription has not acknowledged.

    Raises:
        SubscriptionNotFound (from :func:`subscription_of`), MessageNotFound.
    """
    cursor = subscription_of(topic, subscription).cursor
    found = await nth_unacked(topic, cursor.mark_delete_position, cursor.is_deleted, n)
    if found is None:
        raise MessageNotFound(
            f"subscription {subscription} of {topic.name} has fewer than {n} messages"
        )
    return found


async def nth_unacked(
    topic: PersistentTopic, after: Position, is_deleted: Any, n: int
) -> Entry | None:
    """The ``n``-th entry after ``after`` for which ``is_deleted`` is false (``None``: fewer)."""
    if n < 1:
        raise ValueError(f"message position must be 1 or more, got {n}")
    ledger = topic.ledger
    last = ledger.last_confirmed_position
    position = ledger.next_position(after)
    while position <= last:
        entries = await ledger.read(position, _READ_BATCH)
        if not entries:
            return None
        for entry in entries:
            if entry.position > last:
                return None
            if not is_deleted(entry.position):
                n -= 1
                if n == 0:
                    return entry
        position = ledger.next_position(entries[-1].position)
    return None


async def examine_entry(topic: PersistentTopic, initial_position: str, n: int) -> Entry:
    """The ``n``-th (1-based) entry from the topic's first (``earliest``) or last (``latest``).

    Raises:
        ValueError: ``initial_position`` is neither, or ``n`` < 1. MessageNotFound.
    """
    if n < 1:
        raise ValueError(f"message position must be 1 or more, got {n}")
    ledger = topic.ledger
    if initial_position == "earliest":
        found = await nth_unacked(topic, before_first(topic), lambda _: False, n)
        if found is None:
            raise MessageNotFound(f"{topic.name} has fewer than {n} entries")
        return found
    if initial_position != "latest":
        raise ValueError(f"initialPosition must be earliest or latest, got {initial_position!r}")
    # Backwards from the last entry, ledger by ledger (entries of a ledger are contiguous).
    last = ledger.last_confirmed_position
    for info in reversed(list(ledger.ledgers)):
        count = last.entry_id + 1 if info.ledger_id == last.ledger_id else info.entries
        if info.ledger_id > last.ledger_id or count <= 0:
            continue
        if n <= count:
            return await entry_at(topic, info.ledger_id, count - n)
        n -= count
    raise MessageNotFound(f"{topic.name} has fewer entries than asked for")


async def entry_at(topic: PersistentTopic, ledger_id: int, entry_id: int) -> Entry:
    """The entry at ``ledger_id:entry_id``. Raises :class:`MessageNotFound`."""
    ledger = topic.ledger
    wanted = Position(ledger_id, entry_id)
    known = {info.ledger_id: info.entries for info in ledger.ledgers}
    last = ledger.last_confirmed_position
    if entry_id < 0 or ledger_id not in known or wanted > last:
        raise MessageNotFound(f"message id {ledger_id}:{entry_id} not found in {topic.name}")
    if ledger_id != last.ledger_id and entry_id >= known[ledger_id]:
        raise MessageNotFound(f"message id {ledger_id}:{entry_id} not found in {topic.name}")
    entries = await ledger.read(wanted, 1)
    if not entries or entries[0].position != wanted:
        raise MessageNotFound(f"message id {ledger_id}:{entry_id} not found in {topic.name}")
    return entries[0]


def before_first(topic: PersistentTopic) -> Position:
    """The position just before the topic's first stored entry."""
    ledgers = topic.ledger.ledgers
    if not ledgers:
        return topic.ledger.last_confirmed_position
    return Position(ledgers[0].ledger_id, -1)


def subscription_of(topic: PersistentTopic, name: str) -> Subscription:
    """The topic's durable subscription ``name``. Raises :class:`SubscriptionNotFound`."""
    sub = topic.subscriptions.get(name)
    if sub is None:
        raise SubscriptionNotFound(f"subscription {name} not found on {topic.name}")
    return sub


def message_headers(entry: Entry, partition_index: int = -1) -> dict[str, str]:
    """Pulsar's ``X-Pulsar-*`` headers of a peek/examine/get-by-id answer for ``entry``."""
    meta = parse_metadata(entry.data)
    headers = {"X-Pulsar-Message-ID": f"{entry.position.ledger_id}:{entry.position.entry_id}"}
    if partition_index >= 0:
        headers["X-Pulsar-Message-ID"] += f":{partition_index}"
    headers["X-Pulsar-publish-time"] = _iso(meta.publish_time)
    if meta.HasField("event_time") and meta.event_time:
        headers["X-Pulsar-event-time"] = _iso(meta.event_time)
    if meta.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(meta.num_messages_in_batch)
        headers["X-Pulsar-batch-size"] = str(len(entry_payload(entry)))
    if meta.HasField("null_value") and meta.null_value:
        headers["X-Pulsar-null-value"] = "true"
    headers["X-Pulsar-producer-name"] = meta.producer_name
    headers["X-Pulsar-sequence-id"] = str(meta.sequence_id)
    if meta.HasField("partition_key"):
        headers["X-Pulsar-partition-key"] = meta.partition_key
    if meta.compression != pb.NONE:
        headers["X-Pulsar-compression"] = pb.CompressionType.Name(meta.compression)
        headers["X-Pulsar-uncompressed-size"] = str(meta.uncompressed_size)
    if meta.HasField("schema_version"):
        headers["X-Pulsar-schema-version"] = meta.schema_version.hex()
    if meta.HasField("chunk_id") or meta.HasField("uuid"):
        headers["X-Pulsar-Is-Chunked"] = "true"
    for prop in meta.properties:
        headers[f"X-Pulsar-PROPERTY-{prop.key}"] = prop.value
    return headers


def entry_payload(entry: Entry) -> bytes:
    """The entry's payload, uncompressed (a batch stays one payload, as Pulsar answers it)."""
    meta, payload = decode_message_body(entry.data)
    if meta.compression == pb.NONE:
        return payload
    return decompress(meta.compression, payload, meta.uncompressed_size)


def _iso(ms: int) -> str:
    """Pulsar's header and stats time format (ISO-8601, UTC, milliseconds)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


__all__ = [
    "MessageNotFound",
    "before_first",
    "entry_at",
    "entry_payload",
    "examine_entry",
    "internal_stats",
    "message_headers",
    "nth_unacked",
    "peek_entry",
    "subscription_of",
]
