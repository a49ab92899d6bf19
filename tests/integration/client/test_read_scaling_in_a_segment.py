"""PIP-460 "Read-side scaling within a range" / PIP-486 "Scalable Key-Shared Consumption", with
Braid's client on ``topic://`` against a real broker with the scalable-topic layer.

The broker gives every segment of a new topic four entry buckets (``scalableTopicEntryBuckets``)
and advertises them in the DAG; the producer then batches by bucket and stamps its entries. Stream
consumers of one subscription on a one-segment topic - two, then a third joining under load: the
controller lets those that would be idle share the segment by bucket, the broker dispatches
whole entries by bucket, and the auto-scaler, seeing consumers outnumber segments while the
segment's write rate warrants no split, does not split (ADR 0055).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import braid
from braid.core.names import TopicName
from tests.integration.client.conftest import ScalableBroker, StepGate
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)

KEYS = [f"key-{i}" for i in range(48)]
MESSAGES = 6000


@pytest.fixture(scope="module")
def bucket_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScalableBroker]:
    data_dir: Path = tmp_path_factory.mktemp("braid-buckets")
    broker = ScalableBroker(data_dir, StepGate(), scalable_topic_entry_buckets=4).start()
    try:
        yield broker
    finally:
        broker.stop()


class Recorder:
    """Receives on one Stream consumer in a thread, acknowledging as it goes."""

    def __init__(
        self, consumer: braid.StreamConsumer, log: list[tuple[str, str, int]], lock: threading.Lock
    ) -> None:
        self.consumer = consumer
        self.name = ""
        self.count = 0
        self._log = log
        self._lock = lock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, name: str) -> Recorder:
        self.name = name
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self.consumer.receive_many(200, timeout=0.05)
            if not batch:
                continue
            with self._lock:
                for message in batch:
                    key, _, seq = message.value.decode().partition(":")
                    self._log.append((self.name, key, int(seq)))
                self.count += len(batch)
            self.consumer.acknowledge_cumulative(batch[-1])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_pip460_read_side_scaling_within_a_range_consumers_share_a_segment_by_bucket_no_split(
    bucket_broker: ScalableBroker,
) -> None:
    topic = "topic://public/default/read-scaling"
    name = TopicName.parse(topic)
    bucket_broker.call(bucket_broker.scalable.create_topic(name, 1))
    log: list[tuple[str, str, int]] = []
    lock = threading.Lock()
    recorders: list[Recorder] = []
    with braid.Client(bucket_broker.service_url, operation_timeout=15) as client:
        producer = client.create_producer(topic)
        try:

            def join(i: int) -> None:
                consumer = client.subscribe_stream(
                    topic, "rs", consumer_name=f"c{i}", initial_position="earliest"
                )
                recorders.append(Recorder(consumer, log, lock).start(f"c{i}"))

            join(0)
            join(1)
            # Under load: keyed messages over many keys while the consumers share the segment;
            # a third consumer joins a third of the way in (buckets move while in flight).
            sent = 0
            seq = dict.fromkeys(KEYS, 0)
            started = time.monotonic()
            while sent < MESSAGES:
                if sent == MESSAGES // 3:
                    join(2)
                batch = []
                keys = []
                for _ in range(50):
                    key = KEYS[sent % len(KEYS)]
                    batch.append(f"{key}:{seq[key]}".encode())
                    keys.append(key)
                    seq[key] += 1
                    sent += 1
                producer.send_many(batch, keys=keys)
            producer.flush()

            def all_received() -> bool:
                with lock:
                    return len(log) >= MESSAGES

            wait_for(all_received, within=90, message=f"{MESSAGES} messages received")
            elapsed = time.monotonic() - started
            # No split: with the consumers still there, the auto-scaler prefers bucket sharing.
            layout = bucket_broker.call(bucket_broker.scalable.get_layout(name))
            assert layout.epoch == 0 and len(layout.active_segments) == 1
            assert layout.entry_buckets == 4
            stats = bucket_broker.call(bucket_broker.scalable.stats(name))
            decision = stats["autoScale"]["lastDecision"]
            assert decision["reason"] == "bucket_sharing", decision
            assert stats["entryBuckets"] == 4
            assert stats["subscriptions"]["rs"]["coordinator"]["sharedSegments"] == [0]
        finally:
            for recorder in recorders:
                recorder.stop()
            producer.close()
            for recorder in recorders:
                recorder.consumer.close()

    with lock:
        received = list(log)
    # Every consumer was busy.
    per_consumer = {r.name: r.count for r in recorders}
    assert all(count > 0 for count in per_consumer.values()), per_consumer
    # Exactly once each, and per key in order across consumers (a moved bucket waited for its
    # previous owner's acknowledgements).
    assert len(received) == MESSAGES, (len(received), per_consumer)
    by_key: dict[str, list[int]] = {}
    for _, key, number in received:
        by_key.setdefault(key, []).append(number)
    for key, numbers in by_key.items():
        assert numbers == sorted(numbers) == list(range(len(numbers))), key
    print(f"{MESSAGES} messages over 3 consumers in {elapsed:.1f}s: {per_consumer}")
