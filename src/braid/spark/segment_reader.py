"""Read one bounded range of one segment with the public client (executors, and the driver's
admission control).

A :class:`~braid.spark.planning.SegmentRange` says: segment ``S`` of a topic, from just after
``start`` through ``end`` (a position, or the segment's end when ``end`` is drained).
:class:`SegmentRangeReader` opens the client's segment reader on ``S`` from ``start``
(``Client.create_segment_reader``, ADR 0031) and takes column chunks
(:class:`braid.client.PackedColumns`) off it, in segment order, cut at ``end``. Stop conditions:

* ``end`` is a position: after the message at ``end`` (a whole entry when its batch index is
  ``WHOLE_ENTRY``), or at the first message beyond it;
* ``end`` is drained: when the segment reader is drained (sealed, its end reported by the
  broker, every message taken).

Data loss (retention deleted what the range needs) shows as ``S`` draining before ``end`` was
reached, or ``S`` missing from the topic's layout; it raises
:class:`~braid.spark.errors.BraidDataLossError`, or logs a warning and ends the range when
``fail_on_data_loss`` is false. A range that makes no progress for ``read_timeout`` seconds
fails with ``DeadlineExceededError`` rather than hanging a task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from braid.client import Client, PackedColumns, SegmentReader
from braid.client.errors import NotFoundError
from braid.core.checkpoint import SegmentCursor
from braid.core.errors import DeadlineExceededError
from braid.spark.errors import BraidDataLossError
from braid.spark.options import DEFAULT_RECEIVER_QUEUE_BYTES, DEFAULT_RECEIVER_QUEUE_SIZE
from braid.spark.planning import SegmentRange, beyond, reaches

log = logging.getLogger(__name__)

#: How long one read waits before the reader checks whether the segment is drained.
POLL_SECONDS = 0.05
#: Without progress for this long, ask the admin API whether the segment still exists.
EXISTENCE_CHECK_SECONDS = 3.0

SegmentExists = Callable[[str, int], bool]


class SegmentRangeReader:
    """The messages of one :class:`SegmentRange`, in segment order (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        rng: SegmentRange,
        *,
        fail_on_data_loss: bool = True,
        segment_exists: SegmentExists | None = None,
        read_timeout: float = 120.0,
        receiver_queue_size: int = DEFAULT_RECEIVER_QUEUE_SIZE,
        receiver_queue_bytes: int | None = DEFAULT_RECEIVER_QUEUE_BYTES,
    ) -> None:
        self.range = rng
        self._fail_on_data_loss = fail_on_data_loss
        self._segment_exists = segment_exists
        self._read_timeout = read_timeout
        self._buffer = PackedColumns(rng.topic, rng.segment_id)
        self._done = False
        self.last_position: tuple[int, int, int] | None = None
        self.count = 0
        start = None if rng.start.after is None else SegmentCursor.after(*rng.start.after)
        self._reader: SegmentReader[PackedColumns] | None = None
        try:
            self._reader = client.create_segment_reader(
                rng.topic,
                rng.segment_id,
                start,
                receiver_queue_size=receiver_queue_size,
                packed=True,
                receiver_queue_bytes=receiver_queue_bytes,
            )
        except NotFoundError as exc:
            self._lost(f"it no longer exists (deleted by retention): {exc}")
            self._done = True

    @property
    def done(self) -> bool:
        """Whether the whole range was read."""
        return self._done and not len(self._buffer)

    def next_columns(self, max_messages: int) -> PackedColumns:
        """The next ``max_messages`` messages of the range, fewer only at its end; empty only
        when it is done. (Filled to the full count: Spark pays per Arrow batch, and the
        broker dispatches one entry - a few hundred messages - at a time.)"""
        while len(self._buffer) < max_messages and not self._done:
            self._fill(max_messages - len(self._buffer))
        taken = self._buffer.take_front(max_messages)
        if len(taken):
            self.last_position = taken.position(len(taken) - 1)
            self.count += len(taken)
        return taken

    def _fill(self, want: int) -> None:
        rng = self.range
        sid = rng.segment_id
        end = rng.end.after
        reader = self._reader
        assert reader is not None
        idle_since = time.monotonic()
        checked_at = idle_since
        while True:
            cols = reader.read_columns(max(want, 1), timeout=POLL_SECONDS)
            n = len(cols)
            if end is not None and n and self._at_or_past_end(end, cols, n - 1):
                # Positions grow within a segment: only the chunk's tail can cross the end.
                cut = n
                for i in range(n):
                    here = cols.position(i)
                    if beyond(end, here):
                        cut = i
                        break
                    if reaches(end, here, cols.batch_size(i)):
                        cut = i + 1
                        break
                cols = cols.slice(0, cut)
                self._done = True
            if len(cols) or self._done:
                self._buffer.extend(cols)
                return
            if reader.drained:
                if end is not None:
                    self._lost(f"it ended before position {list(end)} was read")
                self._done = True
                return
            now = time.monotonic()
            if self._segment_exists is not None and now - checked_at >= EXISTENCE_CHECK_SECONDS:
                checked_at = now
                if not self._segment_exists(rng.topic, sid):
                    self._lost("it no longer exists (deleted by retention)")
                    self._done = True
                    return
            if now - idle_since >= self._read_timeout:
                raise DeadlineExceededError(
                    f"segment {sid} of {rng.topic}: no message for {self._read_timeout:g}s while "
                    f"reading up to {rng.end.to_json()}"
                )

    @staticmethod
    def _at_or_past_end(end: tuple[int, int, int], cols: PackedColumns, row: int) -> bool:
        here = cols.position(row)
        return beyond(end, here) or reaches(end, here, cols.batch_size(row))

    def _lost(self, why: str) -> None:
        rng = self.range
        message = (
            f"data loss in segment {rng.segment_id} of {rng.topic}: {why}; the query needed it "
            f"from {rng.start.to_json()} to {rng.end.to_json()}"
        )
        if self._fail_on_data_loss:
            raise BraidDataLossError(
                message + " (set failOnDataLoss=false to skip lost data and continue)"
            )
        log.warning("%s; continuing after the gap (failOnDataLoss=false)", message)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    def __enter__(self) -> SegmentRangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SegmentExists", "SegmentRangeReader"]
