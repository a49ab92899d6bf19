"""A controller killed between any two steps of a split or merge: the next leader rolls forward.

For each cut point of ADR 0021 the first broker's controller dies right after that
step (its step hook raises and the broker's control plane closes, as a crash would end its
session); a second broker then takes over the topic. Checks: the operation completes exactly as
planned, its record is gone, every message acknowledged before the cut is still readable on the
parent, and every child has the subscription's cursor (so nothing written to it can be missed).
"""

from __future__ import annotations

import pytest

from braid.core.names import SegmentTopicName, TopicName
from braid.scalable.controller import STEPS
from braid.scalable.resources import SubscriptionType
from tests.support.controller_faults import ControllerKilled, kill_at
from tests.support.polling import eventually
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import ScalableStack, second_service
from tests.support.segment_io import drain, produce

TOPIC = TopicName.parse("topic://public/default/orders")


def name_of(stack_layout: object, segment_id: int) -> str:
    info = stack_layout.segment(segment_id)  # type: ignore[attr-defined]
    return str(SegmentTopicName.of(TOPIC, info.hash_range, segment_id))


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("kind", ["split", "merge"])
async def test_the_next_leader_completes_an_operation_cut_after_any_step(
    stack: ScalableStack, kind: str, step: str
) -> None:
    await stack.scalable.create_topic(TOPIC, 2)
    await stack.scalable.create_subscription(TOPIC, "s", SubscriptionType.STREAM, earliest=True)
    before = await stack.scalable.get_layout(TOPIC)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await produce(raw, name_of(before, 0), [b"a0", b"a1"])
        await produce(raw, name_of(before, 1), [b"b0"])
        controller = await stack.scalable.controller(TOPIC)
        controller._step_hook = kill_at(step)  # the broker dies at this cut point
        with pytest.raises(ControllerKilled):
            if kind == "split":
                await stack.scalable.split(TOPIC, 0)
            else:
                await stack.scalable.merge(TOPIC, [0, 1])
        await stack.scalable.release_controller(TOPIC)  # its session ends with it

        other = await second_service(stack, broker_url="pulsar://127.0.0.1:2")
        try:
            successor = await other.scalable.controller(TOPIC)
            await eventually(lambda: successor.is_leader, message="the successor to lead")
            await successor.wait_ready()
            after = await other.scalable.get_layout(TOPIC)
            assert await other.scalable.resources.get_operation(TOPIC) is None
            assert after.epoch == 1
            if kind == "split":
                assert [s.segment_id for s in after.active_segments] == [2, 3, 1]
                parents, children = [0], [2, 3]
            else:
                assert [s.segment_id for s in after.active_segments] == [2]
                parents, children = [0, 1], [2]
            for pid in parents:
                topic = await stack.broker.service.get_or_create_topic(
                    name_of(after, pid), create=False
                )
                assert topic.is_terminated
            for cid in children:
                topic = await stack.broker.service.get_or_create_topic(
                    name_of(after, cid), create=False
                )
                assert "s" in topic.subscriptions and not topic.is_terminated
            # Nothing acknowledged before the cut is lost.
            assert await drain(raw, name_of(after, 0), "s", 2) == [b"a0", b"a1"]
            assert await drain(raw, name_of(after, 1), "s", 1) == [b"b0"]
        finally:
            await other.close()
    finally:
        await raw.close()


async def test_a_broker_starting_with_an_unfinished_operation_resumes_it_by_itself(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    controller = await stack.scalable.controller(TOPIC)
    controller._step_hook = kill_at("parents-terminated")
    with pytest.raises(ControllerKilled):
        await stack.scalable.split(TOPIC, 0)
    await stack.scalable.release_controller(TOPIC)
    # No client asks for the topic: the new broker's start-up scan finds the record.
    other = await second_service(stack, broker_url="pulsar://127.0.0.1:3")
    try:
        assert await other.scalable.resources.get_operation(TOPIC) is None
        assert (await other.scalable.get_layout(TOPIC)).epoch == 1
    finally:
        await other.close()
