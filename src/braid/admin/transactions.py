"""Admin REST for Pulsar's transactions, with Pulsar's paths and JSON field names, under
``/admin/v3/transactions`` (what ``pulsar-admin transactions`` calls):

* ``GET /coordinators``: the coordinators served here (``{id: {"id", "brokerServiceUrl"}}``);
* ``GET /coordinatorStats[?coordinatorId=n]``: ``TransactionCoordinatorStats`` of one coordinator,
  or of every one served here keyed by id;
* ``GET /transactionMetadata/{mostSigBits}/{leastSigBits}``: ``TransactionMetadata`` (status,
  open time, timeout, produced partitions and acknowledged subscriptions with their stats);
* ``GET /slowTransactions/{timeout}[?coordinatorId=n]``: the transactions open longer than
  ``timeout`` milliseconds, by id;
* ``GET /transactionInBufferStats/{tenant}/{namespace}/{topic}/{most}/{least}``: one
  transaction in a topic's buffer (``startPosition``, ``aborted``);
* ``GET /transactionInPendingAckStats/{tenant}/{namespace}/{topic}/{sub}/{most}/{least}``: one
  transaction in a subscription's pending acks (``cumulativeAckPosition``);
* ``GET /transactionBufferStats/{tenant}/{namespace}/{topic}``: ``TransactionBufferStats``
  (with Braid's snapshot and recovery counters: ADR 0071);
* ``GET /pendingAckStats/{tenant}/{namespace}/{topic}/{sub}``: ``TransactionPendingAckStats``;
* ``GET /positionStatsInPendingAck/{tenant}/{namespace}/{topic}/{sub}/{ledgerId}/{entryId}
  [?batchIndex=i]``: whether a message is held by a pending ack (``PendingAck``), acknowledged
  (``MarkDelete``) or neither (``NotInPendingAck``).

With ``transactionCoordinatorEnabled=false`` every route answers 503 (Pulsar's answer). The
coordinator routes answer for the coordinators this broker serves; a topic route runs on the
topic's owner (:mod:`braid.admin.owner_redirect` redirects it there on ``braid broker``; a topic
not loaded is loaded; an unknown one, or one being deleted, is 404). With authorization on, these
routes need a super user (the table of :mod:`braid.admin.authorization` knows no ``/admin/v3``
path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Path, Query

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.errors import TopicNotFound
from braid.broker.topic import PersistentTopic
from braid.broker.topic_deletion import TopicDeletion
from braid.broker.transactions.coordinator import TransactionCoordinator, TxnMeta
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.pending_ack import PendingAcks, TopicTransactions
from braid.broker.transactions.topics import BrokerTransactions
from braid.clock import Clock
from braid.core.errors import InvalidInputError, NotFoundError, ServiceUnavailableError
from braid.core.names import TopicDomain, TopicName
from braid.ledger.api import Position


class TransactionCoordinatorDisabled(ServiceUnavailableError):
    """503: the broker runs with ``transactionCoordinatorEnabled=false``."""


class SubscriptionNotFound(NotFoundError):
    """404: no such subscription on the topic."""


class TransactionsBroker(Protocol):
    """What the transaction routes need from the broker (``BrokerService`` provides it)."""

    @property
    def transactions(self) -> BrokerTransactions | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def deletion(self) -> TopicDeletion:
        """Which topics are being deleted (their stats are 404 meanwhile)."""
        ...

    async def get_or_create_topic(self, name: str, *, create: bool | None = None) -> object: ...


_TAGS: list[Any] = ["transactions"]
_Bits = Annotated[int, Path(ge=0, lt=1 << 64, description="64-bit half of a transaction id")]
_CoordinatorId = Annotated[
    int | None, Query(alias="coordinatorId", ge=0, description="one coordinator (default: all)")
]


def _txn_metadata(
    meta: TxnMeta, produced: Mapping[str, object], acked: Mapping[str, object]
) -> Any:
    """Pulsar's ``TransactionMetadata``."""
    return {
        "txnId": str(meta.txn),
        "status": meta.status.value,
        "openTimestamp": meta.opened_ms,
        "timeoutAt": meta.timeout_ms,
        "producedPartitions": dict(produced),
        "ackedPartitions": dict(acked),
    }


