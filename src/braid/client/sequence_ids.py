"""A topic producer's sequence ids (C5): one monotonic counter across all of its segments.

A message gets its id when it enters a segment's batch (:meth:`SequenceIds.assign`), so within a
segment ids grow in the order messages go on the wire. An explicit id (``send(...,
sequence_id=n)``) is used as given and moves the counter past it. Without an
``initial_sequence_id`` the counter resumes after the highest ``last_sequence_id`` a broker reports
when a segment producer attaches (where broker deduplication resumes); with one, the application's
seed wins. :attr:`SequenceIds.last` is the highest id the brokers confirmed. A message re-routed
after its segment was sealed keeps the id it was sent with (ADR 0055).

The topic producer owns the counter and hands it to each of its segment producers: they are the
only callers of :meth:`~SequenceIds.assign` and :meth:`~SequenceIds.resume_after`.
"""

from __future__ import annotations

from braid.client.pending import PendingMessage


class SequenceIds:
    """The sequence-id counter of one topic producer (see the module docstring)."""

    __slots__ = ("_last", "_next", "_seeded")

    def __init__(self, initial: int | None) -> None:
        self._seeded = initial is not None
        self._next = 0 if initial is None else initial + 1
        self._last = -1 if initial is None else initial

    @property
    def last(self) -> int:
        """The highest sequence id the brokers confirmed (-1 before any)."""
        return self._last

    def assign(self, record: PendingMessage) -> None:
        """Number ``record`` as it enters a batch (the id it was already sent with, else its
        explicit id, else the next one)."""
        if record.sent_seq >= 0:
            record.seq = record.sent_seq
            return
        explicit = record.explicit_seq
        if explicit is None:
            record.seq = self._next
            self._next += 1
        else:
            record.seq = explicit
            if explicit >= self._next:
                self._next = explicit + 1

    def resume_after(self, last: int) -> None:
        """A broker reported ``last`` as the producer's last stored id (PRODUCER_SUCCESS)."""
        if self._seeded:
            return
        if last + 1 > self._next:
            self._next = last + 1
        if last > self._last:
            self._last = last

    def confirmed(self, highest: int) -> None:
        """Messages up to id ``highest`` were stored."""
        if highest > self._last:
            self._last = highest


__all__ = ["SequenceIds"]
