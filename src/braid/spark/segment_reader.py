"""Read one bounded range of one segment with the public client (executors, and the driver's
admission control).

A :class:`~braid.spark.planning.SegmentRange` says: segment ``S`` of a topic, from just after
``start`` through ``end`` (a position, or the segment's end when ``end`` is drained). The public
client reads topics, not segments, so :class:`SegmentRangeReader` opens a checkpoint consumer
whose start checkpoint marks every *other* segment the plan knows (and a margin of ids above
them, for segments created while it reads) as already drained, and ``S`` as read up to
``start``. The consumer then reads ``S`` alone, in segment order; any message of another segment
(one created after the margin) is dropped here. Stop conditions:

* ``end`` is a position: after the message at ``end`` (a whole entry when its batch index is
  ``WHOLE_ENTRY``), or at the first message beyond it;
* ``end`` is drained: when the consumer's own checkpoint reports ``S`` drained (sealed, its end
  reported by the broker, every message delivered).

Data loss (retention deleted what the range needs) shows as ``S`` draining before ``end`` was
reached, or ``S`` missing from the topic's layout; it raises
:class:`~braid.spark.errors.BraidDataLossError`, or logs a warning and ends the range when
``fail_on_data_loss`` is false. A range that makes no progress for ``read_timeout`` seconds
fails with ``DeadlineExceededError`` rather than hanging a task.

The smallest public client addition that would replace the drained-marking trick is noted in
docs/spark.md ("Client API notes").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from braid.client import Client, Message
from braid.core.checkpoint import (
    DRAINED,
    CursorKind,
    SegmentCursor,
    checkpoint_cursors,
    checkpoint_of,
)
from braid.core.errors import DeadlineExceededError
from braid.core.message_id import MessagePosition, message_position
from braid.spark.errors import BraidDataLossError
from braid.spark.planning import SegmentRange, beyond, reaches

log = logging.getLogger(__name__)

#: Segment ids above the plan's known ids also marked drained (segments created while reading).
ID_MARGIN = 64
#: How long one receive waits before the reader checks whether the segment is drained.
POLL_SECONDS = 0.05
#: Without progress for this long, ask the admin API whether the segment still exists.
EXISTENCE_CHECK_SECONDS = 3.0

SegmentExists = Callable[[str, int], bool]


def _position_of(message: Message) -> MessagePosition:
    pos = message_position(message.message_id)
    assert pos is not None  # a received message always has a concrete position
    return pos


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
        receiver_queue_size: int = 2000,
    ) -> None:
        self.range = rng
        self._fail_on_data_loss = fail_on_data_loss
        self._segment_exists = segment_exists
        self._read_timeout = read_timeout
        sid = rng.segment_id
        top = max(rng.known_ids, default=sid) + ID_MARGIN
        cursors: dict[int, SegmentCursor] = dict.fromkeys(range(top + 1), DRAINED)
        del cursors[sid]
        if rng.start.after is not None:
            cursors[sid] = SegmentCursor.after(*rng.start.after)
        self._consumer = client.create_checkpoint_consumer(
            rng.topic,
            start=checkpoint_of(rng.epoch, cursors),
            receiver_queue_size=receiver_queue_size,
        )
        self._buffer: list[Message] = []
        self._positions: list[MessagePosition] = []
        self._done = False
        self.last_position: tuple[int, int, int] | None = None
        self.count = 0

    @property
    def done(self) -> bool:
        """Whether the whole range was read."""
        return self._done and not self._buffer

    def next_messages(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` next messages of the range; ``[]`` only when it is done."""
        return self.next_chunk(max_messages)[0]

    def next_chunk(self, max_messages: int) -> tuple[list[Message], list[MessagePosition]]:
        """Like :meth:`next_messages`, with each message's position."""
        while not self._buffer and not self._done:
            self._fill(max_messages)
        taken, self._buffer = self._buffer[:max_messages], self._buffer[max_messages:]
        positions, self._positions = (
            self._positions[:max_messages],
            self._positions[max_messages:],
        )
        if taken:
            pos = positions[-1]
            self.last_position = (pos.ledger_id, pos.entry_id, pos.batch_index)
            self.count += len(taken)
        return taken, positions

    def _fill(self, want: int) -> None:
        rng = self.range
        sid = rng.segment_id
        end = rng.end.after
        idle_since = time.monotonic()
        checked_at = idle_since
        while True:
            messages = self._consumer.receive_many(max(want, 1), timeout=POLL_SECONDS)
            kept = messages
            kept_at = [_position_of(m) for m in messages]
            if any(p.segment_id != sid for p in kept_at):
                mine = [i for i, p in enumerate(kept_at) if p.segment_id == sid]
                kept, kept_at = [messages[i] for i in mine], [kept_at[i] for i in mine]
            if end is not None and kept_at and self._at_or_past_end(end, kept_at[-1]):
                # Positions grow within a segment: only the chunk's tail can cross the end.
                cut = len(kept_at)
                for i, pos in enumerate(kept_at):
                    here = (pos.ledger_id, pos.entry_id, pos.batch_index)
                    if beyond(end, here):
                        cut = i
                        break
                    if reaches(end, here, pos.batch_size):
                        cut = i + 1
                        break
                kept, kept_at = kept[:cut], kept_at[:cut]
                self._done = True
            if kept or self._done:
                self._buffer.extend(kept)
                self._positions.extend(kept_at)
                return
            now = time.monotonic()
            cursor = (checkpoint_cursors(self._consumer.checkpoint()) or {}).get(sid)
            if cursor is not None and cursor.kind is CursorKind.DRAINED:
                if end is not None:
                    self._lost(f"it ended before position {list(end)} was read")
                self._done = True
                return
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
    def _at_or_past_end(end: tuple[int, int, int], pos: MessagePosition) -> bool:
        here = (pos.ledger_id, pos.entry_id, pos.batch_index)
        return beyond(end, here) or reaches(end, here, pos.batch_size)

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
        self._consumer.close()

    def __enter__(self) -> SegmentRangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ID_MARGIN", "SegmentExists", "SegmentRangeReader"]
