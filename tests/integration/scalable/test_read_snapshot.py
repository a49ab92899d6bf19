"""The read snapshot (``GET .../positions``): a scalable topic's DAG and the last stored entry of
each active segment, of one epoch - also when a split lands between reading the DAG and the
positions (the interleaving a Spark AvailableNow query once met, ending 281,400 rows short)."""

from __future__ import annotations

import pytest

from braid.core.names import SegmentTopicName, TopicName
from braid.scalable.read_snapshot import read_snapshot
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import ScalableStack
from tests.support.segment_io import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = TopicName.parse("topic://public/default/snapshot")


def segment_name(layout: object, segment_id: int) -> str:
    info = layout.segment(segment_id)  # type: ignore[attr-defined]
    return str(SegmentTopicName.of(TOPIC, info.hash_range, segment_id))


async def test_each_active_segment_reports_its_last_entry_and_an_empty_one_none(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    layout = await stack.scalable.get_layout(TOPIC)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await produce(raw, segment_name(layout, 0), [b"a", b"b", b"c"])
    finally:
        await raw.close()
    ledger = (await stack.broker.service.get_or_create_topic(segment_name(layout, 0))).ledger

    snapshot = await stack.scalable.read_snapshot(TOPIC)

    assert snapshot["topic"] == str(TOPIC) and snapshot["epoch"] == 0
    assert snapshot["segments"]["0"] == {
        "parentIds": [],
        "active": True,
        "lastConfirmed": [ledger.ledgers[-1].ledger_id, 2],  # three entries: 0, 1, 2
    }
    assert snapshot["segments"]["1"] == {"parentIds": [], "active": True, "lastConfirmed": None}


async def test_a_split_between_the_dag_and_the_positions_gives_the_later_epoch(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    layout = await stack.scalable.get_layout(TOPIC)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await produce(raw, segment_name(layout, 0), [b"before"] * 5)
    finally:
        await raw.close()
    splits = []

    async def split_once() -> None:
        if not splits:
            splits.append(await stack.scalable.split(TOPIC, 0))

    snapshot = await read_snapshot(
        stack.scalable.resources, stack.scalable.segments, TOPIC, between=split_once
    )

    assert splits
    assert snapshot["epoch"] == 1
    # Segment 0 is sealed (read to its end, no position), its two children are there - not
    # segment 0 "active with five entries" and no children.
    assert snapshot["segments"]["0"] == {"parentIds": [], "active": False, "lastConfirmed": None}
    children = {sid: s for sid, s in snapshot["segments"].items() if s["parentIds"] == [0]}
    assert len(children) == 2
    assert all(s["active"] and s["lastConfirmed"] is None for s in children.values())
