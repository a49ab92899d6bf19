"""JSON Web Tokens the way Pulsar uses them: minting (``braid tokens``) and the broker's provider.

Pulsar's tokens are JWTs signed with a shared secret (HS256/384/512; the secret is raw bytes) or
a key pair (RS256/384/512, ES256/384/512, PS256/384/512; the private key is PKCS#8 DER, the
public key X.509 DER, as ``pulsar tokens create-key-pair`` writes them). The role is the ``sub``
claim, or the claim named by ``tokenAuthClaim``; ``exp``, when present, ends the token's validity
and a connection authenticated with it is asked for a fresh one (``AUTH_CHALLENGE``). A token
without ``exp`` never expires, as in Pulsar. ``tokenAudienceClaim``/``tokenAudience`` add an
audience check.

The provider refuses ``alg: none``, an algorithm of the wrong family for the configured key (a
public key used as an HMAC secret is the classic forgery) and tokens longer than
:data:`MAX_TOKEN_BYTES`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from braid.core.errors import InvalidInputError
from braid.core.units import parse_duration_ms
from braid.security.api import AuthenticationFailed, Credentials, Identity
from braid.security.keys import InvalidKey, load_private_key, load_public_key, read_key_bytes

#: Pulsar's class name for this provider.
CLASS_NAME = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
#: Tokens longer than this are refused before any parsing (a JWT of a role is a few hundred bytes).
MAX_TOKEN_BYTES = 16 * 1024

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
KEY_PAIR_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "ES256",
    "ES384",
    "ES512",
    "PS256",
    "PS384",
    "PS512",
)
_EC_CURVES = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}
_SECRET_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
_RELATIVE = re.compile(r"^\s*(\d+)\s*([wWyY])\s*$")


class InvalidTokenSettings(InvalidInputError):
    """A token option or key that cannot be used (unknown algorithm, unreadable key, bad expiry)."""


def parse_expiry(text: str) -> float:
    """``pulsar tokens create --expiry-time`` in seconds: ``30s``, ``10m``, ``2h``, ``7d``, ``2w``,
    ``1y`` (365 days), or a bare number of seconds.

    Raises:
        InvalidTokenSettings: anything else, or zero.
    """
    match = _RELATIVE.match(text)
    if match is not None:
        days = 7 if match.group(2).lower() == "w" else 365
        seconds = int(match.group(1)) * days * 86_400.0
    else:
        try:
            seconds = parse_duration_ms(text) / 1000.0
        except ValueError as exc:
            raise InvalidTokenSettings(f"expiry time {text!r}: {exc}") from None
    if seconds <= 0:
        raise InvalidTokenSettings(f"expiry time {text!r} must be positive")
    return seconds


def create_secret_key(algorithm: str = "HS256") -> bytes:
    """A random secret for an HMAC algorithm, as many bytes as the hash is long."""
    if algorithm not in _SECRET_BYTES:
        raise InvalidTokenSettings(f"{algorithm!r} is not an HMAC algorithm ({HMAC_ALGORITHMS})")
    return secrets.token_bytes(_SECRET_BYTES[algorithm])


def create_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """A new key pair for ``algorithm``: (PKCS#8 DER private key, X.509 DER public key)."""
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm.startswith(("RS", "PS")) and algorithm in KEY_PAIR_ALGORITHMS:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm in _EC_CURVES:
        private = ec.generate_private_key(_EC_CURVES[algorithm])
    else:
        raise InvalidTokenSettings(f"{algorithm!r} is not a key-pair algorithm")
    private_der = private.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_der, public_der


def _key_pair_algorithm(key: PrivateKeyTypes | PublicKeyTypes) -> str:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return {256: "ES256", 384: "ES384", 521: "ES512"}.get(key.curve.key_size, "ES256")
    raise InvalidTokenSettings(f"unsupported key type {type(key).__name__}")


def create_token(
    subject: str,
    *,
    secret_key: bytes | None = None,
    private_key: bytes | None = None,
    algorithm: str | None = None,
    expires_at: float | None = None,
    headers: dict[str, str] | None = None,
) -> str:
    """Mint a token for role ``subject`` signed with a secret or a private key (one of them).

    Args:
        algorithm: defaults to HS256 for a secret, and to the key's own family for a private
            key (RS256 for RSA, ES256/384/512 by curve).
        expires_at: the ``exp`` claim (wall-clock seconds); ``None`` for a token that never
            expires.

    Raises:
        InvalidTokenSettings: no key, both keys, a key that does not parse, a wrong algorithm.
    """
    if (secret_key is None) == (private_key is None):
        raise InvalidTokenSettings("give exactly one of a secret key and a private key")
    claims: dict[str, object] = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    if secret_key is not None:
        alg = algorithm or "HS256"
        if alg not in HMAC_ALGORITHMS:
            raise InvalidTokenSettings(f"a secret key signs with {HMAC_ALGORITHMS}, not {alg!r}")
        return jwt.encode(claims, secret_key, algorithm=alg, headers=headers)
    assert private_key is not None
    try:
        key = load_private_key(private_key)
    except InvalidKey as exc:
        raise InvalidTokenSettings(str(exc)) from None
    alg = algorithm or _key_pair_algorithm(key)
    if alg not in KEY_PAIR_ALGORITHMS:
        raise InvalidTokenSettings(f"a private key signs with {KEY_PAIR_ALGORITHMS}, not {alg!r}")
    return jwt.encode(claims, key, algorithm=alg, headers=headers)  # type: ignore[arg-type]


def token_claims(token: str) -> dict[str, object]:
    """The claims of a token, *without* verifying its signature (``braid tokens show``).

    Raises:
        InvalidInputError: not a JWT.
    """
    try:
        return dict(jwt.decode(token, options={"verify_signature": False}))
    except jwt.PyJWTError as exc:
        raise InvalidInputError(f"not a JWT: {exc}") from None


@dataclass(frozen=True)
class TokenSettings:
    """The broker's token settings (Pulsar's keys).

    Attributes:
        secret_key: ``tokenSecretKey`` as written (``file:``/``data:``/...), or ``""``.
        public_key: ``tokenPublicKey`` as written, or ``""``.
        public_algorithm: ``tokenPublicAlg``: the algorithm tokens signed with the private key
            use (RS256 by default; the family of the key must match).
        auth_claim: ``tokenAuthClaim``: the claim holding the role (``sub``).
        audience_claim / audience: ``tokenAudienceClaim`` / ``tokenAudience``: when
            ``audience`` is set, the claim must hold it.
    """

    secret_key: str = ""
    public_key: str = ""
    public_algorithm: str = "RS256"
    auth_claim: str = "sub"
    audience_claim: str = "aud"
    audience: str = ""


class TokenAuthenticationProvider:
    """``AuthenticationProviderToken``: the role is a verified JWT's ``sub`` (or
    ``tokenAuthClaim``).

    Raises (at construction):
        InvalidTokenSettings: neither or both keys configured, a key that cannot be read.
    """

    class_name = CLASS_NAME
    method = "token"

    def __init__(self, settings: TokenSettings) -> None:
        self._settings = settings
        self._key: bytes | PublicKeyTypes
        if bool(settings.secret_key) == bool(settings.public_key):
            raise InvalidTokenSettings(
                "the token provider needs exactly one of tokenSecretKey and tokenPublicKey"
            )
        try:
            if settings.secret_key:
                self._key = read_key_bytes(settings.secret_key)
                self._algorithms = list(HMAC_ALGORITHMS)
            else:
                public = load_public_key(read_key_bytes(settings.public_key))
                family = _key_pair_algorithm(public)[:2]
                if settings.public_algorithm not in KEY_PAIR_ALGORITHMS or not (
                    settings.public_algorithm.startswith(family)
                    or (family == "RS" and settings.public_algorithm.startswith("PS"))
                ):
                    raise InvalidTokenSettings(
                        f"tokenPublicAlg={settings.public_algorithm} does not fit the key"
                    )
                self._key = public
                self._algorithms = [settings.public_algorithm]
        except InvalidKey as exc:
            raise InvalidTokenSettings(str(exc)) from None

    def authenticate(self, credentials: Credentials, now: float) -> Identity:
        data = credentials.data
        if not data:
            raise AuthenticationFailed("no token")
        if len(data) > MAX_TOKEN_BYTES:
            raise AuthenticationFailed(f"token of {len(data)} bytes is over {MAX_TOKEN_BYTES}")
        try:
            token = data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise AuthenticationFailed("token is not ASCII") from None
        token = token.removeprefix("Bearer ").strip()
        try:
            claims = jwt.decode(
                token,
                self._key,  # type: ignore[arg-type]
                algorithms=self._algorithms,
                # A key too short for the token's algorithm (a 32-byte secret and an HS512
                # token) is refused, as Pulsar's JWT library refuses it, instead of warning on
                # every request a peer sends.
                options={
                    "verify_exp": False,
                    "verify_aud": False,
                    "require": [],
                    "enforce_minimum_key_length": True,
                },
            )
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(f"invalid token: {exc}") from None
        expires_at = _expiry(claims)
        if expires_at is not None and now >= expires_at:
            raise AuthenticationFailed("token expired")
        self._check_audience(claims)
        role = claims.get(self._settings.auth_claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationFailed(f"token has no {self._settings.auth_claim!r} claim")
        return Identity(role, self.method, expires_at)

    def _check_audience(self, claims: dict[str, object]) -> None:
        wanted = self._settings.audience
        if not wanted:
            return
        got = claims.get(self._settings.audience_claim)
        audiences = got if isinstance(got, list) else [got]
        if wanted not in audiences:
            raise AuthenticationFailed("token is not for this broker's audience")


def _expiry(claims: dict[str, object]) -> float | None:
    exp = claims.get("exp")
    if exp is None:
        return None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise AuthenticationFailed("token's exp claim is not a number")
    return float(exp)


__all__ = [
    "CLASS_NAME",
    "HMAC_ALGORITHMS",
    "KEY_PAIR_ALGORITHMS",
    "MAX_TOKEN_BYTES",
    "InvalidTokenSettings",
    "TokenAuthenticationProvider",
    "TokenSettings",
    "create_key_pair",
    "create_secret_key",
    "create_token",
    "parse_expiry",
    "token_claims",
]
