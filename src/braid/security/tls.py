"""TLS contexts from PEM files (Pulsar's ``tls*`` keys) and the peer certificate's name.

Server side (:func:`server_context`): the broker's certificate chain and key, and - when a trust
file is given - client certificates verified against it: *required* with
``tlsRequireTrustedClientCertOnConnect=true`` (mTLS), otherwise requested and verified when the
client offers one (so ``AuthenticationProviderTls`` can read its CN). With
``tlsAllowInsecureConnection=true`` client certificates are not requested at all (Python's TLS
cannot accept an untrusted client certificate and still read it).

Client side (:func:`client_context`): trust the given CA file (or the system's store), check the
host name unless told not to, present a client certificate for mTLS; ``allow_insecure`` turns
every check off (tests and labs only).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from braid.core.errors import InvalidInputError


class InvalidTlsSettings(InvalidInputError):
    """A certificate, key or trust file that is missing or does not load."""


@dataclass(frozen=True)
class TlsSettings:
    """The broker's TLS files and policy (Pulsar's keys).

    Attributes:
        certificate_file: ``tlsCertificateFilePath`` (PEM chain).
        key_file: ``tlsKeyFilePath`` (PEM, unencrypted).
        trust_certs_file: ``tlsTrustCertsFilePath`` (PEM CAs for client certificates), or None.
        require_trusted_client_cert: ``tlsRequireTrustedClientCertOnConnect``.
        allow_insecure_connection: ``tlsAllowInsecureConnection``.
    """

    certificate_file: Path
    key_file: Path
    trust_certs_file: Path | None = None
    require_trusted_client_cert: bool = False
    allow_insecure_connection: bool = False


def server_context(settings: TlsSettings, *, request_client_certs: bool = True) -> ssl.SSLContext:
    """The context a TLS listener (binary or HTTPS) wraps accepted sockets with.

    ``request_client_certs`` (with a trust file) asks clients for a certificate even when one is
    not required, so the tls provider can read its CN; a certificate that is offered is verified.

    Raises:
        InvalidTlsSettings: a file is missing or does not hold what it should.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(settings.certificate_file, settings.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidTlsSettings(
            f"cannot load tlsCertificateFilePath={settings.certificate_file} / "
            f"tlsKeyFilePath={settings.key_file}: {exc}"
        ) from None
    if settings.require_trusted_client_cert and settings.trust_certs_file is None:
        raise InvalidTlsSettings(
            "tlsRequireTrustedClientCertOnConnect=true needs tlsTrustCertsFilePath"
        )
    if settings.trust_certs_file is not None and not settings.allow_insecure_connection:
        _load_trust(ctx, settings.trust_certs_file, "tlsTrustCertsFilePath")
        if settings.require_trusted_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            ctx.verify_mode = ssl.CERT_OPTIONAL if request_client_certs else ssl.CERT_NONE
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def client_context(
    *,
    trust_certs_file: Path | None = None,
    certificate_file: Path | None = None,
    key_file: Path | None = None,
    validate_hostname: bool = True,
    allow_insecure: bool = False,
) -> ssl.SSLContext:
    """The context a client connects with (Braid's client, the admin client, broker-to-broker).

    Raises:
        InvalidTlsSettings: a file is missing or does not load, or only one of certificate and
            key is given.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if allow_insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        if trust_certs_file is not None:
            _load_trust(ctx, trust_certs_file, "trust certificates")
        else:
            ctx.load_default_certs()
        ctx.check_hostname = validate_hostname
    if (certificate_file is None) != (key_file is None):
        raise InvalidTlsSettings("a client certificate needs both its certificate and key file")
    if certificate_file is not None and key_file is not None:
        try:
            ctx.load_cert_chain(certificate_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidTlsSettings(
                f"cannot load client certificate {certificate_file} / {key_file}: {exc}"
            ) from None
    return ctx


def _load_trust(ctx: ssl.SSLContext, path: Path, what: str) -> None:
    try:
        ctx.load_verify_locations(cafile=str(path))
    except (OSError, ssl.SSLError) as exc:
        raise InvalidTlsSettings(f"cannot load {what} {path}: {exc}") from None


def peer_common_name(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The CN of the peer's *verified* certificate (``None`` without one)."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    for rdn in cert.get("subject", ()):
        for attribute in rdn:
            if len(attribute) == 2 and attribute[0] == "commonName":
                return str(attribute[1])
    return None


__all__ = [
    "InvalidTlsSettings",
    "TlsSettings",
    "client_context",
    "peer_common_name",
    "server_context",
]
