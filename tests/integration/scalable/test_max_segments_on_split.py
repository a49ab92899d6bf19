"""``scalableTopicMaxSegments`` holds on split (issue 27, finding 4): admin splits stop at the cap
with the key named, and the controller's split - what the auto-scaler's load-driven and
consumer-driven splits call - refuses past the topic's effective cap too."""

from __future__ import annotations

import httpx
import pytest

from braid.admin.app import create_app
from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.scalable.errors import MaxSegmentsReached
from tests.support.scalable_stack import ScalableStack

#: The admin API takes a POST only as JSON (its cross-site guard).
JSON = {"Content-Type": "application/json"}

TOPIC = TopicName.parse("topic://public/default/capped")
PATH = "/admin/v2/scalable/public/default/capped"


def _admin(stack: ScalableStack) -> httpx.AsyncClient:
    broker = stack.broker
    app = create_app(broker.config, broker.resources, broker.service, stack.scalable)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


@pytest.mark.timeout(120)
async def test_admin_splits_stop_at_scalable_topic_max_segments_naming_the_key(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 1)
    cap = (
        await stack.scalable.auto_scale.policies.resolve(TOPIC, await _layout(stack))
    ).max_segments
    assert cap == 64  # the broker default the finding hit
    async with _admin(stack) as admin:
        # The finding as written: up to 500 admin splits in a row (it left 501 segments).
        accepted = 0
        refusals: list[httpx.Response] = []
        for _ in range(500):
            layout = await _layout(stack)
            segment = min(layout.active_segments, key=lambda s: s.segment_id)
            response = await admin.post(f"{PATH}/split/{segment.segment_id}", headers=JSON)
            if response.status_code == 200:
                accepted += 1
                continue
            refusals.append(response)
            if len(refusals) == 5:
                break
    assert accepted == cap - 1
    assert len((await _layout(stack)).active_segments) == cap
    for refused in refusals:
        assert refused.status_code == 409, refused.text
        assert "scalableTopicMaxSegments (64)" in refused.json()["reason"]


@pytest.mark.timeout(60)
async def test_the_controllers_split_refuses_past_the_topics_effective_cap(
    stack: ScalableStack,
) -> None:
    await stack.scalable.create_topic(TOPIC, 3)
    # A topic override lower than what the topic has now (set after it grew): the auto-scaler
    # and a consumer-driven split both go through the controller's split, which refuses.
    await stack.scalable.auto_scale.policies.check_topic_override(TOPIC, {"maxSegments": 2})
    await stack.scalable.resources.update_layout(
        TOPIC, lambda layout: layout.with_auto_scale_policy({"maxSegments": 2})
    )
    controller = await stack.scalable.controller(TOPIC)
    first = min(s.segment_id for s in (await _layout(stack)).active_segments)
    with pytest.raises(MaxSegmentsReached, match=r"scalableTopicMaxSegments \(2\)"):
        await controller.split(first)
    assert len((await _layout(stack)).active_segments) == 3
    # Merging stays allowed, and once under the cap a split is accepted again.
    active = sorted((await _layout(stack)).active_segments, key=lambda s: s.hash_range)
    await controller.merge([s.segment_id for s in active])
    merged = min((await _layout(stack)).active_segments, key=lambda s: s.hash_range)
    await controller.split(merged.segment_id)
    assert len((await _layout(stack)).active_segments) == 2


async def _layout(stack: ScalableStack) -> SegmentLayout:
    return await stack.scalable.get_layout(TOPIC)
