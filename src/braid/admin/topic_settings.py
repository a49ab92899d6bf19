"""Admin REST for the topic-level settings beyond quotas and TTL, and the namespace caps, with
Pulsar's paths and bodies.

Topic level, for ``persistent`` topics and ``scalable`` topics (covering their segment DAG),
under ``/admin/v2/{persistent|scalable}/{tenant}/{namespace}/{topic}``:

* ``GET/POST/DELETE .../retention`` (``RetentionPolicies``: ``retentionTimeInMinutes``,
  ``retentionSizeInMB``);
* ``GET/POST/DELETE .../deduplicationEnabled`` (body ``true`` / ``false``);
* ``GET/POST/DELETE .../maxProducers``, ``.../maxConsumers``, ``.../maxConsumersPerSubscription``
  (body an integer, 0 = no cap).

Each ``GET`` answers the topic's own value (``null`` when not set), or with ``?applied=true`` the
value in force - the topic's, else its namespace's, else the broker's - as Pulsar does.

Namespace level: ``GET/POST/DELETE /admin/v2/namespaces/{tenant}/{namespace}/maxProducersPerTopic``,
``.../maxConsumersPerTopic`` and ``.../maxConsumersPerSubscription`` (Pulsar's ``Policies`` keys
``max_producers_per_topic``, ...).

Values are validated (412 with the reason otherwise), stored by
:class:`~braid.broker.topic_policies.TopicPolicies` or in the namespace's ``Policies`` (each a CAS),
and applied by :class:`~braid.broker.applied_policies.AppliedPolicyResolver`: the caps to the next
producer or consumer, deduplication and retention by reloading the loaded topics they change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Body, Query, Response

from braid.admin.errors import PreconditionFailed
from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.applied_policies import (
    AppliedPolicies,
    check_deduplication,
    check_limit,
    check_retention,
    namespace_limit,
    with_namespace_limit,
)
from braid.broker.resources import BrokerResources, InvalidPolicies
from braid.broker.topic_policies import (
    DEDUPLICATION,
    MAX_CONSUMERS,
    MAX_CONSUMERS_PER_SUBSCRIPTION,
    MAX_PRODUCERS,
    RETENTION,
    TopicPolicies,
)
from braid.core.names import TopicDomain, TopicName


class PolicyResolver(Protocol):
    """The broker's :class:`~braid.broker.applied_policies.AppliedPolicyResolver`."""

    async def resolve(self, topic: TopicName) -> AppliedPolicies: ...

    def forget(self) -> None: ...


def _applied_value(applied: AppliedPolicies, key: str) -> Any:
    if key == RETENTION:
        return None if applied.retention is None else applied.retention.to_json()
    if key == DEDUPLICATION:
        return applied.deduplication_enabled
    limits = applied.client_limits
    return {
        MAX_PRODUCERS: limits.max_producers_per_topic,
        MAX_CONSUMERS: limits.max_consumers_per_topic,
        MAX_CONSUMERS_PER_SUBSCRIPTION: limits.max_consumers_per_subscription,
    }[key]


def _checked(key: str, body: object) -> Any:
    """The stored JSON form of ``body`` for the setting ``key`` (412 when invalid)."""
    try:
        if key == RETENTION:
            return check_retention(body).to_json()
        if key == DEDUPLICATION:
            return check_deduplication(body)
        return check_limit(body, key)
    except InvalidPolicies as exc:
        raise PreconditionFailed(str(exc)) from None


#: (topic-level key, REST path suffix, what the summary calls it)
_TOPIC_SETTINGS = (
    (RETENTION, "retention", "retention"),
    (DEDUPLICATION, "deduplicationEnabled", "deduplication"),
    (MAX_PRODUCERS, "maxProducers", "producer cap"),
    (MAX_CONSUMERS, "maxConsumers", "consumer cap"),
    (MAX_CONSUMERS_PER_SUBSCRIPTION, "maxConsumersPerSubscription", "per-subscription cap"),
)
#: (topic-level key, namespace REST path suffix)
_NAMESPACE_CAPS = (
    (MAX_PRODUCERS, "maxProducersPerTopic"),
    (MAX_CONSUMERS, "maxConsumersPerTopic"),
    (MAX_CONSUMERS_PER_SUBSCRIPTION, "maxConsumersPerSubscription"),
)


