"""Column chunks -> Arrow record batches of the read schema (:data:`braid.spark.schema.SCHEMA`,
re-exported here).

Reads return Arrow batches built from the client's :class:`braid.client.PackedColumns` with no
Python work per row: each packed entry already holds its per-message columns (value, key, event
time, sequence id) as Arrow buffers, which ``pa.Array.from_buffers`` wraps without a copy (one
window of an entry each, then one concatenation per column and batch); the per-entry ones
(``publish_time``, ``producer_name`` and the ``message_id`` prefix) are repeated by Arrow once
per window - a window holds rows of one entry - and the ``message_id`` bytes come packed from
the decoder too. Exactly the Arrow schema Spark derives from
:data:`SCHEMA`; the values are ``Message``'s (pinned by ``tests/unit/spark/test_rows.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from braid.client import PackedColumns
from braid.client.columns import EMPTY_PROPERTIES
from braid.spark.schema import SCHEMA

ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
_TYPES = [f.type for f in ARROW_SCHEMA]


def _properties(cols: PackedColumns, n: int) -> pa.Array:
    if all(entry.properties is None for entry, _, _ in cols):  # the common case: none at all
        return pa.MapArray.from_arrays(_zero_offsets(n), _NO_STRINGS, _NO_STRINGS, type=_TYPES[6])
    rows: list[Mapping[str, str]] = []
    for entry, start, stop in cols:
        props = entry.properties
        rows.extend([EMPTY_PROPERTIES] * (stop - start) if props is None else props[start:stop])
    return pa.array([list(p.items()) for p in rows], type=_TYPES[6])


def _zero_offsets(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(bytes(4 * (n + 1)))])


_NO_STRINGS = pa.array([], pa.string())


def _joined(parts: list[pa.Array], arrow_type: pa.DataType) -> pa.Array:
    if not parts:
        return pa.array([], arrow_type)
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _variable(cols: PackedColumns, arrow_type: pa.DataType, keys: bool) -> pa.Array:
    """The values (``keys=False``) or keys column: each window's slice of its entry's buffers."""
    parts = []
    for entry, start, stop in cols:
        if keys:
            data, offsets, nulls, valid = (
                entry.keys,
                entry.key_offsets,
                entry.key_nulls,
                entry.key_validity,
            )
        else:
            data, offsets, nulls, valid = entry.values, entry.value_offsets, 0, b""
        parts.append(
            pa.Array.from_buffers(
                arrow_type,
                stop - start,
                [pa.py_buffer(valid) if nulls else None, pa.py_buffer(offsets), pa.py_buffer(data)],
                null_count=-1 if nulls else 0,
                offset=start,
            )
        )
    return _joined(parts, arrow_type)


def _int64(cols: PackedColumns, event_times: bool) -> pa.Array:
    """The event times (``event_times=True``, ms, nulls where unset) or sequence ids."""
    parts = []
    for entry, start, stop in cols:
        if event_times:
            data, nulls, valid = (
                entry.event_times,
                entry.event_time_nulls,
                entry.event_time_validity,
            )
        else:
            data, nulls, valid = entry.sequence_ids, 0, b""
        parts.append(
            pa.Array.from_buffers(
                pa.int64(),
                stop - start,
                [pa.py_buffer(valid) if nulls else None, pa.py_buffer(data)],
                null_count=-1 if nulls else 0,
                offset=start,
            )
        )
    return _joined(parts, pa.int64())


def _message_ids(cols: PackedColumns) -> pa.Array:
    """The ``MessageId.to_bytes()`` of every row (built by the decoder, wrapped here)."""
    parts = [
        pa.Array.from_buffers(
            pa.binary(),
            stop - start,
            [None, pa.py_buffer(entry.message_id_offsets), pa.py_buffer(entry.message_ids)],
            null_count=0,
            offset=start,
        )
        for entry, start, stop in cols
    ]
    return _joined(parts, pa.binary())


def _per_entry(
    values: list[int] | list[str], counts: list[int], arrow_type: pa.DataType
) -> pa.Array:
    """A column whose value is the same for all rows of an entry, repeated by Arrow per window."""
    parts = [pa.repeat(pa.scalar(v, arrow_type), n) for v, n in zip(values, counts, strict=True)]
    return _joined(parts, arrow_type)


def to_record_batch(cols: PackedColumns, min_publish_time_ms: int | None = None) -> pa.RecordBatch:
    """The rows of ``cols`` (skipping those published before ``min_publish_time_ms``)."""
    n = len(cols)
    counts = [stop - start for _, start, stop in cols]
    entries = [entry for entry, _, _ in cols]
    publish = _per_entry([e.publish_time for e in entries], counts, pa.int64())
    no_event_times = all(e.event_time_nulls == e.rows for e in entries)
    arrays = [
        _variable(cols, _TYPES[0], keys=True),
        _variable(cols, _TYPES[1], keys=False),
        pa.repeat(pa.scalar(cols.topic, _TYPES[2]), n),
        _message_ids(cols),
        pc.multiply(publish, 1000).cast(_TYPES[4]),
        pa.nulls(n, _TYPES[5])
        if no_event_times
        else pc.multiply(_int64(cols, event_times=True), 1000).cast(_TYPES[5]),
        _properties(cols, n),
        _per_entry([e.producer_name for e in entries], counts, _TYPES[7]),
        _int64(cols, event_times=False),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
    if min_publish_time_ms is not None:
        batch = batch.filter(pc.greater_equal(publish, min_publish_time_ms))
    return batch


__all__ = ["ARROW_SCHEMA", "SCHEMA", "to_record_batch"]
