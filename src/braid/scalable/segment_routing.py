"""Segments on any broker (PIP-468, ADR 0051): the controller's ``SegmentAdmin`` for
``braid broker``, routed to each segment's owner.

A ``segment://`` topic is placed like any topic: by the namespace bundle its name hashes into,
owned by one broker (:mod:`braid.broker.ownership`). :class:`RoutedSegmentAdmin` runs every
Segments-API call where the segment is served:

* the broker's lookup of the segment (:meth:`~braid.broker.service.BrokerService.lookup`) names
  this broker - it owns the bundle, or nobody does and this broker is the candidate, which takes
  it: the call runs on the in-process broker (:class:`~braid.scalable.segments.LocalSegmentAdmin`);
* it is a non-authoritative redirect (an unowned bundle; this broker is not the load manager's
  leader): the lookup is repeated on the broker named (the leader, over its internal listener),
  which places the bundle - acting on the leader itself would put every new segment there;
* it names another broker - the owner, or for an unowned bundle the candidate, which takes the
  bundle when the call loads the topic: the call goes to that broker's **internal listener**
  (:mod:`braid.admin.internal`) with the cluster's broker secret
  (:mod:`braid.broker.broker_secret`);
* the callee refuses (503: the bundle moved between the lookup and the call) or the local broker
  says it lost the bundle: looked up again, :data:`ATTEMPTS` times at most, then a retriable
  :class:`~braid.broker.errors.ServiceNotReady` (the controller's operation recovery, ADR 0021 and
  ``operation_recovery``, retries a failed split or merge step).

``broker_url`` (what DAG watchers are told, ``segment_brokers``) is the same lookup's answer. A
legacy root of a migrated topic (ADR 0063) is routed the same way by its ``persistent://``
partition's name (:data:`LEGACY_DESCRIPTOR` in the path).

:class:`DrainRelay` carries the other direction: a segment owner that sees a subscription drain a
sealed segment tells the topic's controller leader (its broker's internal listener), since the
leader hands the children of a drained segment out (ADR 0043).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from braid.broker.broker_registry import BrokerRegistry, broker_id
from braid.broker.broker_secret import BROKER_SECRET_HEADER
from braid.broker.cluster_tls import PeerTls, peer_client
from braid.broker.errors import ServiceNotReady, TopicNotFound
from braid.broker.ownership import NotOwner
from braid.broker.service import BrokerService
from braid.core.errors import BraidError, InvalidInputError, category_class
from braid.core.inherited_sequence_ids import InheritedSequenceIds, SegmentSequenceIds
from braid.core.names import SegmentTopicName, TopicName
from braid.metadata.api import MetadataStore
from braid.metadata.election import read_leader
from braid.scalable.forwarding import refusal_of
from braid.scalable.resources import ScalableTopicResources
from braid.scalable.segments import LocalSegmentAdmin, SegmentTopic

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Lookups of one call before it gives up (retriable) while a bundle moves.
ATTEMPTS = 3
#: Non-authoritative redirects a lookup follows (this broker -> the load-manager leader).
MAX_REDIRECTS = 3
#: Where a broker serves the internal Segments API (:mod:`braid.admin.internal`).
INTERNAL_PREFIX = "/internal/v1"
#: The descriptor naming a legacy root of a migrated topic (ADR 0063) in a Segments-API path:
#: ``/segments/{tenant}/{ns}/{partition}/legacy`` is the ``persistent://`` partition it wraps.
LEGACY_DESCRIPTOR = "legacy"


class InternalApiClient:
    """HTTP calls to other brokers' internal listeners, with the cluster's broker secret; over
    TLS as ``tls`` says (:mod:`braid.broker.cluster_tls`: the one place that knows how)."""

    def __init__(
        self,
        registry: BrokerRegistry,
        secret: str,
        *,
        timeout_s: float = 30.0,
        tls: PeerTls | None = None,
    ) -> None:
        self._registry = registry
        self._tls = tls
        self._headers = {BROKER_SECRET_HEADER: secret, "Content-Type": "application/json"}
        self._timeout_s = timeout_s

    async def internal_url(self, service_url: str) -> str:
        """The internal listener of the broker registered as ``service_url``.

        Raises:
            ServiceNotReady: the broker is not registered (gone, or starting).
        """
        info = await self._registry.get(broker_id(service_url))
        if info is None or not info.internal_url:
            raise ServiceNotReady(
                f"broker {service_url} is not registered with an internal listener; retry shortly"
            )
        return info.internal_url

    async def lookup(self, service_url: str, topic: str) -> tuple[str, bool, bool]:
        """The lookup of ``topic`` on the broker at ``service_url``, as a client would be answered
        there: ``(service URL, redirect, authoritative)``."""
        doc = await self.call(service_url, "GET", "/lookup", params={"topic": topic})
        return str(doc["serviceUrl"]), bool(doc["redirect"]), bool(doc["authoritative"])

    async def call(
        self,
        service_url: str,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        """``method path`` on the broker at ``service_url``; returns its JSON (``None`` if empty).

        Raises:
            ServiceNotReady: unreachable, or it answered 503 (retriable).
            TopicNotFound: 404. The typed error of its answer otherwise.
        """
        base = await self.internal_url(service_url)
        tls = self._tls
        try:
            async with peer_client(tls, base, timeout_s=self._timeout_s) as http:
                response = await http.request(
                    method, INTERNAL_PREFIX + path, json=body, params=params, headers=self._headers
                )
        except httpx.HTTPError as exc:
            if tls is not None:
                tls.failed(service_url, exc)
            raise ServiceNotReady(f"could not reach broker {service_url} at {base}: {exc}") from exc
        if tls is not None:
            tls.succeeded(service_url)
        if response.status_code >= 400:
            raise _error_for(response, service_url)
        return response.json() if response.content else None


def _error_for(response: httpx.Response, service_url: str) -> BraidError:
    reason, category = refusal_of(response)
    status = response.status_code
    if status >= 500:
        return ServiceNotReady(f"broker {service_url}: {reason}")
    if status == 404:
        return TopicNotFound(reason)
    cls = category_class(category) if category is not None else None
    if cls is not None:
        return cls(reason)
    return InvalidInputError(f"broker {service_url} answered {status}: {reason}")


def _segment_path(segment: SegmentTopic) -> str:
    if not isinstance(segment, SegmentTopicName):  # a legacy root: its partition (ADR 0063)
        return (
            f"/segments/{quote(segment.tenant, safe='')}/{quote(segment.namespace, safe='')}/"
            f"{quote(segment.local_name, safe='')}/{LEGACY_DESCRIPTOR}"
        )
    parent = segment.parent
    return (
        f"/segments/{quote(parent.tenant, safe='')}/{quote(parent.namespace, safe='')}/"
        f"{quote(parent.local_name, safe='')}/{quote(segment.descriptor, safe='')}"
    )


class RoutedSegmentAdmin:
    """:class:`~braid.scalable.segments.SegmentAdmin` over every broker of the cluster (see the
    module docstring)."""

    def __init__(self, broker: BrokerService, internal: InternalApiClient) -> None:
        self._broker = broker
        self.local = LocalSegmentAdmin(broker)
        self._internal = internal

    async def _route(
        self,
        segment: SegmentTopic,
        here: Callable[[], Awaitable[T]],
        there: Callable[[str], Awaitable[T]],
    ) -> T:
        failure: BraidError | None = None
        for _ in range(ATTEMPTS):
            try:
                where = await self._where(segment)
                if where is None:
                    return await here()
                return await there(where)
            except ServiceNotReady as exc:  # NotOwner included: the bundle moved
                log.debug("segment %s: %s; looking it up again", segment, exc)
                failure = exc
        raise ServiceNotReady(f"segment {segment} could not be reached: {failure}")

    async def create_segment(self, segment: SegmentTopic, subscriptions: Iterable[str]) -> None:
        names = list(subscriptions)
        await self._route(
            segment,
            lambda: self.local.create_segment(segment, names),
            lambda url: self._internal.call(url, "PUT", _segment_path(segment), body=names),
        )

    async def terminate_segment(self, segment: SegmentTopic) -> None:
        path = _segment_path(segment) + "/terminate"
        await self._route(
            segment,
            lambda: self.local.terminate_segment(segment),
            lambda url: self._internal.call(url, "POST", path),
        )

    async def delete_segment(self, segment: SegmentTopic) -> None:
        await self._route(
            segment,
            lambda: self.local.delete_segment(segment),
            lambda url: self._internal.call(url, "DELETE", _segment_path(segment)),
        )

    async def _state(self, url: str, segment: SegmentTopic) -> dict[str, bool]:
        doc = await self._internal.call(url, "GET", _segment_path(segment))
        return {k: bool(v) for k, v in dict(doc).items()}

    async def segment_exists(self, segment: SegmentTopic) -> bool:
        async def there(url: str) -> bool:
            return (await self._state(url, segment))["exists"]

        return await self._route(segment, lambda: self.local.segment_exists(segment), there)

    async def is_terminated(self, segment: SegmentTopic) -> bool:
        async def there(url: str) -> bool:
            return (await self._state(url, segment))["terminated"]

        return await self._route(segment, lambda: self.local.is_terminated(segment), there)

    async def list_subscriptions(self, segment: SegmentTopic) -> list[str]:
        async def there(url: str) -> list[str]:
            path = _segment_path(segment) + "/subscriptions"
            listed = await self._internal.call(url, "GET", path)
            return [str(name) for name in listed]

        return await self._route(segment, lambda: self.local.list_subscriptions(segment), there)

    def _subscription_path(self, segment: SegmentTopic, subscription: str) -> str:
        return f"{_segment_path(segment)}/subscriptions/{quote(subscription, safe='')}"

    async def create_subscription(
        self, segment: SegmentTopic, subscription: str, *, earliest: bool
    ) -> None:
        path = self._subscription_path(segment, subscription)
        params = {"earliest": "true" if earliest else "false"}
        await self._route(
            segment,
            lambda: self.local.create_subscription(segment, subscription, earliest=earliest),
            lambda url: self._internal.call(url, "PUT", path, params=params),
        )

    async def delete_subscription(self, segment: SegmentTopic, subscription: str) -> None:
        path = self._subscription_path(segment, subscription)
        await self._route(
            segment,
            lambda: self.local.delete_subscription(segment, subscription),
            lambda url: self._internal.call(url, "DELETE", path),
        )

    async def is_drained(self, segment: SegmentTopic, subscription: str) -> bool:
        path = self._subscription_path(segment, subscription) + "/drained"

        async def there(url: str) -> bool:
            return bool((await self._internal.call(url, "GET", path))["drained"])

        return await self._route(
            segment, lambda: self.local.is_drained(segment, subscription), there
        )

    async def seek_subscription(
        self, segment: SegmentTopic, subscription: str, timestamp_ms: int
    ) -> None:
        path = self._subscription_path(segment, subscription) + "/seek"
        await self._route(
            segment,
            lambda: self.local.seek_subscription(segment, subscription, timestamp_ms),
            lambda url: self._internal.call(url, "POST", path, body={"timestamp": timestamp_ms}),
        )

    async def stats(self, segment: SegmentTopic) -> dict[str, object] | None:
        async def there(url: str) -> dict[str, object] | None:
            doc = await self._internal.call(url, "GET", _segment_path(segment) + "/stats")
            stats = doc.get("stats") if isinstance(doc, dict) else None
            return dict(stats) if isinstance(stats, dict) else None

        return await self._route(segment, lambda: self.local.stats(segment), there)

    async def last_confirmed(self, segment: SegmentTopic) -> tuple[int, int] | None:
        async def there(url: str) -> tuple[int, int] | None:
            doc = await self._internal.call(url, "GET", _segment_path(segment) + "/last-confirmed")
            last = doc.get("lastConfirmed") if isinstance(doc, dict) else None
            if isinstance(last, list) and len(last) == 2:
                return int(last[0]), int(last[1])
            return None

        return await self._route(segment, lambda: self.local.last_confirmed(segment), there)

    async def _where(self, segment: SegmentTopic) -> str | None:
        """The service URL of the broker that serves ``segment`` or will take its bundle;
        ``None`` for this broker.

        The lookup a client would make: this broker's answer, and while that is a
        non-authoritative redirect (an unowned bundle, and this broker is not the load manager's
        leader) the lookup on the broker it names - the leader, which places the bundle. Acting
        on the redirect's target instead would make the leader take every new segment.
        """
        answer = await self._broker.lookup(str(segment))
        if answer.local:
            return None
        url, redirect, authoritative = answer.service_url, answer.redirect, answer.authoritative
        for _ in range(MAX_REDIRECTS):
            if not redirect or authoritative:
                break
            url, redirect, authoritative = await self._internal.lookup(url, str(segment))
        return None if url == self._broker.service_url else url

    async def broker_url(self, segment: SegmentTopic) -> str:
        """The segment's owner, or the broker that will take its bundle (the lookup's answer)."""
        return await self._where(segment) or self._broker.service_url

    async def sequence_ids(self, segment: SegmentTopic) -> SegmentSequenceIds:
        async def there(url: str) -> SegmentSequenceIds:
            doc = await self._internal.call(url, "GET", _segment_path(segment) + "/sequence-ids")
            return SegmentSequenceIds.from_json(doc if isinstance(doc, dict) else {})

        return await self._route(segment, lambda: self.local.sequence_ids(segment), there)

    async def inherit_sequence_ids(
        self, segment: SegmentTopic, inherited: InheritedSequenceIds
    ) -> None:
        path = _segment_path(segment) + "/inherited-sequence-ids"
        await self._route(
            segment,
            lambda: self.local.inherit_sequence_ids(segment, inherited),
            lambda url: self._internal.call(url, "PUT", path, body=inherited.to_json()),
        )


class DrainRelay:
    """Tells a topic's controller leader on another broker that a subscription drained a sealed
    segment served here (best effort: a new leader re-reads the drained set from the cursors,
    ADR 0043)."""

    def __init__(self, store: MetadataStore, internal: InternalApiClient, broker_url: str) -> None:
        self._store = store
        self._internal = internal
        self._broker_url = broker_url

    async def relay(self, topic: TopicName, segment: str, subscription: str) -> None:
        value = await read_leader(self._store, ScalableTopicResources.controller_path(topic))
        if value is None or value.decode() == self._broker_url:
            return  # no leader now (the next one reads the cursors), or it is this broker
        leader = value.decode()
        try:
            await self._internal.call(
                leader, "POST", "/drained", body={"segment": segment, "subscription": subscription}
            )
        except (BraidError, NotOwner) as exc:
            log.info("could not tell the controller leader %s of %s: %s", leader, topic, exc)


__all__ = ["ATTEMPTS", "LEGACY_DESCRIPTOR", "DrainRelay", "InternalApiClient", "RoutedSegmentAdmin"]
