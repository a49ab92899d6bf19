"""The driver's reading of the broker's read snapshot (``GET .../positions``): strict."""

from __future__ import annotations

from typing import Any

import pytest

from braid.spark.admin_reads import AdminReadError, scalable_path
from braid.spark.offsets import BEGINNING, DRAINED, WHOLE_ENTRY, SegmentProgress
from braid.spark.planning import SegmentView
from braid.spark.topology import snapshot_from_json

T = "topic://public/default/t"


def _doc() -> dict[str, Any]:
    return {
        "topic": T,
        "epoch": 1,
        "segments": {
            "0": {"parentIds": [], "active": False, "lastConfirmed": None},
            "1": {"parentIds": [0], "active": True, "lastConfirmed": [12, 41]},
            "2": {"parentIds": [0], "active": True, "lastConfirmed": None},
        },
    }


def test_the_answer_becomes_a_snapshot_with_whole_entry_positions() -> None:
    snap = snapshot_from_json(T, _doc())
    assert snap.epoch == 1
    assert snap.segments[0] == SegmentView(0, (), True)
    assert snap.segments[1] == SegmentView(1, (0,), False)
    assert dict(snap.latest) == {1: (12, 41, WHOLE_ENTRY)}
    assert snap.everything().segments == {
        0: DRAINED,
        1: SegmentProgress((12, 41, WHOLE_ENTRY)),
        2: BEGINNING,
    }


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda d: d.pop("epoch"),
        lambda d: d.update(epoch="1"),
        lambda d: d.update(epoch=True),
        lambda d: d.update(segments=[]),
        lambda d: d["segments"].update({"x": d["segments"]["1"]}),
        lambda d: d["segments"]["1"].update(active="yes"),
        lambda d: d["segments"]["1"].pop("parentIds"),
        lambda d: d["segments"]["1"].update(lastConfirmed=[12]),
        lambda d: d["segments"]["1"].update(lastConfirmed=[12, -1]),
    ],
)
def test_an_answer_of_another_shape_is_refused(corrupt: Any) -> None:
    doc = _doc()
    corrupt(doc)
    with pytest.raises(AdminReadError, match="unexpected positions answer"):
        snapshot_from_json(T, doc)


def test_the_path_quotes_each_part_of_the_name() -> None:
    assert scalable_path("topic://public/default/a%b") == "/admin/v2/scalable/public/default/a%25b"
