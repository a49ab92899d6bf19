"""Admin REST for inspecting a persistent topic and moving its subscriptions, with Pulsar's paths,
bodies and answers (what ``pulsar-admin topics`` scripts call), under
``/admin/v2/persistent/{tenant}/{namespace}/{topic}``:

* ``GET .../internalStats``: ``PersistentTopicInternalStats`` (ledgers, cursors);
* ``GET .../subscription/{sub}/position/{n}``: peek the ``n``-th unacknowledged message;
* ``GET .../examinemessage?initialPosition=earliest|latest&messagePosition=n``;
* ``GET .../ledger/{ledgerId}/entry/{entryId}``: the message at an id;
* ``POST .../subscription/{sub}/resetcursor/{timestamp}`` and ``POST .../subscription/{sub}/
  resetcursor`` with a ``MessageIdImpl`` body (``ledgerId``, ``entryId``; ``?isExcluded=true``
  starts after it);
* ``POST .../subscription/{sub}/skip/{n}``, ``POST .../subscription/{sub}/skip_all``
  (clear-backlog);
* ``POST .../subscription/{sub}/expireMessages/{seconds}`` and
  ``POST .../all_subscription/expireMessages/{seconds}``.

The three message reads answer the uncompressed payload as ``application/octet-stream`` with the
``X-Pulsar-*`` headers (a batch is one payload with ``X-Pulsar-num-batch-message``). On a
partitioned topic, reset-cursor, clear-backlog and expiry apply to every partition (as Pulsar);
the reads and skip name one partition (400 otherwise; Pulsar answers 405). Logic lives in
:mod:`braid.broker.topic_inspection` and :mod:`braid.broker.subscription_admin`.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Body, Query, Response

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.admin.topics import PersistentTopicAdmin
from braid.broker import subscription_admin as cursors
from braid.broker import topic_inspection as inspect
from braid.broker.errors import NotSupported, TopicNotFound
from braid.broker.topic import PersistentTopic
from braid.clock import Clock
from braid.core.errors import InvalidInputError
from braid.core.names import TopicDomain, TopicName
from braid.core.partitions import partition_index, partition_name
from braid.ledger.api import Entry, Position


class TopicOperationsBroker(PersistentTopicAdmin, Protocol):
    """What the operations need from the broker (``BrokerService`` provides it)."""

    @property
    def clock(self) -> Clock: ...


def _header_value(value: str) -> str:
    """A header value as HTTP carries it: UTF-8 bytes, seen through latin-1 (as Pulsar sends)."""
    try:
        value.encode("latin-1")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8").decode("latin-1")


def _message_response(entry: Entry, name: TopicName) -> Response:
    headers = inspect.message_headers(entry, partition_index(name.local_name))
    return Response(
        content=inspect.entry_payload(entry),
        media_type="application/octet-stream",
        headers={k: _header_value(v) for k, v in headers.items()},
    )


def topic_operations_router(broker: TopicOperationsBroker) -> APIRouter:
    """The inspection and cursor endpoints of persistent topics (under ``/admin/v2``)."""
    router = APIRouter()
    targets = _Targets(broker)
    _add_read_routes(router, targets)
    _add_cursor_routes(router, targets, broker.clock)
    return router


_BASE = "/persistent/{tenant}/{namespace}/{topic}"
_TAGS: list[str | enum.Enum] = ["topics"]


class _Targets:
    """The topic (or partitions) an operation applies to, loaded."""

    def __init__(self, broker: TopicOperationsBroker) -> None:
        self._broker = broker

    async def targets(self, tenant: str, namespace: str, topic: str, *, fan_out: bool) -> list[str]:
        """The topic, or a partitioned topic's partitions when ``fan_out`` (400 otherwise)."""
        name = TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
        existing = await self._broker.list_topics(f"{tenant}/{namespace}")
        if str(name) in existing:
            return [str(name)]
        count = await self._broker.partitioned.partitions(name)
        if not count:
            raise TopicNotFound(f"topic {name} does not exist")
        if not fan_out:
            raise NotSupported(
                f"{name} is a partitioned topic: name one partition ({topic}-partition-N)"
            )
        names = [
            str(TopicName(TopicDomain.PERSISTENT, tenant, namespace, partition_name(topic, i)))
            for i in range(count)
        ]
        return [n for n in names if n in existing]

    async def loaded(self, name: str) -> PersistentTopic:
        topic = await self._broker.get_or_create_topic(name, create=False)
        if not isinstance(topic, PersistentTopic):
            raise TopicNotFound(f"topic {name} is not served here")
        return topic

    async def each(
        self,
        tenant: str,
        namespace: str,
        topic: str,
        apply: Callable[[PersistentTopic], Awaitable[Any]],
    ) -> Response:
        for name in await self.targets(tenant, namespace, topic, fan_out=True):
            await apply(await self.loaded(name))
        return Response(status_code=204)

    async def one(self, tenant: str, namespace: str, topic: str) -> PersistentTopic:
        return await self.loaded((await self.targets(tenant, namespace, topic, fan_out=False))[0])


