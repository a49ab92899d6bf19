"""Issue 10 acceptance on a real ``braid standalone`` child process (one per module): 3
producers x 200 keys with per-key sequence numbers while the topic is split and merged through
the admin API, consumed by

* 3 Stream consumers of one subscription joining and leaving mid-run: every acknowledged
  message is delivered at least once, no key is ever out of order - per consumer and across the
  hand-over of a segment from one consumer to the next (for each key, the sequence of first
  deliveries increases) - and no exception reaches the application;
* 3 Queue consumers joining and leaving: nothing acknowledged is lost;
* a Checkpoint consumer whose checkpoint, captured mid-run and restored after two further
  splits, reads exactly the messages it had not delivered yet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import braid
from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess
from tests.integration.e2e.workload import (
    ConsumerGroup,
    DeliveryLog,
    KeyedProducers,
    LayoutDriver,
    ack_cumulative,
    ack_each,
    drive_layout,
    duplicates,
    in_step,
    order_violations,
    wait_delivered,
    wait_progress,
)
from tests.support.polling import wait_for

OPERATIONS = 12
ROUNDS = 40
PER_ROUND = 3 * 200

#: Operation index -> membership change (after that operation).
CHURN: dict[int, Callable[[ConsumerGroup], None]] = {
    1: lambda g: g.join("c2"),
    3: lambda g: g.join("c3"),
    5: lambda g: g.leave("c1"),
    7: lambda g: g.join("c1"),
    9: lambda g: g.leave("c2"),
}


def _run_with_churn(
    standalone: StandaloneProcess,
    admin: AdminClient,
    topic: str,
    group: ConsumerGroup,
) -> tuple[KeyedProducers, LayoutDriver]:
    """Produce while splitting/merging ``OPERATIONS`` times and churning ``group``; return
    once every acknowledged message was delivered to the group."""
    admin.scalable_topics.create(topic, segments=2)
    log = group.log
    with braid.Client(standalone.service_url, operation_timeout=30) as client:
        try:
            group.join("c1")
            driver = LayoutDriver(admin, topic)
            gate = in_step(
                driver, OPERATIONS, ROUNDS, consumed=lambda: len(log.entries), per_round=PER_ROUND
            )
            producers = KeyedProducers(
                client, topic, producers=3, keys=200, rounds=ROUNDS, gate=gate
            ).start()
            drive_layout(
                driver,
                lambda: producers.acked_count,
                producers.total,
                OPERATIONS,
                on_step=lambda i: CHURN.get(i, lambda g: None)(group),
            )
            producers.join()
            wait_delivered(producers.acked_pairs, log)
        finally:
            group.close()
    assert producers.failures == []
    assert len(producers.acked_pairs()) == producers.total
    assert len(driver.done) >= 10
    return producers, driver


def test_stream_consumers_joining_and_leaving_keep_every_key_in_order_across_splits_and_merges(
    standalone: StandaloneProcess, admin: AdminClient, scalable_topic: str
) -> None:
    group = ConsumerGroup(
        standalone.service_url,
        lambda client, name: client.subscribe_stream(
            scalable_topic, "billing", consumer_name=name, initial_position="earliest"
        ),
        ack_cumulative,
    )
    _, driver = _run_with_churn(standalone, admin, scalable_topic, group)

    deliveries = group.log.snapshot()
    assert order_violations(deliveries) == [], driver.done
    assert {d.consumer for d in deliveries} == {"c1", "c2", "c3"}, group.events


def test_queue_consumers_joining_and_leaving_lose_nothing_across_splits_and_merges(
    standalone: StandaloneProcess, admin: AdminClient, scalable_topic: str
) -> None:
    group = ConsumerGroup(
        standalone.service_url,
        lambda client, name: client.subscribe_queue(
            scalable_topic, "workers", consumer_name=name, initial_position="earliest"
        ),
        ack_each,
    )
    _run_with_churn(standalone, admin, scalable_topic, group)

    assert {d.consumer for d in group.log.snapshot()} == {"c1", "c2", "c3"}, group.events


def test_a_checkpoint_restored_after_two_more_splits_reads_exactly_the_remaining_messages(
    standalone: StandaloneProcess, admin: AdminClient, scalable_topic: str
) -> None:
    admin.scalable_topics.create(scalable_topic, segments=2)
    rounds, operations = 20, 6
    first = DeliveryLog()
    saved: list[bytes] = []
    take = threading.Event()

    def read_then_checkpoint(reader: braid.CheckpointConsumer) -> None:
        # Reads while the topic is split and merged; when told, checkpoints between two
        # receives (everything logged so far is exactly what the checkpoint covers) and stops.
        while not take.is_set():
            first.record("reader", reader.receive_many(100, timeout=0.05))
        saved.append(reader.checkpoint().to_bytes())

    with braid.Client(standalone.service_url, operation_timeout=30) as client:
        driver = LayoutDriver(admin, scalable_topic, seed=11)
        producers = KeyedProducers(
            client,
            scalable_topic,
            producers=3,
            keys=200,
            rounds=rounds,
            gate=in_step(driver, operations, rounds),
        )
        reader = client.create_checkpoint_consumer(
            scalable_topic, start=braid.Checkpoint.earliest()
        )
        thread = threading.Thread(target=read_then_checkpoint, args=(reader,))
        thread.start()
        producers.start()
        try:
            # Four changes while the reader reads, the checkpoint, then two more splits.
            drive_layout(driver, lambda: producers.acked_count, producers.total // 2, 4)
            wait_for(lambda: len(first.entries) > 2000, within=60, message="the reader to read")
        finally:
            take.set()
            thread.join(30)
        reader.close()
        assert saved, "the reader did not checkpoint"
        for i in (4, 5):
            wait_progress(
                lambda: producers.acked_count, producers.total * (i + 1) // (operations + 2)
            )
            driver.step("split")
        producers.join()
        acked = producers.acked_pairs()
        expected = acked - first.delivered_pairs()

        restored = client.create_checkpoint_consumer(
            scalable_topic, start=braid.Checkpoint.from_bytes(saved[0])
        )
        rest = DeliveryLog()
        wait_for(
            lambda: (
                rest.record("restored", restored.receive_many(500, timeout=0.05))
                or rest.delivered_pairs() >= expected
            ),
            within=60,
            message=lambda: f"{len(expected - rest.delivered_pairs())} messages after restore",
        )
        # Nothing more comes: not one message from before the checkpoint.
        rest.record("restored", restored.receive_many(500, timeout=1.0))
        restored.close()

    assert producers.failures == [] and len(acked) == producers.total
    assert driver.done[-2:][0].startswith("split") and driver.done[-1].startswith("split")
    assert 0 < len(first.delivered_pairs()) < len(acked)
    assert duplicates(first.snapshot()) == []
    deliveries = rest.snapshot()
    assert duplicates(deliveries) == []
    assert rest.delivered_pairs() == expected
    assert order_violations(first.snapshot() + deliveries) == []
