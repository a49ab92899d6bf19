"""Column chunks -> Arrow record batches of the read schema (:data:`braid.spark.schema.SCHEMA`,
re-exported here).

Reads return Arrow batches built from the client's :class:`braid.MessageColumns` with no Python
work per row: the per-message columns (key, value, sequence id, event time) are built from one
Python list each in C; the per-entry ones (``publish_time``, ``producer_name`` and the
``message_id`` prefix) are repeated by Arrow once per entry *run* - the rows of one entry, which
are contiguous because positions grow within a segment - and a message id is the entry's prefix
joined by Arrow to the cached tail of its batch index (a slice of one cached array when the run
holds consecutive indexes, the common case). Exactly the Arrow schema Spark derives from
:data:`SCHEMA`; the values are ``Message``'s (pinned by ``tests/unit/spark/test_rows.py``).
"""

from __future__ import annotations

from bisect import bisect_right
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


def entry_runs(cols: MessageColumns) -> list[tuple[int, int]]:
    """``[start, stop)`` of the rows of each entry, in order.

    Positions grow within a segment, so ledger ids never decrease and, within a ledger, entry
    ids never decrease: each run is found by bisection (a few steps per entry, none per row).

    Raises:
        ValueError: the rows are not in position order (a run's ends disagree).
    """
    ledgers, entries = cols.ledger_ids, cols.entry_ids
    n = len(ledgers)
    runs: list[tuple[int, int]] = []
    start = 0
    while start < n:
        ledger = ledgers[start]
        ledger_stop = bisect_right(ledgers, ledger, start)
        while start < ledger_stop:
            entry = entries[start]
            stop = bisect_right(entries, entry, start, ledger_stop)
            if stop <= start or entries[stop - 1] != entry or ledgers[stop - 1] != ledger:
                raise ValueError(f"rows are not in position order at row {start}")
            runs.append((start, stop))
            start = stop
    return runs


class MessageIdArrays:
    """Builds ``message_id`` columns (one per read: it caches the tails of each batch size as
    Arrow arrays, and the entry prefixes through :class:`MessageIdBytes`)."""

    def __init__(self) -> None:
        self._bytes = MessageIdBytes()
        self._tails: dict[int, pa.Array] = {}

    def _tails_of(self, batch_size: int) -> pa.Array:
        array = self._tails.get(batch_size)
        if array is None:
            array = pa.array(self._bytes.tails(batch_size), pa.binary())
            if len(self._tails) >= 64:
                self._tails.clear()
            self._tails[batch_size] = array
        return array

    def column(self, cols: MessageColumns, runs: list[tuple[int, int]]) -> pa.Array:
        """The ``MessageId.to_bytes()`` of every row of ``cols`` (``runs``: its entry runs).

        Built per batch, not per run: each run repeats its entry's prefix and slices its tails
        (no copies), then one join makes the whole column (a compute call costs tens of
        microseconds, so one per entry run was most of this column's cost)."""
        if not runs:
            return pa.array([], pa.binary())
        prefixes = []
        tails = []
        indexes, sizes = cols.batch_indexes, cols.batch_sizes
        for start, stop in runs:
            prefix = self._bytes.prefix(
                cols.segment_id, cols.ledger_ids[start], cols.entry_ids[start]
            )
            all_tails = self._tails_of(sizes[start])
            first = indexes[start] + 1
            count = stop - start
            prefixes.append(pa.repeat(pa.scalar(prefix, pa.binary()), count))
            if indexes[stop - 1] + 1 - first == count - 1:  # consecutive indexes: one slice
                tails.append(all_tails.slice(first, count))
            else:
                picks = pa.array(indexes[start:stop], pa.int64())
                tails.append(all_tails.take(pc.add(picks, 1)))
        if len(runs) == 1:
            return pc.binary_join_element_wise(prefixes[0], tails[0], b"")
        return pc.binary_join_element_wise(pa.concat_arrays(prefixes), pa.concat_arrays(tails), b"")


def _per_entry(
    values: list[int] | list[str], runs: list[tuple[int, int]], arrow_type: pa.DataType
) -> pa.Array:
    """A column whose value is the same for all rows of an entry, repeated by Arrow per run."""
    if not runs:
        return pa.array([], arrow_type)
    parts = [pa.repeat(pa.scalar(values[start], arrow_type), stop - start) for start, stop in runs]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def to_record_batch(
    cols: MessageColumns, ids: MessageIdArrays, min_publish_time_ms: int | None = None
) -> pa.RecordBatch:
    """The rows of ``cols`` (skipping those published before ``min_publish_time_ms``);
    ``ids`` builds the ``message_id`` column."""
    n = len(cols)
    runs = entry_runs(cols)
    publish = _per_entry(cols.publish_times, runs, pa.int64())
    event_times = cols.event_times
    arrays = [
        pa.array(cols.keys, _TYPES[0]),
        pa.array(cols.values, _TYPES[1]),
        pa.repeat(pa.scalar(cols.topic, _TYPES[2]), n),
        ids.column(cols, runs),
        pc.multiply(publish, 1000).cast(_TYPES[4]),
        pa.nulls(n, _TYPES[5])
        if event_times.count(None) == n
        else _timestamps(event_times, _TYPES[5]),
        _properties(cols.properties, n),
        _per_entry(cols.producer_names, runs, _TYPES[7]),
        pa.array(cols.sequence_ids, _TYPES[8]),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
    if min_publish_time_ms is not None:
        batch = batch.filter(pc.greater_equal(publish, min_publish_time_ms))
    return batch


__all__ = ["ARROW_SCHEMA", "SCHEMA", "MessageIdArrays", "entry_runs", "to_record_batch"]
