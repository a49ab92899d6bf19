"""PIP-483 on a running broker: traffic -> load records -> the auto-scale loop -> splits, merges.

Time is a ManualClock shared by the scalable layer and the metadata store; storage keeps real
time. Every scenario drives real messages through the segment topics, lets the broker's
SegmentLoadReporter write the records, and advances to the auto-scaler's ticks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.hashing import hash16
from braid.core.segment_load import SegmentLoad
from braid.metadata.api import Notification, NotificationType
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.scalable.coordinator import ConsumerAssignmentView
from braid.scalable.resources import ScalableTopicResources, SubscriptionType
from tests.support.autoscale_driver import (
    TEST_POLICY,
    TOPIC,
    AutoScaleDriver,
    keys_in,
    open_auto_stack,
    segment_topic,
)
from tests.support.raw_client import request
from tests.support.scalable_stack import second_service
from tests.support.segment_io import _ids


class Connection:
    """The assignment pushes to one registered consumer's connection."""

    closed = False

    def send_assignment_update(self, consumer_id: int, assignment: ConsumerAssignmentView) -> None:
        pass


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def driver_for(
    tmp_path: Path, clock: ManualClock, policy: AutoScalePolicy = TEST_POLICY, segments: int = 1
) -> AutoScaleDriver:
    stack = await open_auto_stack(tmp_path / "broker", clock, policy)
    await stack.scalable.create_topic(TOPIC, segments)
    await stack.scalable.controller(TOPIC)
    driver = AutoScaleDriver(stack, clock)
    await driver.settle()
    return driver


@pytest.fixture
async def driver(tmp_path: Path, clock: ManualClock) -> AsyncIterator[AutoScaleDriver]:
    d = await driver_for(tmp_path, clock)
    try:
        yield d
    finally:
        await d.close()
        await d.stack.close()


async def register(driver: AutoScaleDriver, name: str, sub: str = "s") -> None:
    await driver.stack.scalable.register_consumer(
        str(TOPIC), sub, name, 1, SubscriptionType.STREAM, Connection()
    )
    await driver.settle()


# -- consumer-driven -----------------------------------------------------------------------------


async def test_a_consumer_driven_split_fires_on_registration_not_again_within_split_cooldown(
    driver: AutoScaleDriver,
) -> None:
    await register(driver, "c1")
    assert driver.active_ids() == [0]
    await register(driver, "c2")  # 2 consumers > 1 segment: split at once, no tick needed
    assert driver.active_ids() == [1, 2]
    assert (driver.decision.trigger, driver.decision.action) == ("membership", "split")
    assert driver.decision.reason == "consumer-driven"
    await driver.advance(20)
    await register(driver, "c3")  # within splitCooldown (60 s) of the first split
    assert driver.active_ids() == [1, 2]
    assert driver.decision.reason == "split_cooldown"
    await driver.advance(40)  # the follow-up evaluation splitCooldown after the split
    assert len(driver.active_ids()) == 3
    assert driver.decision.trigger in ("follow-up", "tick")
    assert driver.scaler.stats()["counters"]["autoSplits"] == 2


async def test_a_queue_only_topic_never_splits_on_consumer_count(driver: AutoScaleDriver) -> None:
    await driver.stack.scalable.create_subscription(TOPIC, "work", SubscriptionType.QUEUE)
    raw = await driver.connect()
    segment = segment_topic(driver.layout.segment(0))
    for consumer_id in range(3):  # three queue consumers on the one segment (Shared)
        request_id = next(_ids)
        answer = await request(
            raw,
            commands.subscribe(
                segment, "work", pb.CommandSubscribe.Shared, 7000 + consumer_id, request_id
            ),
            request_id,
        )
        assert answer.type == pb.BaseCommand.SUCCESS
    await driver.advance(180)
    assert driver.active_ids() == [0]
    assert driver.decision.action == "none"
    assert driver.scaler.stats()["counters"]["autoSplits"] == 0


# -- load-driven ---------------------------------------------------------------------------------

HOT_CASES = {
    "msgRateIn": dict(split_msg_rate_in_threshold=5.0, merge_msg_rate_in_threshold=1.0),
    "bytesRateIn": dict(split_bytes_rate_in_threshold=4_000.0, merge_bytes_rate_in_threshold=10.0),
    "msgRateOut": dict(split_msg_rate_out_threshold=5.0, merge_msg_rate_out_threshold=1.0),
    "bytesRateOut": dict(
        split_bytes_rate_out_threshold=4_000.0, merge_bytes_rate_out_threshold=10.0
    ),
}


