"""``AdminClient``: a synchronous Python client of Braid's admin REST API (``/admin/v2``).

One method per endpoint, grouped as the REST API and the ``braid admin`` command are::

    from braid.admin import AdminClient

    with AdminClient("http://127.0.0.1:8080") as admin:
        admin.scalable_topics.create("topic://public/default/orders", segments=4)
        layout = admin.scalable_topics.split("topic://public/default/orders", 1)
        admin.scalable_topics.merge("topic://public/default/orders", [3, 4, 5])

Groups: :attr:`AdminClient.tenants`, :attr:`~AdminClient.namespaces`, :attr:`~AdminClient.topics`
(``persistent://``, partitioned or not), :attr:`~AdminClient.schemas` (a topic's schema
versions) and :attr:`~AdminClient.scalable_topics` (``topic://``), plus :meth:`AdminClient.health`,
:meth:`~AdminClient.broker_health` and :meth:`~AdminClient.clusters`.

Values are plain JSON: dicts, lists, strings, ``None`` for the 204 answers. Methods that return a
segment layout (``scalable_topics.get``, ``split``, ``merge``) return the topic's
``ScalableTopicMetadata`` document (PIP-468's JSON: ``epoch``, ``nextSegmentId``, ``segments``
keyed by id string, inclusive ``hashRange``, ``properties``);
``braid.core.layout_codec.layout_from_metadata(doc)`` turns it into a validated layout.

Names are checked here before a request leaves, with :mod:`braid.core.names` (the server's own
rules): a scalable topic is ``topic://tenant/ns/name`` (or the short ``tenant/ns/name`` / ``name``
forms, which mean ``public/default``), a persistent topic ``persistent://...`` (same short forms),
a segment ``segment://tenant/ns/name/<descriptor>``, a namespace ``tenant/namespace``.

Every failure is an :class:`AdminError`, which is also the :mod:`braid.core.errors` category of
the answer: 404 :class:`~braid.core.errors.NotFoundError`; 409
:class:`~braid.core.errors.AlreadyExistsError`, :class:`~braid.core.errors.ConflictError`
(retriable), :class:`~braid.core.errors.IllegalStateError` or
:class:`~braid.core.errors.TopicTerminatedError` (a Braid broker names the category in its error
body; another server's bare 409 is a conflict); 400/412/422
:class:`~braid.core.errors.InvalidInputError`; 401/403
:class:`~braid.core.errors.AuthorizationError`; 503 and "nobody answers"
:class:`~braid.core.errors.ServiceUnavailableError` (retriable); a timeout
:class:`~braid.core.errors.DeadlineExceededError`. The message is the server's ``reason``.

Each group is a module of its own (``braid.admin.client_tenants``, ``client_namespaces``,
``client_topics``, ``client_schemas``, ``client_scalable``, ``client_bookie_clusters``,
``client_backlog``, ``client_transactions``) over one
transport (``client_transport``); every name is importable from here. They import only
:mod:`httpx` and :mod:`braid.core` (no FastAPI, no broker), so scripts and the CLI load them
quickly.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from braid.admin.client_backlog import BacklogPolicies
from braid.admin.client_bookie_clusters import BookieClusters
from braid.admin.client_bookies import Bookies
from braid.admin.client_errors import (
    AdminAlreadyExistsError,
    AdminAuthenticationError,
    AdminAuthorizationError,
    AdminConflictError,
    AdminError,
    AdminIllegalStateError,
    AdminInvalidInputError,
    AdminNotFoundError,
    AdminTimeoutError,
    AdminTopicTerminatedError,
    AdminUnavailableError,
)
from braid.admin.client_errors import error_from_response as error_from_response
from braid.admin.client_namespaces import Namespaces
from braid.admin.client_scalable import (
    INITIAL_POSITIONS,
    SUBSCRIPTION_TYPES,
    ScalableTopics,
)
from braid.admin.client_schemas import Schemas
from braid.admin.client_tenants import Tenants
from braid.admin.client_topics import Topics
from braid.admin.client_transactions import Transactions
from braid.admin.client_transport import _Http
from braid.core.errors import InvalidInputError
from braid.security.credentials import ClientCredentials
from braid.security.tls import client_context

#: Where ``braid standalone`` serves the admin API by default.
DEFAULT_URL = "http://127.0.0.1:8080"


def _authorize(credentials: ClientCredentials) -> Callable[[httpx.Request], None]:
    """A request hook putting the credentials' ``Authorization`` header on each request - the
    redirects too: an admin call sent to any broker is redirected to the topic's or bundle's
    owner, which authenticates it again (httpx's ``auth`` would drop the header on a redirect to
    another host:port, and the owner would answer 401). A token file is read again every time,
    so a token rotated on disk is picked up."""

    def authorize(request: httpx.Request) -> None:
        header = credentials.http_authorization()
        if header is not None:
            request.headers["Authorization"] = header

    return authorize


class AdminClient:
    """A synchronous client of a Braid broker's admin REST API.

    Args:
        url: the broker's admin base URL (``http://host:port``; default ``braid standalone``'s).
        timeout: seconds to wait for each answer (a split or a delete of a large topic may take
            a few seconds).
        transport: an ``httpx`` transport (tests, proxies); the default one otherwise.
        credentials: sent with every request (``Authorization: Bearer``/``Basic``, or the client
            certificate of ``tls`` credentials); build them with
            :func:`braid.security.credentials.from_plugin` from ``pulsar-admin``'s
            ``--auth-plugin``/``--auth-params``.
        tls_trust_certs_file: CA certificates (PEM) an ``https://`` broker must chain to
            (default: the system's trust store).
        tls_validate_hostname: check the certificate names the host (default on).
        tls_allow_insecure_connection: accept any certificate (tests and labs only).

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        credentials: ClientCredentials | None = None,
        tls_trust_certs_file: str | Path | None = None,
        tls_validate_hostname: bool = True,
        tls_allow_insecure_connection: bool = False,
    ) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInputError(
                f"invalid admin URL {url!r}: expected http://host:port, e.g. {DEFAULT_URL}"
            )
        self.url = url.rstrip("/")
        verify: ssl.SSLContext | bool = True
        if parts.scheme == "https":
            verify = client_context(
                trust_certs_file=Path(tls_trust_certs_file) if tls_trust_certs_file else None,
                certificate_file=credentials.cert_file if credentials else None,
                key_file=credentials.key_file if credentials else None,
                validate_hostname=tls_validate_hostname,
                allow_insecure=tls_allow_insecure_connection,
            )
        self._client = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            transport=transport,
            verify=verify,
            event_hooks={"request": [_authorize(credentials)] if credentials is not None else []},
            follow_redirects=True,
        )
        http = _Http(self._client, self.url)
        self._http = http
        self.tenants = Tenants(http)
        self.namespaces = Namespaces(http)
        self.topics = Topics(http)
        self.schemas = Schemas(http)
        self.scalable_topics = ScalableTopics(http)
        self.bookie_clusters = BookieClusters(http)
        self.bookies = Bookies(http)
        self.backlog = BacklogPolicies(http)
        self.transactions = Transactions(http)

    def health(self) -> dict[str, Any]:
        """``GET /health``: the process answers (``{"status": "ok"}``)."""
        result: dict[str, Any] = self._http.call("GET", "/health")
        return result

    def broker_health(self) -> str:
        """``GET /admin/v2/brokers/health``: ``"ok"`` after a round trip to the metadata store."""
        result: str = self._http.call("GET", "/admin/v2/brokers/health")
        return result

    def clusters(self) -> list[str]:
        """The cluster names this broker knows."""
        result: list[str] = self._http.call("GET", "/admin/v2/clusters")
        return result

    def brokers(self, cluster: str) -> list[str]:
        """``GET /admin/v2/brokers/{cluster}``: the live brokers' ids (``host:port``)."""
        result: list[str] = self._http.call("GET", f"/admin/v2/brokers/{quote(cluster, safe='')}")
        return result

    def leader_broker(self) -> dict[str, str]:
        """``GET /admin/v2/brokers/leaderBroker``: ``{"brokerId", "serviceUrl"}``."""
        result: dict[str, str] = self._http.call("GET", "/admin/v2/brokers/leaderBroker")
        return result

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text exposition (topic counters, backlogs, PIP-483
        auto-scale counters)."""
        result: str = self._http.call("GET", "/metrics")
        return result

    def close(self) -> None:
        """Close the connection pool. Idempotent."""
        self._client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AdminClient({self.url!r})"


__all__ = [
    "DEFAULT_URL",
    "INITIAL_POSITIONS",
    "SUBSCRIPTION_TYPES",
    "AdminAlreadyExistsError",
    "AdminAuthenticationError",
    "AdminAuthorizationError",
    "AdminClient",
    "AdminConflictError",
    "AdminError",
    "AdminIllegalStateError",
    "AdminInvalidInputError",
    "AdminNotFoundError",
    "AdminTimeoutError",
    "AdminTopicTerminatedError",
    "AdminUnavailableError",
    "BacklogPolicies",
    "BookieClusters",
    "Bookies",
    "Namespaces",
    "ScalableTopics",
    "Schemas",
    "Tenants",
    "Topics",
    "Transactions",
]
