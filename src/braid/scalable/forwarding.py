"""Reaching the controller leader from any broker (PIP-468 "the ScalableTopicService handles this
transparently").

Split, merge, subscription and stats requests may land on any broker. When the local controller
is not the leader, :class:`~braid.scalable.leader_router.LeaderRouter` hands the operation
(:mod:`braid.scalable.leader_operations`) to :class:`LeaderForwarder`, which sends it to the
leader's admin REST API; :func:`admin_request` is the one table of the operations' REST forms, so
no other module of ``scalable/`` builds an admin URL. The election
value is the leader's *broker service* URL (``pulsar://host:port``, what clients need); the
matching admin URL comes from the broker registry (:mod:`braid.broker.broker_registry`), where
every broker announces itself in an ephemeral node ``/loadbalance/brokers/{host:port}``
(Pulsar's path): its ``webServiceUrlTls`` over HTTPS when this broker has TLS configured (the
client of :class:`~braid.broker.cluster_tls.PeerTls`, no plain fallback), else its
``webServiceUrl``. A forwarded request carries :data:`FORWARDED_HEADER`; a broker
that receives one and is not the leader answers 503 instead of forwarding again, so a request
never loops while an election settles.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from braid.broker.broker_registry import BrokerRegistry, broker_id
from braid.broker.cluster_tls import PeerTls, peer_admin_url, peer_client
from braid.broker.errors import ServiceNotReady
from braid.core.errors import (
    AuthorizationError,
    BraidError,
    ConflictError,
    IllegalStateError,
    InvalidInputError,
    NotFoundError,
    category_class,
)
from braid.core.names import TopicName
from braid.scalable.errors import NotLeader
from braid.scalable.leader_operations import (
    AutoScaleDecisions,
    CreateSubscription,
    DeleteSubscription,
    LeaderOperation,
    Merge,
    SeekSubscription,
    Split,
    Stats,
)
from braid.security.credentials import ClientCredentials

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Header marking a request one broker forwarded to another.
FORWARDED_HEADER = "X-Braid-Forwarded"
#: Where a broker serves its admin REST API.
ADMIN_PREFIX = "/admin/v2"


@dataclass(frozen=True)
class AdminRequest:
    """One call of a broker's admin REST API: the method, the path below ``/admin/v2`` and the
    JSON body (``None``: no body)."""

    method: str
    path: str
    body: Any = None


def _topic_path(topic: TopicName) -> str:
    return (
        f"/scalable/{quote(topic.tenant, safe='')}/{quote(topic.namespace, safe='')}/"
        f"{quote(topic.local_name, safe='')}"
    )


def admin_request(topic: TopicName, operation: LeaderOperation[Any]) -> AdminRequest:
    """The admin REST form of a leader-only operation (the paths :mod:`braid.admin.scalable`
    serves).

    Raises:
        TypeError: an operation this table does not know (a programming error).
    """
    base = _topic_path(topic)
    match operation:
        case Split(segment_id=segment_id, split_hash=split_hash):
            split = {} if split_hash is None else {"splitHash": split_hash}
            return AdminRequest("POST", f"{base}/split/{segment_id}", split)
        case Merge(segment_ids=segment_ids):
            return AdminRequest("POST", f"{base}/merge", {"segmentIds": list(segment_ids)})
        case CreateSubscription(subscription=name, sub_type=sub_type, earliest=earliest):
            position = "Earliest" if earliest else "Latest"
            body = {"type": sub_type.value, "initialPosition": position}
            return AdminRequest("PUT", f"{base}/subscriptions/{quote(name, safe='')}", body)
        case DeleteSubscription(subscription=name):
            return AdminRequest("DELETE", f"{base}/subscriptions/{quote(name, safe='')}")
        case SeekSubscription(subscription=name, timestamp_ms=timestamp_ms):
            path = f"{base}/subscriptions/{quote(name, safe='')}/seek"
            return AdminRequest("POST", path, {"timestamp": timestamp_ms})
        case Stats():
            return AdminRequest("GET", f"{base}/stats")
        case AutoScaleDecisions():
            return AdminRequest("GET", f"{base}/autoScaleDecisions")
    raise TypeError(f"no admin request for {type(operation).__name__}")


class LeaderForwarder:
    """Sends a leader-only operation to the leader broker's admin REST API and maps its answer
    back: the one place that knows how to reach another broker's controller."""

    def __init__(
        self,
        registry: BrokerRegistry,
        *,
        timeout_s: float = 30.0,
        credentials: ClientCredentials | None = None,
        tls: PeerTls | None = None,
    ) -> None:
        """``tls``: how this broker reaches the others (``braid broker``; ``None``: plain)."""
        self._registry = registry
        self._timeout_s = timeout_s
        self._tls = tls
        #: What this broker presents to the others (``brokerClientAuthenticationPlugin``).
        self._credentials = credentials

    async def send(self, leader_url: str, topic: TopicName, operation: LeaderOperation[R]) -> R:
        """Run ``operation`` on the broker whose service URL is ``leader_url``; returns its result.

        Raises:
            NotLeader: the leader's admin URL is unknown or it is unreachable (retriable).
            The typed error matching the leader's HTTP status otherwise.
        """
        info = await self._registry.get(broker_id(leader_url))
        tls = self._tls
        web = (
            None
            if info is None
            else peer_admin_url(tls, info.web_service_url, info.web_service_url_tls)
        )
        if web is None:
            raise NotLeader(
                f"the controller leader of {topic} is {leader_url}, whose admin address is not "
                "registered; retry shortly"
            )
        request = admin_request(topic, operation)
        # JSON even without a body: the admin API refuses other POSTs (ADR 0044).
        headers = {FORWARDED_HEADER: "1", "Content-Type": "application/json"}
        authorization = (
            self._credentials.http_authorization() if self._credentials is not None else None
        )
        if authorization is not None:
            headers["Authorization"] = authorization
        try:
            async with peer_client(tls, web, timeout_s=self._timeout_s) as http:
                response = await http.request(
                    request.method,
                    ADMIN_PREFIX + request.path,
                    json=request.body,
                    headers=headers,
                )
        except (httpx.HTTPError, ServiceNotReady) as exc:
            if tls is not None:
                tls.failed(leader_url, exc)
            raise NotLeader(
                f"could not reach the controller leader of {topic} at {web}: {exc}"
            ) from exc
        if tls is not None:
            tls.succeeded(leader_url)
        if response.status_code >= 400:
            raise _error_for(response)
        return operation.result_of(response.json() if response.content else None)


def refusal_of(response: httpx.Response) -> tuple[str, str | None]:
    """``(reason, category)`` of another broker's JSON error answer (the admin API's shape; the
    category is ``None`` when the body names none)."""
    try:
        body = response.json()
        category = body.get("category")
        return str(body.get("reason", response.text)), (
            category if isinstance(category, str) else None
        )
    except (ValueError, AttributeError):
        return response.text, None


def _error_for(response: httpx.Response) -> BraidError:
    """The leader's refusal as the same error category (its body names it), else by status."""
    reason, category = refusal_of(response)
    status = response.status_code
    cls = category_class(category) if category is not None and status < 500 else None
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
    if status in (401, 403):
        # Not retriable: this broker's brokerClientAuthentication* settings are missing or wrong.
        return AuthorizationError(
            f"the controller leader refused this broker ({status}: {reason}); check "
            "brokerClientAuthenticationPlugin/brokerClientAuthenticationParameters"
        )
    return NotLeader(f"the controller leader answered {status}: {reason}")


__all__ = [
    "ADMIN_PREFIX",
    "FORWARDED_HEADER",
    "AdminRequest",
    "LeaderForwarder",
    "admin_request",
    "refusal_of",
]
