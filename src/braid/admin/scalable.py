"""Admin REST for scalable topics and their segments (PIP-468's two tables).

``/admin/v2/scalable/{tenant}/{namespace}[/{topic}[...]]`` — list, create, get, delete, stats,
subscriptions, split, merge — and ``/admin/v2/segments/{tenant}/{namespace}/{topic}/{descriptor}``
— create, terminate, delete — served by the broker's
:class:`~braid.scalable.service.ScalableTopicService`, which forwards mutations to the controller
leader when this broker is not it. Shapes other tools rely on:

* create takes ``{"numInitialSegments": N, "properties": {...}}`` (N defaults to 1);
* GET of a topic returns the ``ScalableTopicMetadata`` JSON; split and merge return the new one;
* split accepts an optional ``{"splitHash": H}`` (the first hash of the upper child), merge also
  ``POST .../merge`` with ``{"segmentIds": [a, b, c]}``;
* ``GET/POST/DELETE .../autoScalePolicy`` is the topic's PIP-483 ``AutoScalePolicyOverride``
  (camelCase knobs, each optional; checked after resolution against the namespace's override and
  ``broker.conf``: 400 naming the keys when inconsistent or unknown).

Errors are JSON ``{"reason": ...}``: 404 unknown topic/segment, 409 a conflicting state (sealed
segment, operation in flight, topic in use), 412 invalid names, 503 no controller leader reachable
(retry), 400/422 invalid bodies — never 500 for bad input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response
from pydantic import BaseModel, Field

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.core.errors import InvalidInputError, NotFoundError
from braid.core.layout_codec import layout_to_metadata
from braid.core.names import (
    SegmentTopicName,
    TopicDomain,
    TopicName,
    parse_descriptor,
)
from braid.core.ranges import MAX_HASH
from braid.scalable.forwarding import FORWARDED_HEADER
from braid.scalable.resources import SubscriptionType
from braid.scalable.service import ScalableTopicService

_MAX_INITIAL_SEGMENTS = MAX_HASH + 1


class CreateScalableTopic(BaseModel):
    """Body of ``PUT /admin/v2/scalable/{tenant}/{namespace}/{topic}``."""

    numInitialSegments: int = Field(default=1, ge=1, le=_MAX_INITIAL_SEGMENTS)
    properties: dict[str, str] = Field(default_factory=dict)


class SplitRequest(BaseModel):
    """Optional body of a split: where the upper child starts (default: the midpoint)."""

    splitHash: int | None = Field(default=None, ge=1, le=MAX_HASH)


class MergeRequest(BaseModel):
    """Body of ``POST .../merge``: two or more hash-adjacent active segments."""

    segmentIds: list[Annotated[int, Field(ge=0, le=2**63 - 1)]] = Field(min_length=2)


class SubscriptionRequest(BaseModel):
    """Optional body of a subscription create."""

    type: SubscriptionType = SubscriptionType.STREAM
    initialPosition: str = Field(default="Latest", pattern="^(Earliest|Latest)$")


class SeekRequest(BaseModel):
    """Body of a subscription seek: wall-clock milliseconds."""

    timestamp: int = Field(ge=0, le=2**63 - 1)


_SEGMENT_ID = Annotated[int, Field(ge=0, le=2**63 - 1)]
_FORWARDED = Annotated[str | None, Header(alias=FORWARDED_HEADER, include_in_schema=False)]


def scalable_router(
    service: ScalableTopicService,
    namespace_exists: Callable[[str, str], Awaitable[bool]] | None = None,
) -> APIRouter:
    """The ``/scalable`` endpoints (mounted under ``/admin/v2``). PIP-468's Segments table is not
    here: brokers serve it to each other on their internal listener (:mod:`braid.admin.internal`,
    ADR 0051).

    ``namespace_exists`` lets a list of a namespace that does not exist answer 404, as the
    ``/persistent`` list does, instead of an empty list.
    """
    router = APIRouter()
    router.include_router(_topics_router(service, namespace_exists))
    router.include_router(_subscriptions_router(service))
    router.include_router(_split_merge_router(service))
    router.include_router(_auto_scale_router(service))
    return router


def _topic_name(tenant: str, namespace: str, topic: str) -> TopicName:
    return TopicName(TopicDomain.TOPIC, tenant, namespace, topic)


def _segment_name(tenant: str, namespace: str, topic: str, descriptor: str) -> SegmentTopicName:
    hash_range, segment_id = parse_descriptor(descriptor)
    return SegmentTopicName.of(_topic_name(tenant, namespace, topic), hash_range, segment_id)


def _topics_router(
    service: ScalableTopicService,
    namespace_exists: Callable[[str, str], Awaitable[bool]] | None,
) -> APIRouter:
    """List, create, get, delete a scalable topic, and its stats."""
    router = APIRouter()

    @router.get(
        "/scalable/{tenant}/{namespace}",
        tags=["scalable topics"],
        summary="List the scalable topics of a namespace",
    )
    async def list_scalable(tenant: Tenant, namespace: Namespace) -> list[str]:
        TopicName(TopicDomain.TOPIC, tenant, namespace, "_")  # validates both names
        if namespace_exists is not None and not await namespace_exists(tenant, namespace):
            raise NotFoundError(f"namespace {tenant}/{namespace} does not exist")
        return await service.list_topics(tenant, namespace)

    @router.put(
        "/scalable/{tenant}/{namespace}/{topic}",
        status_code=204,
        tags=["scalable topics"],
        summary="Create a scalable topic with N initial segments",
    )
    async def create_scalable(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        body: Annotated[CreateScalableTopic | None, Body()] = None,
    ) -> Response:
        request = body or CreateScalableTopic()
        await service.create_topic(
            _topic_name(tenant, namespace, topic), request.numInitialSegments, request.properties
        )
        return Response(status_code=204)

    @router.get(
        "/scalable/{tenant}/{namespace}/{topic}",
        tags=["scalable topics"],
        summary="Get the topic's ScalableTopicMetadata (the segment DAG)",
    )
    async def get_scalable(tenant: Tenant, namespace: Namespace, topic: LocalTopicName) -> Any:
        return layout_to_metadata(await service.get_layout(_topic_name(tenant, namespace, topic)))

    @router.delete(
        "/scalable/{tenant}/{namespace}/{topic}",
        status_code=204,
        tags=["scalable topics"],
        summary="Delete a scalable topic, its segments and subscriptions",
    )
    async def delete_scalable(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        force: Annotated[bool, Query(description="disconnect connected clients")] = False,
    ) -> Response:
        await service.delete_topic(_topic_name(tenant, namespace, topic), force=force)
        return Response(status_code=204)

    @router.get(
        "/scalable/{tenant}/{namespace}/{topic}/positions",
        tags=["scalable topics"],
        summary="The segment DAG and each active segment's last stored entry, of one epoch",
    )
    async def positions_scalable(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Any:
        return await service.read_snapshot(_topic_name(tenant, namespace, topic))

    @router.get(
        "/scalable/{tenant}/{namespace}/{topic}/stats",
        tags=["scalable topics"],
        summary="Aggregated stats: the DAG with per-segment stats, subscriptions, consumers",
    )
    async def stats_scalable(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, forwarded: _FORWARDED = None
    ) -> Any:
        return await service.stats(
            _topic_name(tenant, namespace, topic), forwarded=forwarded is not None
        )

    return router


def _subscriptions_router(service: ScalableTopicService) -> APIRouter:
    """Create, delete and seek a subscription on every segment of a topic."""
    router = APIRouter()

    @router.put(
        "/scalable/{tenant}/{namespace}/{topic}/subscriptions/{subscription}",
        status_code=204,
        tags=["scalable topics"],
        summary="Create a subscription on every segment",
    )
    async def create_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        body: Annotated[SubscriptionRequest | None, Body()] = None,
        forwarded: _FORWARDED = None,
    ) -> Response:
        request = body or SubscriptionRequest()
        await service.create_subscription(
            _topic_name(tenant, namespace, topic),
            _subscription_name(subscription),
            request.type,
            earliest=request.initialPosition == "Earliest",
            forwarded=forwarded is not None,
        )
        return Response(status_code=204)

    @router.delete(
        "/scalable/{tenant}/{namespace}/{topic}/subscriptions/{subscription}",
        status_code=204,
        tags=["scalable topics"],
        summary="Delete a subscription from every segment (its consumers are unregistered)",
    )
    async def delete_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        forwarded: _FORWARDED = None,
    ) -> Response:
        await service.delete_subscription(
            _topic_name(tenant, namespace, topic),
            _subscription_name(subscription),
            forwarded=forwarded is not None,
        )
        return Response(status_code=204)

    @router.post(
        "/scalable/{tenant}/{namespace}/{topic}/subscriptions/{subscription}/seek",
        status_code=204,
        tags=["scalable topics"],
        summary="Move a subscription to a publish time on every segment",
    )
    async def seek_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        subscription: str,
        body: SeekRequest,
        forwarded: _FORWARDED = None,
    ) -> Response:
        await service.seek_subscription(
            _topic_name(tenant, namespace, topic),
            _subscription_name(subscription),
            body.timestamp,
            forwarded=forwarded is not None,
        )
        return Response(status_code=204)

    return router


def _split_merge_router(service: ScalableTopicService) -> APIRouter:
    """Split a segment, merge two or more: each answers the topic's new DAG."""
    router = APIRouter()

    @router.post(
        "/scalable/{tenant}/{namespace}/{topic}/split/{segment_id}",
        tags=["scalable topics"],
        summary="Split an active segment (at its midpoint or at splitHash); returns the new DAG",
    )
    async def split_segment(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        segment_id: _SEGMENT_ID,
        body: Annotated[SplitRequest | None, Body()] = None,
        forwarded: _FORWARDED = None,
    ) -> Any:
        layout = await service.split(
            _topic_name(tenant, namespace, topic),
            segment_id,
            body.splitHash if body is not None else None,
            forwarded=forwarded is not None,
        )
        return layout_to_metadata(layout)

    @router.post(
        "/scalable/{tenant}/{namespace}/{topic}/merge/{segment_id1}/{segment_id2}",
        tags=["scalable topics"],
        summary="Merge two adjacent active segments; returns the new DAG",
    )
    async def merge_two(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        segment_id1: _SEGMENT_ID,
        segment_id2: _SEGMENT_ID,
        forwarded: _FORWARDED = None,
    ) -> Any:
        layout = await service.merge(
            _topic_name(tenant, namespace, topic),
            [segment_id1, segment_id2],
            forwarded=forwarded is not None,
        )
        return layout_to_metadata(layout)

    @router.post(
        "/scalable/{tenant}/{namespace}/{topic}/merge",
        tags=["scalable topics"],
        summary="Merge two or more hash-adjacent active segments; returns the new DAG",
    )
    async def merge_many(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        body: MergeRequest,
        forwarded: _FORWARDED = None,
    ) -> Any:
        layout = await service.merge(
            _topic_name(tenant, namespace, topic), body.segmentIds, forwarded=forwarded is not None
        )
        return layout_to_metadata(layout)

    return router


