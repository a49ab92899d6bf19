"""A lookup the broker answers with ``MetadataError`` is retried by the client, not surfaced.

A broker answers a ``LOOKUP`` with ``MetadataError`` when it cannot serve it for now: its
metadata-store session is reconnecting after a cut link (the multi-host test saw 86 sends fail
that way before this was retried), or ``maxConcurrentLookupRequest`` lookups are already in
flight (the broker sends ``MetadataError`` there because the C++ client would drop its whole
connection on ``TooManyRequests``). The Java client retries it (``BrokerMetadataException`` is
retriable); so does Braid's: a producer whose topic moved keeps its pending send and delivers it
once the broker answers again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import braid
from tests.support.broker_stack import BackgroundBroker
from tests.support.polling import wait_for


@pytest.fixture
def one_lookup_at_a_time(tmp_path: Path) -> Iterator[BackgroundBroker]:
    background = BackgroundBroker(tmp_path / "broker", max_concurrent_lookup_request=1).start()
    try:
        yield background
    finally:
        background.stop()


@pytest.mark.timeout(60)
def test_a_producer_keeps_its_send_through_lookups_refused_with_metadata_error(
    one_lookup_at_a_time: BackgroundBroker,
) -> None:
    broker = one_lookup_at_a_time
    topic = "persistent://public/default/lookup-refused"
    slot: contextlib.AbstractContextManager[None] = broker.service.lookups.slot()
    with braid.Client(broker.service_url, operation_timeout=30) as client:
        producer = client.create_producer(topic)
        producer.send(b"before")

        async def hold_the_only_slot_and_unload() -> None:
            slot.__enter__()  # "another client's" lookup in flight
            loaded = broker.service._topics[topic]
            await broker.service.unload_topic(loaded, "moved")

        broker.call(hold_the_only_slot_and_unload())
        sent = producer.send_async(b"after")
        # The producer looks its topic up again and is answered MetadataError, more than once.
        wait_for(lambda: broker.service.lookups.refused >= 2, within=20, message="lookups refused")
        assert not sent.done(), sent.exception() if sent.done() else None

        async def free_the_slot() -> None:
            slot.__exit__(None, None, None)

        broker.call(free_the_slot())
        started = time.monotonic()
        message_id = sent.result(timeout=20)
        assert time.monotonic() - started < 20
        consumer = client.subscribe_stream(topic, "s", initial_position="earliest")
        values = [consumer.receive(timeout=10).value for _ in range(2)]
        consumer.close()
        assert values == [b"before", b"after"]
        assert message_id is not None
