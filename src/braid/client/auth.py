"""Client credentials and TLS options, named as the official Pulsar client names them.

* :class:`AuthenticationToken` - a JWT, or a callable returning one (called again whenever the
  broker asks for fresh credentials with ``AUTH_CHALLENGE``).
* :class:`AuthenticationBasic` - ``user:password`` (the broker's htpasswd provider).
* :class:`AuthenticationTLS` - a client certificate; the broker's tls provider takes its CN as
  the role. The certificate is presented in the TLS handshake (``pulsar+ssl://`` only).
* :class:`TlsOptions` - trust, hostname verification and a client certificate for
  ``pulsar+ssl://`` connections.

Each authentication gives the ``auth_method_name`` and the bytes a CONNECT (or AUTH_RESPONSE)
carries; none of them talks to the network.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from braid.client.errors import AuthenticationError, InvalidConfigurationError
from braid.core.errors import InvalidInputError
from braid.security.tls import client_context


class Authentication:
    """Base of the client's credentials: a method name and the data for it."""

    method: str = "none"

    def auth_data(self) -> bytes:
        """The credentials to send now (read again on every CONNECT and AUTH_RESPONSE).

        Raises:
            AuthenticationError: they cannot be produced (a token supplier failed).
        """
        return b""

    def certificate(self) -> tuple[Path, Path] | None:
        """A client certificate and key to present in the TLS handshake, if any."""
        return None


class AuthenticationToken(Authentication):
    """A JWT (``method = "token"``): a string, or a callable that returns the current one."""

    method = "token"

    def __init__(self, token: str | Callable[[], str]) -> None:
        if isinstance(token, str) and not token.strip():
            raise InvalidConfigurationError("the token is empty")
        self._token = token

    def auth_data(self) -> bytes:
        try:
            token = self._token() if callable(self._token) else self._token
        except Exception as exc:
            raise AuthenticationError(f"the token supplier failed: {exc}") from exc
        return token.strip().encode("ascii", "replace")


class AuthenticationBasic(Authentication):
    """A user name and password (``method = "basic"``)."""

    method = "basic"

    def __init__(self, username: str, password: str) -> None:
        if not username or ":" in username:
            raise InvalidConfigurationError("the user name must be non-empty and without ':'")
        self._data = f"{username}:{password}".encode()

    def auth_data(self) -> bytes:
        return self._data


class AuthenticationTLS(Authentication):
    """A client certificate and key, PEM (``method = "tls"``; ``pulsar+ssl://`` only)."""

    method = "tls"

    def __init__(self, certificate_path: str | Path, private_key_path: str | Path) -> None:
        self._pair = (Path(certificate_path), Path(private_key_path))

    def certificate(self) -> tuple[Path, Path] | None:
        return self._pair


@dataclass(frozen=True)
class TlsOptions:
    """How ``pulsar+ssl://`` connections are made.

    Attributes:
        trust_certs_file: CA certificates (PEM) the broker's certificate must chain to; ``None``
            uses the system's trust store.
        validate_hostname: check that the certificate names the host connected to (default on).
        allow_insecure: accept any certificate (tests and labs only).
        certificate_file / key_file: a client certificate for mutual TLS (also taken from
            :class:`AuthenticationTLS`).
    """

    trust_certs_file: Path | None = None
    validate_hostname: bool = True
    allow_insecure: bool = False
    certificate_file: Path | None = None
    key_file: Path | None = None

    def context(self, authentication: Authentication | None = None) -> ssl.SSLContext:
        """The SSL context for one connection.

        Raises:
            InvalidConfigurationError: a file is missing or does not load.
        """
        cert, key = self.certificate_file, self.key_file
        pair = authentication.certificate() if authentication is not None else None
        if pair is not None:
            cert, key = pair
        try:
            return client_context(
                trust_certs_file=self.trust_certs_file,
                certificate_file=cert,
                key_file=key,
                validate_hostname=self.validate_hostname,
                allow_insecure=self.allow_insecure,
            )
        except InvalidInputError as exc:
            raise InvalidConfigurationError(str(exc)) from None


__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "TlsOptions",
]
