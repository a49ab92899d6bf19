"""TLS on the bookie port: the contexts a bookie serves with and a bookie client connects with.

A bookie with ``tlsProviderFactoryClass`` (BookKeeper's switch) or ``tlsCertificatePath`` set
speaks TLS from the first byte of every connection on ``bookiePort``: there is no plain port
beside it and no STARTTLS upgrade (Braid's bookie wire is its own, ADR 0033), so a plain client
fails its first request and a TLS client never talks to a plain bookie by mistake. The files are
PEM (``tlsKeyStoreType=PEM``, ``tlsTrustStoreType=PEM``): ``tlsCertificatePath`` the chain,
``tlsKeyStore`` the private key, ``tlsTrustStore`` the CAs of client certificates; with
``tlsClientAuthentication=true`` a client without a certificate signed by them cannot connect.

A bookie's own client (auto-recovery copies ledgers between bookies) reaches the other bookies
with the same files: it trusts ``tlsTrustStore`` and presents its certificate. The broker's client
takes Pulsar's ``bookkeeperTLS*`` keys (:mod:`braid.broker.cluster_tls`).
"""

from __future__ import annotations

import ssl

from braid.security.tls import TlsSettings, client_context, server_context
from braid.storage.bookie.config import BookieConfig


def bookie_server_context(config: BookieConfig) -> ssl.SSLContext | None:
    """The context the bookie port wraps connections with (``None``: plain TCP).

    Raises:
        InvalidTlsSettings: a file is missing or does not load.
    """
    if not config.tls_enabled:
        return None
    assert config.tls_certificate_path is not None and config.tls_key_store is not None
    settings = TlsSettings(
        config.tls_certificate_path,
        config.tls_key_store,
        config.tls_trust_store,
        require_trusted_client_cert=config.tls_client_authentication,
    )
    return server_context(settings, request_client_certs=True)


def bookie_peer_context(config: BookieConfig) -> ssl.SSLContext | None:
    """The context this bookie's own client (auto-recovery) reaches other bookies with: TLS when
    this bookie serves TLS (a cluster's bookies share the setting), trusting ``tlsTrustStore``
    (the system's CAs without it) and presenting this bookie's certificate.

    Raises:
        InvalidTlsSettings: a file is missing or does not load.
    """
    if not config.tls_enabled:
        return None
    return client_context(
        trust_certs_file=config.tls_trust_store,
        certificate_file=config.tls_certificate_path,
        key_file=config.tls_key_store,
    )


__all__ = ["bookie_peer_context", "bookie_server_context"]
