"""What a client presents: credentials named as ``pulsar-admin``/``pulsar-client`` name them.

``--auth-plugin`` / ``--auth-params`` (and ``client.conf``'s ``authPlugin``/``authParams``) name a
Pulsar client authentication class and its parameters; :func:`from_plugin` reads the three Braid
serves:

* ``org.apache.pulsar.client.impl.auth.AuthenticationToken``: ``token:<jwt>``,
  ``file:///path`` (the token is read from the file on every use) or ``{"token": "<jwt>"}``;
* ``org.apache.pulsar.client.impl.auth.AuthenticationBasic``:
  ``{"userId": "u", "password": "p"}`` (or ``userId:u,password:p``);
* ``org.apache.pulsar.client.impl.auth.AuthenticationTls``:
  ``tlsCertFile:/path,tlsKeyFile:/path`` (or JSON with those keys).

Short names (``token``, ``basic``, ``tls``) are accepted too. :class:`ClientCredentials` gives
the HTTP ``Authorization`` header and the binary protocol's method and data.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

from braid.core.errors import InvalidInputError

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
BASIC_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"
_PLUGINS = {
    TOKEN_PLUGIN: "token",
    BASIC_PLUGIN: "basic",
    TLS_PLUGIN: "tls",
    "AuthenticationToken": "token",
    "AuthenticationBasic": "basic",
    "AuthenticationTls": "tls",
    "token": "token",
    "basic": "basic",
    "tls": "tls",
}


class InvalidCredentials(InvalidInputError):
    """An unknown plugin, parameters that do not parse, or a token file that cannot be read."""


@dataclass(frozen=True)
class ClientCredentials:
    """One client's credentials.

    Attributes:
        method: ``token``, ``basic`` or ``tls``.
        token: the JWT (``token``), unless ``token_file`` names where to read it.
        token_file: a file read on every use (a token refreshed on disk keeps working).
        username / password: for ``basic``.
        cert_file / key_file: the client certificate for ``tls`` (presented in the handshake).
    """

    method: str
    token: str | None = None
    token_file: Path | None = None
    username: str | None = None
    password: str | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def current_token(self) -> str:
        """The token to send now.

        Raises:
            InvalidCredentials: the token file cannot be read or is empty.
        """
        if self.token_file is not None:
            try:
                text = self.token_file.read_text(encoding="ascii").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidCredentials(
                    f"cannot read token file {self.token_file}: {exc}"
                ) from None
            if not text:
                raise InvalidCredentials(f"token file {self.token_file} is empty")
            return text
        return self.token or ""

    def http_authorization(self) -> str | None:
        """The ``Authorization`` header value (``None`` for ``tls``: the certificate speaks)."""
        if self.method == "token":
            return f"Bearer {self.current_token()}"
        if self.method == "basic":
            pair = f"{self.username}:{self.password}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        return None

    def auth_data(self) -> bytes:
        """The CONNECT's ``auth_data`` for :attr:`method`."""
        if self.method == "token":
            return self.current_token().encode("ascii", "replace")
        if self.method == "basic":
            return f"{self.username}:{self.password}".encode()
        return b""


def _params(text: str) -> dict[str, str]:
    text = text.strip()
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise InvalidCredentials(f"auth params are not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise InvalidCredentials("auth params JSON must be an object")
        return {str(k): str(v) for k, v in loaded.items()}
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def from_plugin(plugin: str, params: str) -> ClientCredentials:
    """Credentials from a Pulsar client authentication class name and its parameters.

    Raises:
        InvalidCredentials: an unknown plugin, or parameters missing what it needs.
    """
    method = _PLUGINS.get(plugin.strip())
    if method is None:
        known = ", ".join((TOKEN_PLUGIN, BASIC_PLUGIN, TLS_PLUGIN))
        raise InvalidCredentials(f"unknown auth plugin {plugin!r} (supported: {known})")
    text = params.strip()
    if method == "token":
        if text.startswith("token:"):
            return ClientCredentials("token", token=text[len("token:") :].strip())
        if text.startswith("file:"):
            path = text[len("file://") :] if text.startswith("file://") else text[len("file:") :]
            return ClientCredentials("token", token_file=Path(path))
        token = _params(text).get("token") if text.startswith("{") else text
        if not token:
            raise InvalidCredentials("the token plugin needs token:<jwt> or file:///path")
        return ClientCredentials("token", token=token)
    values = _params(text)
    if method == "basic":
        user, password = values.get("userId"), values.get("password")
        if not user or password is None:
            raise InvalidCredentials('the basic plugin needs {"userId": ..., "password": ...}')
        return ClientCredentials("basic", username=user, password=password)
    cert, key = values.get("tlsCertFile"), values.get("tlsKeyFile")
    if not cert or not key:
        raise InvalidCredentials("the tls plugin needs tlsCertFile:/path,tlsKeyFile:/path")
    return ClientCredentials("tls", cert_file=Path(cert), key_file=Path(key))


__all__ = [
    "BASIC_PLUGIN",
    "TLS_PLUGIN",
    "TOKEN_PLUGIN",
    "ClientCredentials",
    "InvalidCredentials",
    "from_plugin",
]