def _coordinator_stats(coordinator: TransactionCoordinator) -> dict[str, object]:
    """Pulsar's ``TransactionCoordinatorStats``: the low watermark is the sequence below which
    every transaction of the coordinator has ended."""
    open_sequences = [meta.txn.least_bits for meta in coordinator.transactions()]
    low = min(open_sequences) - 1 if open_sequences else coordinator.sequence
    return {
        "state": "Ready",
        "leastSigBits": coordinator.sequence,
        "lowWaterMark": low,
        "ongoingTxnSize": len(open_sequences),
        "recoverStartTime": coordinator.recover_start_ms,
        "recoverEndTime": coordinator.recover_end_ms,
    }


class _Transactions:
    """Resolves what a route names: the coordinators, a loaded topic's transactions."""

    def __init__(self, broker: TransactionsBroker) -> None:
        self._broker = broker

    def enabled(self) -> BrokerTransactions:
        transactions = self._broker.transactions
        if transactions is None:
            raise TransactionCoordinatorDisabled(
                "This Broker is not configured with transactionCoordinatorEnabled=true."
            )
        return transactions

    def coordinators(self, coordinator_id: int | None) -> list[TransactionCoordinator]:
        transactions = self.enabled()
        if coordinator_id is not None:
            return [transactions.coordinators.get(coordinator_id)]
        return transactions.coordinators.served()

    async def topic(self, tenant: str, namespace: str, topic: str) -> TopicTransactions:
        self.enabled()
        name = str(TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic))
        if self._broker.deletion.is_deleting(name):
            raise TopicNotFound(f"topic {name} is being deleted")
        loaded = await self._broker.get_or_create_topic(name, create=False)
        if not isinstance(loaded, PersistentTopic) or loaded.transactions is None:
            raise TopicNotFound(f"topic {name} has no transaction buffer here")
        return loaded.transactions

    async def pending(
        self, tenant: str, namespace: str, topic: str, subscription: str
    ) -> PendingAcks:
        transactions = await self.topic(tenant, namespace, topic)
        pending = transactions.pending_of(subscription)
        if pending is None:
            raise SubscriptionNotFound(
                f"subscription {subscription} does not exist on {transactions.topic}"
            )
        return pending

    async def metadata(self, meta: TxnMeta) -> Any:
        """``TransactionMetadata`` of ``meta``, with the stats of its topics served here."""
        produced: dict[str, object] = {}
        for topic in meta.partitions:
            found = await self._loaded(topic)
            stats = found.buffer.transaction_stats(meta.txn) if found is not None else None
            produced[topic] = stats or {"startPosition": None, "aborted": False}
        acked: dict[str, dict[str, object]] = {}
        for topic, subscription in meta.subscriptions:
            found = await self._loaded(topic)
            pending = found.pending_of(subscription) if found is not None else None
            acked.setdefault(topic, {})[subscription] = (
                pending.transaction_stats(meta.txn)
                if pending is not None
                else {"cumulativeAckPosition": None}
            )
        return _txn_metadata(meta, produced, acked)

    async def _loaded(self, topic: str) -> TopicTransactions | None:
        if self._broker.deletion.is_deleting(topic):
            return None
        try:
            loaded = await self._broker.get_or_create_topic(topic, create=False)
        except NotFoundError:
            return None
        return loaded.transactions if isinstance(loaded, PersistentTopic) else None


def transactions_router(broker: TransactionsBroker, broker_service_url: str) -> APIRouter:
    """The ``/admin/v3/transactions`` routes (mounted at the root)."""
    router = APIRouter(prefix="/admin/v3/transactions", tags=_TAGS)
    resolve = _Transactions(broker)
    _coordinator_routes(router, resolve, broker, broker_service_url)
    _topic_routes(router, resolve)
    return router


