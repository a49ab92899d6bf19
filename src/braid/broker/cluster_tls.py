"""TLS inside the cluster: the broker's internal listener, its calls to other brokers, and its
bookie client - each context made here, from ``broker.conf`` (Pulsar's keys), in one place.

* **Internal listener** (:func:`internal_server_context`): served over HTTPS with the broker's
  ``tlsCertificateFilePath``/``tlsKeyFilePath`` whenever the broker has TLS configured (a TLS
  port, or ``brokerClientTlsEnabled=true``); with ``tlsRequireTrustedClientCertOnConnect=true``
  a caller needs a certificate signed by ``tlsTrustCertsFilePath``. It has no plain port then,
  and the URL it announces in the broker registry says ``https://``.
* **Calls to other brokers** (:class:`PeerTls`, made by :func:`peer_tls`): an ``https://`` URL is
  reached trusting ``brokerClientTrustCertsFilePath`` (else ``tlsTrustCertsFilePath``, else the
  system's CAs), checking the host name unless ``tlsHostnameVerificationEnabled=false`` (Braid's
  default is on; Pulsar's is off), presenting ``brokerClientCertificateFilePath``/
  ``brokerClientKeyFilePath`` (or the ``AuthenticationTls`` plugin's files) when set;
  ``tlsAllowInsecureConnection=true`` turns the checks off, as for Pulsar's broker client. With
  TLS configured (``brokerClientTlsEnabled=true``, or this broker's internal listener serving
  HTTPS) a peer that announces a plain ``http://`` address is refused: no plain fallback. A
  handshake that fails is logged once per peer (until a call succeeds). The same client reaches
  another broker's **admin API** (forwarding to a controller leader, the load manager's unload
  and split, a namespace unload): with TLS configured, at the ``webServiceUrlTls`` the peer
  registers (:meth:`PeerTls.admin_url`); a peer without an HTTPS admin port is refused, and a
  ``braid broker`` with TLS configured must have one (:func:`check_https_admin`).
* **Transactions' binary calls** (:mod:`braid.broker.transactions.peers`): with TLS configured a
  coordinator reaches another broker at the ``pulsar+ssl://`` URL it registered, through
  :attr:`PeerTls.context`; a ``braid broker`` with transactions and TLS configured must have a TLS
  binary port (:func:`check_tls_transaction_port`).
* **Bookies** (:func:`bookie_client_context`): with ``bookkeeperTLSClientAuthentication=true``
  (Pulsar's switch for TLS to bookies) every bookie is reached over TLS, trusting
  ``bookkeeperTLSTrustCertsFilePath`` and presenting ``bookkeeperTLSCertificateFilePath``/
  ``bookkeeperTLSKeyFilePath`` when set (PEM only). A standalone's in-process bookies
  (``standaloneBookies`` > 1) then serve TLS with the broker's own certificate
  (:func:`standalone_bookie_tls`).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from braid.broker.config import BrokerConfig, InvalidConfig
from braid.broker.errors import ServiceNotReady
from braid.broker.security_settings import broker_client_credentials, tls_files, tls_settings
from braid.security.tls import InvalidTlsSettings, TlsSettings, client_context, server_context

log = logging.getLogger(__name__)

#: The only bookie TLS provider factory (BookKeeper's).
TLS_PROVIDER_FACTORY_CLASS = "org.apache.bookkeeper.tls.TLSContextFactory"


class PlainPeerRefused(ServiceNotReady):
    """This broker has TLS configured and the other broker announces a plain address."""


def internal_tls_settings(config: BrokerConfig) -> TlsSettings | None:
    """The internal listener's TLS files (``None``: plain HTTP, the broker has no TLS).

    Raises:
        InvalidConfig: ``brokerClientTlsEnabled=true`` without the broker's certificate.
    """
    settings = tls_settings(config)
    if settings is not None or not config.broker_client_tls_enabled:
        return settings
    return tls_files(
        config,
        "brokerClientTlsEnabled=true (the internal listener other brokers call serves HTTPS)",
        ("brokerClientTlsEnabled",),
    )


def internal_server_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The internal listener's SSL context (``None``: plain HTTP)."""
    settings = internal_tls_settings(config)
    return None if settings is None else server_context(settings, request_client_certs=False)


