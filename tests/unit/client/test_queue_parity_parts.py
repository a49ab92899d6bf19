"""The pure parts of Queue parity: ``delivery_time`` (deliver_after / deliver_at), the
``DeadLetterPolicy`` and its topic names, the delayed message's entry metadata (golden bytes
checked against protobuf), and the ack-timeout tracker on a real event loop."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from braid.client.ack_timeout import UnackedTracker, check_ack_timeout
from braid.client.batch_encoder import entry_metadata, producer_name_field
from braid.client.dead_letter import DeadLetterPolicy
from braid.client.delayed_delivery import delivery_time
from braid.client.errors import InvalidConfigurationError
from braid.core.errors import InvalidInputError
from braid.protocol.generated import PulsarApi_pb2 as pb


def test_deliver_after_and_deliver_at_become_one_deliver_at_time() -> None:
    assert delivery_time(None, None) is None
    assert delivery_time(1.5, None, now_ms=1000) == 2500
    assert delivery_time(datetime.timedelta(minutes=1), None, now_ms=0) == 60_000
    assert delivery_time(None, 123) == 123
    for after, at in ((1, 2), (-1, None), (float("nan"), None), ("1", None), (None, -5)):
        with pytest.raises(InvalidInputError):
            delivery_time(after, at)  # type: ignore[arg-type]


def test_a_delayed_entry_carries_deliver_at_time_as_protobuf_writes_it() -> None:
    raw = entry_metadata(producer_name_field("p"), 7, 1000, deliver_at_time=1_234_567)
    expected = pb.MessageMetadata(
        producer_name="p", sequence_id=7, publish_time=1000, deliver_at_time=1_234_567
    ).SerializeToString()
    assert raw[4:] == expected and int.from_bytes(raw[:4], "big") == len(expected)


def test_dead_letter_policy_has_the_official_fields_and_topic_names() -> None:
    policy = DeadLetterPolicy(3)
    assert policy.dead_letter_topic_for("topic://t/n/x", "s") == "topic://t/n/x-s-DLQ"
    assert policy.retry_letter_topic_for("topic://t/n/x", "s") == "topic://t/n/x-s-RETRY"
    named = DeadLetterPolicy(1, dead_letter_topic="persistent://t/n/dead")
    assert named.dead_letter_topic_for("topic://t/n/x", "s") == "persistent://t/n/dead"
    for bad in (0, -1, True, "3"):
        with pytest.raises(InvalidConfigurationError):
            DeadLetterPolicy(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigurationError):
        DeadLetterPolicy(1, dead_letter_topic="")
    with pytest.raises(InvalidConfigurationError):
        check_ack_timeout(-1)


async def test_the_ack_timeout_tracker_expires_only_what_was_not_forgotten() -> None:
    expired: list[object] = []
    done = asyncio.Event()

    def on_expired(messages: list[object]) -> None:
        expired.extend(messages)
        done.set()

    loop = asyncio.get_running_loop()
    tracker = UnackedTracker(loop, 0.2, on_expired)  # type: ignore[arg-type]
    tracker.start()
    tracker.add([((1, 0, -1), "a"), ((1, 1, -1), "b"), ((1, 2, 0), "c")])  # type: ignore[list-item]
    assert tracker.forget((1, 1, -1)) == "b"
    assert tracker.forget((9, 9, 9)) is None
    await asyncio.wait_for(done.wait(), 5)
    assert sorted(expired) == ["a", "c"]  # type: ignore[type-var]
    assert len(tracker) == 0
    tracker.close()
