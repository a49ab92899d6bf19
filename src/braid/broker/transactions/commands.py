"""The ``transactions`` command family: Pulsar's coordinator and end-on-participant commands.

TC_CLIENT_CONNECT_REQUEST (a client's handshake with coordinator ``tc_id``), NEW_TXN,
ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN, END_TXN, END_TXN_ON_PARTITION and
END_TXN_ON_SUBSCRIPTION are each answered with their own response command, the error (if any) in
its ``error``/``message`` fields as Pulsar does. A coordinator command for a coordinator another
broker serves is ``TransactionCoordinatorNotFound`` (the client looks it up again); an
END_TXN_ON_* for a topic another broker serves is ``ServiceNotReady`` (the coordinator's broker
looks it up again, ADR 0070). WATCH_TC_ASSIGNMENTS / WATCH_TC_ASSIGNMENTS_CLOSE open and close a
coordinator-assignment watch (:mod:`.assignments`). With ``transactionCoordinatorEnabled=false``
every one is refused with an ``ERROR`` ``NotAllowedError`` "transactions are not enabled" (Pulsar's
answer). The session keeps no state: a transaction belongs to its coordinator, not to a
connection (a client may end it over another connection).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from google.protobuf.message import Message

from braid.broker.authorization import AuthorizationService
from braid.broker.errors import InvalidTopicName, ServerError, to_server_error
from braid.broker.registry import CommandChannel, CommandFamily, CommandHandler, CommandType
from braid.broker.transactions.coordinator import TransactionCoordinator
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.topics import BrokerTransactions
from braid.core import names
from braid.core.names import TopicName
from braid.protocol import commands
from braid.protocol.events import CommandReceived
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.authorization import AuthorizationDenied

log = logging.getLogger(__name__)

_T = pb.BaseCommand


class TransactionService(Protocol):
    """What the transaction commands need from the broker."""

    @property
    def transactions(self) -> BrokerTransactions | None:
        """``None`` while ``transactionCoordinatorEnabled`` is off."""
        ...

    @property
    def authorization(self) -> AuthorizationService:
        """Who is a super user (may end another role's transaction)."""
        ...


def _response(message: Message, txn: TxnId | None, error: BaseException | None) -> pb.BaseCommand:
    if txn is not None:
        message.txnid_most_bits = txn.most_bits  # type: ignore[attr-defined]
        message.txnid_least_bits = txn.least_bits  # type: ignore[attr-defined]
    if error is not None:
        code, text = to_server_error(error)
        message.error = code  # type: ignore[attr-defined]
        message.message = text  # type: ignore[attr-defined]
    return commands.wrap(message)


def _full_name(topic: str) -> str:
    """The full name of ``topic`` as topics know themselves (a short name completed)."""
    try:
        return str(TopicName.parse(topic))
    except names.InvalidTopicName as exc:
        raise InvalidTopicName(str(exc)) from exc


class TransactionCommands:
    """One connection's transaction commands."""

    def __init__(self, channel: CommandChannel, service: TransactionService) -> None:
        self._channel = channel
        self._service = service

    async def close(self) -> None:
        transactions = self._service.transactions
        if transactions is not None:
            transactions.assignments.unwatch(id(self))

    async def _coordinator(self, t: BrokerTransactions, txn: TxnId) -> TransactionCoordinator:
        """``txn``'s coordinator, once this connection's role may act on ``txn``."""
        coordinator = await t.coordinators.acquire(txn.coordinator_id)
        role = self._channel.auth_role
        super_user = self._service.authorization.is_super_user(role)
        coordinator.check_owner(txn, role, super_user)
        return coordinator

    def _serve(
        self,
        request_id: int,
        txn: TxnId | None,
        work: Callable[[BrokerTransactions], Awaitable[TxnId | None]],
        response: Callable[[], Message],
    ) -> None:
        """Run ``work``; answer with ``response()`` filled with its transaction id or error."""
        transactions = self._service.transactions
        if transactions is None:
            self._channel.send(
                commands.error(
                    request_id,
                    ServerError.NotAllowedError,
                    "transactions are not enabled (transactionCoordinatorEnabled=false)",
                )
            )
            return

        async def run() -> None:
            try:
                done = await work(transactions)
            except Exception as exc:
                log.info("transaction request %d refused: %s", request_id, exc)
                self._channel.send(_response(response(), txn, exc))
                return
            self._channel.send(_response(response(), done or txn, None))

        self._channel.spawn(run(), request_id=request_id)

    def on_tc_connect(self, event: CommandReceived) -> None:
        req = event.command.tcClientConnectRequest

        async def work(t: BrokerTransactions) -> None:
            await t.coordinators.acquire(req.tc_id)

        self._serve(
            req.request_id,
            None,
            work,
            lambda: pb.CommandTcClientConnectResponse(request_id=req.request_id),
        )

    def on_new_txn(self, event: CommandReceived) -> None:
        req = event.command.newTxn

        async def work(t: BrokerTransactions) -> TxnId:
            coordinator = await t.coordinators.acquire(req.tc_id)
            return await coordinator.new_transaction(req.txn_ttl_millis, self._channel.auth_role)

        self._serve(
            req.request_id, None, work, lambda: pb.CommandNewTxnResponse(request_id=req.request_id)
        )

    def on_add_partition(self, event: CommandReceived) -> None:
        req = event.command.addPartitionToTxn
        txn = TxnId.of(req)

        async def work(t: BrokerTransactions) -> None:
            partitions = [_full_name(p) for p in req.partitions]
            await (await self._coordinator(t, txn)).add_partitions(txn, partitions)

        self._serve(
            req.request_id,
            txn,
            work,
            lambda: pb.CommandAddPartitionToTxnResponse(request_id=req.request_id),
        )

    def on_add_subscription(self, event: CommandReceived) -> None:
        req = event.command.addSubscriptionToTxn
        txn = TxnId.of(req)

        async def work(t: BrokerTransactions) -> None:
            subs = [(_full_name(s.topic), s.subscription) for s in req.subscription]
            await (await self._coordinator(t, txn)).add_subscriptions(txn, subs)

        self._serve(
            req.request_id,
            txn,
            work,
            lambda: pb.CommandAddSubscriptionToTxnResponse(request_id=req.request_id),
        )

    def on_end_txn(self, event: CommandReceived) -> None:
        req = event.command.endTxn
        txn = TxnId.of(req)

        async def work(t: BrokerTransactions) -> None:
            await (await self._coordinator(t, txn)).end(txn, req.txn_action)

        self._serve(
            req.request_id, txn, work, lambda: pb.CommandEndTxnResponse(request_id=req.request_id)
        )

    def _require_broker(self) -> None:
        """END_TXN_ON_* come from coordinators on brokers: with authentication on, only a super
        user (the brokers' ``brokerClientAuthenticationPlugin`` role) may send them.

        Raises:
            AuthorizationDenied: another role.
        """
        role = self._channel.auth_role
        if role is not None and not self._service.authorization.is_super_user(role):
            raise AuthorizationDenied(
                f"role {role!r} may not end transactions on topics: only brokers (super users) do"
            )

    def on_end_txn_on_partition(self, event: CommandReceived) -> None:
        req = event.command.endTxnOnPartition
        txn = TxnId.of(req)

        async def work(t: BrokerTransactions) -> None:
            self._require_broker()
            await t.end_on_partition_here(req.topic, txn, req.txn_action)

        self._serve(
            req.request_id,
            txn,
            work,
            lambda: pb.CommandEndTxnOnPartitionResponse(request_id=req.request_id),
        )

    def on_end_txn_on_subscription(self, event: CommandReceived) -> None:
        req = event.command.endTxnOnSubscription
        txn = TxnId.of(req)
        sub = req.subscription

        async def work(t: BrokerTransactions) -> None:
            self._require_broker()
            await t.end_on_subscription_here(sub.topic, sub.subscription, txn, req.txn_action)

        self._serve(
            req.request_id,
            txn,
            work,
            lambda: pb.CommandEndTxnOnSubscriptionResponse(request_id=req.request_id),
        )

    def on_watch_tc_assignments(self, event: CommandReceived) -> None:
        watch_id = event.command.watchTcAssignments.watch_id
        transactions = self._service.transactions
        if transactions is None:
            self._channel.send(
                commands.watch_tc_assignments_update(
                    watch_id,
                    error=ServerError.NotAllowedError,
                    message="transactions are not enabled (transactionCoordinatorEnabled=false)",
                )
            )
            return
        transactions.assignments.watch(id(self), watch_id, self._channel.send)

    def on_watch_tc_assignments_close(self, event: CommandReceived) -> None:
        transactions = self._service.transactions
        if transactions is not None:
            transactions.assignments.unwatch(
                id(self), event.command.watchTcAssignmentsClose.watch_id
            )


def transaction_commands(service: TransactionService) -> CommandFamily[TransactionCommands]:
    """The ``transactions`` family, to register on the broker's command registry."""
    handlers: dict[CommandType, CommandHandler[TransactionCommands]] = {
        _T.TC_CLIENT_CONNECT_REQUEST: TransactionCommands.on_tc_connect,
        _T.NEW_TXN: TransactionCommands.on_new_txn,
        _T.ADD_PARTITION_TO_TXN: TransactionCommands.on_add_partition,
        _T.ADD_SUBSCRIPTION_TO_TXN: TransactionCommands.on_add_subscription,
        _T.END_TXN: TransactionCommands.on_end_txn,
        _T.END_TXN_ON_PARTITION: TransactionCommands.on_end_txn_on_partition,
        _T.END_TXN_ON_SUBSCRIPTION: TransactionCommands.on_end_txn_on_subscription,
        _T.WATCH_TC_ASSIGNMENTS: TransactionCommands.on_watch_tc_assignments,
        _T.WATCH_TC_ASSIGNMENTS_CLOSE: TransactionCommands.on_watch_tc_assignments_close,
    }
    return CommandFamily(
        name="transactions",
        open_session=lambda channel: TransactionCommands(channel, service),
        handlers=handlers,
    )
