"""``AdminClient.transactions``: the ``/admin/v3/transactions`` group of
:mod:`braid.admin.client` (Pulsar's transaction coordinator, buffer and pending-ack stats).

A transaction id is given as ``(most, least)`` - the two numbers of Pulsar's ``TxnID``
``(most,least)`` text - and a topic as a ``persistent://`` name (short forms mean
``public/default``). Answers are Pulsar's JSON documents, unchanged.
"""

from __future__ import annotations

from typing import Any

from braid.admin.client_transport import _Http, _q, _topic, _topic_path
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName

_ROOT = "/admin/v3/transactions"


def _bits(value: int, what: str) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 64:
        raise InvalidInputError(f"{what} is an unsigned 64-bit number, got {value!r}")
    return str(value)


def _txn(most: int, least: int) -> str:
    return f"{_bits(most, 'mostSigBits')}/{_bits(least, 'leastSigBits')}"


def _topic_part(topic: str | TopicName) -> str:
    return _topic_path(_topic(topic, TopicDomain.PERSISTENT))


def _coordinator(coordinator_id: int | None) -> dict[str, str] | None:
    if coordinator_id is None:
        return None
    return {"coordinatorId": _bits(coordinator_id, "a coordinator id")}


class Transactions:
    """``/admin/v3/transactions``."""

    def __init__(self, http: _Http) -> None:
        self._http = http

    def coordinators(self) -> dict[str, Any]:
        """The cluster's coordinators: ``{id: {"id", "brokerServiceUrl"}}``."""
        result: dict[str, Any] = self._http.call("GET", f"{_ROOT}/coordinators")
        return result

    def coordinator_stats(self, coordinator_id: int | None = None) -> dict[str, Any]:
        """``TransactionCoordinatorStats`` of one coordinator, or of each one keyed by id."""
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/coordinatorStats", params=_coordinator(coordinator_id)
        )
        return result

    def transaction_metadata(self, most: int, least: int) -> dict[str, Any]:
        """``TransactionMetadata``: status, open time, timeout, partitions, subscriptions."""
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/transactionMetadata/{_txn(most, least)}"
        )
        return result

    def slow_transactions(
        self, timeout_ms: int, coordinator_id: int | None = None
    ) -> dict[str, Any]:
        """Transactions open for longer than ``timeout_ms``, by id."""
        result: dict[str, Any] = self._http.call(
            "GET",
            f"{_ROOT}/slowTransactions/{_bits(timeout_ms, 'a timeout')}",
            params=_coordinator(coordinator_id),
        )
        return result

    def transaction_in_buffer_stats(
        self, topic: str | TopicName, most: int, least: int
    ) -> dict[str, Any]:
        """One transaction in a topic's buffer: ``startPosition``, ``aborted``."""
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/transactionInBufferStats/{_topic_part(topic)}/{_txn(most, least)}"
        )
        return result

    def transaction_in_pending_ack_stats(
        self, topic: str | TopicName, subscription: str, most: int, least: int
    ) -> dict[str, Any]:
        """One transaction in a subscription's pending acks: ``cumulativeAckPosition``."""
        path = f"{_topic_part(topic)}/{_q(subscription)}/{_txn(most, least)}"
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/transactionInPendingAckStats/{path}"
        )
        return result

    def transaction_buffer_stats(self, topic: str | TopicName) -> dict[str, Any]:
        """``TransactionBufferStats`` (with Braid's snapshot and recovery counters)."""
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/transactionBufferStats/{_topic_part(topic)}"
        )
        return result

    def pending_ack_stats(self, topic: str | TopicName, subscription: str) -> dict[str, Any]:
        """``TransactionPendingAckStats`` of a subscription."""
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/pendingAckStats/{_topic_part(topic)}/{_q(subscription)}"
        )
        return result

    def position_stats_in_pending_ack(
        self,
        topic: str | TopicName,
        subscription: str,
        ledger_id: int,
        entry_id: int,
        batch_index: int | None = None,
    ) -> dict[str, Any]:
        """Whether a message is held by a pending ack: ``{"state": "PendingAck" | "MarkDelete"
        | "NotInPendingAck"}``."""
        path = (
            f"{_topic_part(topic)}/{_q(subscription)}/"
            f"{_bits(ledger_id, 'a ledger id')}/{_bits(entry_id, 'an entry id')}"
        )
        params = None if batch_index is None else {"batchIndex": _bits(batch_index, "an index")}
        result: dict[str, Any] = self._http.call(
            "GET", f"{_ROOT}/positionStatsInPendingAck/{path}", params=params
        )
        return result


__all__ = ["Transactions"]
