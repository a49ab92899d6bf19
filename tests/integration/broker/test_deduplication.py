"""Broker-side deduplication by (producer name, sequence id), across reconnects and restarts."""

from __future__ import annotations

from braid.broker.dedup import DEDUP_CURSOR_NAME, MessageDeduplication
from braid.broker.topic_names import managed_ledger_name, parse_topic_name
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.integration.broker.conftest import StackHolder
from tests.support.polling import eventually
from tests.support.raw_client import RawClient, message_body, publish, request

TOPIC = "persistent://public/default/dedup"
DUPLICATE_ID = (1 << 64) - 1  # -1 as an unsigned message-id field


async def _enable_dedup(holder: StackHolder) -> None:
    assert holder.stack is not None
    await holder.stack.resources.set_deduplication("public", "default", True)


async def _producer(holder: StackHolder, name: str, producer_id: int = 1) -> tuple[RawClient, int]:
    raw = await holder.raw()
    answer = await request(raw, commands.producer(TOPIC, producer_id, 100, producer_name=name), 100)
    assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS, answer
    return raw, answer.producer_success.last_sequence_id


def _entries(holder: StackHolder) -> int:
    assert holder.stack is not None
    return holder.stack.service.topics[TOPIC].ledger.number_of_entries


async def test_resend_of_a_persisted_message_gets_a_receipt_without_a_second_write(
    holder: StackHolder,
) -> None:
    await _enable_dedup(holder)
    raw, last = await _producer(holder, "orders")
    assert last == -1
    for seq in range(5):
        receipt = await publish(raw, 1, "orders", seq)
        assert receipt.type == pb.BaseCommand.SEND_RECEIPT
        assert receipt.send_receipt.message_id.entryId == seq
    duplicate = await publish(raw, 1, "orders", 3)
    assert duplicate.type == pb.BaseCommand.SEND_RECEIPT
    assert duplicate.send_receipt.sequence_id == 3
    assert duplicate.send_receipt.message_id.ledgerId == DUPLICATE_ID
    assert duplicate.send_receipt.message_id.entryId == DUPLICATE_ID
    assert _entries(holder) == 5


async def test_reconnecting_producer_learns_its_last_sequence_id(holder: StackHolder) -> None:
    await _enable_dedup(holder)
    raw, _ = await _producer(holder, "billing")
    for seq in range(3):
        await publish(raw, 1, "billing", seq)
    await raw.close()
    _, last = await _producer(holder, "billing", producer_id=2)
    assert last == 2


async def test_dedup_state_survives_a_broker_restart(holder: StackHolder) -> None:
    await _enable_dedup(holder)
    raw, _ = await _producer(holder, "ledger")
    for seq in range(4):
        await publish(raw, 1, "ledger", seq)
    await holder.restart()

    raw, last = await _producer(holder, "ledger")
    assert last == 3
    resent = await publish(raw, 1, "ledger", 3)
    assert resent.send_receipt.message_id.ledgerId == DUPLICATE_ID
    fresh = await publish(raw, 1, "ledger", 4)
    assert fresh.send_receipt.message_id.ledgerId != DUPLICATE_ID
    assert _entries(holder) == 5


async def test_batches_advance_the_watermark_to_their_highest_sequence_id(
    holder: StackHolder,
) -> None:
    await _enable_dedup(holder)
    raw, _ = await _producer(holder, "batcher")
    first = await publish(raw, 1, "batcher", 0, num_messages=5)
    assert first.type == pb.BaseCommand.SEND_RECEIPT
    inside = await publish(raw, 1, "batcher", 4)
    assert inside.send_receipt.message_id.ledgerId == DUPLICATE_ID
    after = await publish(raw, 1, "batcher", 5)
    assert after.send_receipt.message_id.ledgerId != DUPLICATE_ID
    assert _entries(holder) == 2


async def test_without_dedup_a_resend_is_stored_again(holder: StackHolder) -> None:
    raw, last = await _producer(holder, "plain")
    assert last == -1
    await publish(raw, 1, "plain", 0)
    again = await publish(raw, 1, "plain", 0)
    assert again.send_receipt.message_id.ledgerId != DUPLICATE_ID
    assert _entries(holder) == 2


async def test_replay_after_the_snapshot_rebuilds_sequence_ids(holder: StackHolder) -> None:
    """Entries written after the last snapshot (a crash loses no dedup state) are replayed."""
    assert holder.stack is not None
    factory = holder.stack.factory
    ledger = await factory.open(managed_ledger_name(parse_topic_name(TOPIC)) + "-replay")
    first = await MessageDeduplication.load(ledger)
    assert first.last_sequence_id("p") == -1
    # Written straight to the ledger: no snapshot covers them, as after a crash.
    await ledger.append(message_body("p", 0, b"a"))
    await ledger.append(message_body("p", 1, b"b", num_messages_in_batch=3))
    await ledger.append(message_body("q", 7, b"c"))
    second = await MessageDeduplication.load(ledger)
    assert second.last_sequence_id("p") == 3
    assert second.last_sequence_id("q") == 7
    # The reload took a snapshot: the dedup cursor now covers every entry.
    cursor = ledger.cursors[DEDUP_CURSOR_NAME]
    assert cursor.properties == {"p": 3, "q": 7}
    assert cursor.mark_delete_position == ledger.last_confirmed_position
    await ledger.close()


async def test_resend_while_the_first_copy_is_in_flight_closes_the_producer(
    holder: StackHolder,
) -> None:
    await _enable_dedup(holder)
    raw, _ = await _producer(holder, "racer")
    body = message_body("racer", 0, b"once")
    # Both copies in one write: the second arrives while the first is still being persisted.
    raw.proto.send(commands.send(1, 0), body)
    raw.proto.send(commands.send(1, 0), body)
    await raw.send_raw(raw.proto.data_to_send())
    closed = await raw.next_command(lambda c: c.type == pb.BaseCommand.CLOSE_PRODUCER)
    assert closed.close_producer.producer_id == 1
    await eventually(lambda: _entries(holder) == 1, message="the first copy to be stored")
    # The client re-creates the producer and resends: the first copy is there, once.
    again, last = await _producer(holder, "racer", producer_id=2)
    assert last == 0
    resent = await publish(again, 2, "racer", 0, b"once")
    assert resent.send_receipt.message_id.ledgerId == DUPLICATE_ID
    assert _entries(holder) == 1


async def test_a_terminated_topic_answers_a_resend_of_what_it_stored_with_its_receipt(
    holder: StackHolder,
) -> None:
    """As Pulsar: deduplication comes before the terminated check (ADR 0055)."""
    await _enable_dedup(holder)
    raw, _ = await _producer(holder, "sealed")
    for seq in range(3):
        await publish(raw, 1, "sealed", seq)
    assert holder.stack is not None
    await holder.stack.service.terminate_topic(TOPIC)
    resent = await publish(raw, 1, "sealed", 2)
    assert resent.type == pb.BaseCommand.SEND_RECEIPT
    assert resent.send_receipt.message_id.ledgerId == DUPLICATE_ID
    refused = await publish(raw, 1, "sealed", 3)
    assert refused.type == pb.BaseCommand.SEND_ERROR
    assert refused.send_error.error == pb.TopicTerminatedError
    assert _entries(holder) == 3
