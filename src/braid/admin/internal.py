"""The internal listener of ``braid broker``: the Segments API brokers call on each other
(PIP-468 "Segment Topic Management", ADR 0051), and PIP-470's cursor PROMOTE a switch
orchestrator forwards to the broker owning the cursor (``POST /internal/v1/bookie-clusters/
promote-cursor``, ADR 0061: 409 when the cursor rolled over instead, 503 when this broker does not
own it).

The scalable-topic controller leader of a topic runs on one broker; the topic's ``segment://``
topics are owned, bundle by bundle, by any broker. To create, seal or delete a segment, manage the
subscriptions' cursors on it, ask whether a subscription drained it or read its stats, the
leader's :class:`~braid.scalable.segment_routing.RoutedSegmentAdmin` calls the owner's internal
listener; a segment owner tells the leader that a subscription drained a sealed segment the same
way (``POST /internal/v1/drained``). ``GET /internal/v1/lookup?topic=`` answers this broker's
lookup as a client's first lookup would be: a controller placing a new segment follows the
redirect to the load manager's leader there, which chooses the broker.

This app is **not** the admin API: it is served on its own port (``internalWebServicePort``), it
is absent from the public OpenAPI document (it publishes none), and every request must carry the
cluster's broker secret (:mod:`braid.broker.broker_secret`) - anything else gets 403, logged once
per refusal. When the broker has TLS configured it is served over HTTPS only, optionally
requiring client certificates (:mod:`braid.broker.cluster_tls`, ADR 0066). It acts on this broker
only and never forwards: a segment whose bundle another broker owns is refused with 503
(``ServiceNotReady``), and the caller looks the owner up again. A legacy root of a migrated topic
(ADR 0063) is addressed as ``/segments/{tenant}/{ns}/{partition}/legacy``: the ``persistent://``
partition it wraps.

Errors are the admin API's JSON (``{"reason", "category"}``) with the same statuses.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Header, Query, Request, Response
from pydantic import BaseModel, Field

from braid.admin.bookie_clusters import PromoteCursorBody, promote_cursor
from braid.admin.errors import install_error_handlers
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.broker_secret import BROKER_SECRET_HEADER, secret_matches
from braid.broker.errors import ServiceNotReady
from braid.broker.ownership import LookupAnswer
from braid.clusters.cursor_owners import PROMOTE_CURSOR_PATH
from braid.clusters.service import StorageClusterService
from braid.core.errors import AuthorizationError
from braid.core.inherited_sequence_ids import InheritedSequenceIds
from braid.core.names import SegmentTopicName, TopicDomain, TopicName, parse_descriptor
from braid.scalable.segment_routing import INTERNAL_PREFIX, LEGACY_DESCRIPTOR
from braid.scalable.segments import SegmentAdmin, SegmentTopic

log = logging.getLogger(__name__)

#: ``(segment topic, subscription)``: a subscription drained a sealed segment of this broker.
DrainedListener = Callable[[str, str], None]
#: This broker's lookup of a topic (non-authoritative, as a client's first lookup).
Lookup = Callable[[str], Awaitable[LookupAnswer]]


class NotFromABroker(AuthorizationError):
    """An internal-listener request without the cluster's broker secret (403)."""


class SeekBody(BaseModel):
    timestamp: int = Field(ge=0)


class DrainedBody(BaseModel):
    segment: str = Field(min_length=1, max_length=4096)
    subscription: str = Field(min_length=1, max_length=1024)


def _segment(tenant: str, namespace: str, topic: str, descriptor: str) -> SegmentTopic:
    if descriptor == LEGACY_DESCRIPTOR:  # a legacy root: the partition it wraps (ADR 0063)
        return TopicName(TopicDomain.PERSISTENT, tenant, namespace, topic)
    hash_range, segment_id = parse_descriptor(descriptor)
    parent = TopicName(TopicDomain.TOPIC, tenant, namespace, topic)
    return SegmentTopicName.of(parent, hash_range, segment_id)


