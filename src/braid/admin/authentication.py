"""Authentication of admin REST requests: an ASGI middleware in front of the whole app.

With ``authenticationEnabled=true`` every HTTP request must prove a role, as Pulsar's
``AuthenticationFilter`` demands: ``Authorization: Bearer <jwt>`` (token provider),
``Authorization: Basic <base64 user:password>`` (basic provider), or ``anonymousUserRole``. A
request that does not gets ``401`` with Pulsar's JSON error shape and, when the basic provider is
on, a ``WWW-Authenticate: Basic`` challenge (so a browser can open the console). ``/health`` and
``/metrics`` stay open, like Pulsar's default ``authenticateMetricsEndpoint=false``, so probes
and Prometheus keep working.

The authenticated :class:`~braid.security.api.Identity` is put in the request scope's state
(``request.state.identity``) for the endpoints' authorization checks (the next slice).
The middleware is pure ASGI (not Starlette's ``BaseHTTPMiddleware``) so server-sent event
streams pass through untouched.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from braid.clock import Clock
from braid.security.api import AuthenticationFailed
from braid.security.authentication import AuthenticationService

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths served without credentials (liveness and Prometheus scraping).
OPEN_PATHS = frozenset({"/health", "/metrics"})
#: The 401 body (Pulsar's wording; the reason of the refusal stays in the log).
UNAUTHENTICATED = {"reason": "Authentication required"}


class AuthenticationMiddleware:
    """Refuses admin requests without valid credentials (when authentication is enabled)."""

    def __init__(self, app: ASGIApp, *, service: AuthenticationService, clock: Clock) -> None:
        self._app = app
        self._service = service
        self._clock = clock
        challenge = "basic" in service.methods
        self._headers = [(b"content-type", b"application/json")]
        if challenge:
            self._headers.append((b"www-authenticate", b'Basic realm="braid"'))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self._service.enabled:
            await self._app(scope, receive, send)
            return
        if scope.get("path") in OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        authorization = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        try:
            identity = self._service.authenticate_http(
                authorization, None, self._clock.now_ms() / 1000.0
            )
        except AuthenticationFailed as exc:
            client = scope.get("client") or ("?", 0)
            log.info(
                "refusing %s %s from %s: %s", scope.get("method"), scope.get("path"), client[0], exc
            )
            await self._refuse(scope, send)
            return
        scope.setdefault("state", {})["identity"] = identity
        await self._app(scope, receive, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # policy violation
            return
        body = json.dumps(UNAUTHENTICATED).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [*self._headers, (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


__all__ = ["OPEN_PATHS", "AuthenticationMiddleware"]
