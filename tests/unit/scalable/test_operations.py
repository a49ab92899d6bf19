"""Split and merge records: what the controller writes before acting and redoes after a crash."""

from __future__ import annotations

import pytest

from braid.core.errors import InvalidInputError
from braid.core.layout import InvalidLayoutOperation, SegmentLayout
from braid.scalable.operations import MERGE, SPLIT, StructuralOperation


def test_split_record_round_trips_and_recomputes_the_same_children() -> None:
    layout = SegmentLayout.initial(2, now_ms=1)
    op = StructuralOperation(SPLIT, (1,), now_ms=5_000, base_epoch=layout.epoch)
    again = StructuralOperation.from_json(op.to_json())
    assert again == op
    first, second = op.apply(layout), again.apply(layout)
    assert first == second
    assert [c.segment_id for c in op.children(first)] == [2, 3]
    assert all(c.created_at_ms == 5_000 for c in op.children(first))


def test_is_applied_is_false_before_and_true_after_the_cas() -> None:
    layout = SegmentLayout.initial(2)
    op = StructuralOperation(MERGE, (0, 1), now_ms=7)
    assert not op.is_applied(layout)
    merged = op.apply(layout)
    assert op.is_applied(merged)
    assert [c.segment_id for c in op.children(merged)] == [2]
    assert [p.segment_id for p in op.parents(merged)] == [0, 1]


def test_applying_twice_is_refused_by_the_layout() -> None:
    layout = SegmentLayout.initial(1)
    op = StructuralOperation(SPLIT, (0,), now_ms=1)
    with pytest.raises(InvalidLayoutOperation):
        op.apply(op.apply(layout))


@pytest.mark.parametrize(
    ("kind", "ids"),
    [(SPLIT, ()), (SPLIT, (1, 2)), (MERGE, (1,)), ("rebucket", (1,))],
)
def test_malformed_operations_are_refused(kind: str, ids: tuple[int, ...]) -> None:
    with pytest.raises(InvalidInputError):
        StructuralOperation(kind, ids, now_ms=0)


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"type": "split"},
        {"type": "split", "segmentIds": "x", "nowMs": 1},
        {"type": "merge", "segmentIds": [1, 2], "nowMs": "soon"},
    ],
)
def test_malformed_records_name_the_problem(doc: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError, match="operation record"):
        StructuralOperation.from_json(doc)


def test_describe_names_the_parents_and_the_split_point() -> None:
    assert StructuralOperation(SPLIT, (3,), 0).describe() == "split of segment 3 at midpoint"
    assert StructuralOperation(MERGE, (4, 5, 6), 0).describe() == "merge of segments 4, 5, 6"