@dataclass
class PeerTls:
    """How this broker reaches other brokers over HTTP(S): one factory for the client."""

    #: TLS is configured (``brokerClientTlsEnabled``, or an HTTPS internal listener): a plain
    #: peer address is refused.
    required: bool
    #: The context of ``https://`` calls.
    context: ssl.SSLContext
    _failed: set[str] = field(default_factory=set)

    def client(self, base_url: str, *, timeout_s: float) -> httpx.AsyncClient:
        """An HTTP client for ``base_url`` (one peer) with this broker's TLS settings.

        Raises:
            PlainPeerRefused: TLS is required and ``base_url`` is plain ``http://``.
        """
        if base_url.startswith("http://") and self.required:
            raise PlainPeerRefused(
                f"{base_url} is a plain-HTTP address and this broker has TLS configured "
                "(brokerClientTlsEnabled=true or a TLS port): the other broker must serve TLS "
                "too (tlsCertificateFilePath with a TLS port or brokerClientTlsEnabled=true there)"
            )
        return httpx.AsyncClient(base_url=base_url, timeout=timeout_s, verify=self.context)

    def admin_url(self, plain: str | None, tls: str | None) -> str | None:
        """Which of a peer's admin URLs to call: its ``webServiceUrlTls`` when TLS is required
        here, else its ``webServiceUrl``. With TLS required and no HTTPS admin port there, the
        plain URL is returned for :meth:`client` to refuse (no plain fallback)."""
        return tls if self.required and tls else plain

    def failed(self, peer: str, exc: BaseException) -> bool:
        """Note a failed call to ``peer``; a TLS failure is logged once (``True`` if TLS)."""
        cause = _ssl_error_in(exc)
        if cause is None:
            return False
        if peer not in self._failed:
            self._failed.add(peer)
            log.error(
                "TLS to broker %s failed: %s (is its certificate signed by a CA in "
                "brokerClientTrustCertsFilePath, for its advertised address? does it accept "
                "this broker's certificate?); logged once until a call succeeds",
                peer,
                cause,
            )
        return True

    def succeeded(self, peer: str) -> None:
        self._failed.discard(peer)


def peer_client(tls: PeerTls | None, base_url: str, *, timeout_s: float) -> httpx.AsyncClient:
    """An HTTP client for another broker at ``base_url``: through ``tls`` (``braid broker``), or
    plain httpx defaults without it (``braid standalone``, which has no peers).

    Raises:
        PlainPeerRefused: see :meth:`PeerTls.client`.
    """
    if tls is None:
        return httpx.AsyncClient(base_url=base_url, timeout=timeout_s)
    return tls.client(base_url, timeout_s=timeout_s)


def peer_admin_url(tls: PeerTls | None, plain: str | None, https: str | None) -> str | None:
    """A peer's admin URL to call (:meth:`PeerTls.admin_url`; plain without ``tls``)."""
    return plain if tls is None else tls.admin_url(plain, https)


