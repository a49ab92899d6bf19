"""A transactional Pulsar client at the wire level, for tests of Braid's transactions.

The official Python ``pulsar-client`` (3.x) has no transaction API: its C++ core carries the
transaction commands in its protobuf but no coordinator client. So the transactional side of the
interop tests speaks the commands the Java client sends, in its order - find the coordinator
(PARTITIONED_METADATA of the assign topic, LOOKUP of its partition, TC_CLIENT_CONNECT_REQUEST),
NEW_TXN, ADD_PARTITION_TO_TXN before the first SEND to a partition, SENDs whose command and
``MessageMetadata`` carry the transaction id, ADD_SUBSCRIPTION_TO_TXN before an ACK with the
transaction id, END_TXN - over :class:`~tests.support.raw_client.RawClient`. What is visible to
consumers is checked with the official client.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.frames import encode_message_body
from braid.protocol.generated import PulsarApi_pb2 as pb
from tests.support.raw_client import RawClient

ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
_T = pb.BaseCommand


@dataclass(frozen=True)
class Txn:
    most: int
    least: int


class TxnWire:
    """One connection acting as a transactional producer and consumer."""

    def __init__(self, raw: RawClient) -> None:
        self.raw = raw
        self._ids = itertools.count(1)
        #: MESSAGE commands received, in order, while waiting for other answers.
        self.messages: list[CommandReceived] = []

    @classmethod
    async def open(cls, host: str, port: int, token: str | None = None) -> TxnWire:
        return cls(await RawClient.open(host, port, token=token))

    async def close(self) -> None:
        await self.raw.close()

    def next_id(self) -> int:
        return next(self._ids)

    async def _wait(
        self, matches: Callable[[pb.BaseCommand], bool], within: float = 20.0
    ) -> pb.BaseCommand:
        while True:
            event = await self.raw.next_event(within=within)
            if event.command.type == _T.MESSAGE:
                self.messages.append(event)
            if matches(event.command):
                return event.command

    async def request(self, cmd: pb.BaseCommand, request_id: int) -> pb.BaseCommand:
        """Send ``cmd``; its answer (the typed response or ERROR) for ``request_id``."""
        await self.raw.send(cmd)

        def answers(c: pb.BaseCommand) -> bool:
            return getattr(commands.inner(c), "request_id", None) == request_id

        return await self._wait(answers)

    async def next_message(self, within: float = 20.0) -> CommandReceived:
        """The next MESSAGE (one stashed meanwhile first)."""
        if not self.messages:
            await self._wait(lambda c: c.type == _T.MESSAGE, within)
        return self.messages.pop(0)

    # -- the coordinator -----------------------------------------------------------------------

    async def connect_coordinator(self, tc_id: int = 0) -> pb.BaseCommand:
        rid = self.next_id()
        meta = await self.request(commands.partitioned_metadata(ASSIGN_TOPIC, rid), rid)
        assert meta.type == _T.PARTITIONED_METADATA_RESPONSE, meta
        assert meta.partitionMetadataResponse.partitions > tc_id, meta
        rid = self.next_id()
        lookup = await self.request(commands.lookup(f"{ASSIGN_TOPIC}-partition-{tc_id}", rid), rid)
        assert lookup.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect, lookup
        rid = self.next_id()
        cmd = commands.wrap(pb.CommandTcClientConnectRequest(request_id=rid, tc_id=tc_id))
        return await self.request(cmd, rid)

    async def new_txn(self, ttl_ms: int = 60_000, tc_id: int = 0) -> Txn:
        response = await self.new_txn_response(ttl_ms, tc_id)
        assert response.type == _T.NEW_TXN_RESPONSE, response
        assert not response.newTxnResponse.HasField("error"), response
        return Txn(
            response.newTxnResponse.txnid_most_bits, response.newTxnResponse.txnid_least_bits
        )

    async def new_txn_response(self, ttl_ms: int = 60_000, tc_id: int = 0) -> pb.BaseCommand:
        rid = self.next_id()
        cmd = commands.wrap(pb.CommandNewTxn(request_id=rid, txn_ttl_millis=ttl_ms, tc_id=tc_id))
        return await self.request(cmd, rid)

    async def add_partition(self, txn: Txn, topic: str) -> pb.BaseCommand:
        rid = self.next_id()
        cmd = commands.wrap(
            pb.CommandAddPartitionToTxn(
                request_id=rid,
                txnid_most_bits=txn.most,
                txnid_least_bits=txn.least,
                partitions=[topic],
            )
        )
        return await self.request(cmd, rid)

    async def add_subscription(self, txn: Txn, topic: str, subscription: str) -> pb.BaseCommand:
        rid = self.next_id()
        cmd = commands.wrap(
            pb.CommandAddSubscriptionToTxn(
                request_id=rid,
                txnid_most_bits=txn.most,
                txnid_least_bits=txn.least,
                subscription=[pb.Subscription(topic=topic, subscription=subscription)],
            )
        )
        return await self.request(cmd, rid)

    async def end(self, txn: Txn, action: pb.TxnAction.ValueType) -> pb.CommandEndTxnResponse:
        rid = self.next_id()
        cmd = commands.wrap(
            pb.CommandEndTxn(
                request_id=rid,
                txnid_most_bits=txn.most,
                txnid_least_bits=txn.least,
                txn_action=action,
            )
        )
        response = await self.request(cmd, rid)
        assert response.type == _T.END_TXN_RESPONSE, response
        return response.endTxnResponse

    # -- producing and acknowledging -----------------------------------------------------------

    async def create_producer(self, topic: str, producer_id: int, name: str) -> None:
        rid = self.next_id()
        response = await self.request(
            commands.producer(topic, producer_id, rid, producer_name=name), rid
        )
        assert response.type == _T.PRODUCER_SUCCESS, response

    async def send(
        self,
        producer_id: int,
        name: str,
        sequence_id: int,
        payload: bytes,
        txn: Txn | None,
        key: str | None = None,
    ) -> pb.BaseCommand:
        """SEND one message (in ``txn``, with ``key``); its SEND_RECEIPT or SEND_ERROR."""
        meta = pb.MessageMetadata(
            producer_name=name, sequence_id=sequence_id, publish_time=1_700_000_000_000
        )
        if key is not None:
            meta.partition_key = key
        cmd = commands.send(producer_id, sequence_id)
        if txn is not None:
            meta.txnid_most_bits, meta.txnid_least_bits = txn.most, txn.least
            cmd.send.txnid_most_bits, cmd.send.txnid_least_bits = txn.most, txn.least
        await self.raw.send(cmd, encode_message_body(meta, payload))
        return await self._wait(
            lambda c: (
                (c.type == _T.SEND_RECEIPT and c.send_receipt.sequence_id == sequence_id)
                or (c.type == _T.SEND_ERROR and c.send_error.sequence_id == sequence_id)
            )
        )

    async def subscribe(
        self,
        topic: str,
        subscription: str,
        consumer_id: int,
        sub_type: pb.CommandSubscribe.SubType.ValueType = pb.CommandSubscribe.Shared,
        permits: int = 1000,
    ) -> None:
        rid = self.next_id()
        cmd = commands.subscribe(
            topic,
            subscription,
            sub_type,
            consumer_id,
            rid,
            initial_position=pb.CommandSubscribe.Earliest,
        )
        response = await self.request(cmd, rid)
        assert response.type == _T.SUCCESS, response
        await self.raw.send(commands.flow(consumer_id, permits))

    async def ack(
        self,
        consumer_id: int,
        message_id: pb.MessageIdData,
        txn: Txn | None,
        cumulative: bool = False,
    ) -> pb.CommandAckResponse:
        rid = self.next_id()
        cmd = commands.ack(consumer_id, [message_id], request_id=rid, cumulative=cumulative)
        if txn is not None:
            cmd.ack.txnid_most_bits, cmd.ack.txnid_least_bits = txn.most, txn.least
        response = await self.request(cmd, rid)
        assert response.type == _T.ACK_RESPONSE, response
        return response.ackResponse


def error_name(response: object) -> str | None:
    """The ``ServerError`` name in a response's ``error`` field, if it has one."""
    if not response.HasField("error"):  # type: ignore[attr-defined]
        return None
    return pb.ServerError.Name(response.error)  # type: ignore[attr-defined]
