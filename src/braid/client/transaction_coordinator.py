"""The client's link to Pulsar's transaction coordinators (TC): discovery and the TC commands.

Coordinator discovery takes Pulsar's lookup path, the fallback every conformant client has
(``docs/client.md#transactions``): the partition count of
``persistent://pulsar/system/transaction_coordinator_assign`` is the number of coordinators,
coordinator *n* is served by the owner of partition *n* (a standard LOOKUP), and a
TC_CLIENT_CONNECT_REQUEST with ``tc_id = n`` on that connection makes it the coordinator's. The
scalable-topic TC discovery watch (``supports_tc_metadata_discovery``) is not used yet.

One :class:`CoordinatorClient` per client, created on the first ``new_transaction``. It keeps
one connection per coordinator (from the client's pool, so shared with producers and consumers);
a connection that went away is looked up again on the next request. NEW_TXN goes to the
coordinators round-robin; every other command to the coordinator named by the transaction id's
``mostBits``. Transient failures (connection loss, a broker not ready) are retried with backoff
until the operation timeout; a coordinator's refusal (its response's ``error`` field) is raised
as the client's typed error (:func:`~braid.client.errors.error_for_code`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from braid.client.backoff import retry_transient
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.errors import NotAllowedError, NotFoundError, error_for_code
from braid.client.lookup import lookup_broker, partition_count
from braid.protocol import commands
from braid.protocol.generated import PulsarApi_pb2 as pb

#: The partitioned topic whose partitions name the coordinators (Pulsar's name).
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"

_NOT_ENABLED = (
    "the broker runs no transaction coordinator (it needs transactionCoordinatorEnabled=true)"
)


def _check(response: pb.BaseCommand, what: str) -> pb.BaseCommand:
    """``response`` unless its inner command carries a coordinator error (then raised, typed)."""
    inner: Any = commands.inner(response)
    if inner is not None and inner.HasField("error"):
        raise error_for_code(inner.error, inner.message, context=what)
    return response


class CoordinatorClient:
    """Reaches the transaction coordinators of one client's cluster (see the module doc)."""

    def __init__(self, ctx: ClientContext) -> None:
        self._ctx = ctx
        self._count: int | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._round_robin = itertools.count()

    async def _coordinators(self) -> int:
        if self._count is None:
            try:
                count = await partition_count(self._ctx.pool, ASSIGN_TOPIC)
            except NotFoundError as exc:
                raise NotAllowedError(_NOT_ENABLED) from exc
            if count <= 0:
                raise NotAllowedError(_NOT_ENABLED)
            self._count = count
        return self._count

    async def _connection(self, tc_id: int) -> BrokerConnection:
        conn = self._connections.get(tc_id)
        if conn is not None and not conn.closed:
            return conn
        url = await lookup_broker(self._ctx.pool, f"{ASSIGN_TOPIC}-partition-{tc_id}")
        conn = await self._ctx.pool.get(url)
        request_id = conn.new_request_id()
        cmd = commands.wrap(pb.CommandTcClientConnectRequest(request_id=request_id, tc_id=tc_id))
        _check(await conn.request(cmd, request_id), f"coordinator {tc_id}")
        self._connections[tc_id] = conn
        return conn

    async def _request(
        self, tc_id: int, build: Callable[[int], pb.BaseCommand], what: str
    ) -> pb.BaseCommand:
        async def once() -> pb.BaseCommand:
            conn = await self._connection(tc_id)
            request_id = conn.new_request_id()
            try:
                response = await conn.request(build(request_id), request_id)
            except Exception:
                self._connections.pop(tc_id, None)  # looked up again next time
                raise
            if response.type == pb.BaseCommand.ERROR:
                raise error_for_code(response.error.error, response.error.message, context=what)
            return _check(response, what)

        return await retry_transient(once, self._ctx.backoff(), self._ctx.deadline())

    async def new_txn(self, timeout_ms: int) -> tuple[int, int]:
        """Begin a transaction; its id ``(mostBits, leastBits)``.

        Raises:
            NotAllowedError: the broker runs no coordinator.
            TransactionConflictError, ServiceNotReadyError (too many open), ...: refused.
        """
        count = await self._coordinators()
        tc_id = next(self._round_robin) % count
        response = await self._request(
            tc_id,
            lambda rid: commands.wrap(
                pb.CommandNewTxn(request_id=rid, txn_ttl_millis=timeout_ms, tc_id=tc_id)
            ),
            f"new transaction on coordinator {tc_id}",
        )
        answer = response.newTxnResponse
        return answer.txnid_most_bits, answer.txnid_least_bits

    async def add_partition(self, txn: tuple[int, int], topic: str) -> None:
        """ADD_PARTITION_TO_TXN: ``txn`` produces to ``topic`` (a segment topic)."""
        most, least = txn
        await self._request(
            most,
            lambda rid: commands.wrap(
                pb.CommandAddPartitionToTxn(
                    request_id=rid, txnid_most_bits=most, txnid_least_bits=least, partitions=[topic]
                )
            ),
            f"adding {topic} to transaction ({most},{least})",
        )

    async def add_subscription(self, txn: tuple[int, int], topic: str, subscription: str) -> None:
        """ADD_SUBSCRIPTION_TO_TXN: ``txn`` acknowledges on ``subscription`` of ``topic``."""
        most, least = txn
        await self._request(
            most,
            lambda rid: commands.wrap(
                pb.CommandAddSubscriptionToTxn(
                    request_id=rid,
                    txnid_most_bits=most,
                    txnid_least_bits=least,
                    subscription=[pb.Subscription(topic=topic, subscription=subscription)],
                )
            ),
            f"adding {topic}/{subscription} to transaction ({most},{least})",
        )

    async def end(self, txn: tuple[int, int], commit: bool) -> None:
        """END_TXN with COMMIT or ABORT; returns once the coordinator has ended it everywhere.

        A retried END_TXN of the same outcome is answered again by the coordinator (ADR 0064),
        so a lost connection mid-request is safe to retry.
        """
        most, least = txn
        action = pb.TxnAction.COMMIT if commit else pb.TxnAction.ABORT
        await self._request(
            most,
            lambda rid: commands.wrap(
                pb.CommandEndTxn(
                    request_id=rid, txnid_most_bits=most, txnid_least_bits=least, txn_action=action
                )
            ),
            f"{'committing' if commit else 'aborting'} transaction ({most},{least})",
        )


__all__ = ["ASSIGN_TOPIC", "CoordinatorClient"]
