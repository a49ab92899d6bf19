"""A topic whose managed ledger another writer takes over (ADR 0040), seen on the wire.

The other writer is a second managed-ledger factory on the broker's own metadata store and
bookie, opening the topic's log as a new owner does: it recovers the current ledger, which fences
it on the bookie. The broker's next add is refused by the bookie. Pinned: the sends that were not
stored get no SEND_RECEIPT (the broker closes the producer instead - a SEND_ERROR would make the
official clients drop the whole connection); the broker gives the topic up, so the next producer
loads it again (recovering the other writer's ledger in turn); every receipted message is there.
"""

from __future__ import annotations

from braid.ledger import EARLIEST, DefaultManagedLedgerFactory
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, message_body, request

TOPIC = "persistent://public/default/contested"
LEDGER = "public/default/persistent/contested"
ANSWERS = (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR, pb.BaseCommand.CLOSE_PRODUCER)


async def _producer(raw: RawClient, producer_id: int) -> None:
    request_id = 10 + producer_id
    answer = await request(
        raw, commands.producer(TOPIC, producer_id, request_id, producer_name="p"), request_id
    )
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer


async def _send(raw: RawClient, producer_id: int, seqs: range) -> list[pb.BaseCommand]:
    for seq in seqs:
        raw.proto.send(commands.send(producer_id, seq), message_body("p", seq, b"m%d" % seq))
    await raw.send(commands.ping())
    answers = []
    while not answers or answers[-1].type != pb.BaseCommand.CLOSE_PRODUCER:
        answers.append(await raw.next_command(lambda c: c.type in ANSWERS))
        if len(answers) == len(seqs) and all(
            a.type == pb.BaseCommand.SEND_RECEIPT for a in answers
        ):
            break
    return answers


async def test_sends_on_a_fenced_topic_get_no_receipt_and_the_topic_is_given_up(
    holder: StackHolder,
) -> None:
    stack = holder.stack
    assert stack is not None
    raw = await holder.raw()
    await _producer(raw, 1)
    receipted = await _send(raw, 1, range(5))
    assert [a.type for a in receipted] == [pb.BaseCommand.SEND_RECEIPT] * 5
    loaded = stack.service.topics[TOPIC]

    intruder = DefaultManagedLedgerFactory(stack.metadata, stack.factory.storage)
    try:
        await intruder.open(LEDGER)  # recovers (fences) the broker's current ledger

        answers = await _send(raw, 1, range(5, 10))
        # No receipt for what was not stored: the producer is closed instead.
        assert [a.type for a in answers] == [pb.BaseCommand.CLOSE_PRODUCER]
        assert loaded.fenced
        assert stack.service.topics.get(TOPIC) is not loaded
        await eventually(lambda: loaded.closed, message="the fenced topic to close")

        # The client reconnects and resends: the topic loads again (the broker is the new
        # owner now) and takes them.
        await _producer(raw, 2)
        resent = await _send(raw, 2, range(5, 10))
        assert [a.type for a in resent] == [pb.BaseCommand.SEND_RECEIPT] * 5
    finally:
        await intruder.close()

    ledger = stack.factory.opened(LEDGER)
    assert ledger is not None
    stored = [entry.position for entry in await ledger.read(EARLIEST, 100)]
    ids = [a.send_receipt.message_id for a in receipted + resent]
    assert [(m.ledgerId, m.entryId) for m in ids] == [(p.ledger_id, p.entry_id) for p in stored]
