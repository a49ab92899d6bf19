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
coordinator routes answer for the whole cluster, as Pulsar's do (ADR 0071, amended 2026-11-27): a
route naming one coordinator (``transactionMetadata`` by its ``mostSigBits``, ``coordinatorStats``
and ``slowTransactions`` with ``coordinatorId``) is answered ``307`` to the web URL of the broker
serving it - its HTTPS one when the call came over HTTPS - after placing a coordinator nobody
serves; the others gather every other broker's answer (:mod:`braid.admin.transaction_peers`),
except when the request is itself such a gathering call (marked with
:data:`~braid.scalable.forwarding.FORWARDED_HEADER`), which answers for this broker only. A
transaction's produced partitions and acknowledged subscriptions are read from the brokers
serving them. A topic route runs on the topic's owner (:mod:`braid.admin.owner_redirect`
redirects it there on ``braid broker``; a topic not loaded is loaded; an unknown one, or one
being deleted, is 404). With authorization on, these
routes need a super user (the table of :mod:`braid.admin.authorization` knows no ``/admin/v3``
path).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Protocol
from urllib.parse import quote

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import RedirectResponse

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.admin.transaction_peers import TransactionPeers
from braid.broker.errors import CoordinatorNotFound, TopicNotFound
from braid.broker.ownership import LookupAnswer
from braid.broker.topic import PersistentTopic
from braid.broker.topic_deletion import TopicDeletion
from braid.broker.transactions.coordinator import TransactionCoordinator, TxnMeta
from braid.broker.transactions.ids import TxnId
from braid.broker.transactions.pending_ack import PendingAcks, TopicTransactions
from braid.broker.transactions.topics import BrokerTransactions
from braid.clock import Clock
from braid.core.errors import (
    BraidError,
    InvalidInputError,
    NotFoundError,
    ServiceUnavailableError,
)
from braid.core.names import TopicDomain, TopicName
from braid.ledger.api import Position
from braid.scalable.forwarding import FORWARDED_HEADER

log = logging.getLogger(__name__)


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

    async def lookup(
        self, name: str, listener: str | None = None, *, authoritative: bool = False
    ) -> LookupAnswer: ...


_TAGS: list[Any] = ["transactions"]
_Bits = Annotated[int, Path(ge=0, lt=1 << 64, description="64-bit half of a transaction id")]
_CoordinatorId = Annotated[
    int | None, Query(alias="coordinatorId", ge=0, description="one coordinator (default: all)")
]
#: Set on the calls one broker makes to gather the others' answers: answer for this broker only.
_Forwarded = Annotated[str | None, Header(alias=FORWARDED_HEADER, include_in_schema=False)]


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

    def __init__(self, broker: TransactionsBroker, peers: TransactionPeers) -> None:
        self._broker = broker
        self.peers = peers

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

    async def here_or_owner(self, tc_id: int, https: bool) -> TransactionCoordinator | str:
        """Coordinator ``tc_id`` when this broker serves it, else the web URL of the broker that
        does (``https``: the call came over HTTPS). A coordinator nobody serves is placed first,
        as a client's lookup of it would place it.

        Raises:
            CoordinatorNotFound: no such coordinator, or (standalone) not served here.
            ServiceUnavailableError: it has no broker right now (mid hand-over).
        """
        transactions = self.enabled()
        coordinators = transactions.coordinators
        if not 0 <= tc_id < coordinators.count:
            raise CoordinatorNotFound(
                f"transaction coordinator {tc_id} does not exist (there are {coordinators.count})"
            )
        here = coordinators.serving(tc_id)
        placement = transactions.placement
        if here is not None or placement is None:
            return here or coordinators.get(tc_id)
        if await placement.place(tc_id):
            await coordinators.adopt(tc_id)
            return coordinators.get(tc_id)
        web = await placement.web_url(tc_id, https)
        if web is None:
            raise ServiceUnavailableError(
                f"transaction coordinator {tc_id} has no broker right now; retry shortly"
            )
        return web

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
        """``TransactionMetadata`` of ``meta``, with the stats of its topics, read from the
        brokers serving them."""
        txn = meta.txn
        produced: dict[str, object] = {}
        for topic in meta.partitions:
            found = await self._stats(
                topic,
                f"transactionInBufferStats/{_path_of(topic)}/{txn.most_bits}/{txn.least_bits}",
                lambda here: here.buffer.transaction_stats(txn),
            )
            produced[topic] = found or {"startPosition": None, "aborted": False}
        acked: dict[str, dict[str, object]] = {}
        for topic, subscription in meta.subscriptions:
            sub = quote(subscription, safe="")
            found = await self._stats(
                topic,
                f"transactionInPendingAckStats/{_path_of(topic)}/{sub}/{txn.most_bits}/"
                f"{txn.least_bits}",
                functools.partial(_pending_stats, subscription=subscription, txn=txn),
            )
            acked.setdefault(topic, {})[subscription] = found or {"cumulativeAckPosition": None}
        return _txn_metadata(meta, produced, acked)

    async def _stats(
        self, topic: str, path: str, local: Callable[[TopicTransactions], object]
    ) -> object:
        """One transaction's stats on ``topic``: from its loaded transactions here, else from
        the broker serving it (``path``); ``None`` when neither knows the topic."""
        if self._broker.deletion.is_deleting(topic):
            return None
        try:
            answer = await self._broker.lookup(topic)
        except BraidError:
            answer = None
        if answer is not None and not answer.local and answer.http_url:
            web = self.peers.admin_url(answer.http_url, answer.http_url_tls or None)
            if web is not None:
                try:
                    return await self.peers.get(answer.service_url, web, f"/{path}")
                except BraidError as exc:
                    log.info("transaction stats of %s from %s: %s", topic, web, exc)
                    return None
        try:
            loaded = await self._broker.get_or_create_topic(topic, create=False)
        except BraidError:
            return None
        if not isinstance(loaded, PersistentTopic) or loaded.transactions is None:
            return None
        return local(loaded.transactions)


