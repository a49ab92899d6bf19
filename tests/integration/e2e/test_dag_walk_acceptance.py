"""Issue 28 acceptance on a real ``braid standalone`` child process: Stream consumers walking a
long segment DAG are bound by the messages, not by the number of segments.

Two producers send 7,200 keyed messages with the Braid client while the topic is split or merged
through the admin REST API every 0.3 s (about 250 changes, a DAG of a few hundred segments, most
of them holding a handful of messages). Once production ends, two Stream consumers of the
subscription (created before the first message) read from ``earliest``, acknowledging
cumulatively: together they must have every acknowledged message within 5 s of the end of
production, each key in order, none lost. Before the hand-over was event driven end to end
(ADR 0043) this walk took 8.5 s on this machine (18 s in the issue): 20-50 ms per segment.
"""

from __future__ import annotations

import threading
import time

import pytest

import braid
from braid.admin import AdminClient
from braid.admin.client_errors import AdminConflictError
from braid.cli.process import StandaloneProcess
from tests.integration.e2e.workload import (
    ConsumerGroup,
    KeyedProducers,
    LayoutDriver,
    ack_cumulative,
    missing,
    order_violations,
    wait_delivered,
)
from tests.support.polling import wait_for

PRODUCERS = 2
KEYS = 120
ROUNDS = 30  # 2 x 120 x 30 = 7,200 messages
RESHAPE_EVERY_S = 0.3
OPERATIONS = 250
READ_WITHIN_S = 5.0


class Reshaper:
    """Splits or merges the topic every ``RESHAPE_EVERY_S`` seconds (the scenario's pace, not a
    wait for a condition) until ``OPERATIONS`` are done or it is stopped. A change refused
    because another one is still running (the auto-scaler's, say: HTTP 409) is tried again at
    the next tick, as an operator would."""

    conflicts = 0

    def __init__(self, driver: LayoutDriver) -> None:
        self.driver = driver
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reshaper")
        self._thread.start()

    def _run(self) -> None:
        try:
            next_at = time.monotonic()
            while len(self.driver.done) < OPERATIONS and not self._stop.is_set():
                try:
                    self.driver.step()
                except AdminConflictError:
                    self.conflicts += 1
                next_at += RESHAPE_EVERY_S
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the reshaper did not stop"
        assert self.error is None, f"a split or merge failed: {self.error!r}"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_stream_consumers_walk_a_dag_reshaped_every_300ms_within_5s_of_the_last_send(
    standalone: StandaloneProcess, admin: AdminClient, scalable_topic: str
) -> None:
    admin.scalable_topics.create(scalable_topic, segments=2)
    # The subscription exists before the first message (its consumers come later): without one,
    # sealed segments are collected as soon as they are, and their messages with them.
    admin.scalable_topics.create_subscription(scalable_topic, "walk", initial_position="Earliest")
    driver = LayoutDriver(admin, scalable_topic, min_active=2, max_active=6, seed=28)

    def gate(r: int) -> None:
        # Production is spread over the reshaping: round r once its share of changes is done.
        needed = r * OPERATIONS // ROUNDS
        wait_for(
            lambda: len(driver.done) >= needed,
            within=60,
            interval=0.01,
            message=lambda: f"{needed} layout changes before round {r} ({len(driver.done)})",
        )

    with braid.Client(standalone.service_url, operation_timeout=30) as client:
        reshaper = Reshaper(driver)
        try:
            producers = KeyedProducers(
                client, scalable_topic, producers=PRODUCERS, keys=KEYS, rounds=ROUNDS, gate=gate
            ).start()
            producers.join(timeout=200)
        finally:
            reshaper.stop()
        production_ended = time.monotonic()
        layout = admin.scalable_topics.get(scalable_topic)

        group = ConsumerGroup(
            standalone.service_url,
            lambda c, name: c.subscribe_stream(
                scalable_topic, "walk", consumer_name=name, initial_position="earliest"
            ),
            ack_cumulative,
        )
        try:
            group.join("c1")
            group.join("c2")
            wait_delivered(producers.acked_pairs, group.log, within=60)
            read_s = time.monotonic() - production_ended
        finally:
            group.close()

    acked = producers.acked_pairs()
    deliveries = group.log.snapshot()
    segments = len(layout["segments"])
    assert producers.failures == [] and len(acked) == PRODUCERS * KEYS * ROUNDS
    assert len(driver.done) >= OPERATIONS * 0.9, driver.done[-5:]
    assert segments > 200, f"the DAG has only {segments} segments"
    assert missing(acked, group.log) == set()
    assert order_violations(deliveries) == []
    assert {d.consumer for d in deliveries} == {"c1", "c2"}
    assert read_s <= READ_WITHIN_S, (
        f"the two consumers took {read_s:.2f} s to read {len(acked)} messages over "
        f"{segments} segments (limit {READ_WITHIN_S} s)"
    )
