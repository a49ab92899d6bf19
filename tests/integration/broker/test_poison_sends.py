"""Poison SENDs are refused before storage; the producer and the topic keep working.

Every refusal is a SEND_ERROR ChecksumError naming the reason (the code the official clients answer
by failing only that message), in its place among the producer's receipts; the good messages around
it are stored and delivered, and nothing of the poison reaches a consumer.
"""

from __future__ import annotations

import logging

import pytest

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.poison import poison_bodies
from tests.support.raw_client import RawClient, message_body, request

TOPIC = "persistent://public/default/poison"


def _answer(cmd: pb.BaseCommand) -> bool:
    return cmd.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)


async def _produce(raw: RawClient, name: str) -> None:
    ready = await request(raw, commands.producer(TOPIC, 1, 1, producer_name=name), 1)
    assert ready.type == pb.BaseCommand.PRODUCER_SUCCESS, ready


async def test_each_kind_of_poison_is_refused_in_order_between_stored_messages(
    holder: StackHolder, caplog: pytest.LogCaptureFixture
) -> None:
    assert holder.stack is not None
    limit = holder.stack.config.max_message_size
    raw = await holder.raw()
    await _produce(raw, "mixed")
    poison = poison_bodies("mixed", 1, limit)
    bodies = [message_body("mixed", 0, b"good-0")]
    bodies += poison
    bodies.append(message_body("mixed", 1 + len(poison), b"good-1"))
    caplog.set_level(logging.INFO, logger="braid")
    for seq, body in enumerate(bodies):
        await raw.send(commands.send(1, seq), body)  # all in flight at once
    answers = [await raw.next_command(_answer) for _ in bodies]

    assert [a.type for a in answers] == [
        pb.BaseCommand.SEND_RECEIPT,
        *[pb.BaseCommand.SEND_ERROR] * len(poison),
        pb.BaseCommand.SEND_RECEIPT,
    ]
    assert [a.send_receipt.sequence_id or a.send_error.sequence_id for a in answers] == list(
        range(len(bodies))
    )
    errors = [a.send_error for a in answers[1:-1]]
    assert {e.error for e in errors} == {pb.ChecksumError}
    reasons = [e.message for e in errors]
    assert "does not parse" in reasons[0]
    assert "lacks required fields" in reasons[1]
    assert "num_messages_in_batch=100 does not match the payload" in reasons[2]
    assert f"exceeds maxMessageSize {limit}" in reasons[3]
    # Logged once for the producer, then only counted.
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1
    topic = holder.stack.service.topics[TOPIC]
    [stats] = topic.stats()["publishers"]  # type: ignore[misc]
    assert stats["msgRefusedCounter"] == len(poison)
    assert stats["msgInCounter"] == 2

    # A consumer sees the two good messages and nothing else.
    subscribed = await request(
        raw,
        commands.subscribe(
            TOPIC,
            "reader",
            pb.CommandSubscribe.Exclusive,
            7,
            70,
            initial_position=pb.CommandSubscribe.Earliest,
        ),
        70,
    )
    assert subscribed.type == pb.BaseCommand.SUCCESS
    await raw.send(commands.flow(7, 100))
    got = []
    for _ in range(2):
        event = await raw.next_event(lambda c: c.type == pb.BaseCommand.MESSAGE)
        assert event.body is not None
        got.append(event.body[-6:])
    assert got == [b"good-0", b"good-1"]
    assert topic.ledger.number_of_entries == 2
