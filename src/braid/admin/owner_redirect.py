"""Admin REST calls about a topic another broker serves are redirected to it (307), as Pulsar's
``validateTopicOwnership`` does.

A call under ``/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/{topic}[/...]`` is
looked up first (:meth:`braid.broker.service.BrokerService.lookup`): served here, it runs here;
owned by another broker - or an unowned bundle another broker should take - it is answered
``307 Temporary Redirect`` to the same path and query on that broker's web service URL - its
HTTPS one when the call came in over HTTPS, never a downgrade to plain HTTP - (with
``authoritative=true`` added for a broker asked to take the bundle). Calls about a partitioned
topic's metadata (``/partitions``, ``/partitioned-stats``, ``/partitioned-internalStats``) need
no owner and run on any broker. The ``/admin/v3/transactions`` routes about a topic's transaction
buffer or a subscription's pending acks are redirected the same way. A name or namespace the
lookup refuses runs here, so the endpoint answers with its own error. Only brokers with bundle
ownership (``braid broker``) install this.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Protocol

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse

from braid.broker.ownership import LookupAnswer
from braid.core.errors import BraidError

log = logging.getLogger(__name__)

_TOPIC_PATH = re.compile(
    r"^/admin/v2/(?P<domain>persistent|non-persistent)/(?P<tenant>[^/]+)/(?P<namespace>[^/]+)/"
    r"(?P<topic>[^/]+)(?P<rest>/.*)?$"
)
#: Sub-resources about a partitioned topic's metadata, which any broker serves.
_ANY_BROKER = frozenset({"partitions", "partitioned-stats", "partitioned-internalStats"})
#: ``/admin/v3/transactions`` routes about a persistent topic's buffer or pending acks.
_TRANSACTION_TOPIC_PATH = re.compile(
    r"^/admin/v3/transactions/(?:transactionInBufferStats|transactionInPendingAckStats|"
    r"transactionBufferStats|pendingAckStats|positionStatsInPendingAck)/"
    r"(?P<tenant>[^/]+)/(?P<namespace>[^/]+)/(?P<topic>[^/]+)(?:/.*)?$"
)


class OwnerLookup(Protocol):
    async def lookup(
        self, name: str, listener: str | None = None, *, authoritative: bool = False
    ) -> LookupAnswer: ...


def topic_of_path(path: str) -> str | None:
    """The topic an admin path is about, when it needs the topic's owner; else ``None``."""
    match = _TOPIC_PATH.match(path)
    if match is None:
        txn = _TRANSACTION_TOPIC_PATH.match(path)
        if txn is None:
            return None
        return f"persistent://{txn['tenant']}/{txn['namespace']}/{txn['topic']}"
    rest = (match["rest"] or "").strip("/").split("/", 1)[0]
    if rest in _ANY_BROKER:
        return None
    return f"{match['domain']}://{match['tenant']}/{match['namespace']}/{match['topic']}"


def install_owner_redirect(app: FastAPI, broker: OwnerLookup) -> None:
    """Redirect topic calls to the topic's owner (see the module docstring)."""

    @app.middleware("http")
    async def redirect_to_owner(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        topic = topic_of_path(request.url.path)
        if topic is None:
            return await call_next(request)
        authoritative = request.query_params.get("authoritative") == "true"
        try:
            answer = await broker.lookup(topic, authoritative=authoritative)
        except BraidError:
            return await call_next(request)  # the endpoint reports the bad name or namespace
        if answer.local or not answer.http_url:
            return await call_next(request)
        query = request.url.query
        if answer.redirect and answer.authoritative and "authoritative=" not in query:
            query = f"{query}&authoritative=true" if query else "authoritative=true"
        web = answer.web_url(request.url.scheme == "https")
        target = f"{web.rstrip('/')}{request.url.path}" + (f"?{query}" if query else "")
        log.debug("redirecting %s %s to %s", request.method, request.url.path, target)
        return RedirectResponse(target, status_code=307)


__all__ = ["install_owner_redirect", "topic_of_path"]