@pytest.mark.parametrize("metric", sorted(HOT_CASES))
async def test_a_hot_segment_over_any_one_threshold_splits_on_the_next_tick(
    tmp_path: Path, clock: ManualClock, metric: str
) -> None:
    # Only the one metric's split threshold is low; every other stays at PIP-483's default.
    policy = AutoScalePolicy(**HOT_CASES[metric])  # type: ignore[arg-type]
    driver = await driver_for(tmp_path, clock, policy)
    try:
        await driver.advance(10)  # the reporter's first look at the segment (baseline)
        keys = [f"k{i}" for i in range(80)]
        for second in range(20, 70, 10):  # 80 messages of 1 kB per 10 s: 8 msg/s, 8 kB/s
            await driver.publish(keys, b"p" * 1000)
            if "Out" in metric:
                await driver.consume(driver.layout.segment(0), len(keys))
            if second == 60:
                load = driver.reporter.last_written(segment_topic(driver.layout.segment(0)))
                assert load is not None
                assert getattr(load, _attr(metric)) > policy.split_thresholds[_index(metric)]
                assert driver.active_ids() == [0]  # hot since t=20 s, but the tick is at 60 s
            await driver.advance(10)
        assert driver.active_ids() == [1, 2], driver.decision
        assert (driver.decision.trigger, driver.decision.reason) == ("tick", "load-driven")
    finally:
        await driver.close()
        await driver.stack.close()


def _attr(metric: str) -> str:
    return {"msgRateIn": "msg_rate_in", "bytesRateIn": "bytes_rate_in"}.get(
        metric, {"msgRateOut": "msg_rate_out", "bytesRateOut": "bytes_rate_out"}.get(metric, "")
    )


def _index(metric: str) -> int:
    return ["msgRateIn", "bytesRateIn", "msgRateOut", "bytesRateOut"].index(metric)


async def test_a_load_driven_split_cuts_where_skewed_keys_halve_the_load(
    driver: AutoScaleDriver,
) -> None:
    hot = keys_in(0xC000, 0xFFFF, 48, "hot")  # 4 of every 5 messages hash into the top quarter
    cold = keys_in(0x0000, 0xBFFF, 12, "cold")
    await driver.advance(10)
    for _ in range(5):  # 6 msg/s from t=10 s to the tick at 60 s
        await driver.publish(hot + cold)
        await driver.advance(10)
    assert driver.active_ids() == [1, 2], driver.decision
    low, high = (driver.layout.segment(i).hash_range for i in (1, 2))
    split_at = high.start
    assert driver.decision.split_hash == split_at
    assert 0xC000 < split_at <= 0xFFFF  # not the midpoint: inside the hot quarter
    below = sum(1 for k in hot + cold if hash16(k) < split_at)
    assert 0.3 <= below / 60 <= 0.7
    assert low.end == split_at - 1


async def test_max_segments_suppresses_a_wanted_split_and_counts_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    driver = await driver_for(
        tmp_path, clock, dataclasses.replace(TEST_POLICY, max_segments=2), segments=2
    )
    try:
        await driver.advance(10)
        for _ in range(5):  # tick at 60 s: segment 0 is hot, the topic is at maxSegments
            await driver.publish(keys_in(0, 0x7FFF, 80))
            await driver.advance(10)
        assert driver.active_ids() == [0, 1]
        assert driver.decision.reason == "max_segments"
        assert driver.scaler.stats()["counters"]["splitSuppressedMaxSegments"] == 1
    finally:
        await driver.close()
        await driver.stack.close()


# -- merges --------------------------------------------------------------------------------------


