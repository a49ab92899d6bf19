"""Authentication of one client connection: the CONNECT check and credential refresh.

Pulsar's ``ServerCnx`` flow, without the socket: the CONNECT's ``auth_method_name`` and
``auth_data`` (plus the TLS peer's certificate CN) go to the broker's
:class:`~braid.security.authentication.AuthenticationService`; a refusal closes the connection
with ``AuthenticationError`` "Unable to authenticate" (the reason goes only to the log). When the
credentials expire (a JWT's ``exp``), the periodic check (``authenticationRefreshCheckSeconds``)
sends ``AUTH_CHALLENGE`` with the refresh marker; the client answers ``AUTH_RESPONSE`` with fresh
credentials of the same role, or the connection is closed: at once for a client that does not
advertise ``supports_auth_refresh``, and at the next check for one that has not answered.

This object owns the connection's :class:`~braid.security.api.Identity`; its role is what the
command sessions read as the channel's ``auth_role``.
"""

from __future__ import annotations

import enum
import logging

from braid.protocol.connection import auth_method
from braid.protocol.generated import PulsarApi_pb2 as pb
from braid.security.api import AuthenticationFailed, Credentials, Identity
from braid.security.authentication import AuthenticationService

log = logging.getLogger(__name__)


class RefreshAction(enum.Enum):
    """What the periodic check asks the connection to do."""

    NOTHING = "nothing"
    CHALLENGE = "challenge"  # send AUTH_CHALLENGE for the identity's method
    CLOSE = "close"  # expired and not refreshable (or the challenge went unanswered)


class ConnectionAuthentication:
    """The authentication state of one connection.

    Args:
        service: the broker's authentication service.
        remote: the peer's address, for logs.
        peer_common_name: the CN of the peer's verified TLS client certificate, if any.
    """

    def __init__(
        self, service: AuthenticationService, remote: str, peer_common_name: str | None
    ) -> None:
        self._service = service
        self._remote = remote
        self._peer_cn = peer_common_name
        self._identity: Identity | None = None
        self._pending_challenge = False

    @property
    def identity(self) -> Identity | None:
        return self._identity

    @property
    def role(self) -> str | None:
        return None if self._identity is None else self._identity.role

    @property
    def refreshes(self) -> bool:
        """Whether this connection's credentials expire (so the periodic check must run)."""
        return self._identity is not None and self._identity.expires_at is not None

    def check_connect(self, connect: pb.CommandConnect, now: float) -> str | None:
        """Authenticate a CONNECT at wall time ``now``: ``None`` to accept, else the reason."""
        method = auth_method(connect)
        credentials = Credentials(connect.auth_data, self._peer_cn)
        try:
            self._identity = self._service.authenticate(method, credentials, now)
        except AuthenticationFailed as exc:
            log.info("refusing connection %s (method %s): %s", self._remote, method, exc)
            return str(exc)
        if self._identity is not None:
            log.debug("connection %s authenticated as %s", self._remote, self._identity.role)
        return None

    def on_auth_response(self, response: pb.CommandAuthResponse, now: float) -> str | None:
        """Check fresh credentials: ``None`` if they prove the same role, else the reason to
        close the connection."""
        self._pending_challenge = False
        current = self._identity
        if current is None:
            return "AUTH_RESPONSE without an authenticated connection"
        method = response.response.auth_method_name or current.method
        credentials = Credentials(response.response.auth_data, self._peer_cn)
        try:
            fresh = self._service.authenticate(method, credentials, now)
        except AuthenticationFailed as exc:
            return str(exc)
        if fresh is None or fresh.role != current.role:
            got = None if fresh is None else fresh.role
            return f"the role cannot change on a refresh ({current.role!r} -> {got!r})"
        self._identity = fresh
        log.info("connection %s refreshed its credentials for role %s", self._remote, fresh.role)
        return None

    def refresh_check(self, now: float, client_supports_refresh: bool) -> RefreshAction:
        """The periodic check at wall time ``now``."""
        identity = self._identity
        if identity is None or not identity.expired(now):
            return RefreshAction.NOTHING
        if not client_supports_refresh:
            log.info("closing %s: credentials expired, client cannot refresh", self._remote)
            return RefreshAction.CLOSE
        if self._pending_challenge:
            log.info("closing %s: no answer to the credential refresh", self._remote)
            return RefreshAction.CLOSE
        self._pending_challenge = True
        return RefreshAction.CHALLENGE


__all__ = ["ConnectionAuthentication", "RefreshAction"]
