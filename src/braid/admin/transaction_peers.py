"""The other brokers' side of the cluster-wide ``/admin/v3/transactions`` answers (ADR 0071,
amended 2026-11-27).

On a cluster of ``braid broker`` processes each coordinator, and each topic, is served by one
broker. The routes of :mod:`braid.admin.transactions` answer for the whole cluster as Pulsar's do:
a route naming one coordinator is redirected to its broker, and the rest are put together here:

* :meth:`TransactionPeers.gather` asks every other registered broker (the broker registry,
  :mod:`braid.broker.broker_registry`) for the same route, marked with
  :data:`~braid.scalable.forwarding.FORWARDED_HEADER` - a broker answering a marked request
  answers for what it serves itself and asks nobody, so a request never loops - and merges the
  documents, keyed by coordinator or transaction id;
* :meth:`TransactionPeers.get` reads one document from the broker serving a topic (a
  transaction's produced partition or acknowledged subscription).

These calls present the broker's own credentials (``brokerClientAuthenticationPlugin``) and use
its TLS settings toward the others (:class:`~braid.broker.cluster_tls.PeerTls`: HTTPS when
configured, no plain fallback), as the other broker-to-broker admin calls do. A broker that does
not answer fails the whole request with 503 naming it (Pulsar fails the request too): an answer
silently missing a broker's coordinators would read as "no transactions there".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from braid.broker.broker_registry import BrokerInfo, BrokerRegistry
from braid.broker.cluster_tls import PeerTls, peer_admin_url, peer_client
from braid.broker.errors import ServiceNotReady
from braid.core.errors import NotFoundError, ServiceUnavailableError
from braid.scalable.forwarding import FORWARDED_HEADER, refusal_of
from braid.security.credentials import ClientCredentials

log = logging.getLogger(__name__)

#: Where the transaction routes live on every broker.
PREFIX = "/admin/v3/transactions"


class TransactionPeers:
    """Reads ``/admin/v3/transactions`` documents from the other brokers of the cluster."""

    def __init__(
        self,
        registry: BrokerRegistry | None,
        *,
        tls: PeerTls | None = None,
        credentials: Callable[[], ClientCredentials | None] = lambda: None,
        timeout_s: float = 30.0,
    ) -> None:
        """``registry``: ``None`` on a broker without one (nothing to gather);
        ``credentials``: what this broker presents to the others (read when first needed)."""
        self._registry = registry
        self._tls = tls
        self._credentials = credentials
        self._timeout_s = timeout_s

    def _headers(self) -> dict[str, str]:
        headers = {FORWARDED_HEADER: "1"}
        credentials = self._credentials()
        authorization = credentials.http_authorization() if credentials is not None else None
        if authorization is not None:
            headers["Authorization"] = authorization
        return headers

    def admin_url(self, plain: str | None, https: str | None) -> str | None:
        """Which of a peer's admin URLs this broker calls (its HTTPS one with TLS configured)."""
        return peer_admin_url(self._tls, plain, https)

    async def get(
        self, peer: str, web: str, path: str, params: Mapping[str, str] | None = None
    ) -> Any:
        """The JSON ``peer`` (a broker id, for messages) answers at ``web`` + :data:`PREFIX` +
        ``path``.

        Raises:
            NotFoundError: the peer answered 404.
            ServiceUnavailableError: the peer is unreachable or answered another error.
        """
        try:
            async with peer_client(self._tls, web, timeout_s=self._timeout_s) as http:
                response = await http.get(
                    PREFIX + path, params=dict(params or {}), headers=self._headers()
                )
        except (httpx.HTTPError, ServiceNotReady) as exc:
            if self._tls is None or not self._tls.failed(peer, exc):
                log.warning("transaction admin: broker %s at %s unreachable: %s", peer, web, exc)
            raise ServiceUnavailableError(
                f"broker {peer} did not answer {PREFIX}{path}: {exc}"
            ) from exc
        if self._tls is not None:
            self._tls.succeeded(peer)
        if response.status_code == 404:
            raise NotFoundError(refusal_of(response)[0])
        if response.status_code >= 300:
            raise ServiceUnavailableError(
                f"broker {peer} answered {PREFIX}{path} with {response.status_code}: "
                f"{refusal_of(response)[0]}"
            )
        return response.json()

    async def gather(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The documents every other registered broker answers at ``path``, merged (each is an
        object keyed by coordinator or transaction id, which one broker serves at a time).

        Raises:
            ServiceUnavailableError: a registered broker did not answer.
        """
        if self._registry is None:
            return {}
        me = self._registry.me
        own = me.broker_id if me is not None else None
        others = [b for b in await self._registry.brokers() if b.broker_id != own]
        answers = await asyncio.gather(*(self._ask(b, path, params) for b in others))
        merged: dict[str, Any] = {}
        for answer in answers:
            merged.update(answer)
        return merged

    async def _ask(
        self, peer: BrokerInfo, path: str, params: Mapping[str, str] | None
    ) -> dict[str, Any]:
        web = self.admin_url(peer.web_service_url, peer.web_service_url_tls)
        if web is None:
            raise ServiceUnavailableError(
                f"broker {peer.broker_id} has no admin URL in the registry; retry shortly"
            )
        answer = await self.get(peer.broker_id, web, path, params)
        if not isinstance(answer, dict):
            raise ServiceUnavailableError(
                f"broker {peer.broker_id} answered {path} with {answer!r}"
            )
        return answer


__all__ = ["PREFIX", "TransactionPeers"]
