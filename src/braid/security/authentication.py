"""The broker's authentication service: which provider checks a CONNECT or an HTTP request.

Built once from the configuration (Pulsar's ``authenticationEnabled``, ``authenticationProviders``
with Pulsar's class names, ``anonymousUserRole`` and the providers' own keys). With authentication
disabled every peer is let in without a role, as in Pulsar. With it enabled:

* a CONNECT names its method (``auth_method_name``); the provider of that method decides. A
  method no provider serves (``none`` from a client without credentials) gets
  ``anonymousUserRole`` when one is configured, and is refused otherwise.
* an HTTP request is checked by its ``Authorization`` header (``Bearer`` -> token, ``Basic`` ->
  basic), else by its verified client certificate (tls), else it gets the anonymous role or is
  refused (401).

Every refusal is :class:`~braid.security.api.AuthenticationFailed`; its message is for the log.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field

from braid.core.errors import InvalidInputError
from braid.security import basic, tls_auth, tokens
from braid.security.api import AuthenticationFailed, AuthenticationProvider, Credentials, Identity

#: The role value an HTTP request or CONNECT gets when authentication is off.
ANONYMOUS_METHOD = "none"
_MAX_HEADER = 20 * 1024


class InvalidAuthenticationSettings(InvalidInputError):
    """``authenticationProviders`` names an unknown class, or a provider's keys are unusable."""


@dataclass(frozen=True)
class AuthenticationSettings:
    """Pulsar's authentication keys.

    Attributes:
        enabled: ``authenticationEnabled``.
        providers: ``authenticationProviders`` (class names, in order).
        anonymous_role: ``anonymousUserRole`` ("" = none: unauthenticated peers are refused).
        token: the ``token*`` keys.
        basic_conf: ``basicAuthConf`` (the htpasswd file).
        refresh_check_seconds: ``authenticationRefreshCheckSeconds``: how often a connection
            whose credentials expire is checked (and challenged once they have).
    """

    enabled: bool = False
    providers: tuple[str, ...] = ()
    anonymous_role: str = ""
    token: tokens.TokenSettings = field(default_factory=tokens.TokenSettings)
    basic_conf: str = ""
    refresh_check_seconds: int = 60


def _build_provider(name: str, settings: AuthenticationSettings) -> AuthenticationProvider:
    try:
        if name == tokens.CLASS_NAME:
            return tokens.TokenAuthenticationProvider(settings.token)
        if name == basic.CLASS_NAME:
            return basic.BasicAuthenticationProvider(settings.basic_conf)
        if name == tls_auth.CLASS_NAME:
            return tls_auth.TlsAuthenticationProvider()
    except InvalidInputError as exc:
        raise InvalidAuthenticationSettings(f"{name}: {exc}") from None
    known = ", ".join((tokens.CLASS_NAME, basic.CLASS_NAME, tls_auth.CLASS_NAME))
    raise InvalidAuthenticationSettings(
        f"authenticationProviders: unknown provider {name!r} (known: {known})"
    )


class AuthenticationService:
    """Picks the provider for each peer and says who the peer is."""

    def __init__(self, settings: AuthenticationSettings) -> None:
        self.settings = settings
        self._providers: dict[str, AuthenticationProvider] = {}
        if settings.enabled:
            if not settings.providers:
                raise InvalidAuthenticationSettings(
                    "authenticationEnabled=true needs authenticationProviders"
                )
            for name in settings.providers:
                provider = _build_provider(name, settings)
                self._providers[provider.method] = provider

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def methods(self) -> Sequence[str]:
        """The ``auth_method_name`` values served, in configuration order."""
        return tuple(self._providers)

    @property
    def wants_client_certificates(self) -> bool:
        """Whether a TLS listener should ask for client certificates (the tls provider is on)."""
        return "tls" in self._providers

    def authenticate(self, method: str, credentials: Credentials, now: float) -> Identity | None:
        """Who a CONNECT (or AUTH_RESPONSE) with ``method`` proves to be; ``None`` with
        authentication disabled.

        Raises:
            AuthenticationFailed: the credentials fail, or the method is not served and there is
                no anonymous role.
        """
        if not self.enabled:
            return None
        provider = self._providers.get(method)
        if provider is None:
            return self._anonymous(f"no provider for method {method!r}")
        return provider.authenticate(credentials, now)

    def authenticate_http(
        self, authorization: str | None, peer_common_name: str | None, now: float
    ) -> Identity | None:
        """Who an HTTP request is, from its ``Authorization`` header or client certificate;
        ``None`` with authentication disabled.

        Raises:
            AuthenticationFailed: bad or missing credentials and no anonymous role.
        """
        if not self.enabled:
            return None
        if authorization:
            if len(authorization) > _MAX_HEADER:
                raise AuthenticationFailed("oversize Authorization header")
            scheme, _, value = authorization.strip().partition(" ")
            scheme = scheme.lower()
            if scheme == "bearer" and "token" in self._providers:
                data = value.strip().encode("utf-8", "replace")
                return self._providers["token"].authenticate(Credentials(data), now)
            if scheme == "basic" and "basic" in self._providers:
                try:
                    data = base64.b64decode(value.strip(), validate=True)
                except (binascii.Error, ValueError):
                    raise AuthenticationFailed("Basic credentials are not base64") from None
                return self._providers["basic"].authenticate(Credentials(data), now)
            raise AuthenticationFailed(f"no provider for the {scheme!r} Authorization scheme")
        if peer_common_name and "tls" in self._providers:
            credentials = Credentials(peer_common_name=peer_common_name)
            return self._providers["tls"].authenticate(credentials, now)
        return self._anonymous("no credentials")

    def _anonymous(self, why: str) -> Identity:
        if not self.settings.anonymous_role:
            raise AuthenticationFailed(f"{why}, and no anonymousUserRole")
        return Identity(self.settings.anonymous_role, ANONYMOUS_METHOD)


__all__ = [
    "AuthenticationService",
    "AuthenticationSettings",
    "InvalidAuthenticationSettings",
]