async def test_a_cold_pair_merges_only_after_the_merge_window_then_waits_for_the_cooldown(
    tmp_path: Path, clock: ManualClock
) -> None:
    policy = dataclasses.replace(
        TEST_POLICY, merge_window_ms=60_000, merge_cooldown_ms=300_000, min_segments=2
    )
    driver = await driver_for(tmp_path, clock, policy, segments=4)
    try:
        # t=10 the reporter's first look; t=20 every segment's record says 0 (cold since 20 s).
        await driver.advance(60)  # tick at 60 s: cold for 40 s only
        assert driver.decision.reason == "merge_window"
        assert driver.active_ids() == [0, 1, 2, 3]
        await driver.advance(60)  # tick at 120 s: cold for 100 s >= mergeWindow
        assert (driver.decision.action, driver.decision.segment_ids) == ("merge", (0, 1))
        assert driver.active_ids() == [4, 2, 3]
        merged_at = clock.now_ms()
        while clock.now_ms() - merged_at < 300_000 - 60_000:
            await driver.advance(60)
            assert driver.decision.reason == "merge_cooldown"
            assert len(driver.active_ids()) == 3
        await driver.advance(60)  # 300 s after the merge
        assert driver.decision.action == "merge"
        assert len(driver.active_ids()) == 2
        await driver.advance(600)  # at minSegments: nothing more
        assert len(driver.active_ids()) == 2
        assert driver.decision.reason == "min_segments"
        assert driver.scaler.stats()["counters"]["autoMerges"] == 2
    finally:
        await driver.close()
        await driver.stack.close()


async def test_max_dag_depth_suppresses_a_merge_and_counts_it(
    tmp_path: Path, clock: ManualClock
) -> None:
    policy = dataclasses.replace(TEST_POLICY, merge_window_ms=30_000, max_dag_depth=0)
    driver = await driver_for(tmp_path, clock, policy, segments=2)
    try:
        await driver.advance(120)
        assert driver.active_ids() == [0, 1]
        assert driver.decision.reason == "max_dag_depth"
        assert driver.scaler.stats()["counters"]["mergeSuppressedMaxDepth"] >= 1
    finally:
        await driver.close()
        await driver.stack.close()


async def test_traffic_resuming_restarts_the_merge_window(
    tmp_path: Path, clock: ManualClock
) -> None:
    policy = dataclasses.replace(TEST_POLICY, merge_window_ms=120_000)
    driver = await driver_for(tmp_path, clock, policy, segments=2)
    try:
        await driver.advance(110)  # both cold since t=20
        await driver.publish(["a"] * 4)  # a trickle (0.4 msg/s: still below the merge threshold)
        await driver.advance(10)  # rewritten at t=120 (crossing zero): cold since 120
        await driver.advance(120)
        assert driver.active_ids() == [0, 1]
        assert driver.decision.reason == "merge_window"
        await driver.advance(60)
        assert len(driver.active_ids()) == 1
    finally:
        await driver.close()
        await driver.stack.close()


# -- leadership ----------------------------------------------------------------------------------


async def test_a_new_leader_resumes_with_the_cooldown_seeded_from_the_layout(
    driver: AutoScaleDriver, clock: ManualClock
) -> None:
    await register(driver, "c1")
    await register(driver, "c2")
    assert driver.active_ids() == [1, 2]  # split at t0
    await driver.stack.scalable.release_controller(TOPIC)  # the leader resigns
    other = await second_service(
        driver.stack,
        clock=clock,
        # Long grace: the restored sessions of c1 and c2 stay while time passes.
        settings=dataclasses.replace(driver.stack.scalable.settings, consumer_session_grace_s=600),
    )
    try:
        controller = await other.scalable.controller(TOPIC)
        assert controller.is_leader and controller.last_split_at_ms is None
        scaler = other.scalable.auto_scale.scaler(TOPIC)
        assert scaler is not None and scaler.running
        await other.scalable.register_consumer(
            str(TOPIC), "s", "c3", 3, SubscriptionType.STREAM, Connection()
        )
        await scaler.wait_idle()
        # Within splitCooldown of the split the old leader made: no second split yet.
        assert len(controller.layout.active_segments) == 2
        assert scaler.last_decision is not None
        assert scaler.last_decision.reason == "split_cooldown"
        for _ in range(6):
            clock.advance(10)
            await driver.settle()
            await scaler.wait_idle()
        assert len(controller.layout.active_segments) == 3
    finally:
        await other.close()


async def test_losing_leadership_stops_both_loops_of_the_controller(
    driver: AutoScaleDriver,
) -> None:
    scaler = driver.scaler
    assert scaler.running
    await driver.stack.scalable.release_controller(TOPIC)
    assert not scaler.running
    assert driver.stack.scalable.auto_scale.scaler(TOPIC) is None