def _ssl_error_in(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc`` (httpx wraps it), if any."""
    seen: BaseException | None = exc
    for _ in range(10):  # a chain is short; bounded against cycles
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def peer_tls(config: BrokerConfig) -> PeerTls:
    """This broker's TLS for calls to other brokers (see the module docstring).

    Raises:
        InvalidConfig: a file that does not load, or only one of certificate and key.
    """
    cert, key = config.broker_client_certificate_file_path, config.broker_client_key_file_path
    credentials = broker_client_credentials(config)
    if cert is None and key is None and credentials is not None and credentials.method == "tls":
        cert, key = credentials.cert_file, credentials.key_file
    trust = config.broker_client_trust_certs_file_path or config.tls_trust_certs_file_path
    # TLS configured here (the internal listener serves HTTPS): no plain call to another broker.
    required = config.broker_client_tls_enabled or internal_tls_settings(config) is not None
    return PeerTls(
        required,
        _client_context(
            "brokerClientTrustCertsFilePath/brokerClientCertificateFilePath/"
            "brokerClientKeyFilePath",
            trust,
            cert,
            key,
            config,
        ),
    )


def check_https_admin(config: BrokerConfig) -> None:
    """A ``braid broker`` with TLS configured has an HTTPS admin port: the other brokers call its
    admin API there only (no plain fallback).

    Raises:
        InvalidConfig: TLS configured (a TLS port, or ``brokerClientTlsEnabled=true``) without
            an HTTPS admin port.
    """
    if internal_tls_settings(config) is not None and config.tls_web_port is None:
        raise InvalidConfig(
            None,
            "",
            "this broker has TLS configured, so the other brokers call its admin API (forwarding "
            "to a controller leader, bundle unload and split) over HTTPS only: set "
            "webServicePortTls (or tlsEnabled=true for port 8443)",
            keys=("webServicePortTls", "brokerClientTlsEnabled"),
        )


def check_tls_transaction_port(config: BrokerConfig) -> None:
    """A ``braid broker`` with transactions and TLS configured has a ``pulsar+ssl://`` port: the
    other brokers' coordinators end transactions on its topics there only (no plain fallback).

    Raises:
        InvalidConfig: ``transactionCoordinatorEnabled=true`` and TLS configured (a TLS port, or
            ``brokerClientTlsEnabled=true``) without ``brokerServicePortTls``.
    """
    if (
        config.transaction_coordinator_enabled
        and internal_tls_settings(config) is not None
        and config.tls_broker_port is None
    ):
        raise InvalidConfig(
            None,
            "",
            "this broker has TLS configured and transactions enabled, so the other brokers end "
            "transactions on its topics over pulsar+ssl:// only: set brokerServicePortTls (or "
            "tlsEnabled=true for port 6651)",
            keys=("brokerServicePortTls", "brokerClientTlsEnabled"),
        )


def bookie_client_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The context the broker reaches bookies with (``None``: plain TCP).

    Raises:
        InvalidConfig: a setting Braid does not have (a non-PEM type, another provider
            factory) or a file that does not load.
    """
    if not config.bookkeeper_tls_client_authentication:
        return None
    for key, value in (
        ("bookkeeperTLSKeyFileType", config.bookkeeper_tls_key_file_type),
        ("bookkeeperTLSTrustCertTypes", config.bookkeeper_tls_trust_cert_types),
    ):
        if value.upper() != "PEM":
            raise InvalidConfig(key, value, "only PEM files are supported")
    factory = config.bookkeeper_tls_provider_factory_class
    if factory and factory != TLS_PROVIDER_FACTORY_CLASS:
        raise InvalidConfig(
            "bookkeeperTLSProviderFactoryClass", factory, f"expected {TLS_PROVIDER_FACTORY_CLASS}"
        )
    return _client_context(
        "bookkeeperTLSTrustCertsFilePath/bookkeeperTLSCertificateFilePath/bookkeeperTLSKeyFilePath",
        config.bookkeeper_tls_trust_certs_file_path,
        config.bookkeeper_tls_certificate_file_path,
        config.bookkeeper_tls_key_file_path,
        config,
    )


def standalone_bookie_tls(config: BrokerConfig) -> TlsSettings | None:
    """What a standalone's in-process bookies serve TLS with when the broker reaches bookies
    over TLS: the broker's certificate and key, client certificates verified against
    ``tlsTrustCertsFilePath`` and required when the broker presents one.

    Raises:
        InvalidConfig: TLS to bookies without the broker's certificate.
    """
    if not config.bookkeeper_tls_client_authentication:
        return None
    if config.tls_certificate_file_path is None or config.tls_key_file_path is None:
        raise InvalidConfig(
            None,
            "",
            "bookkeeperTLSClientAuthentication=true with in-process bookies needs "
            "tlsCertificateFilePath and tlsKeyFilePath: the bookies serve TLS with them",
            keys=("bookkeeperTLSClientAuthentication", "tlsCertificateFilePath", "tlsKeyFilePath"),
        )
    mutual = config.bookkeeper_tls_certificate_file_path is not None
    return TlsSettings(
        config.tls_certificate_file_path,
        config.tls_key_file_path,
        config.tls_trust_certs_file_path if mutual else None,
        require_trusted_client_cert=mutual and config.tls_trust_certs_file_path is not None,
    )


def _client_context(
    keys: str,
    trust: Path | None,
    cert: Path | None,
    key: Path | None,
    config: BrokerConfig,
) -> ssl.SSLContext:
    try:
        return client_context(
            trust_certs_file=trust,
            certificate_file=cert,
            key_file=key,
            validate_hostname=config.tls_hostname_verification_enabled,
            allow_insecure=config.tls_allow_insecure_connection,
        )
    except InvalidTlsSettings as exc:
        raise InvalidConfig(None, "", f"{keys}: {exc}", keys=tuple(keys.split("/"))) from None


__all__ = [
    "TLS_PROVIDER_FACTORY_CLASS",
    "PeerTls",
    "PlainPeerRefused",
    "bookie_client_context",
    "check_https_admin",
    "check_tls_transaction_port",
    "internal_server_context",
    "internal_tls_settings",
    "peer_admin_url",
    "peer_client",
    "peer_tls",
    "standalone_bookie_tls",
]