def _add_read_routes(router: APIRouter, targets: _Targets) -> None:
    base, tag = _BASE, _TAGS

    @router.get(base + "/internalStats", tags=tag, summary="Managed-ledger internal stats")
    async def internal_stats(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        return inspect.internal_stats(await targets.one(tenant, namespace, topic))

    @router.get(
        base + "/subscription/{subscription}/position/{position}",
        tags=tag,
        summary="Peek the n-th unacknowledged message of a subscription (1-based)",
        response_class=Response,
    )
    async def peek(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        position: int,
    ) -> Response:
        target = await targets.one(tenant, namespace, topic)
        entry = await inspect.peek_entry(target, subscription, _positive(position))
        return _message_response(entry, TopicName.parse(target.name))

    @router.get(
        base + "/examinemessage",
        tags=tag,
        summary="The n-th message from the earliest or the latest",
        response_class=Response,
    )
    async def examine(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        initial_position: Annotated[str, Query(alias="initialPosition")] = "latest",
        message_position: Annotated[int, Query(alias="messagePosition")] = 1,
    ) -> Response:
        target = await targets.one(tenant, namespace, topic)
        if initial_position not in ("earliest", "latest"):
            raise InvalidInputError("initialPosition must be earliest or latest")
        entry = await inspect.examine_entry(target, initial_position, _positive(message_position))
        return _message_response(entry, TopicName.parse(target.name))

    @router.get(
        base + "/ledger/{ledger_id}/entry/{entry_id}",
        tags=tag,
        summary="The message at a message id",
        response_class=Response,
    )
    async def get_by_id(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, ledger_id: int, entry_id: int
    ) -> Response:
        target = await targets.one(tenant, namespace, topic)
        entry = await inspect.entry_at(target, ledger_id, entry_id)
        return _message_response(entry, TopicName.parse(target.name))


def _add_cursor_routes(router: APIRouter, targets: _Targets, clock: Clock) -> None:
    base, tag = _BASE, _TAGS
    each = targets.each

    @router.post(
        base + "/subscription/{subscription}/resetcursor/{timestamp}",
        status_code=204,
        tags=tag,
        summary="Reset a subscription to the first message published at or after a time (ms)",
    )
    async def reset_to_time(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        timestamp: int,
    ) -> Response:
        async def apply(t: PersistentTopic) -> None:
            await cursors.reset_cursor_to_time(t, subscription, timestamp)

        return await each(tenant, namespace, topic, apply)

    @router.post(
        base + "/subscription/{subscription}/resetcursor",
        status_code=204,
        tags=tag,
        summary="Reset a subscription to a message id (MessageIdImpl body)",
    )
    async def reset_to_id(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        body: Annotated[Any, Body()],
        is_excluded: Annotated[bool, Query(alias="isExcluded")] = False,
    ) -> Response:
        position = _message_id(body)

        async def apply(t: PersistentTopic) -> None:
            await cursors.reset_cursor_to_id(t, subscription, position, excluded=is_excluded)

        return await each(tenant, namespace, topic, apply)

    @router.post(
        base + "/subscription/{subscription}/skip/{count}",
        status_code=204,
        tags=tag,
        summary="Acknowledge the subscription's next n messages",
    )
    async def skip(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, subscription: str, count: int
    ) -> Response:
        await cursors.skip(await targets.one(tenant, namespace, topic), subscription, count)
        return Response(status_code=204)

    @router.post(
        base + "/subscription/{subscription}/skip_all",
        status_code=204,
        tags=tag,
        summary="Clear the subscription's backlog",
    )
    async def skip_all(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, subscription: str
    ) -> Response:
        async def apply(t: PersistentTopic) -> None:
            await cursors.clear_backlog(t, subscription)

        return await each(tenant, namespace, topic, apply)

    @router.post(
        base + "/subscription/{subscription}/expireMessages/{seconds}",
        status_code=204,
        tags=tag,
        summary="Acknowledge the subscription's messages older than this many seconds",
    )
    async def expire(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, subscription: str, seconds: int
    ) -> Response:
        async def apply(t: PersistentTopic) -> None:
            await cursors.expire_older_than(t, clock.now_ms(), seconds, subscription)

        return await each(tenant, namespace, topic, apply)

    @router.post(
        base + "/all_subscription/expireMessages/{seconds}",
        status_code=204,
        tags=tag,
        summary="Acknowledge every subscription's messages older than this many seconds",
    )
    async def expire_all(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, seconds: int
    ) -> Response:
        async def apply(t: PersistentTopic) -> None:
            await cursors.expire_older_than(t, clock.now_ms(), seconds)

        return await each(tenant, namespace, topic, apply)


def _positive(n: int) -> int:
    if n < 1:
        raise InvalidInputError(f"message position must be 1 or more, got {n}")
    return n


def _message_id(body: object) -> Position:
    """A ``MessageIdImpl`` JSON body (``ledgerId``, ``entryId``) as a position."""
    if not isinstance(body, dict):
        raise InvalidInputError(f"expected a message id {{ledgerId, entryId}}, got {body!r}")
    ledger_id, entry_id = body.get("ledgerId"), body.get("entryId")
    if not isinstance(ledger_id, int) or not isinstance(entry_id, int):
        raise InvalidInputError(f"ledgerId and entryId must be integers, got {body!r}")
    return Position(ledger_id, entry_id)


__all__ = ["TopicOperationsBroker", "topic_operations_router"]
