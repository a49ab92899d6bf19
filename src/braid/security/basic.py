"""``AuthenticationProviderBasic``: user names and password hashes from an htpasswd file.

The file is named by ``basicAuthConf`` (Pulsar's key; Pulsar also reads the system property
``pulsar.auth.basic.conf``): a path, a ``file:``/``data:`` URL, or the file's content in base64.
Each line is ``user:hash`` with the hash in one of the forms ``htpasswd`` writes: bcrypt
(``$2y$``/``$2a$``/``$2b$``, ``htpasswd -B``), Apache MD5 (``$apr1$``, ``htpasswd -m``) or
traditional DES crypt (``htpasswd -d``). A client sends ``user:password``: as the CONNECT's auth
data (method ``basic``) or as an HTTP ``Authorization: Basic`` header.

bcrypt is deliberately slow; a successful check is remembered (by a SHA-256 of the password and
the stored hash, never the password) so an admin client that sends the header on every request
does not pay it every time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict

import bcrypt
from passlib.hash import apr_md5_crypt, des_crypt

from braid.core.errors import InvalidInputError
from braid.security.api import AuthenticationFailed, Credentials, Identity
from braid.security.keys import InvalidKey, read_key_bytes

CLASS_NAME = "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
_MAX_CREDENTIALS = 4096
_REMEMBERED = 1024


class InvalidHtpasswd(InvalidInputError):
    """The htpasswd file cannot be read, or a line is not ``user:hash`` with a known hash."""


def parse_htpasswd(text: str) -> dict[str, str]:
    """``{user: hash}`` from htpasswd lines (blank lines and ``#`` comments skipped).

    Raises:
        InvalidHtpasswd: a line without ``:``, or a hash in no supported form.
    """
    users: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, stored = line.partition(":")
        if not sep or not user or not stored:
            raise InvalidHtpasswd(f"htpasswd line {number}: expected user:hash")
        if _scheme(stored) is None:
            raise InvalidHtpasswd(
                f"htpasswd line {number} ({user}): the hash is not bcrypt, $apr1$ or crypt"
            )
        users[user] = stored
    return users


def _scheme(stored: str) -> str | None:
    if stored.startswith(("$2y$", "$2a$", "$2b$")):
        return "bcrypt"
    if stored.startswith("$apr1$"):
        return "apr1"
    if len(stored) == 13 and not stored.startswith("$"):
        return "crypt"
    return None


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches an htpasswd hash (constant-time where the scheme allows)."""
    scheme = _scheme(stored)
    try:
        if scheme == "bcrypt":
            encoded = password.encode("utf-8")
            if len(encoded) > 72:
                return False  # bcrypt looks at 72 bytes; a longer password is not the one stored
            return bcrypt.checkpw(encoded, ("$2b$" + stored[4:]).encode("ascii"))
        if scheme == "apr1":
            return bool(apr_md5_crypt.verify(password, stored))
        if scheme == "crypt":
            return bool(des_crypt.verify(password, stored))
    except (ValueError, TypeError):
        return False
    return False


class BasicAuthenticationProvider:
    """The ``basic`` method over one htpasswd file, read at start-up."""

    class_name = CLASS_NAME
    method = "basic"

    def __init__(self, conf: str) -> None:
        if not conf:
            raise InvalidHtpasswd("the basic provider needs basicAuthConf (an htpasswd file)")
        try:
            text = read_key_bytes(conf).decode("utf-8")
        except (InvalidKey, UnicodeDecodeError) as exc:
            raise InvalidHtpasswd(f"basicAuthConf: {exc}") from None
        self._users = parse_htpasswd(text)
        self._remembered: OrderedDict[bytes, str] = OrderedDict()

    def authenticate(self, credentials: Credentials, now: float) -> Identity:
        data = credentials.data
        if not data or len(data) > _MAX_CREDENTIALS:
            raise AuthenticationFailed("no user:password, or an oversize one")
        try:
            user, sep, password = data.decode("utf-8").partition(":")
        except UnicodeDecodeError:
            raise AuthenticationFailed("credentials are not UTF-8") from None
        if not sep or not user:
            raise AuthenticationFailed("credentials are not user:password")
        stored = self._users.get(user)
        if stored is None:
            raise AuthenticationFailed(f"unknown user {user!r}")
        digest = hashlib.sha256(f"{stored}\0{password}".encode()).digest()
        seen = self._remembered.get(digest)
        if seen is not None and hmac.compare_digest(seen, user):
            self._remembered.move_to_end(digest)
            return Identity(user, self.method)
        if not verify_password(password, stored):
            raise AuthenticationFailed(f"wrong password for user {user!r}")
        self._remembered[digest] = user
        if len(self._remembered) > _REMEMBERED:
            self._remembered.popitem(last=False)
        return Identity(user, self.method)


__all__ = [
    "CLASS_NAME",
    "BasicAuthenticationProvider",
    "InvalidHtpasswd",
    "parse_htpasswd",
    "verify_password",
]
