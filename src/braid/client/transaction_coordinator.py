"""The client's link to Pulsar's transaction coordinators (TC): discovery and the TC commands.

Discovery (``docs/client.md#transactions``) takes one of two paths, chosen on first use from the
service broker's CONNECTED:

* it advertises ``supports_tc_metadata_discovery``: one coordinator-assignment watch per client
  (:class:`~braid.client.tc_assignments.TcAssignmentWatch`). The number of coordinators is the
  snapshot's ``parallelism``; each coordinator's handler (its connection) points at the owner the
  latest snapshot names and is retargeted when a snapshot names another; a coordinator absent from
  the snapshot (mid-election) parks its requests until a later snapshot names an owner, bounded by
  the operation timeout (then :class:`~braid.client.errors.TimeoutError`);
* it does not: Pulsar's lookup path, the fallback every conformant client has - the partition
  count of ``persistent://pulsar/system/transaction_coordinator_assign`` is the number of
  coordinators, coordinator *n* is served by the owner of partition *n* (a standard LOOKUP).

Either way a TC_CLIENT_CONNECT_REQUEST with ``tc_id = n`` on the owner's connection makes it the
coordinator's. One :class:`CoordinatorClient` per client, created on the first
``new_transaction``; its connections come from the client's pool (shared with producers and
consumers), and one that went away is found again on the next request. NEW_TXN goes to the
coordinators round-robin; every other command to the coordinator named by the transaction id's
``mostBits``. Transient failures (connection loss, a broker not ready) are retried with backoff
until the operation timeout; a coordinator's refusal (its response's ``error`` field) is raised
as the client's typed error (:func:`~braid.client.errors.error_for_code`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from braid.client.backoff import retry_transient
from braid.client.connection import BrokerConnection
from braid.client.context import ClientContext
from braid.client.errors import NotAllowedError, NotFoundError, error_for_code
from braid.client.lookup import lookup_broker, partition_count
from braid.client.tc_assignments import TcAssignmentWatch
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
        #: ``tc_id -> (the URL it was found at, the connection made its coordinator's)``.
        self._handlers: dict[int, tuple[str, BrokerConnection]] = {}
        self._round_robin = itertools.count()
        self._discovering = asyncio.Lock()
        self._discovered = False
        self._watch: TcAssignmentWatch | None = None
        #: Lookups made to find coordinators (PARTITIONED_METADATA and LOOKUP of the assign
        #: topic); stays 0 on the watch path.
        self.lookups = 0

    @property
    def discovery(self) -> str:
        """``"watch"`` (the coordinator-assignment watch) or ``"lookup"`` (Pulsar's lookup
        path); ``"unknown"`` before the first request."""
        if not self._discovered:
            return "unknown"
        return "watch" if self._watching() is not None else "lookup"

    def _watching(self) -> TcAssignmentWatch | None:
        watch = self._watch
        return watch if watch is not None and not watch.unsupported else None

    async def _discover(self) -> None:
        """Choose the discovery path once, from the service broker's CONNECTED."""
        async with self._discovering:
            if self._discovered:
                return
            conn = await retry_transient(
                self._ctx.pool.service_connection, self._ctx.backoff(), self._ctx.deadline()
            )
            if conn.supports_tc_metadata_discovery:
                watch = TcAssignmentWatch(self._ctx)
                await watch.start()
                watch.listeners.append(self._retarget)
                self._watch = watch
            self._discovered = True

    def _retarget(self) -> None:
        """A new snapshot: drop each coordinator handler whose owner is no longer the one it
        points at (its next request connects to the new owner, or parks)."""
        watch = self._watch
        if watch is None:
            return
        owners = watch.owners()
        for tc_id, (url, _) in list(self._handlers.items()):
            if owners.get(tc_id) != url:
                del self._handlers[tc_id]

    async def _coordinators(self) -> int:
        await self._discover()
        watch = self._watching()
        if watch is not None:
            if watch.parallelism <= 0:
                raise NotAllowedError(_NOT_ENABLED)
            return watch.parallelism
        if self._count is None:
            self.lookups += 1
            try:
                count = await partition_count(self._ctx.pool, ASSIGN_TOPIC)
            except NotFoundError as exc:
                raise NotAllowedError(_NOT_ENABLED) from exc
            if count <= 0:
                raise NotAllowedError(_NOT_ENABLED)
            self._count = count
        return self._count

    async def _owner(self, tc_id: int, deadline: float) -> str:
        watch = self._watching()
        if watch is not None:
            url = await watch.owner(tc_id, deadline)  # parked while mid-election
            if url is not None:
                return url
        self.lookups += 1
        return await lookup_broker(self._ctx.pool, f"{ASSIGN_TOPIC}-partition-{tc_id}")

    async def _connection(self, tc_id: int, deadline: float) -> BrokerConnection:
        await self._discover()
        found = self._handlers.get(tc_id)
        watch = self._watching()
        if found is not None and not found[1].closed and watch is None:
            return found[1]
        url = await self._owner(tc_id, deadline)
        if found is not None and not found[1].closed and found[0] == url:
            return found[1]
        conn = await self._ctx.pool.get(url)
        request_id = conn.new_request_id()
        cmd = commands.wrap(pb.CommandTcClientConnectRequest(request_id=request_id, tc_id=tc_id))
        _check(await conn.request(cmd, request_id), f"coordinator {tc_id}")
        self._handlers[tc_id] = (url, conn)
        return conn

    async def close(self) -> None:
        """End the coordinator-assignment watch (the connections belong to the pool)."""
        if self._watch is not None:
            await self._watch.close()

    async def _request(
        self, tc_id: int, build: Callable[[int], pb.BaseCommand], what: str
    ) -> pb.BaseCommand:
        deadline = self._ctx.deadline()

        async def once() -> pb.BaseCommand:
            conn = await self._connection(tc_id, deadline)
            request_id = conn.new_request_id()
            try:
                response = await conn.request(build(request_id), request_id)
            except Exception:
                self._handlers.pop(tc_id, None)  # found again next time
                raise
            if response.type == pb.BaseCommand.ERROR:
                raise error_for_code(response.error.error, response.error.message, context=what)
            return _check(response, what)

        return await retry_transient(once, self._ctx.backoff(), deadline)

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
