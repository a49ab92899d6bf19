"""Auto split/merge end to end on the real ``braid standalone`` command, with the Braid client.

The broker runs with short PIP-483 intervals and a low ingest threshold (``BRAID_scalableTopic*``
variables, as an operator would set them). A producer drives skewed keyed traffic hot: the topic
splits by itself, the first split cutting inside the hot key range rather than at the midpoint;
when the traffic stops the topic merges back to one segment by itself. A stream consumer with
cumulative acknowledgments reads throughout: every message arrives (no loss) and each key's
messages arrive in the order they were sent.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import braid
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.core.hashing import hash16
from tests.support.polling import wait_for

TOPIC = "topic://public/default/autoscaled"

AUTO_SCALE_ENV = {
    "BRAID_scalableTopicLoadReportInterval": "1s",  # rates over a 6 s window
    "BRAID_scalableTopicAutoScaleInterval": "1s",
    "BRAID_scalableTopicSplitCooldown": "2s",
    "BRAID_scalableTopicMergeCooldown": "3s",
    "BRAID_scalableTopicMergeWindow": "3s",
    "BRAID_scalableTopicSplitMsgRateInThreshold": "400",
    "BRAID_scalableTopicMergeMsgRateInThreshold": "100",
    "BRAID_scalableTopicMaxSegments": "4",
    "BRAID_scalableTopicGcIntervalSeconds": "2",
}


def keys_in(start: int, end: int, count: int, prefix: str) -> list[str]:
    found: list[str] = []
    i = 0
    while len(found) < count:
        key = f"{prefix}-{i}"
        if start <= hash16(key) <= end:
            found.append(key)
        i += 1
    return found


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneProcess]:
    process = StandaloneProcess.start_on_free_ports(
        tmp_path / "data", env={**os.environ, **AUTO_SCALE_ENV}, log_path=tmp_path / "sa.log"
    )
    try:
        yield process
    finally:
        if process.running:
            process.stop()


class Producing(threading.Thread):
    """Publishes ~1500 msg/s until stopped: 80 % of the messages on keys hashing into the top
    quarter of the ring; each key's values count up from 0."""

    def __init__(self, client: braid.Client) -> None:
        super().__init__(daemon=True)
        self.producer = client.create_producer(TOPIC)
        hot = keys_in(0xC000, 0xFFFF, 40, "hot")
        cold = keys_in(0x0000, 0xBFFF, 10, "cold")
        self.pattern = hot * 4 + cold * 4  # per round: 160 hot and 40 cold messages
        self.next_seq: dict[str, int] = {}
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                started = time.monotonic()
                keys = list(self.pattern)
                values = []
                for key in keys:
                    seq = self.next_seq.get(key, 0)
                    self.next_seq[key] = seq + 1
                    values.append(b"%d" % seq)
                self.producer.send_many(values, keys=keys)
                # Pace at ~1500 msg/s: the load generator's own rate, not a wait for a condition.
                self.stop_event.wait(max(0.0, len(keys) / 1500 - (time.monotonic() - started)))
        except BaseException as exc:  # reported by the test
            self.error = exc

    @property
    def sent(self) -> int:
        return sum(self.next_seq.values())


class Consuming(threading.Thread):
    """A stream consumer acknowledging cumulatively; records every (key, value) received."""

    def __init__(self, client: braid.Client) -> None:
        super().__init__(daemon=True)
        self.consumer = client.subscribe_stream(TOPIC, "audit", initial_position="earliest")
        self.received: dict[str, list[int]] = {}
        self.count = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                messages = self.consumer.receive_many(500, timeout=0.2)
                for message in messages:
                    assert message.key is not None
                    self.received.setdefault(message.key, []).append(int(message.value))
                self.count += len(messages)
                if messages:
                    self.consumer.acknowledge_cumulative(messages[-1])
        except BaseException as exc:
            self.error = exc


def active(layout: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in layout["segments"].values() if s["state"] == "ACTIVE"]


def test_traffic_splits_the_topic_where_the_load_is_and_silence_merges_it_back(
    standalone: StandaloneProcess,
) -> None:
    admin = AdminClient(standalone.web_url)
    admin.scalable_topics.create(TOPIC, segments=1)
    client = braid.Client(standalone.service_url, operation_timeout=30)
    producing = consuming = None
    try:
        consuming = Consuming(client)
        consuming.start()
        producing = Producing(client)
        producing.start()
        # Hot: the topic splits by itself, first where the load halves (inside the hot range).
        wait_for(
            lambda: len(active(admin.scalable_topics.get(TOPIC))) >= 2,
            within=60,
            message=lambda: f"a split; stats: {admin.scalable_topics.stats(TOPIC)['autoScale']}",
        )
        layout = admin.scalable_topics.get(TOPIC)
        first = sorted(
            (s for s in layout["segments"].values() if s["parentIds"] == [0]),
            key=lambda s: s["hashRange"]["start"],
        )
        split_at = first[1]["hashRange"]["start"]
        assert 0xC000 < split_at <= 0xFFFF, f"split at 0x{split_at:04x}, not where the load is"
        # Keep the load on for ~4000 more messages (the children may split again), watching
        # how many segments are active at most.
        peak = [len(active(layout))]
        more = producing.sent + 4000

        def loaded_long_enough() -> bool:
            peak[0] = max(peak[0], len(active(admin.scalable_topics.get(TOPIC))))
            return producing.sent >= more or producing.error is not None

        wait_for(loaded_long_enough, within=60, message="4000 more messages published")
        producing.stop_event.set()
        producing.join(30)
        assert producing.error is None, producing.error
        # Silence: the topic merges back to one segment by itself.
        wait_for(
            lambda: len(active(admin.scalable_topics.get(TOPIC))) == 1,
            within=120,
            interval=0.5,
            message=lambda: (
                f"merging back; stats: {admin.scalable_topics.stats(TOPIC)['autoScale']}"
            ),
        )
        sent = producing.sent
        wait_for(
            lambda: consuming.count >= sent or consuming.error is not None,
            within=120,
            message=lambda: f"{sent} messages, {consuming.count} received",
        )
        assert consuming.error is None, consuming.error
        # No loss and per-key order: first deliveries per key are 0, 1, 2, ... in order.
        for key, expected in producing.next_seq.items():
            values = consuming.received.get(key, [])
            first_seen: list[int] = []
            seen: set[int] = set()
            for value in values:
                if value not in seen:
                    seen.add(value)
                    first_seen.append(value)
            assert first_seen == list(range(expected)), f"key {key}: order or loss"
        stats = admin.scalable_topics.stats(TOPIC)["autoScale"]
        assert stats["counters"]["autoSplits"] >= 1
        assert stats["counters"]["autoMerges"] == stats["counters"]["autoSplits"]
        metrics = admin.metrics()
        assert f'pulsar_scalable_topic_active_segments{{topic="{TOPIC}"}} 1.0' in metrics
        print(
            f"\nsent {sent} messages; splits {stats['counters']['autoSplits']} (peak {peak[0]} "
            f"active), first split at 0x{split_at:04x}; merges {stats['counters']['autoMerges']}"
        )
    finally:
        for worker in (producing, consuming):
            if worker is not None:
                worker.stop_event.set()
                worker.join(30)
        client.close()
        admin.close()