# -- the load reporter ---------------------------------------------------------------------------


async def test_a_steady_segment_writes_its_load_record_once_and_then_stays_silent(
    driver: AutoScaleDriver,
) -> None:
    store = driver.stack.broker.metadata
    path = ScalableTopicResources.segment_load_path(TOPIC, 0)
    writes: list[Notification] = []
    unregister = store.register_listener(
        lambda n: (
            writes.append(n)
            if n.path == path and n.type in (NotificationType.CREATED, NotificationType.MODIFIED)
            else None
        )
    )
    try:
        # This test watches the reporter alone: keep the auto-scaler from splitting the segment.
        await driver.stack.scalable.auto_scale.set_topic_override(TOPIC, {"enabled": False})
        await driver.advance(10)
        keys = [f"k{i}" for i in range(80)]
        for _ in range(12):  # two minutes at a steady 8 msg/s, the same keys every interval
            await driver.publish(keys)
            await driver.advance(10)
        await driver.settle()
        assert len(writes) == 1
        assert driver.reporter.writes_of(segment_topic(driver.layout.segment(0))) == 1
        found = await store.get(path)
        assert found is not None
        load = SegmentLoad.decode(found[0], found[1].modified_ms)
        assert load.msg_rate_in == 8.0 and load.key_hash_buckets
        # Traffic stops: the rate decays over the window, a few writes, then silence at zero.
        await driver.advance(120)
        after_stop = len(writes)
        assert 2 <= after_stop <= 6
        await driver.advance(300)
        assert len(writes) == after_stop
        found = await store.get(path)
        assert found is not None and SegmentLoad.decode(found[0], 0).msg_rate_in == 0.0
    finally:
        unregister()


async def test_deleting_the_topic_deletes_its_load_records_for_good(
    driver: AutoScaleDriver,
) -> None:
    await driver.advance(30)
    store = driver.stack.broker.metadata
    assert await store.get(ScalableTopicResources.segment_load_path(TOPIC, 0)) is not None
    await driver.stack.scalable.delete_topic(TOPIC, force=True)
    await driver.advance(30)
    assert await store.exists(ScalableTopicResources.topic_path(TOPIC)) is None
    assert await driver.stack.scalable.list_topics("public", "default") == []


async def test_stats_show_the_load_records_policy_and_last_decision(
    driver: AutoScaleDriver,
) -> None:
    await driver.advance(10)
    for _ in range(5):  # a steady 3 msg/s: written once at t=20 s
        await driver.publish([f"k{i}" for i in range(30)])
        await driver.advance(10)
    stats = await driver.stack.scalable.stats(TOPIC)
    load = stats["segments"]["0"]["load"]
    assert load["msgRateIn"] == 3.0 and load["ageMs"] == 40_000
    assert 0 < load["balancedSplitHash"] <= 0xFFFF
    section = stats["autoScale"]
    assert section["effectivePolicy"]["splitMsgRateInThreshold"] == 5.0
    assert section["overrides"] == {"namespace": None, "topic": None}
    assert section["lastDecision"]["reason"] == "min_segments"  # one segment, not hot
    assert section["running"] is True


async def test_a_topic_override_is_resolved_over_the_namespace_and_broker(
    driver: AutoScaleDriver,
) -> None:
    service = driver.stack.scalable.auto_scale
    await service.set_topic_override(TOPIC, {"enabled": False})
    await driver.advance(60)
    assert driver.decision.reason == "disabled"
    await driver.stack.broker.resources.update_namespace_policies(
        "public",
        "default",
        lambda p: dataclasses.replace(
            p, scalable_topic_auto_scale_policy={"splitMsgRateInThreshold": 0.5}
        ),
    )
    await service.remove_topic_override(TOPIC)
    await driver.advance(60)
    # The namespace's split threshold (0.5) is now below the broker's merge threshold (1.0):
    # the stored combination is invalid, so the topic is left alone and the reason says why.
    assert driver.decision.reason == "invalid_policy"
    assert "splitMsgRateInThreshold" in driver.decision.detail
    stats = await driver.stack.scalable.stats(TOPIC)
    assert stats["autoScale"]["effectivePolicy"] is None
    assert "splitMsgRateInThreshold" in stats["autoScale"]["policyError"]
