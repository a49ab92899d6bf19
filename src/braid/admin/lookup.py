"""HTTP lookup: what a Pulsar client with an ``http://`` service URL asks the web service.

Such a client does no binary lookup at all; it asks over HTTP and then connects to the broker URL
it is given:

* ``GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}`` (``?listenerName=`` or the
  ``X-Pulsar-ListenerName`` header to name an advertised listener) answers Pulsar's
  ``LookupData``: ``{"brokerUrl", "brokerUrlTls", "httpUrl", "httpUrlTls", "nativeUrl"}`` of the
  broker owning the topic's bundle; for an unowned bundle another broker should take, 307 to that
  broker's lookup with ``?authoritative=true`` (Pulsar's redirect; see
  :mod:`braid.broker.ownership`);
* the partition count comes from ``GET /admin/v2/persistent/.../partitions`` and schemas from
  ``/admin/v2/schemas/...`` (their own modules);
* a regex consumer lists topics with ``GET /admin/v2/namespaces/{tenant}/{namespace}/topics``
  (``?mode=PERSISTENT|NON_PERSISTENT|ALL``; partitions listed by their ``-partition-N`` names;
  non-persistent topics are those active on this broker).
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import RedirectResponse

from braid.admin.path_params import LocalTopicName, Namespace, Tenant
from braid.broker.non_persistent import NonPersistentTopics
from braid.broker.ownership import LookupAnswer
from braid.core.names import NamespaceName, TopicName


class LookupService(Protocol):
    """What HTTP lookup needs from the broker (``BrokerService``)."""

    async def check_topic(self, name: str) -> TopicName: ...

    async def check_namespace(self, namespace: str) -> NamespaceName: ...

    async def list_topics(self, namespace: str) -> list[str]: ...

    @property
    def non_persistent(self) -> NonPersistentTopics: ...

    async def lookup(
        self, name: str, listener: str | None = None, *, authoritative: bool = False
    ) -> LookupAnswer: ...

    def lookup_url_tls(self, listener: str | None = None) -> str | None: ...


def lookup_router(broker: LookupService) -> APIRouter:
    """``/lookup/v2/topic/...`` and ``/admin/v2/namespaces/{tenant}/{namespace}/topics``."""
    router = APIRouter()

    @router.get(
        "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic:path}",
        tags=["lookup"],
        summary="The broker serving a topic (Pulsar's HTTP lookup)",
    )
    async def lookup_topic(
        request: Request,
        domain: str,
        tenant: Tenant,
        namespace: Namespace,
        topic: LocalTopicName,
        listenerName: Annotated[str | None, Query()] = None,
        x_pulsar_listenername: Annotated[str | None, Header()] = None,
        authoritative: Annotated[bool, Query()] = False,
    ) -> Any:
        name = f"{domain}://{tenant}/{namespace}/{topic}"
        listener = listenerName or x_pulsar_listenername or None
        answer = await broker.lookup(name, listener, authoritative=authoritative)
        if answer.redirect:
            # Pulsar's HTTP redirect: ask the broker chosen to take the unowned bundle (or the
            # leader broker, which chooses: not authoritative).
            query = f"authoritative={str(answer.authoritative).lower()}" + (
                f"&listenerName={listenerName}" if listenerName else ""
            )
            web = answer.web_url(request.url.scheme == "https")
            return RedirectResponse(f"{web}{request.url.path}?{query}", status_code=307)
        url = answer.service_url
        web = str(request.base_url).rstrip("/") if answer.local else answer.http_url
        if answer.local:
            web_tls = web if request.url.scheme == "https" else ""
        else:
            web_tls = answer.http_url_tls
        return {
            "brokerUrl": url,
            "brokerUrlTls": (broker.lookup_url_tls(listener) or "") if answer.local else "",
            "httpUrl": web,
            "httpUrlTls": web_tls,
            "nativeUrl": url,
            "topic": str(TopicName.parse(name)),
        }

    @router.get(
        "/admin/v2/namespaces/{tenant}/{namespace}/topics",
        tags=["namespaces"],
        summary="The namespace's topics (partitions by their -partition-N names)",
    )
    async def namespace_topics(
        tenant: Tenant,
        namespace: Namespace,
        mode: Annotated[str, Query(pattern="^(PERSISTENT|NON_PERSISTENT|ALL)$")] = "PERSISTENT",
    ) -> list[str]:
        name = await broker.check_namespace(f"{tenant}/{namespace}")
        topics = [] if mode == "NON_PERSISTENT" else await broker.list_topics(str(name))
        if mode != "PERSISTENT":
            topics += broker.non_persistent.names(str(name))  # those active on this broker
        return topics

    return router


__all__ = ["LookupService", "lookup_router"]
