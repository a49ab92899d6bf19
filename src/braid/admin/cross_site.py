"""The admin API's guard against cross-site requests (a web page steering a browser at it).

A page open in a browser on the broker's host can send requests to ``127.0.0.1:8080``: the
loopback default does not protect the admin API by itself. What a page can send without the
browser first asking the server (a CORS preflight, which this API never approves) is a "simple"
request: ``GET``, ``HEAD`` or ``POST`` with a form or ``text/plain`` body or none. A page can also
point a name it controls at ``127.0.0.1`` (DNS rebinding), making its requests same-origin. So a
state-changing request (``POST``, ``PUT``, ``DELETE``, ``PATCH``) is refused unless:

* its ``Host`` names this broker - ``localhost``, a loopback address, the machine's host name,
  ``bindAddress``, ``advertisedAddress``, an ``advertisedListeners`` host - or a name in
  ``webServiceAllowedHosts`` (``*``: any), else **403**;
* its ``Origin``, when it has one, names one of the same hosts (``null`` never does), else
  **403**;
* a ``POST`` carries ``Content-Type: application/json`` (any ``+json`` type too) or an
  ``Authorization`` header - neither can be sent cross-site without a preflight - else **415**.

``PUT``, ``DELETE`` and ``PATCH`` are never simple requests, so their bodies are not checked
(``curl -X DELETE`` keeps working); reads are not checked at all. The rules are a pure function
(:meth:`CrossSitePolicy.refusal`) and a thin ASGI middleware (:class:`CrossSiteGuard`).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from braid.admin.errors import reason
from braid.broker.config import BrokerConfig

#: Methods that change state (everything but reads).
STATE_CHANGING = frozenset({"POST", "PUT", "DELETE", "PATCH"})

_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")


def _host_of(authority: str) -> str:
    """The host name of a ``Host`` header value (port and IPv6 brackets removed), lowercase."""
    text = authority.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text


@dataclass(frozen=True)
class CrossSitePolicy:
    """Which host names the admin API answers state-changing requests for.

    Args:
        allowed_hosts: lowercase host names (no port).
        any_host: ``webServiceAllowedHosts=*``: skip the ``Host``/``Origin`` checks.
    """

    allowed_hosts: frozenset[str]
    any_host: bool = False

    @classmethod
    def for_broker(
        cls, config: BrokerConfig, extra: Iterable[str] = (), *, host_name: str | None = None
    ) -> CrossSitePolicy:
        """The broker's own names (see the module docstring) plus ``webServiceAllowedHosts``."""
        listed = tuple(config.web_service_allowed_hosts) + tuple(extra)
        names = {*_LOOPBACK, config.bind_address, config.advertised_address}
        names.add(host_name if host_name is not None else socket.gethostname())
        for url in config.listener_urls().values():
            names.add(urlsplit(url).hostname or "")
        names.update(listed)
        hosts = frozenset(n.strip().lower() for n in names if n.strip().lower() not in _WILDCARDS)
        return cls(hosts - {"*"}, any_host="*" in listed)

    def refusal(self, method: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """``None`` when the request may go on, else the status and reason to answer.

        Args:
            method: the HTTP method.
            headers: the request's headers, keys lowercase.
        """
        if method.upper() not in STATE_CHANGING:
            return None
        if not self.any_host:
            host = _host_of(headers.get("host", ""))
            if host not in self.allowed_hosts:
                return 403, (
                    f"Host {host!r} is not one of this broker's names; add it to "
                    "webServiceAllowedHosts to administer the broker under that name"
                )
            origin = headers.get("origin")
            if origin is not None:
                origin_host = (urlsplit(origin).hostname or "") if origin != "null" else ""
                if origin_host not in self.allowed_hosts:
                    return 403, (
                        f"cross-site request refused: Origin {origin!r} is not one of this "
                        "broker's names (webServiceAllowedHosts lists more)"
                    )
        if method.upper() == "POST" and "authorization" not in headers:
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json" and not media.endswith("+json"):
                return 415, (
                    "a POST to the admin API needs Content-Type: application/json (got "
                    f"{media or 'none'}); this keeps web pages from sending it cross-site"
                )
        return None


class CrossSiteGuard:
    """ASGI middleware answering a refused request with the API's JSON error body."""

    def __init__(self, app: ASGIApp, policy: CrossSitePolicy) -> None:
        self._app = app
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            refused = self._policy.refusal(scope["method"], headers)
            if refused is not None:
                status, text = refused
                response = reason(status, text, category="Authorization")
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


__all__ = ["STATE_CHANGING", "CrossSiteGuard", "CrossSitePolicy"]
