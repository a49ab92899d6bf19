"""The ``braid`` sink: ``df.write`` and ``df.writeStream`` to one Braid topic, exactly once under
replay.

Columns: ``value`` (binary or string, required), ``key`` (string), ``properties``
(map<string,string>), ``event_time`` (timestamp, or long milliseconds). Rows are published in
partition order with the client, which routes each by its key.

**Exactly-once under micro-batch replay** rests on broker-side deduplication (Pulsar's
``(producer name, sequence id)`` rule): each sink task publishes under a *stable producer name*
(``<base>-p<partition id>``, with ``<base>`` the ``producerName`` option or ``spark-<query id>``,
stable across restarts of the query) and numbers its rows ``batch_id * 2**32 + row position``
(``initial_sequence_id`` of the client's producer), so sequence ids grow across micro-batches.
When Spark replays a micro-batch (the query restarted before the batch committed, or a task was
retried), the replayed rows carry the same names and sequence ids and the broker drops every row
already stored: no duplicate. ``abort`` has nothing to undo: rows of a failed attempt are
visible, and its retry does not publish them again. Conditions (docs/spark.md): deduplication
enabled for the topic's namespace (checked when the write starts), a deterministic row order
within each partition of the replayed batch, and no split or merge of the target topic between
a batch's first attempt and its replay (dedup state is per segment and the broker does not yet
carry it to child segments).

A batch ``df.write`` uses batch id 0 and a fresh ``<base>`` per write job (task retries within
the job share it).
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from braid.core.errors import BraidError
from braid.core.message_id import MessageId
from braid.core.names import TopicName
from braid.spark.clients import admin_client, shared_client
from braid.spark.errors import DeduplicationDisabledError
from braid.spark.options import BraidSparkOptionError, SinkOptions, sink_options

log = logging.getLogger(__name__)

#: Sequence ids of batch ``b`` start at ``b << ROW_BITS``.
ROW_BITS = 32
#: Spark's local property holding the micro-batch id (set by MicroBatchExecution).
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Spark's local property holding the streaming query id (stable across restarts).
QUERY_ID_PROPERTY = "sql.streaming.queryId"

_COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "value": (BinaryType, StringType),
    "key": (StringType,),
    "properties": (MapType,),
    "event_time": (TimestampType, TimestampNTZType, LongType),
}


@dataclass(frozen=True)
class BraidCommitMessage(WriterCommitMessage):
    """What one sink task did: rows given, rows the broker dropped as already stored."""

    partition_id: int
    producer_name: str
    rows: int
    duplicates: int


def check_sink_schema(schema: StructType) -> None:
    """Refuse unknown columns and wrong types, naming the column.

    Raises:
        BraidSparkOptionError: the DataFrame cannot be written to Braid as it is.
    """
    names = [f.name for f in schema.fields]
    if "value" not in names:
        raise BraidSparkOptionError(
            "the braid sink needs a 'value' column (binary or string); got columns "
            f"{names} (select value, and optionally key, properties, event_time)"
        )
    for field in schema.fields:
        allowed = _COLUMN_TYPES.get(field.name)
        if allowed is None:
            raise BraidSparkOptionError(
                f"the braid sink does not know column {field.name!r}; it writes value, key, "
                "properties and event_time (drop or rename the others)"
            )
        if not isinstance(field.dataType, allowed):
            raise BraidSparkOptionError(
                f"column {field.name!r} has type {field.dataType.simpleString()}; the braid sink "
                f"needs {' or '.join(t.__name__ for t in allowed)}"
            )
        if field.name == "properties":
            mt = field.dataType
            assert isinstance(mt, MapType)
            if not (isinstance(mt.keyType, StringType) and isinstance(mt.valueType, StringType)):
                raise BraidSparkOptionError("column 'properties' must be map<string,string>")


def check_deduplication(options: SinkOptions) -> None:
    """With ``exactlyOnce``, refuse a namespace whose deduplication is explicitly off.

    Raises:
        DeduplicationDisabledError: the namespace policy turns deduplication off.
    """
    if not options.exactly_once:
        return
    namespace = TopicName.parse(options.topic).namespace_name
    try:
        with admin_client(options.admin_url) as admin:
            enabled = admin.namespaces.get_deduplication(namespace)
    except BraidError as exc:
        log.warning(
            "could not read the deduplication policy of %s (%s): exactly-once needs it on",
            namespace,
            exc,
        )
        return
    if enabled is False:
        raise DeduplicationDisabledError(
            f"exactly-once writes to {options.topic} need broker deduplication, which is off for "
            f"namespace {namespace}: run `braid admin namespaces set-deduplication {namespace} on`"
            " (or set option exactlyOnce=false for at-least-once writes)"
        )
    if enabled is None:
        log.warning(
            "namespace %s has no deduplication policy: exactly-once relies on the broker default "
            "(brokerDeduplicationEnabled)",
            namespace,
        )


def _millis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    raise BraidSparkOptionError(f"event_time must be a timestamp or milliseconds, got {value!r}")


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def publish_partition(
    options: SinkOptions, batches: Iterator[pa.RecordBatch], producer_name: str, batch_id: int
) -> BraidCommitMessage:
    """Publish one task's rows, numbered ``batch_id << ROW_BITS`` upwards (executor side)."""
    client = shared_client(options.service_url)
    producer = client.create_producer(
        options.topic,
        producer_name=producer_name,
        initial_sequence_id=(batch_id << ROW_BITS) - 1,
    )
    futures = []
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            values = _column(batch, "value") or []
            values = [v.encode() if isinstance(v, str) else v for v in values]
            if any(v is None for v in values):
                raise BraidSparkOptionError("column 'value' holds a null; every row needs a value")
            keys = _column(batch, "key")
            props = _column(batch, "properties")
            if props is not None:
                props = [None if p is None else dict(p) for p in props]
            times = _column(batch, "event_time")
            if times is not None:
                times = [_millis(t) for t in times]
            futures.append(producer.send_many_async(values, keys, props, times))
            rows += batch.num_rows
        earliest = MessageId.earliest()
        duplicates = sum(mid == earliest for f in futures for mid in f.result())
    finally:
        producer.close()
    ctx = TaskContext.get()
    pid = ctx.partitionId() if ctx is not None else -1
    return BraidCommitMessage(pid, producer_name, rows, duplicates)


