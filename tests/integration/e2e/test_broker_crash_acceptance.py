"""Issue 10 acceptance: ``braid standalone`` is SIGKILLed in the middle of a run (producers
sending, Stream and Queue consumers reading, splits and merges before and after) and restarted
on the same data directory and ports. Producers and consumers recover by themselves - no
exception reaches the application - nothing acknowledged is lost, and no key's first deliveries
go out of order.
"""

from __future__ import annotations

import braid
from braid.admin import AdminClient
from braid.cli.process import StandaloneProcess
from tests.integration.e2e.workload import (
    ConsumerGroup,
    KeyedProducers,
    LayoutDriver,
    ack_cumulative,
    ack_each,
    drive_layout,
    in_step,
    order_violations,
    wait_delivered,
    wait_progress,
)

OPERATIONS = 6
ROUNDS = 30


def test_producers_and_consumers_recover_from_a_broker_sigkill_without_losing_acked_messages(
    standalone: StandaloneProcess, admin: AdminClient, scalable_topic: str
) -> None:
    admin.scalable_topics.create(scalable_topic, segments=2)
    url = standalone.service_url
    stream = ConsumerGroup(
        url,
        lambda client, name: client.subscribe_stream(
            scalable_topic, "ordered", consumer_name=name, initial_position="earliest"
        ),
        ack_cumulative,
    )
    queue = ConsumerGroup(
        url,
        lambda client, name: client.subscribe_queue(
            scalable_topic, "work", consumer_name=name, initial_position="earliest"
        ),
        ack_each,
    )
    with braid.Client(url, operation_timeout=30) as client:
        try:
            stream.join("s1")
            stream.join("s2")
            queue.join("q1")
            driver = LayoutDriver(admin, scalable_topic, seed=5)
            producers = KeyedProducers(
                client,
                scalable_topic,
                producers=3,
                keys=200,
                rounds=ROUNDS,
                gate=in_step(driver, OPERATIONS, ROUNDS),
            ).start()
            # Three changes, the crash at 40% of the run, three more changes after the restart.
            drive_layout(driver, lambda: producers.acked_count, producers.total * 5 // 8, 3)
            wait_progress(lambda: producers.acked_count, producers.total * 2 // 5)
            standalone.kill()
            standalone.start()
            # Before anything else changes, both subscriptions catch up with what was
            # acknowledged: nothing may wait for a later layout change (or the sealed-segment
            # GC a minute later) to move on.
            acked_then = producers.acked_pairs()
            wait_delivered(lambda: acked_then, stream.log, within=30)
            wait_delivered(lambda: acked_then, queue.log, within=30)
            for i in range(3, OPERATIONS):
                wait_progress(
                    lambda: producers.acked_count, producers.total * (i + 1) // (OPERATIONS + 2)
                )
                driver.step()
            producers.join()
            wait_delivered(producers.acked_pairs, stream.log)
            wait_delivered(producers.acked_pairs, queue.log)
        finally:
            stream.close()
            queue.close()

    assert producers.failures == []
    assert len(producers.acked_pairs()) == producers.total
    assert len(driver.done) == OPERATIONS
    assert order_violations(stream.log.snapshot()) == [], driver.done
