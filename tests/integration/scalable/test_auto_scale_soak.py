"""Flip-flop soak: load oscillating around the thresholds for hours of simulated time yields a
bounded number of structural changes (PIP-483's three guards: the dead band between split and
merge thresholds, the asymmetric cooldowns with the merge window, and maxDagDepth).

Real traffic through the broker (uniform keys over the ring, each message to the segment that owns
its key), the real load reporter and auto-scaler, on a ManualClock advanced 10 s at a time. Rates
are scaled down (split above 0.5 msg/s, merge below 0.1 msg/s) so hours cost a few thousand
messages. Each scenario prints its count of structural changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from braid.clock import ManualClock
from braid.core.autoscale_policy import AutoScalePolicy
from tests.support.autoscale_driver import TOPIC, AutoScaleDriver, open_auto_stack

SOAK_POLICY = AutoScalePolicy(split_msg_rate_in_threshold=0.5, merge_msg_rate_in_threshold=0.1)
KEYS = [f"soak-{i}" for i in range(97)]


async def soak(
    tmp_path: Path,
    policy: AutoScalePolicy,
    rate_at_minute: Callable[[int], float],
    minutes: int,
    segments: int = 1,
) -> tuple[int, int, list[int]]:
    """Run ``minutes`` of simulated traffic; returns (auto splits, auto merges, active counts
    at every tick)."""
    clock = ManualClock()
    stack = await open_auto_stack(tmp_path / "broker", clock, policy)
    driver = AutoScaleDriver(stack, clock)
    try:
        await stack.scalable.create_topic(TOPIC, segments)
        await stack.scalable.controller(TOPIC)
        await driver.settle()
        owed = 0.0
        cursor = 0
        active_counts = []
        for step in range(minutes * 6):
            owed += rate_at_minute(step // 6) * 10
            count = int(owed)
            owed -= count
            if count:
                keys = [KEYS[(cursor + i) % len(KEYS)] for i in range(count)]
                cursor += count
                await driver.publish(keys)
            await driver.advance(10)
            if step % 6 == 5:
                active_counts.append(len(driver.active_ids()))
        counters = driver.scaler.stats()["counters"]
        return counters["autoSplits"], counters["autoMerges"], active_counts
    finally:
        await driver.close()
        await stack.close()


@pytest.mark.slow
async def test_load_flapping_around_the_split_threshold_splits_once(tmp_path: Path) -> None:
    """0.6 and 0.4 msg/s alternating every minute for two hours: the 60 s rolling rate crosses
    0.5 now and then, one split fires, and the halves (~0.25 msg/s each) sit in the dead band."""
    splits, merges, _ = await soak(
        tmp_path, SOAK_POLICY, lambda minute: 0.6 if minute % 2 == 0 else 0.4, minutes=120
    )
    print(f"\nflapping around the split threshold, 120 min: {splits} splits, {merges} merges")
    assert splits + merges <= 2
    assert merges == 0


@pytest.mark.slow
async def test_load_flapping_around_the_merge_threshold_never_merges(tmp_path: Path) -> None:
    """A pair whose load keeps moving around the merge threshold is rewritten whenever it moves
    by more than 25 %, so it never stays cold for a whole merge window: no merge, no churn."""
    splits, merges, _ = await soak(
        tmp_path,
        SOAK_POLICY,
        lambda minute: 0.3 if minute % 2 == 0 else 0.1,
        minutes=120,
        segments=2,
    )
    print(f"\nflapping around the merge threshold, 120 min: {splits} splits, {merges} merges")
    assert splits == 0
    assert merges <= 1


@pytest.mark.slow
async def test_slow_hot_and_silent_cycles_are_bounded_by_the_cooldowns_and_dag_depth(
    tmp_path: Path,
) -> None:
    """Hot (0.8 msg/s) for 15 min then silent for 15 min, four hours. Each cycle may split and
    merge back once; maxDagDepth=2 then stops merges for the lineage, so the churn ends."""
    policy = dataclasses.replace(SOAK_POLICY, max_dag_depth=2)
    splits, merges, active = await soak(
        tmp_path, policy, lambda minute: 0.8 if (minute // 15) % 2 == 0 else 0.0, minutes=240
    )
    print(
        f"\nhot/silent cycles of 30 min, 240 min: {splits} splits, {merges} merges; "
        f"active segments at the end {active[-1]}"
    )
    assert merges <= 2  # the lineage's merge budget
    assert splits <= merges + 2  # once merges stop, the split children stay split
    assert splits + merges <= 6