def _coordinator_routes(
    router: APIRouter, resolve: _Transactions, broker: TransactionsBroker, service_url: str
) -> None:
    @router.get("/coordinators", summary="The transaction coordinators served by this broker")
    async def coordinators() -> dict[str, object]:
        return {
            str(c.tc_id): {"id": c.tc_id, "brokerServiceUrl": service_url}
            for c in resolve.coordinators(None)
        }

    @router.get("/coordinatorStats", summary="Transaction coordinator stats (one, or all by id)")
    async def coordinator_stats(coordinator_id: _CoordinatorId = None) -> Any:
        found = resolve.coordinators(coordinator_id)
        if coordinator_id is not None:
            return _coordinator_stats(found[0])
        return {str(c.tc_id): _coordinator_stats(c) for c in found}

    @router.get(
        "/transactionMetadata/{most}/{least}",
        summary="A transaction's status, times, produced partitions and acknowledged subscriptions",
    )
    async def transaction_metadata(most: _Bits, least: _Bits) -> Any:
        txn = TxnId(most, least)
        meta = resolve.enabled().coordinators.of(txn).transaction(txn)
        if meta is None:
            raise NotFoundError(f"transaction {txn} not found (never begun, or already ended)")
        return await resolve.metadata(meta)

    @router.get(
        "/slowTransactions/{timeout_ms}",
        summary="Transactions open for longer than `timeout` milliseconds, by id",
    )
    async def slow_transactions(
        timeout_ms: Annotated[int, Path(ge=0, description="milliseconds")],
        coordinator_id: _CoordinatorId = None,
    ) -> Any:
        now = broker.clock.now_ms()
        slow: dict[str, object] = {}
        for coordinator in resolve.coordinators(coordinator_id):
            for meta in coordinator.transactions():
                if now - meta.opened_ms > timeout_ms:
                    slow[str(meta.txn)] = await resolve.metadata(meta)
        return slow


def _topic_routes(router: APIRouter, resolve: _Transactions) -> None:
    topic_path = "{tenant}/{namespace}/{topic}"

    @router.get(
        f"/transactionInBufferStats/{topic_path}/{{most}}/{{least}}",
        summary="One transaction in a topic's transaction buffer",
    )
    async def transaction_in_buffer(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, most: _Bits, least: _Bits
    ) -> Any:
        transactions = await resolve.topic(tenant, namespace, topic)
        stats = transactions.buffer.transaction_stats(TxnId(most, least))
        return stats or {"startPosition": None, "aborted": False}

    @router.get(
        f"/transactionInPendingAckStats/{topic_path}/{{subscription}}/{{most}}/{{least}}",
        summary="One transaction in a subscription's pending acknowledgements",
    )
    async def transaction_in_pending_ack(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        most: _Bits,
        least: _Bits,
    ) -> Any:
        pending = await resolve.pending(tenant, namespace, topic, subscription)
        return pending.transaction_stats(TxnId(most, least))

    @router.get(
        f"/transactionBufferStats/{topic_path}",
        summary="A topic's transaction buffer: max read position, snapshot, recovery",
    )
    async def transaction_buffer_stats(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        low_water_marks: Annotated[bool, Query(alias="lowWaterMarks")] = False,
    ) -> Any:
        transactions = await resolve.topic(tenant, namespace, topic)
        stats = transactions.buffer.stats()
        stats["lowWaterMarks"] = {} if low_water_marks else None
        return stats

    @router.get(
        f"/pendingAckStats/{topic_path}/{{subscription}}",
        summary="A subscription's pending acknowledgements",
    )
    async def pending_ack_stats(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        low_water_marks: Annotated[bool, Query(alias="lowWaterMarks")] = False,
    ) -> Any:
        pending = await resolve.pending(tenant, namespace, topic, subscription)
        stats = pending.stats()
        stats["lowWaterMarks"] = {} if low_water_marks else None
        return stats

    @router.get(
        f"/positionStatsInPendingAck/{topic_path}/{{subscription}}/{{ledger_id}}/{{entry_id}}",
        summary="Whether a message is held by a pending ack, acknowledged, or neither",
    )
    async def position_in_pending_ack(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        ledger_id: int,
        entry_id: int,
        batch_index: Annotated[int | None, Query(alias="batchIndex", ge=0)] = None,
    ) -> Any:
        if ledger_id < 0 or entry_id < 0:
            raise InvalidInputError(f"invalid position {ledger_id}:{entry_id}")
        pending = await resolve.pending(tenant, namespace, topic, subscription)
        return {"state": pending.position_state(Position(ledger_id, entry_id), batch_index)}


__all__ = [
    "SubscriptionNotFound",
    "TransactionCoordinatorDisabled",
    "TransactionsBroker",
    "transactions_router",
]
