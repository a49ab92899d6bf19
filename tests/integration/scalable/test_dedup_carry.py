"""PIP-460 "Exactly-once": the deduplication state a split or merge carries to the children is
complete after a controller failover at any cut point (ADR 0055).

The first broker's controller dies right after a step (as in ``test_operation_recovery.py``); a
second broker takes the topic over and rolls the operation forward. Whatever step it died at,
every child then knows, per producer, the highest sequence id its parents stored - by the key's
range for a merge - and a repeated carry changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from braid.core.hashing import hash16
from braid.core.names import SegmentTopicName, TopicName
from braid.scalable.controller import STEPS
from braid.scalable.sequence_carry import carry_sequence_ids
from tests.support.controller_faults import ControllerKilled, kill_at
from tests.support.polling import eventually
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import open_scalable_stack, second_service
from tests.support.segment_io import produce

TOPIC = TopicName.parse("topic://public/default/eos")

pytestmark = pytest.mark.timeout(120)


def name_of(layout: object, segment_id: int) -> str:
    info = layout.segment(segment_id)  # type: ignore[attr-defined]
    return str(SegmentTopicName.of(TOPIC, info.hash_range, segment_id))


def key_for(layout: object, segment_id: int) -> str:
    info = layout.segment(segment_id)  # type: ignore[attr-defined]
    return next(f"k{i}" for i in range(100_000) if info.hash_range.contains(hash16(f"k{i}")))


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("kind", ["split", "merge"])
async def test_pip460_exactly_once_children_inherit_sequence_ids_after_a_failover_at_any_step(
    tmp_path: Path, kind: str, step: str
) -> None:
    stack = await open_scalable_stack(tmp_path / "broker", broker_deduplication_enabled=True)
    try:
        await stack.scalable.create_topic(TOPIC, 2)
        before = await stack.scalable.get_layout(TOPIC)
        keys = {sid: key_for(before, sid) for sid in (0, 1)}
        raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
        try:
            await produce(raw, name_of(before, 0), [b"a0", b"a1", b"a2"], key=keys[0])
            await produce(raw, name_of(before, 1), [b"b0"], key=keys[1])
        finally:
            await raw.close()
        stored: dict[int, dict[str, int]] = {}
        for sid in (0, 1):
            parent = await stack.broker.service.get_or_create_topic(
                name_of(before, sid), create=False
            )
            assert parent.dedup is not None
            stored[sid] = dict(parent.dedup.persisted)
        controller = await stack.scalable.controller(TOPIC)
        controller._step_hook = kill_at(step)
        with pytest.raises(ControllerKilled):
            if kind == "split":
                await stack.scalable.split(TOPIC, 0)
            else:
                await stack.scalable.merge(TOPIC, [0, 1])
        await stack.scalable.release_controller(TOPIC)

        other = await second_service(stack, broker_url="pulsar://127.0.0.1:2")
        try:
            successor = await other.scalable.controller(TOPIC)
            await eventually(lambda: successor.is_leader, message="the successor to lead")
            await successor.wait_ready()
            after = await other.scalable.get_layout(TOPIC)
            children = [2, 3] if kind == "split" else [2]
            parents = [0] if kind == "split" else [0, 1]
            for cid in children:
                child = await stack.broker.service.get_or_create_topic(
                    name_of(after, cid), create=False
                )
                dedup = child.dedup
                assert dedup is not None
                for pid in parents:
                    ((name, highest),) = stored[pid].items()
                    inherited = dedup.inherited
                    assert inherited.highest(name) >= highest
                    if after.segment(cid).hash_range.contains(hash16(keys[pid])):
                        assert inherited.floor(name, hash16(keys[pid])) == highest
                    assert dedup.last_sequence_id(name) >= highest
                # Carrying again (another roll-forward) changes nothing.
                state = dedup.inherited
                await carry_sequence_ids(
                    stack.scalable.segments,
                    TOPIC,
                    [after.segment(p) for p in parents],
                    [after.segment(cid)],
                )
                assert dedup.inherited == state
        finally:
            await other.close()
    finally:
        await stack.close()
