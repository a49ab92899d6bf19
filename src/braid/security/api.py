"""The authentication contract: what a provider takes, what it returns, how it fails.

A provider is Pulsar's ``AuthenticationProvider`` reduced to what Braid needs: its method name
(the ``auth_method_name`` a client puts in CONNECT: ``token``, ``basic``, ``tls``), a check of one
set of :class:`Credentials` that returns the peer's role, and - for credentials that expire (JWTs)
- the moment they stop being valid, so a long-lived connection can be asked for fresh ones
(``AUTH_CHALLENGE``).

Invariants: a provider never says *why* credentials failed in a way that tells an unauthenticated
peer anything about the broker's data; the message of :class:`AuthenticationFailed` is for the
broker's log, and the peer sees Pulsar's generic wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from braid.core.errors import BraidError

#: What a broker answers a failed CONNECT with (Pulsar's wording; the reason stays in the log).
UNABLE_TO_AUTHENTICATE = "Unable to authenticate"


class AuthenticationFailed(BraidError):
    """The credentials are missing, malformed, wrong or expired (the message says which, for the
    broker's log only)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a peer presented.

    Attributes:
        data: the CONNECT's ``auth_data`` (or AUTH_RESPONSE's), or the HTTP credentials after the
            scheme (a bearer token, ``user:password`` for basic).
        peer_common_name: the CN of a verified client certificate, if the peer sent one over TLS.
    """

    data: bytes = b""
    peer_common_name: str | None = None


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a peer is once authenticated.

    Attributes:
        role: the principal (Pulsar's "role") that authorization will check.
        method: the provider's method name.
        expires_at: wall-clock seconds after which the credentials are no longer valid
            (``None``: they do not expire).
    """

    role: str
    method: str
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        """Whether the credentials this identity came from have expired at wall time ``now``."""
        return self.expires_at is not None and now >= self.expires_at


class AuthenticationProvider(Protocol):
    """One authentication method (Pulsar's ``AuthenticationProvider``)."""

    #: Pulsar's class name, as written in ``authenticationProviders``.
    class_name: str
    #: The ``auth_method_name`` clients send for it.
    method: str

    def authenticate(self, credentials: Credentials, now: float) -> Identity:
        """The identity these credentials prove at wall time ``now``.

        Raises:
            AuthenticationFailed: they prove none.
        """
        ...


__all__ = [
    "UNABLE_TO_AUTHENTICATE",
    "AuthenticationFailed",
    "AuthenticationProvider",
    "Credentials",
    "Identity",
]
