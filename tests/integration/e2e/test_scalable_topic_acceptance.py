"""Issue 9 acceptance through the Braid client on a real ``braid standalone``: keyed messages with
per-key sequence numbers are produced to the active segments while the topic is split and merged
24 times; every acknowledged message is consumed exactly once per subscription, and per-key
order holds across every split and merge.

Three subscriptions read the same run: ``ordered`` (two Stream consumers, so segments are handed
from one to the other at almost every rebalance), ``audit`` (one Stream consumer) and ``work``
(two Queue consumers). Nobody crashes and everybody acknowledges what it receives, so a
redelivery - allowed only for unacknowledged messages - would be a bug: none is tolerated.
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
    duplicates,
    in_step,
    order_violations,
    wait_delivered,
)

OPERATIONS = 24
ROUNDS = 48
KEYS = 100


def test_every_acknowledged_message_is_consumed_once_per_subscription_in_key_order(
    standalone: StandaloneProcess, admin: AdminClient, scalable_topic: str
) -> None:
    admin.scalable_topics.create(scalable_topic, segments=2)
    url = standalone.service_url

    def stream(subscription: str) -> ConsumerGroup:
        return ConsumerGroup(
            url,
            lambda client, name: client.subscribe_stream(
                scalable_topic, subscription, consumer_name=name, initial_position="earliest"
            ),
            ack_cumulative,
        )

    ordered, audit = stream("ordered"), stream("audit")
    work = ConsumerGroup(
        url,
        lambda client, name: client.subscribe_queue(
            scalable_topic, "work", consumer_name=name, initial_position="earliest"
        ),
        ack_each,
    )
    groups = {"ordered": ordered, "audit": audit, "work": work}
    with braid.Client(url, operation_timeout=30) as client:
        try:
            ordered.join("o1")
            ordered.join("o2")
            audit.join("a1")
            work.join("w1")
            work.join("w2")
            driver = LayoutDriver(admin, scalable_topic, seed=3)
            producers = KeyedProducers(
                client,
                scalable_topic,
                producers=3,
                keys=KEYS,
                rounds=ROUNDS,
                gate=in_step(
                    driver,
                    OPERATIONS,
                    ROUNDS,
                    consumed=lambda: min(len(g.log.entries) for g in groups.values()),
                    per_round=3 * KEYS,
                ),
            ).start()
            drive_layout(driver, lambda: producers.acked_count, producers.total, OPERATIONS)
            producers.join()
            for group in groups.values():
                wait_delivered(producers.acked_pairs, group.log)
        finally:
            for group in groups.values():
                group.close()

    assert producers.failures == []
    acked = producers.acked_pairs()
    assert len(acked) == producers.total
    assert len(driver.done) == OPERATIONS
    for name, group in groups.items():
        deliveries = group.log.snapshot()
        assert group.log.delivered_pairs() == acked, name
        assert duplicates(deliveries) == [], f"{name} got redeliveries of acknowledged messages"
        if name != "work":
            assert order_violations(deliveries) == [], (name, driver.done)
    assert {d.consumer for d in ordered.log.snapshot()} == {"o1", "o2"}
