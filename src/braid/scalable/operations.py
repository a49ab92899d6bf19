"""Split and merge as resumable operations (PIP-468 "Split Protocol" / "Merge Protocol").

A structural change runs in PIP-468's order::

    1 record the operation     /topics/.../operation, created with CAS (one operation at a time)
    2 discover subscriptions   metadata subscriptions + durable cursors on every parent
    3 create the children      segment topics with a cursor at earliest for each subscription
    4 terminate the parents    sequentially; producers get TopicTerminated; then each child
                               inherits its parents' dedup state (ADR 0055)
    5 CAS the layout           parents SEALED with child pointers, children ACTIVE, epoch + 1
    6 drop the record, notify  coordinators rebalance; DAG watchers saw step 5 themselves

Every step is idempotent, and the record holds everything needed to redo them (the kind, the
parents, the split point, the timestamp), so a controller that dies between any two steps leaves
a state the next leader *rolls forward* by running the same operation again
(docs/decisions/0021-split-merge-recovery.md). Rolling back is impossible once a parent is
terminated — a managed ledger cannot be un-terminated — and never needed before, because nothing
is visible to clients until step 5. Children are never visible without their cursors (3 before 5)
and parents never writable once children are (4 before 5).

This module is pure: :class:`StructuralOperation` is the record, :meth:`apply` the layout change
and :meth:`is_applied` the check step 5 makes on the latest layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from braid.core.errors import InvalidInputError
from braid.core.layout import SegmentLayout
from braid.core.segment_info import SegmentInfo

SPLIT = "split"
MERGE = "merge"


@dataclass(frozen=True)
class StructuralOperation:
    """A split or merge, as recorded before any side effect.

    Attributes:
        kind: ``"split"`` or ``"merge"``.
        segment_ids: the parent(s): one for a split, two or more for a merge.
        now_ms: the wall-clock time stamped on the children and the sealed parents.
        split_hash: for a split, the first hash of the upper child (``None`` = midpoint).
        base_epoch: the layout epoch the operation was planned against (for logs and stats).
    """

    kind: str
    segment_ids: tuple[int, ...]
    now_ms: int
    split_hash: int | None = None
    base_epoch: int = 0

    def __post_init__(self) -> None:
        if self.kind not in (SPLIT, MERGE):
            raise InvalidInputError(f"unknown structural operation {self.kind!r}")
        if self.kind == SPLIT and len(self.segment_ids) != 1:
            raise InvalidInputError(f"a split has one parent, got {list(self.segment_ids)}")
        if self.kind == MERGE and len(self.segment_ids) < 2:
            raise InvalidInputError(
                f"a merge needs at least two segments, got {list(self.segment_ids)}"
            )

    def apply(self, layout: SegmentLayout) -> SegmentLayout:
        """The layout after this operation.

        Raises:
            SegmentNotFound, InvalidLayoutOperation: not applicable to ``layout``.
        """
        if self.kind == SPLIT:
            return layout.split_segment(
                self.segment_ids[0], self.now_ms, split_hash=self.split_hash
            )
        return layout.merge_segments(self.segment_ids, self.now_ms)

    def is_applied(self, layout: SegmentLayout) -> bool:
        """Whether ``layout`` already reflects this operation (its parents are sealed).

        Only one operation runs at a time and a sealed segment is never sealed again, so sealed
        parents mean that this very operation reached step 5.
        """
        return all(
            sid in layout.segments and not layout.segments[sid].is_active
            for sid in self.segment_ids
        )

    def parents(self, layout: SegmentLayout) -> list[SegmentInfo]:
        return [layout.segment(sid) for sid in self.segment_ids]

    def children(self, target: SegmentLayout) -> list[SegmentInfo]:
        """The children in ``target`` (a layout this operation was applied to)."""
        child_ids: set[int] = set()
        for sid in self.segment_ids:
            child_ids.update(target.segment(sid).child_ids)
        return [target.segment(cid) for cid in sorted(child_ids)]

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": self.kind,
            "segmentIds": list(self.segment_ids),
            "nowMs": self.now_ms,
            "baseEpoch": self.base_epoch,
        }
        if self.split_hash is not None:
            doc["splitHash"] = self.split_hash
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> StructuralOperation:
        """Parse a record written by :meth:`to_json`.

        Raises:
            InvalidInputError: the record is malformed.
        """
        try:
            split_hash = doc.get("splitHash")
            return cls(
                kind=str(doc["type"]),
                segment_ids=tuple(int(i) for i in doc["segmentIds"]),
                now_ms=int(doc["nowMs"]),
                split_hash=None if split_hash is None else int(split_hash),
                base_epoch=int(doc.get("baseEpoch", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"malformed operation record {dict(doc)!r}: {exc}") from exc

    def describe(self) -> str:
        ids = ", ".join(str(i) for i in self.segment_ids)
        if self.kind == SPLIT:
            where = "midpoint" if self.split_hash is None else f"0x{self.split_hash:04x}"
            return f"split of segment {ids} at {where}"
        return f"merge of segments {ids}"


__all__ = ["MERGE", "SPLIT", "StructuralOperation"]