def _auto_scale_router(service: ScalableTopicService) -> APIRouter:
    """The topic's auto-scale override (PIP-483)."""
    router = APIRouter()

    @router.get(
        "/scalable/{tenant}/{namespace}/{topic}/autoScalePolicy",
        tags=["scalable topics"],
        summary="The topic's auto-scale policy override (null when it has none)",
    )
    async def get_auto_scale_policy(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Any:
        return await service.auto_scale.get_topic_override(_topic_name(tenant, namespace, topic))

    @router.post(
        "/scalable/{tenant}/{namespace}/{topic}/autoScalePolicy",
        status_code=204,
        tags=["scalable topics"],
        summary="Set the topic's auto-scale override (PIP-483 AutoScalePolicyOverride)",
    )
    async def set_auto_scale_policy(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, body: Annotated[Any, Body()]
    ) -> Response:
        await service.auto_scale.set_topic_override(_topic_name(tenant, namespace, topic), body)
        return Response(status_code=204)

    @router.delete(
        "/scalable/{tenant}/{namespace}/{topic}/autoScalePolicy",
        status_code=204,
        tags=["scalable topics"],
        summary="Remove the topic's auto-scale override (the namespace's or broker's applies)",
    )
    async def remove_auto_scale_policy(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Response:
        await service.auto_scale.remove_topic_override(_topic_name(tenant, namespace, topic))
        return Response(status_code=204)

    return router


def _subscription_name(name: str) -> str:
    if not name or len(name) > 1024 or any(ord(ch) < 0x20 for ch in name):
        raise InvalidInputError(
            f"invalid subscription name {name[:100]!r}: 1 to 1024 characters, no control characters"
        )
    return name


__all__ = ["scalable_router"]
