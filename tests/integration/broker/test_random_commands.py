"""Well-framed but nonsensical command sequences never break the broker.

Each run sends a few hundred random commands (unknown ids, bogus positions, bad names, wrong
subscription types, sends for producers that do not exist, ...) on one connection. Whatever the
broker answers, it must log no unexpected error, and a fresh connection must still be served.
"""

from __future__ import annotations

import logging
import random

import pytest

from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.raw_client import message_body, publish, request

_TOPICS = [
    "persistent://public/default/fuzz",
    "persistent://public/default/fuzz-2",
    "persistent://public/nope/fuzz",
    "topic://public/default/fuzz",
    "persistent://public/default/a/b",
    "",
    "segment://public/default/fuzz/0000-ffff-0",
]


def _mid(rng: random.Random) -> pb.MessageIdData:
    ledger = rng.choice([0, 1, 2, 3, 2**63 - 1, 2**64 - 1, rng.getrandbits(64)])
    entry = rng.choice([0, 1, 5, 2**64 - 1, rng.getrandbits(32)])
    mid = commands.message_id(ledger, entry)
    if rng.random() < 0.2:
        mid.ack_set.append(rng.getrandbits(63))
    return mid


def _random_command(rng: random.Random, request_id: int) -> tuple[pb.BaseCommand, bytes | None]:
    cid = rng.randint(0, 4)
    kind = rng.randrange(14)
    if kind == 0:
        cmd = commands.producer(rng.choice(_TOPICS), cid, request_id)
        cmd.producer.producer_access_mode = rng.randint(0, 3)  # type: ignore[assignment]
        if rng.random() < 0.5:
            cmd.producer.producer_name = rng.choice(["a", "b", "c"])
        return cmd, None
    if kind == 1:
        meta = {"num_messages_in_batch": rng.randint(0, 5)} if rng.random() < 0.3 else {}
        body = message_body(rng.choice(["a", "b", "x"]), rng.randint(0, 10), b"p", **meta)
        return commands.send(cid, rng.randint(0, 10)), body
    if kind == 2:
        sub_type = rng.randint(0, 3)
        cmd = commands.subscribe(
            rng.choice(_TOPICS), rng.choice(["s", "t", "pulsar.dedup"]), sub_type, cid, request_id
        )  # type: ignore[arg-type]
        cmd.subscribe.durable = rng.random() < 0.9
        return cmd, None
    if kind == 3:
        return commands.flow(cid, rng.randint(0, 2000)), None
    if kind == 4:
        ack = pb.CommandAck(consumer_id=cid, ack_type=rng.randint(0, 1))  # type: ignore[arg-type]
        for _ in range(rng.randint(0, 3)):
            ack.message_id.add().CopyFrom(_mid(rng))
        if rng.random() < 0.5:
            ack.request_id = request_id
        return commands.wrap(ack), None
    if kind == 5:
        redeliver = pb.CommandRedeliverUnacknowledgedMessages(consumer_id=cid)
        for _ in range(rng.randint(0, 2)):
            redeliver.message_ids.add().CopyFrom(_mid(rng))
        return commands.wrap(redeliver), None
    if kind == 6:
        seek = pb.CommandSeek(consumer_id=cid, request_id=request_id)
        if rng.random() < 0.5:
            seek.message_id.CopyFrom(_mid(rng))
        elif rng.random() < 0.5:
            seek.message_publish_time = rng.getrandbits(42)
        return commands.wrap(seek), None
    if kind == 7:
        return commands.wrap(pb.CommandUnsubscribe(consumer_id=cid, request_id=request_id)), None
    if kind == 8:
        return commands.wrap(pb.CommandCloseConsumer(consumer_id=cid, request_id=request_id)), None
    if kind == 9:
        return commands.wrap(pb.CommandCloseProducer(producer_id=cid, request_id=request_id)), None
    if kind == 10:
        inner = pb.CommandGetLastMessageId(consumer_id=cid, request_id=request_id)
        return commands.wrap(inner), None
    if kind == 11:
        return commands.wrap(pb.CommandConsumerStats(consumer_id=cid, request_id=request_id)), None
    if kind == 12:
        return commands.lookup(rng.choice(_TOPICS), request_id), None
    return commands.partitioned_metadata(rng.choice(_TOPICS), request_id), None


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_command_sequences_leave_the_broker_serving(
    holder: StackHolder, seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(seed)
    caplog.set_level(logging.WARNING, logger="braid.broker")
    raw = await holder.raw()
    for request_id in range(300):
        cmd, body = _random_command(rng, request_id)
        try:
            await raw.send(cmd, body)
        except Exception:  # the codec refusing what it cannot encode is not the broker's concern
            continue
    # Everything sent so far is answered (or dropped) before this probe's answer arrives.
    probe = await request(raw, commands.lookup("persistent://public/default/probe", 10_000), 10_000)
    assert probe.type == pb.BaseCommand.LOOKUP_RESPONSE
    fresh = await holder.raw()
    answer = await request(fresh, commands.producer("persistent://public/default/ok", 1, 1), 1)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS
    assert (await publish(fresh, 1, answer.producer_success.producer_name, 0)).type == (
        pb.BaseCommand.SEND_RECEIPT
    )
    unexpected = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not unexpected, [r.getMessage() for r in unexpected]
