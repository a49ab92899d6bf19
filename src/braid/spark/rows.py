"""Column chunks -> Arrow record batches of the read schema (:data:`braid.spark.schema.SCHEMA`,
re-exported here).

Reads return Arrow batches built from the client's :class:`braid.client.PackedColumns` with no
Python work per row: each packed entry already holds its per-message columns (value, key, event
time, sequence id) as Arrow buffers, which ``pa.Array.from_buffers`` wraps without a copy (one
window of an entry each, then one concatenation per column and batch); the per-entry ones
(``publish_time``, ``producer_name``, and ``topic``) are repeated with numpy once per batch -
a window holds rows of one entry - and the ``message_id`` bytes come packed from the decoder
too. Exactly the Arrow schema Spark derives from :data:`SCHEMA`; the values are ``Message``'s
(pinned by ``tests/unit/spark/test_rows.py``).

Nothing here converts Python objects with ``pa.array`` or ``pa.scalar`` on the common path:
those import pandas, 0.2 CPU s in each of Spark's Python workers on its first batch (a message
with properties still does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
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


def _repeated_strings(values: list[str], counts: list[int]) -> pa.Array:
    """A string column holding ``values[i]`` ``counts[i]`` times, in order."""
    encoded = [v.encode() for v in values]
    lengths = np.repeat(np.fromiter(map(len, encoded), np.int64, len(encoded)), counts)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _MAX_INT32:  # not with a batch's rows and Pulsar's name lengths
        raise ValueError(f"{offsets[-1]} bytes of strings do not fit one Arrow string column")
    data = b"".join(v * n for v, n in zip(encoded, counts, strict=True))
    return pa.Array.from_buffers(
        pa.string(),
        len(lengths),
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        null_count=0,
    )


_MAX_INT32 = 2**31 - 1
_MILLIS = pa.timestamp("ms", tz="UTC")
_NO_STRINGS = _repeated_strings([], [])


def _joined(parts: list[pa.Array], arrow_type: pa.DataType) -> pa.Array:
    if not parts:
        return pa.nulls(0, arrow_type)
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


def _micros(millis: np.ndarray[Any, np.dtype[np.int64]], arrow_type: pa.DataType) -> pa.Array:
    """Milliseconds since the epoch -> Spark's timestamp column (microseconds)."""
    return pa.Array.from_buffers(arrow_type, len(millis), [None, pa.py_buffer(millis * 1000)])


def to_record_batch(cols: PackedColumns, min_publish_time_ms: int | None = None) -> pa.RecordBatch:
    """The rows of ``cols`` (skipping those published before ``min_publish_time_ms``)."""
    n = len(cols)
    counts = [stop - start for _, start, stop in cols]
    entries = [entry for entry, _, _ in cols]
    publish = np.repeat(
        np.fromiter((e.publish_time for e in entries), np.int64, len(entries)), counts
    )
    no_event_times = all(e.event_time_nulls == e.rows for e in entries)
    arrays = [
        _variable(cols, _TYPES[0], keys=True),
        _variable(cols, _TYPES[1], keys=False),
        _repeated_strings([cols.topic], [n]),
        _message_ids(cols),
        _micros(publish, _TYPES[4]),
        pa.nulls(n, _TYPES[5])
        if no_event_times
        else _int64(cols, event_times=True).cast(_MILLIS).cast(_TYPES[5]),
        _properties(cols, n),
        _repeated_strings([e.producer_name for e in entries], counts),
        _int64(cols, event_times=False),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
    if min_publish_time_ms is not None:
        keep = np.packbits(publish >= min_publish_time_ms, bitorder="little")
        batch = batch.filter(pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(keep)]))
    return batch


__all__ = ["ARROW_SCHEMA", "SCHEMA", "to_record_batch"]