def create_internal_app(
    segments: SegmentAdmin | None,
    secret: str,
    on_drained: DrainedListener | None = None,
    lookup: Lookup | None = None,
    storage_clusters: StorageClusterService | None = None,
) -> FastAPI:
    """The internal Segments API over this broker's own segments (``segments`` must act locally,
    never route; ``None``: scalable topics are off), its drain-event sink (the scalable-topic
    service), its lookup (a broker placing a segment follows a redirect to the load manager's
    leader here) and PIP-470's cursor PROMOTE for another broker's switch orchestrator."""

    async def from_a_broker(
        request: Request,
        presented: Annotated[str | None, Header(alias=BROKER_SECRET_HEADER)] = None,
    ) -> None:
        if not secret_matches(secret, presented):
            client = request.client.host if request.client else "?"
            log.warning(
                "internal listener: refused %s %s from %s (no valid broker secret)",
                request.method,
                request.url.path,
                client,
            )
            raise NotFromABroker(
                "the internal listener serves brokers of this cluster only "
                f"({BROKER_SECRET_HEADER} missing or wrong)"
            )

    app = FastAPI(
        title="Braid broker internal API",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(from_a_broker)],
    )
    install_error_handlers(app)
    if segments is not None:
        app.include_router(_segments_router(segments), prefix=INTERNAL_PREFIX)

        @app.post(f"{INTERNAL_PREFIX}/drained", status_code=204)
        async def drained(body: DrainedBody) -> Response:
            if on_drained is not None:
                on_drained(body.segment, body.subscription)
            return Response(status_code=204)

    @app.get(f"{INTERNAL_PREFIX}/lookup")
    async def lookup_topic(topic: Annotated[str, Query(min_length=1, max_length=4096)]) -> Any:
        if lookup is None:
            raise ServiceNotReady("this broker does not answer lookups yet; retry shortly")
        answer = await lookup(topic)
        return {
            "serviceUrl": answer.service_url,
            "redirect": answer.redirect,
            "authoritative": answer.authoritative,
        }

    if storage_clusters is not None:
        service = storage_clusters

        @app.post(f"{INTERNAL_PREFIX}{PROMOTE_CURSOR_PATH}")
        async def promote(body: PromoteCursorBody) -> dict[str, Any]:
            return await promote_cursor(service, body)

    return app


def _segments_router(segments: SegmentAdmin) -> APIRouter:
    router = APIRouter()
    base = "/segments/{tenant}/{namespace}/{topic}/{descriptor}"

    @router.put(base, status_code=204)
    async def create_segment(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        descriptor: str,
        subscriptions: Annotated[list[str] | None, Body()] = None,
    ) -> Response:
        name = _segment(tenant, namespace, topic, descriptor)
        await segments.create_segment(name, subscriptions or ())
        return Response(status_code=204)

    @router.get(base)
    async def segment_state(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> dict[str, bool]:
        name = _segment(tenant, namespace, topic, descriptor)
        exists = await segments.segment_exists(name)
        return {"exists": exists, "terminated": exists and await segments.is_terminated(name)}

    @router.post(base + "/terminate", status_code=204)
    async def terminate_segment(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> Response:
        await segments.terminate_segment(_segment(tenant, namespace, topic, descriptor))
        return Response(status_code=204)

    @router.delete(base, status_code=204)
    async def delete_segment(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> Response:
        await segments.delete_segment(_segment(tenant, namespace, topic, descriptor))
        return Response(status_code=204)

    @router.get(base + "/stats")
    async def segment_stats(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> dict[str, Any]:
        stats = await segments.stats(_segment(tenant, namespace, topic, descriptor))
        return {"stats": stats}

    @router.get(base + "/last-confirmed")
    async def last_confirmed(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> dict[str, Any]:
        last = await segments.last_confirmed(_segment(tenant, namespace, topic, descriptor))
        return {"lastConfirmed": None if last is None else list(last)}

    @router.get(base + "/sequence-ids")
    async def sequence_ids(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> dict[str, Any]:
        name = _segment(tenant, namespace, topic, descriptor)
        return (await segments.sequence_ids(name)).to_json()

    @router.put(base + "/inherited-sequence-ids", status_code=204)
    async def inherit_sequence_ids(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        descriptor: str,
        inherited: Annotated[dict[str, Any], Body()],
    ) -> Response:
        name = _segment(tenant, namespace, topic, descriptor)
        await segments.inherit_sequence_ids(name, InheritedSequenceIds.from_json(inherited))
        return Response(status_code=204)

    @router.get(base + "/subscriptions")
    async def list_subscriptions(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, descriptor: str
    ) -> list[str]:
        return await segments.list_subscriptions(_segment(tenant, namespace, topic, descriptor))

    @router.put(base + "/subscriptions/{subscription}", status_code=204)
    async def create_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        descriptor: str,
        subscription: str,
        earliest: Annotated[bool, Query()] = False,
    ) -> Response:
        name = _segment(tenant, namespace, topic, descriptor)
        await segments.create_subscription(name, subscription, earliest=earliest)
        return Response(status_code=204)

    @router.delete(base + "/subscriptions/{subscription}", status_code=204)
    async def delete_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        descriptor: str,
        subscription: str,
    ) -> Response:
        name = _segment(tenant, namespace, topic, descriptor)
        await segments.delete_subscription(name, subscription)
        return Response(status_code=204)

    @router.get(base + "/subscriptions/{subscription}/drained")
    async def is_drained(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        descriptor: str,
        subscription: str,
    ) -> dict[str, bool]:
        name = _segment(tenant, namespace, topic, descriptor)
        return {"drained": await segments.is_drained(name, subscription)}

    @router.post(base + "/subscriptions/{subscription}/seek", status_code=204)
    async def seek_subscription(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        descriptor: str,
        subscription: str,
        body: SeekBody,
    ) -> Response:
        name = _segment(tenant, namespace, topic, descriptor)
        await segments.seek_subscription(name, subscription, body.timestamp)
        return Response(status_code=204)

    return router


__all__ = ["INTERNAL_PREFIX", "NotFromABroker", "create_internal_app"]