def topic_settings_router(
    resources: BrokerResources, topic_policies: TopicPolicies, resolver: PolicyResolver
) -> APIRouter:
    """The topic-level settings of persistent and scalable topics and the namespace caps."""
    router = APIRouter()
    for domain in (TopicDomain.PERSISTENT, TopicDomain.TOPIC):
        for key, suffix, what in _TOPIC_SETTINGS:
            _add_topic_setting(router, domain, key, suffix, what, topic_policies, resolver)
    for key, suffix in _NAMESPACE_CAPS:
        _add_namespace_cap(router, key, suffix, resources, resolver)
    return router


def _add_topic_setting(
    router: APIRouter,
    domain: TopicDomain,
    key: str,
    suffix: str,
    what: str,
    topic_policies: TopicPolicies,
    resolver: PolicyResolver,
) -> None:
    prefix = "scalable" if domain is TopicDomain.TOPIC else domain.value
    path = "/" + prefix + "/{tenant}/{namespace}/{topic}/" + suffix
    tag = "scalable topics" if domain is TopicDomain.TOPIC else "topics"

    def name(tenant: str, namespace: str, topic: str) -> TopicName:
        return TopicName(domain, tenant, namespace, topic)

    async def get_setting(
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        applied: Annotated[
            bool, Query(description="the value in force (topic, else namespace, else broker)")
        ] = False,
    ) -> Any:
        target = name(tenant, namespace, topic)
        if applied:
            return _applied_value(await resolver.resolve(target), key)
        return await topic_policies.setting(target, key)

    async def set_setting(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName, body: Annotated[Any, Body()]
    ) -> Response:
        await topic_policies.set_setting(name(tenant, namespace, topic), key, _checked(key, body))
        resolver.forget()
        return Response(status_code=204)

    async def remove_setting(
        tenant: Tenant, namespace: Namespace, topic: LocalTopicName
    ) -> Response:
        await topic_policies.set_setting(name(tenant, namespace, topic), key, None)
        resolver.forget()
        return Response(status_code=204)

    router.add_api_route(
        path, get_setting, methods=["GET"], tags=[tag], summary=f"Get the topic's {what}"
    )
    router.add_api_route(
        path,
        set_setting,
        methods=["POST"],
        status_code=204,
        tags=[tag],
        summary=f"Set the topic's {what}",
    )
    router.add_api_route(
        path,
        remove_setting,
        methods=["DELETE"],
        status_code=204,
        tags=[tag],
        summary=f"Remove the topic's {what} (the namespace's applies)",
    )


def _add_namespace_cap(
    router: APIRouter,
    key: str,
    suffix: str,
    resources: BrokerResources,
    resolver: PolicyResolver,
) -> None:
    path = "/namespaces/{tenant}/{namespace}/" + suffix

    async def get_cap(tenant: Tenant, namespace: Namespace) -> int | None:
        return namespace_limit(await resources.get_namespace_policies(tenant, namespace), key)

    async def change(tenant: str, namespace: str, value: int | None) -> Response:
        await resources.update_namespace_policies(
            tenant, namespace, lambda policies: with_namespace_limit(policies, key, value)
        )
        resolver.forget()
        return Response(status_code=204)

    async def set_cap(
        tenant: Tenant, namespace: Namespace, body: Annotated[Any, Body()]
    ) -> Response:
        return await change(tenant, namespace, _checked(key, body))

    async def remove_cap(tenant: Tenant, namespace: Namespace) -> Response:
        return await change(tenant, namespace, None)

    add: Callable[..., None] = router.add_api_route
    add(path, get_cap, methods=["GET"], tags=["namespaces"], summary=f"Get {suffix}")
    add(
        path,
        set_cap,
        methods=["POST"],
        status_code=204,
        tags=["namespaces"],
        summary=f"Set {suffix} (0 = no cap)",
    )
    add(
        path,
        remove_cap,
        methods=["DELETE"],
        status_code=204,
        tags=["namespaces"],
        summary=f"Remove {suffix} (the broker's applies)",
    )


__all__ = ["topic_settings_router"]
