"""Column chunks -> Arrow record batches of the read schema (:data:`braid.spark.schema.SCHEMA`,
re-exported here).

Reads return Arrow batches built from the client's :class:`braid.MessageColumns` (no per-row
Python object: each Arrow array is built from one Python list in C; timestamps are scaled and the
``topic`` column repeated by Arrow), with exactly the Arrow schema Spark derives from
:data:`SCHEMA`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from braid.client import MessageColumns
from braid.spark.message_ids import MessageIdBytes
from braid.spark.schema import SCHEMA

ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
_TYPES = [f.type for f in ARROW_SCHEMA]


def _timestamps(millis: list[int] | list[int | None], arrow_type: pa.DataType) -> pa.Array:
    """Epoch milliseconds (``None`` = null) as Spark's microsecond timestamps, in C."""
    return pc.multiply(pa.array(millis, pa.int64()), 1000).cast(arrow_type)


def _properties(rows: list[Mapping[str, str]], n: int) -> pa.Array:
    if not any(rows):  # the common case: one shared empty mapping per row, no entries
        return pa.MapArray.from_arrays(_zero_offsets(n), _NO_STRINGS, _NO_STRINGS, type=_TYPES[6])
    return pa.array([list(p.items()) for p in rows], type=_TYPES[6])


def _zero_offsets(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(bytes(4 * (n + 1)))])


_NO_STRINGS = pa.array([], pa.string())


def to_record_batch(
    cols: MessageColumns, ids: MessageIdBytes, min_publish_time_ms: int | None = None
) -> pa.RecordBatch:
    """The rows of ``cols`` (skipping those published before ``min_publish_time_ms``);
    ``ids`` encodes the ``message_id`` column."""
    n = len(cols)
    publish = pa.array(cols.publish_times, pa.int64())
    id_bytes = ids.encode_columns(
        cols.segment_id, cols.ledger_ids, cols.entry_ids, cols.batch_indexes, cols.batch_sizes
    )
    arrays = [
        pa.array(cols.keys, _TYPES[0]),
        pa.array(cols.values, _TYPES[1]),
        pa.repeat(pa.scalar(cols.topic, _TYPES[2]), n),
        pa.array(id_bytes, _TYPES[3]),
        pc.multiply(publish, 1000).cast(_TYPES[4]),
        _timestamps(cols.event_times, _TYPES[5]),
        _properties(cols.properties, n),
        pa.array(cols.producer_names, _TYPES[7]),
        pa.array(cols.sequence_ids, _TYPES[8]),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
    if min_publish_time_ms is not None:
        batch = batch.filter(pc.greater_equal(publish, min_publish_time_ms))
    return batch


__all__ = ["ARROW_SCHEMA", "SCHEMA", "to_record_batch"]
