"""The row schema of a Braid read (Spark types only: no Arrow, so the driver's planning process
imports it cheaply; :mod:`braid.spark.rows` builds the Arrow batches of this schema).

Columns: ``key`` (string, nullable), ``value`` (binary), ``topic``, ``message_id`` (binary: the
opaque ``braid.MessageId.to_bytes()``), ``publish_time``, ``event_time`` (nullable),
``properties`` (map<string,string>), ``producer_name``, ``sequence_id``. Segments are not a
column: they are an internal detail of the topic.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

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

__all__ = ["SCHEMA"]
