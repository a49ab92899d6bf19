"""Sealed-segment garbage collection: past retention and drained by every subscription, from the
roots down, in one CAS; never with retention -1."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.broker.resources import RetentionPolicies
from braid.clock import ManualClock
from braid.core.names import SegmentTopicName, TopicName
from braid.scalable.resources import SubscriptionType
from braid.scalable.service import ScalableTopicSettings
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import ScalableStack, open_scalable_stack
from tests.support.segment_io import drain, produce

TOPIC = TopicName.parse("topic://public/default/orders")


@pytest.fixture
async def gc_stack(tmp_path: Path) -> AsyncIterator[tuple[ScalableStack, ManualClock]]:
    clock = ManualClock(start_ms=1_800_000_000_000)
    stack = await open_scalable_stack(
        tmp_path / "b", scalable_clock=clock, settings=ScalableTopicSettings(gc_interval_s=0)
    )
    try:
        yield stack, clock
    finally:
        await stack.close()


async def set_retention(stack: ScalableStack, minutes: int) -> None:
    await stack.broker.resources.update_namespace_policies(
        "public",
        "default",
        lambda p: dataclasses.replace(p, retention=RetentionPolicies(minutes, -1)),
    )


def name(layout: object, segment_id: int) -> str:
    info = layout.segment(segment_id)  # type: ignore[attr-defined]
    return str(SegmentTopicName.of(TOPIC, info.hash_range, segment_id))


async def test_a_sealed_segment_is_pruned_once_retention_passed_and_every_sub_drained(
    gc_stack: tuple[ScalableStack, ManualClock],
) -> None:
    stack, clock = gc_stack
    await set_retention(stack, 10)
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.create_subscription(TOPIC, "s", SubscriptionType.STREAM, earliest=True)
    first = await stack.scalable.get_layout(TOPIC)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await produce(raw, name(first, 0), [b"x"])
        await stack.scalable.split(TOPIC, 0)
        controller = stack.scalable.local_controller(TOPIC)
        assert controller is not None
        clock.advance(11 * 60)
        assert await controller.collect_garbage() == []  # "s" still has the message to read
        await drain(raw, name(first, 0), "s", 1)
        clock.advance(1)
        assert await controller.collect_garbage() == [0]
        layout = await stack.scalable.get_layout(TOPIC)
        assert 0 not in layout.segments and layout.epoch == 2
        assert layout.segment(1).parent_ids == () and layout.segment(2).parent_ids == ()
        assert not await stack.broker.service.topic_exists(name(first, 0))
    finally:
        await raw.close()


async def test_nothing_is_pruned_before_retention_passed(
    gc_stack: tuple[ScalableStack, ManualClock],
) -> None:
    stack, clock = gc_stack
    await set_retention(stack, 10)
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.split(TOPIC, 0)
    controller = stack.scalable.local_controller(TOPIC)
    assert controller is not None
    clock.advance(9 * 60)
    assert await controller.collect_garbage() == []
    clock.advance(61)
    assert await controller.collect_garbage() == [0]


async def test_negative_retention_never_prunes(gc_stack: tuple[ScalableStack, ManualClock]) -> None:
    stack, clock = gc_stack
    await set_retention(stack, -1)
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.split(TOPIC, 0)
    controller = stack.scalable.local_controller(TOPIC)
    assert controller is not None
    clock.advance(10**6)
    assert await controller.collect_garbage() == []


async def test_pruning_goes_from_the_roots_down(
    gc_stack: tuple[ScalableStack, ManualClock],
) -> None:
    stack, clock = gc_stack
    await set_retention(stack, 0)
    await stack.scalable.create_topic(TOPIC, 1)
    await stack.scalable.create_subscription(TOPIC, "s", SubscriptionType.STREAM, earliest=True)
    first = await stack.scalable.get_layout(TOPIC)
    raw = await RawClient.open("127.0.0.1", stack.broker.service.port)
    try:
        await produce(raw, name(first, 0), [b"root"])
        await stack.scalable.split(TOPIC, 0)  # 1, 2
        await stack.scalable.split(TOPIC, 1)  # 3, 4: segment 1 is sealed, empty, drained
        controller = stack.scalable.local_controller(TOPIC)
        assert controller is not None
        clock.advance(1)
        # Segment 1 is drained but its parent 0 is not: neither goes.
        assert await controller.collect_garbage() == []
        await drain(raw, name(first, 0), "s", 1)
        before = (await stack.scalable.get_layout(TOPIC)).epoch
        assert await controller.collect_garbage() == [0, 1]
        layout = await stack.scalable.get_layout(TOPIC)
        assert sorted(layout.segments) == [2, 3, 4]
        assert layout.epoch == before + 1  # one change for clients, not one per segment
    finally:
        await raw.close()
