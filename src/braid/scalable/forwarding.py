"""Reaching the controller leader from any broker (PIP-468 "the ScalableTopicService handles this
transparently").

Split, merge, subscription and stats requests may land on any broker. When the local controller
is not the leader, the service forwards the request to the leader's admin REST API. The election
value is the leader's *broker service* URL (``pulsar://host:port``, what clients need); the
matching admin URL comes from the broker registry, where every broker announces itself in an
ephemeral node ``/loadbalance/brokers/{host:port}`` holding ``{"pulsarServiceUrl",
"webServiceUrl"}`` (Pulsar's path). A forwarded request carries :data:`FORWARDED_HEADER`; a broker
that receives one and is not the leader answers 503 instead of forwarding again, so a request
never loops while an election settles.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from braid.core.errors import (
    BraidError,
    ConflictError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    category_class,
)
from braid.core.names import TopicName
from braid.metadata.api import BadVersion, MetadataStore, NodeNotFound
from braid.scalable.errors import NotLeader

log = logging.getLogger(__name__)

#: Root of the broker registry.
BROKERS_ROOT = "/loadbalance/brokers"
#: Header marking a request one broker forwarded to another.
FORWARDED_HEADER = "X-Braid-Forwarded"


def broker_id(service_url: str) -> str:
    """``host:port`` of a ``pulsar://host:port`` URL: the broker's registry name."""
    parts = urlsplit(service_url)
    return parts.netloc or service_url


class BrokerRegistry:
    """This broker's entry in ``/loadbalance/brokers`` and lookups of the others'."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._path: str | None = None

    async def register(self, service_url: str, web_service_url: str | None) -> None:
        """Announce this broker (ephemeral: it disappears with the broker's session)."""
        path = f"{BROKERS_ROOT}/{broker_id(service_url)}"
        doc = {"pulsarServiceUrl": service_url, "webServiceUrl": web_service_url}
        data = json.dumps(doc, separators=(",", ":")).encode()
        try:
            await self._store.put(path, data, -1, ephemeral=True)
        except BadVersion:
            # A previous incarnation's node may still be there until its session expires.
            await self._store.put(path, data)
        self._path = path

    async def unregister(self) -> None:
        if self._path is not None:
            try:
                await self._store.delete(self._path)
            except NodeNotFound:
                pass
            self._path = None

    async def web_service_url(self, service_url: str) -> str | None:
        found = await self._store.get(f"{BROKERS_ROOT}/{broker_id(service_url)}")
        if found is None:
            return None
        try:
            value = json.loads(found[0]).get("webServiceUrl")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) and value else None


class LeaderForwarder:
    """Sends an admin request to the leader broker's REST API and maps its answer back."""

    def __init__(self, registry: BrokerRegistry, *, timeout_s: float = 30.0) -> None:
        self._registry = registry
        self._timeout_s = timeout_s

    async def call(
        self,
        leader_url: str,
        method: str,
        topic: TopicName,
        suffix: str = "",
        body: Any = None,
    ) -> Any:
        """Call ``/admin/v2/scalable/{t}/{ns}/{topic}{suffix}`` on the leader; returns its JSON.

        Raises:
            NotLeader: the leader's admin URL is unknown or it is unreachable (retriable).
            The typed error matching the leader's HTTP status otherwise.
        """
        web = await self._registry.web_service_url(leader_url)
        if web is None:
            raise NotLeader(
                f"the controller leader of {topic} is {leader_url}, whose admin address is not "
                "registered; retry shortly"
            )
        path = (
            f"/admin/v2/scalable/{quote(topic.tenant, safe='')}/"
            f"{quote(topic.namespace, safe='')}/{quote(topic.local_name, safe='')}{suffix}"
        )
        try:
            async with httpx.AsyncClient(base_url=web, timeout=self._timeout_s) as http:
                response = await http.request(
                    method, path, json=body, headers={FORWARDED_HEADER: "1"}
                )
        except httpx.HTTPError as exc:
            raise NotLeader(
                f"could not reach the controller leader of {topic} at {web}: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise _error_for(response)
        if not response.content:
            return None
        return response.json()


def _error_for(response: httpx.Response) -> BraidError:
    """The leader's refusal as the same error category (its body names it), else by status."""
    try:
        body = response.json()
        reason = str(body.get("reason", response.text))
        category = body.get("category")
    except (ValueError, AttributeError):
        reason, category = response.text, None
    status = response.status_code
    cls = category_class(category) if isinstance(category, str) and status < 500 else None
    if cls is not None:
        return cls(reason)
    if status == 404:
        return NotFoundError(reason)
    if status == 409:
        return ConflictError(reason)
    if status == 412:
        return IllegalStateError(reason)
    if status in (400, 422):
        return InvalidInputError(reason)
    return NotLeader(f"the controller leader answered {status}: {reason}")


__all__ = ["BROKERS_ROOT", "FORWARDED_HEADER", "BrokerRegistry", "LeaderForwarder", "broker_id"]
