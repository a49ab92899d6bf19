"""Acknowledgments inside a transaction, on one segment's subscription.

An acknowledgment in a transaction is not grouped like the others: it first adds the segment's
subscription to the transaction (ADD_SUBSCRIPTION_TO_TXN, once per subscription and
transaction), then goes out as one ACK carrying the transaction id and a request id, and is
answered by an ACK_RESPONSE whose ``error`` (``TransactionConflict`` when another transaction
holds the message or it is acknowledged already) fails the operation - and with it the
transaction, which can then only abort. The broker holds the acknowledged messages (not
redelivered) until the transaction ends: a commit applies them, an abort releases them.

A message inside a batch is acknowledged as Pulsar does it, with the entry's ``ack_set``: the bits
of the batch's messages still unacknowledged (individual: all but this one; cumulative: those
after it).
"""

from __future__ import annotations

from braid.client.errors import NotConnectedError, error_for_code
from braid.client.segment_consumer import WHOLE_ENTRY, SegmentSubscriber
from braid.client.transaction import AsyncTransaction
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

_WORD = 64


def _signed(word: int) -> int:
    return word - (1 << 64) if word >= 1 << 63 else word


def ack_set(unacknowledged: list[int], batch_size: int) -> list[int]:
    """Pulsar's ``ack_set`` (a ``BitSet.toLongArray()``) with the bits ``unacknowledged`` set."""
    words = [0] * ((batch_size + _WORD - 1) // _WORD)
    for index in unacknowledged:
        words[index // _WORD] |= 1 << (index % _WORD)
    return [_signed(w) for w in words]


def transactional_ack_id(
    ledger_id: int, entry_id: int, batch_index: int, batch_size: int, *, cumulative: bool
) -> pb.MessageIdData:
    """The ``MessageIdData`` an ACK in a transaction carries for this message."""
    mid = commands.message_id(ledger_id, entry_id)
    if batch_size > 1 and 0 <= batch_index < batch_size and batch_index != WHOLE_ENTRY:
        if cumulative:
            rest = list(range(batch_index + 1, batch_size))
        else:
            rest = [i for i in range(batch_size) if i != batch_index]
        if rest:
            mid.ack_set.extend(ack_set(rest, batch_size))
            mid.batch_size = batch_size
    return mid


async def acknowledge_in_transaction(
    seg: SegmentSubscriber,
    txn: AsyncTransaction,
    position: tuple[int, int, int, int],
    *,
    cumulative: bool,
) -> None:
    """Acknowledge ``position`` (ledger, entry, batch index, batch size) on ``seg``'s
    subscription inside ``txn``; returns once the broker holds it.

    Raises:
        TransactionConflictError: another transaction holds it, or it is acknowledged already.
        NotAllowedError: the subscription cannot take this acknowledgment in a transaction.
        NotConnectedError: the segment's consumer is not attached.
    """
    await txn.add_subscription(seg.route.topic, seg.spec.subscription)
    conn = seg.conn
    if conn is None or not seg.ready:
        raise NotConnectedError(f"the consumer of {seg.route.topic} is not attached")
    request_id = conn.new_request_id()
    ledger_id, entry_id, batch_index, batch_size = position
    cmd = commands.ack(
        seg.consumer_id,
        [transactional_ack_id(ledger_id, entry_id, batch_index, batch_size, cumulative=cumulative)],
        cumulative=cumulative,
        request_id=request_id,
    )
    cmd.ack.txnid_most_bits, cmd.ack.txnid_least_bits = txn.txn_id
    response = (await conn.request(cmd, request_id)).ackResponse
    if response.HasField("error"):
        raise error_for_code(
            response.error, response.message, context=f"acknowledgment on {seg.route.topic}"
        )


__all__ = ["ack_set", "acknowledge_in_transaction", "transactional_ack_id"]
