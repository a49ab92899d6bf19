"""The auto-scaler's decision history of one topic: what it did, and what it did not do and why.

PIP-483's stats keep only the *last* decision; an operator looking at a topic's segment DAG wants
the reason of each split and merge, and the decisions not taken ("a split is warranted but the
last split was 20 s ago"). :class:`AutoScaleDecisionLog` keeps both, bounded, in memory of the
auto-scaler that made them (the controller leader's): the
:class:`~braid.scalable.autoscaler.AutoScaler` appends every
:class:`~braid.scalable.autoscaler.DecisionRecord` it makes, and the admin REST API serves the log
(``GET .../autoScaleDecisions``, :mod:`braid.admin.autoscale_decisions`).

Invariants:

* two separate bounded queues: *taken* (splits, merges, failures) and *not taken*
  (``action == "none"``), so a long quiet stretch never pushes the structural changes out;
* a decision not taken that repeats the newest one's reason (the same guard held again at the
  next tick) is folded into it: ``count`` grows, ``atMs`` and ``detail`` become the latest,
  ``firstAtMs`` stays; so a topic idling for a week holds one entry, not one per tick;
* every new or folded entry gets the next ``seq`` (monotonic per log): a reader that saw ``seq``
  N has seen everything up to N, and one number tells a page whether anything changed.

The log is not persisted: a new leader (or a controller restarted on this broker) starts an empty
one. The splits and merges themselves stay in the layout (each segment's parents and created
epoch and time), so a timeline built from the DAG is complete; only older reasons are lost.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Protocol

#: Decisions taken (splits, merges, failures) kept per topic.
TAKEN_CAPACITY = 200
#: Folded runs of decisions not taken kept per topic.
NOT_TAKEN_CAPACITY = 100


class DecisionRecord(Protocol):
    """What the log needs of an auto-scaler's record
    (:class:`braid.scalable.autoscaler.DecisionRecord` is one)."""

    @property
    def at_ms(self) -> int: ...
    @property
    def action(self) -> str:
        """``"split"``, ``"merge"``, ``"failed"`` or ``"none"`` (a decision not taken)."""
        ...

    @property
    def reason(self) -> str: ...
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class LoggedDecision:
    """One entry of the log: a decision, or a run of the same decision not taken."""

    seq: int
    record: DecisionRecord
    count: int = 1
    first_at_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc = self.record.to_json()
        doc["seq"] = self.seq
        doc["count"] = self.count
        doc["firstAtMs"] = self.record.at_ms if self.first_at_ms is None else self.first_at_ms
        return doc


class AutoScaleDecisionLog:
    """A topic's recent auto-scale decisions, taken and not taken (see the module docstring)."""

    def __init__(
        self, taken_capacity: int = TAKEN_CAPACITY, not_taken_capacity: int = NOT_TAKEN_CAPACITY
    ) -> None:
        if taken_capacity < 1 or not_taken_capacity < 1:
            raise ValueError("a decision log keeps at least one entry of each kind")
        self._taken: deque[LoggedDecision] = deque(maxlen=taken_capacity)
        self._not_taken: deque[LoggedDecision] = deque(maxlen=not_taken_capacity)
        self._seq = 0

    @property
    def seq(self) -> int:
        """The ``seq`` of the newest entry (0 while empty): changes whenever the log does."""
        return self._seq

    def append(self, record: DecisionRecord) -> None:
        """Add one evaluation's outcome (folding a repeated decision not taken)."""
        self._seq += 1
        if record.action != "none":
            self._taken.append(LoggedDecision(self._seq, record))
            return
        last = self._not_taken[-1] if self._not_taken else None
        if last is not None and last.record.reason == record.reason:
            first = last.record.at_ms if last.first_at_ms is None else last.first_at_ms
            self._not_taken[-1] = replace(
                last, seq=self._seq, record=record, count=last.count + 1, first_at_ms=first
            )
            return
        self._not_taken.append(LoggedDecision(self._seq, record))

    def taken(self) -> list[LoggedDecision]:
        """Splits, merges and failures, oldest first."""
        return list(self._taken)

    def not_taken(self) -> list[LoggedDecision]:
        """Runs of decisions not taken, oldest first."""
        return list(self._not_taken)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self._seq,
            "taken": [entry.to_json() for entry in self._taken],
            "notTaken": [entry.to_json() for entry in self._not_taken],
        }


__all__ = [
    "NOT_TAKEN_CAPACITY",
    "TAKEN_CAPACITY",
    "AutoScaleDecisionLog",
    "DecisionRecord",
    "LoggedDecision",
]
