"""The console's traffic sampler on a ManualClock: rates from the broker's cumulative counters,
a scalable topic's numbers summed over its segments, and sampling only while someone watches.

The topics here are plain holders of the same counters and gauges a loaded broker topic has
(``TrafficCounters`` is the broker's own class); ``tests/integration/admin/test_console_api.py``
samples a real broker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from braid.admin.console.traffic import TrafficSampler
from braid.broker.rates import TrafficCounters
from braid.clock import ManualClock
from tests.support.polling import eventually


@dataclass
class _Cursor:
    entries: int

    def backlog(self) -> int:
        return self.entries


@dataclass
class _Subscription:
    cursor: _Cursor
    consumers: list[Any] = field(default_factory=list)


@dataclass
class _Ledger:
    total_size: int = 0


@dataclass
class _Topic:
    counters: TrafficCounters = field(default_factory=TrafficCounters)
    producers: dict[int, Any] = field(default_factory=dict)
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)
    ledger: _Ledger = field(default_factory=_Ledger)
    closed: bool = False


SEG_0 = "segment://public/default/orders/0000-7fff-0"
SEG_1 = "segment://public/default/orders/8000-ffff-1"


def test_rates_come_from_counter_deltas_and_segments_add_up_to_their_topic() -> None:
    clock = ManualClock()
    low, high = _Topic(), _Topic()
    low.subscriptions["audit"] = _Subscription(_Cursor(3), ["c1"])
    high.subscriptions["audit"] = _Subscription(_Cursor(4))
    classic = _Topic(ledger=_Ledger(100))
    topics = {SEG_0: low, SEG_1: high, "persistent://public/default/classic": classic}
    sampler = TrafficSampler(topics, clock, interval_s=2.0, window_s=10.0)
    sampler.sample()
    low.counters.messages_in += 20
    high.counters.messages_in += 60
    high.counters.bytes_out += 400
    clock.advance(2.0)
    snapshot = sampler.sample()
    scalable = snapshot.topics["topic://public/default/orders"]
    assert scalable.msg_rate_in == 40.0 and scalable.bytes_rate_out == 200.0
    assert scalable.backlog == 7 and scalable.consumers == 1
    assert scalable.subscriptions == {"audit": (7, 1)}
    doc = snapshot.topic_json("topic://public/default/orders")
    assert doc["segments"]["0"]["msgRateIn"] == 10.0 and doc["segments"]["1"]["msgRateIn"] == 30.0
    assert snapshot.topics["persistent://public/default/classic"].storage_size == 100
    # An unloaded topic leaves the next snapshot.
    del topics[SEG_1]
    clock.advance(2.0)
    assert set(sampler.sample().segments["topic://public/default/orders"]) == {0}


async def test_the_sampler_runs_only_while_someone_watches() -> None:
    clock = ManualClock()
    topic = _Topic()
    sampler = TrafficSampler({"persistent://public/default/t": topic}, clock, interval_s=2.0)
    assert not sampler.running
    seen: list[float] = []

    async def watch() -> None:
        async for snapshot in sampler.updates():
            seen.append(snapshot.topics["persistent://public/default/t"].msg_rate_in)
            if len(seen) == 2:
                return

    watcher = asyncio.ensure_future(watch())
    await eventually(lambda: len(seen) == 1)
    assert sampler.running
    topic.counters.messages_in += 10
    clock.advance(2.0)
    await asyncio.wait_for(watcher, 5)
    assert seen == [0.0, 5.0]
    assert not sampler.running  # the last watcher left
    sampler.close()