def _pending_stats(transactions: TopicTransactions, *, subscription: str, txn: TxnId) -> object:
    pending = transactions.pending_of(subscription)
    return None if pending is None else pending.transaction_stats(txn)


def _path_of(topic: str) -> str:
    """``tenant/namespace/topic`` of a persistent topic's name, each part URL-quoted."""
    name = TopicName.parse(topic)
    return "/".join(quote(p, safe="") for p in (name.tenant, name.namespace, name.local_name))


def _redirect(request: Request, web: str) -> RedirectResponse:
    """``307`` to the same path and query on the broker at ``web``."""
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"{web.rstrip('/')}{request.url.path}{query}", status_code=307)


def _by_id(documents: Mapping[str, object]) -> dict[str, object]:
    """Documents keyed by coordinator id, in id order."""
    return dict(sorted(documents.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else -1))


def transactions_router(
    broker: TransactionsBroker, broker_service_url: str, peers: TransactionPeers | None = None
) -> APIRouter:
    """The ``/admin/v3/transactions`` routes (mounted at the root); ``peers``: the other brokers
    of the cluster (none: this broker answers alone)."""
    router = APIRouter(prefix="/admin/v3/transactions", tags=_TAGS)
    resolve = _Transactions(broker, peers or TransactionPeers(None))
    _coordinator_routes(router, resolve, broker, broker_service_url)
    _topic_routes(router, resolve)
    return router


def _coordinator_routes(
    router: APIRouter, resolve: _Transactions, broker: TransactionsBroker, service_url: str
) -> None:
    def https(request: Request) -> bool:
        return request.url.scheme == "https"

    @router.get("/coordinators", summary="The cluster's transaction coordinators and brokers")
    async def coordinators(forwarded: _Forwarded = None) -> dict[str, object]:
        found: dict[str, object] = {
            str(c.tc_id): {"id": c.tc_id, "brokerServiceUrl": service_url}
            for c in resolve.coordinators(None)
        }
        if forwarded is None:
            found.update(await resolve.peers.gather("/coordinators"))
        return _by_id(found)

    @router.get("/coordinatorStats", summary="Transaction coordinator stats (one, or all by id)")
    async def coordinator_stats(
        request: Request, coordinator_id: _CoordinatorId = None, forwarded: _Forwarded = None
    ) -> Any:
        if coordinator_id is not None:
            found = await resolve.here_or_owner(coordinator_id, https(request))
            if isinstance(found, str):
                return _redirect(request, found)
            return _coordinator_stats(found)
        stats: dict[str, object] = {
            str(c.tc_id): _coordinator_stats(c) for c in resolve.coordinators(None)
        }
        if forwarded is None:
            stats.update(await resolve.peers.gather("/coordinatorStats"))
        return _by_id(stats)

    @router.get(
        "/transactionMetadata/{most}/{least}",
        summary="A transaction's status, times, produced partitions and acknowledged subscriptions",
    )
    async def transaction_metadata(request: Request, most: _Bits, least: _Bits) -> Any:
        txn = TxnId(most, least)
        found = await resolve.here_or_owner(txn.coordinator_id, https(request))
        if isinstance(found, str):
            return _redirect(request, found)
        meta = found.transaction(txn)
        if meta is None:
            raise NotFoundError(f"transaction {txn} not found (never begun, or already ended)")
        return await resolve.metadata(meta)

    @router.get(
        "/slowTransactions/{timeout_ms}",
        summary="Transactions open for longer than `timeout` milliseconds, by id",
    )
    async def slow_transactions(
        request: Request,
        timeout_ms: Annotated[int, Path(ge=0, description="milliseconds")],
        coordinator_id: _CoordinatorId = None,
        forwarded: _Forwarded = None,
    ) -> Any:
        if coordinator_id is not None:
            found = await resolve.here_or_owner(coordinator_id, https(request))
            if isinstance(found, str):
                return _redirect(request, found)
            served = [found]
        else:
            served = resolve.coordinators(None)
        now = broker.clock.now_ms()
        slow: dict[str, object] = {}
        for coordinator in served:
            for meta in coordinator.transactions():
                if now - meta.opened_ms > timeout_ms:
                    slow[str(meta.txn)] = await resolve.metadata(meta)
        if coordinator_id is None and forwarded is None:
            slow.update(await resolve.peers.gather(f"/slowTransactions/{timeout_ms}"))
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
