"""The Braid Python client: producers and Stream, Queue and Checkpoint consumers.

Imports only :mod:`braid.core` and :mod:`braid.protocol` (ADR 0003), so it works against any
conformant broker. The public names are re-exported by :mod:`braid`; start with
``braid.Client`` (blocking, thread-safe) or ``braid.AsyncClient`` (asyncio). Design:
docs/client.md and docs/decisions/0022-client-layout-driven.md.

Module map: ``async_client`` / ``blocking`` (the two facades), ``producer`` and
``segment_producer`` (routing, per-segment producers, reroute), ``stream_consumer``,
``queue_consumer``, ``checkpoint_consumer``, ``transaction`` (with ``transaction_coordinator``
and ``transaction_acks``) (on ``consumer_base`` and ``segment_consumer``),
``segment_reader`` and ``columns`` (one segment read as column chunks, ADR 0031),
``layout_source`` (DAG watch or synthetic layout), ``assignment_session`` (controller
registration), ``connection`` / ``pool`` / ``lookup`` (transport), ``message``, ``schema``
(value codecs), ``batch_encoder``, ``errors``.
"""

from __future__ import annotations

from braid.client.async_client import AsyncClient
from braid.client.blocking import (
    CheckpointConsumer,
    Client,
    Producer,
    QueueConsumer,
    SegmentReader,
    StreamConsumer,
    Transaction,
)
from braid.client.checkpoint_consumer import AsyncCheckpointConsumer
from braid.client.columns import MessageColumns
from braid.client.dead_letter import DeadLetterPolicy
from braid.client.message import Message
from braid.client.packed_columns import PackedColumns, PackedEntry
from braid.client.producer import AsyncProducer
from braid.client.queue_consumer import AsyncQueueConsumer
from braid.client.schema import Schema
from braid.client.segment_reader import AsyncSegmentReader
from braid.client.stream_consumer import AsyncStreamConsumer
from braid.client.transaction import AsyncTransaction, TransactionState

__all__ = [
    "AsyncCheckpointConsumer",
    "AsyncClient",
    "AsyncProducer",
    "AsyncQueueConsumer",
    "AsyncSegmentReader",
    "AsyncStreamConsumer",
    "AsyncTransaction",
    "CheckpointConsumer",
    "Client",
    "DeadLetterPolicy",
    "Message",
    "MessageColumns",
    "PackedColumns",
    "PackedEntry",
    "Producer",
    "QueueConsumer",
    "Schema",
    "SegmentReader",
    "StreamConsumer",
    "Transaction",
    "TransactionState",
]
