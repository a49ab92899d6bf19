"""The row schema of a Braid read, and messages -> Arrow record batches.

Columns: ``key`` (string, nullable), ``value`` (binary), ``topic``, ``message_id`` (binary: the
opaque ``braid.MessageId.to_bytes()``), ``publish_time``, ``event_time`` (nullable),
``properties`` (map<string,string>), ``producer_name``, ``sequence_id``. Segments are not a
column: they are an internal detail of the topic.

Reads return Arrow batches built column by column (no per-row Python tuple for Spark to convert),
with exactly the Arrow schema Spark derives from :data:`SCHEMA`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from braid.client import Message
from braid.core.message_id import MessagePosition
from braid.spark.message_ids import MessageIdBytes

SCHEMA = StructType(
    [
        StructField("key", StringType(), True),
        StructField("value", BinaryType(), False),
        StructField("topic", StringType(), False),
        StructField("message_id", BinaryType(), False),
        StructField("publish_time", TimestampType(), False),
        StructField("event_time", TimestampType(), True),
        StructField("properties", MapType(StringType(), StringType(), False), False),
        StructField("producer_name", StringType(), False),
        StructField("sequence_id", LongType(), False),
    ]
)
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
_TYPES = [f.type for f in ARROW_SCHEMA]


def to_record_batch(
    messages: Sequence[Message],
    positions: Sequence[MessagePosition],
    topic: str,
    ids: MessageIdBytes,
    min_publish_time_ms: int | None = None,
) -> pa.RecordBatch:
    """The rows of ``messages`` at ``positions`` (skipping those published before
    ``min_publish_time_ms``); ``ids`` encodes the ``message_id`` column."""
    if min_publish_time_ms is not None:
        keep = [i for i, m in enumerate(messages) if m.publish_time >= min_publish_time_ms]
        messages = [messages[i] for i in keep]
        positions = [positions[i] for i in keep]
    n = len(messages)
    keys = [m.key for m in messages]
    values = [m.value for m in messages]
    encode = ids.encode
    id_bytes = [encode(p) for p in positions]
    publish = [m.publish_time * 1000 for m in messages]
    event = [None if m.event_time is None else m.event_time * 1000 for m in messages]
    props = [list(m.properties.items()) if m.properties else [] for m in messages]
    producers = [m.producer_name or "" for m in messages]
    seqs = [m.sequence_id for m in messages]
    columns = [keys, values, [topic] * n, id_bytes, publish, event, props, producers, seqs]
    arrays = [pa.array(col, type=t) for col, t in zip(columns, _TYPES, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


__all__ = ["ARROW_SCHEMA", "SCHEMA", "to_record_batch"]
