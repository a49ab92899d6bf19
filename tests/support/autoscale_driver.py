"""A scalable stack with PIP-483's loops on a ManualClock, and real traffic to drive them.

The scalable layer (controller, load reporter, auto-scaler) and the metadata store share one
``ManualClock`` (a load record's modified time and the controller's "now" agree); storage keeps
real time. :class:`AutoScaleDriver` publishes real messages to the topic's active segments (keys
routed by the layout, as a producer would) and consumes them, advances the clock one report
interval at a time and waits until every report and evaluation that became due has finished.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from braid.clock import ManualClock
from braid.core.autoscale_policy import AutoScalePolicy
from braid.core.hashing import hash16
from braid.core.layout import SegmentLayout
from braid.core.names import SegmentTopicName, TopicName
from braid.core.segment_info import SegmentInfo
from braid.scalable.autoscaler import AutoScaler, DecisionRecord
from braid.scalable.load_reporter import SegmentLoadReporter
from braid.scalable.service import ScalableTopicSettings
from tests.support.polling import eventually
from tests.support.raw_client import RawClient
from tests.support.scalable_stack import ScalableStack, open_scalable_stack
from tests.support.segment_io import drain, produce

TOPIC = TopicName.parse("topic://public/default/orders")
_subs = itertools.count()

#: Thresholds small enough that a few dozen messages per interval make a segment hot.
TEST_POLICY = AutoScalePolicy(
    split_msg_rate_in_threshold=5.0,
    merge_msg_rate_in_threshold=1.0,
)


def keys_in(start: int, end: int, count: int, prefix: str = "key") -> list[str]:
    """``count`` distinct keys whose hash16 lies in ``[start, end]``."""
    found = []
    for i in itertools.count():
        key = f"{prefix}-{i}"
        if start <= hash16(key) <= end:
            found.append(key)
            if len(found) == count:
                return found
    raise AssertionError("unreachable")


def segment_topic(segment: SegmentInfo, topic: TopicName = TOPIC) -> str:
    return str(SegmentTopicName.of(topic, segment.hash_range, segment.segment_id))


async def open_auto_stack(
    data_dir: Path, clock: ManualClock, policy: AutoScalePolicy = TEST_POLICY, **settings: Any
) -> ScalableStack:
    return await open_scalable_stack(
        data_dir,
        scalable_clock=clock,
        metadata_clock=clock,
        settings=ScalableTopicSettings(gc_interval_s=0, auto_scale=policy, **settings),
        # Every entry's key is sampled, so a few dozen messages make a histogram.
        scalable_topic_key_hash_sample_interval=1,
    )


class AutoScaleDriver:
    """Drives one stack's PIP-483 loops through simulated time."""

    def __init__(self, stack: ScalableStack, clock: ManualClock, topic: TopicName = TOPIC) -> None:
        self.stack = stack
        self.clock = clock
        self.topic = topic
        self.raw: RawClient | None = None

    async def connect(self) -> RawClient:
        if self.raw is None:
            self.raw = await RawClient.open("127.0.0.1", self.stack.broker.service.port)
        return self.raw

    async def close(self) -> None:
        if self.raw is not None:
            await self.raw.close()

    @property
    def reporter(self) -> SegmentLoadReporter:
        reporter = self.stack.scalable.auto_scale.reporter
        assert reporter is not None
        return reporter

    @property
    def scaler(self) -> AutoScaler:
        scaler = self.stack.scalable.auto_scale.scaler(self.topic)
        assert scaler is not None
        return scaler

    @property
    def decision(self) -> DecisionRecord:
        assert self.scaler.last_decision is not None
        return self.scaler.last_decision

    @property
    def layout(self) -> SegmentLayout:
        controller = self.stack.scalable.local_controller(self.topic)
        assert controller is not None
        return controller.layout

    def active_ids(self) -> list[int]:
        return [s.segment_id for s in self.layout.active_segments]

    async def settle(self) -> None:
        """Let the timers that came due fire, then wait for every report and evaluation."""
        for _ in range(5):
            await asyncio.sleep(0)
        auto_scale = self.stack.scalable.auto_scale
        await eventually(
            lambda: self.reporter.idle and all(s.idle for s in auto_scale.scalers()),
            message="load reports and auto-scale evaluations to finish",
        )

    async def advance(self, seconds: float, step: float = 10.0) -> None:
        """Move time forward one report interval at a time, settling after each step."""
        while seconds > 1e-9:
            delta = min(step, seconds)
            self.clock.advance(delta)
            seconds -= delta
            await self.settle()

    async def publish(self, keys: Sequence[str], payload: bytes = b"x") -> None:
        """One message per key, each to the active segment that owns the key now."""
        raw = await self.connect()
        by_segment: dict[int, list[str]] = {}
        layout = self.layout
        for key in keys:
            by_segment.setdefault(layout.find_active_segment(hash16(key)).segment_id, []).append(
                key
            )
        for segment_id, segment_keys in by_segment.items():
            name = segment_topic(layout.segment(segment_id), self.topic)
            await produce(raw, name, [payload] * len(segment_keys), keys=segment_keys)

    async def consume(self, segment: SegmentInfo, count: int) -> None:
        """Read ``count`` messages of a segment on a fresh subscription (dispatch traffic)."""
        raw = await self.connect()
        await drain(raw, segment_topic(segment, self.topic), f"reader-{next(_subs)}", count)


__all__ = [
    "TEST_POLICY",
    "TOPIC",
    "AutoScaleDriver",
    "keys_in",
    "open_auto_stack",
    "segment_topic",
]