def _summary(messages: list[Any]) -> tuple[int, int]:
    done = [m for m in messages if isinstance(m, BraidCommitMessage)]
    return sum(m.rows for m in done), sum(m.duplicates for m in done)


class BraidBatchWriter(DataSourceArrowWriter):
    """``df.write.format("braid")``."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema)
        check_deduplication(options)
        self.options = options
        base = options.producer_name or "spark-write"
        self.base = f"{base}-{uuid.uuid4().hex[:12]}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BraidCommitMessage:
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        return publish_partition(self.options, iterator, f"{self.base}-p{pid}", 0)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, dups = _summary(messages)
        log.info("wrote %d rows to %s (%d already stored)", rows, self.options.topic, dups)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, _ = _summary(messages)
        log.warning(
            "write to %s aborted after %d rows of finished tasks; a retry of the job publishes "
            "under new producer names (batch writes are at-least-once across jobs)",
            self.options.topic,
            rows,
        )


class BraidStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("braid")``: exactly once per micro-batch under replay."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema)
        check_deduplication(options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BraidCommitMessage:
        ctx = TaskContext.get()
        batch_id = None if ctx is None else ctx.getLocalProperty(BATCH_ID_PROPERTY)
        query_id = None if ctx is None else ctx.getLocalProperty(QUERY_ID_PROPERTY)
        if ctx is None or batch_id is None or (query_id is None and not self.options.producer_name):
            raise BraidSparkOptionError(
                "the braid stream sink needs Spark's micro-batch id and query id on its tasks "
                "(continuous processing is not supported)"
            )
        base = self.options.producer_name or f"spark-{query_id}"
        return publish_partition(
            self.options, iterator, f"{base}-p{ctx.partitionId()}", int(batch_id)
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows, dups = _summary(messages)
        log.info(
            "batch %d: %d rows to %s (%d dropped as already stored by an earlier attempt)",
            batchId,
            rows,
            self.options.topic,
            dups,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows, _ = _summary(messages)
        log.warning(
            "batch %d to %s aborted (%d rows of finished tasks are stored); its replay will not "
            "publish them again",
            batchId,
            self.options.topic,
            rows,
        )


def batch_writer(options: Mapping[str, str], schema: StructType) -> BraidBatchWriter:
    return BraidBatchWriter(sink_options(options), schema)


def stream_writer(options: Mapping[str, str], schema: StructType) -> BraidStreamWriter:
    return BraidStreamWriter(sink_options(options), schema)


__all__ = [
    "BraidBatchWriter",
    "BraidCommitMessage",
    "BraidStreamWriter",
    "batch_writer",
    "check_deduplication",
    "check_sink_schema",
    "stream_writer",
]
