"""Key material named the way Pulsar's ``tokenSecretKey`` / ``tokenPublicKey`` name it.

A key setting is one of ``file:///path`` (or ``file:path``), ``data:;base64,<base64>`` (a data
URL, RFC 2397, base64 or percent-encoded), ``env:NAME`` (the environment variable's value, itself
base64), a path to an existing file, or the key in base64. Public and private keys may be DER
(what ``pulsar tokens create-key-pair`` writes) or PEM.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import (
    PrivateKeyTypes,
    PublicKeyTypes,
)

from braid.core.errors import InvalidInputError


class InvalidKey(InvalidInputError):
    """A key setting that cannot be read or does not hold a key of the expected kind."""


def read_key_bytes(setting: str, env: Mapping[str, str] | None = None) -> bytes:
    """The bytes a key setting names.

    Raises:
        InvalidKey: the file cannot be read, the data URL or base64 is malformed, the variable is
            not set.
    """
    text = setting.strip()
    if not text:
        raise InvalidKey("the key setting is empty")
    if text.startswith("data:"):
        return _data_url(text)
    if text.startswith("file:"):
        parts = urlsplit(text)
        return _read_file(Path(parts.path or text[len("file:") :]))
    if text.startswith("env:"):
        name = text[len("env:") :]
        value = (os.environ if env is None else env).get(name)
        if value is None:
            raise InvalidKey(f"environment variable {name!r} is not set")
        return _base64(value, f"environment variable {name!r}")
    if Path(text).is_file():
        return _read_file(Path(text))
    return _base64(text, "the key setting")


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidKey(f"cannot read key file {path}: {exc.strerror or exc}") from None


def _data_url(text: str) -> bytes:
    header, sep, payload = text[len("data:") :].partition(",")
    if not sep:
        raise InvalidKey("a data: URL needs a ',' before its data")
    if header.endswith(";base64"):
        return _base64(payload, "the data: URL")
    return unquote_to_bytes(payload)


def _base64(text: str, what: str) -> bytes:
    compact = "".join(text.split())
    padded = compact + "=" * (-len(compact) % 4)
    for altchars in (None, b"-_"):
        try:
            decoded = base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
        if decoded:
            return decoded
    raise InvalidKey(f"{what} is not base64, a data: URL or a file")


def load_public_key(data: bytes) -> PublicKeyTypes:
    """A public key from DER (X.509 SubjectPublicKeyInfo) or PEM bytes.

    Raises:
        InvalidKey: neither form parses.
    """
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError) as exc:
        raise InvalidKey(f"not a public key: {exc}") from None


def load_private_key(data: bytes) -> PrivateKeyTypes:
    """A private key from DER (PKCS#8) or PEM bytes.

    Raises:
        InvalidKey: neither form parses (or it is encrypted).
    """
    try:
        if data.lstrip().startswith(b"-----"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidKey(f"not a private key: {exc}") from None


__all__ = ["InvalidKey", "load_private_key", "load_public_key", "read_key_bytes"]
