"""The broker's TLS and authentication settings, taken from its :class:`BrokerConfig`.

``broker.conf`` keys (Pulsar's names) live in :mod:`braid.broker.config`; this module turns them
into the :mod:`braid.security` settings objects the listeners and the authentication service are
built from, checking the combinations that only make sense together.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl

from braid.broker.config import BrokerConfig, InvalidConfig
from braid.core.errors import InvalidInputError
from braid.security.authentication import AuthenticationService, AuthenticationSettings
from braid.security.authorization import AuthorizationSettings
from braid.security.credentials import ClientCredentials, from_plugin
from braid.security.tls import TlsSettings, server_context
from braid.security.tokens import TokenSettings


def tls_settings(config: BrokerConfig) -> TlsSettings | None:
    """The TLS files and policy when a TLS listener is configured, else ``None``.

    Raises:
        InvalidConfig: a TLS port without ``tlsCertificateFilePath``/``tlsKeyFilePath``.
    """
    if config.tls_broker_port is None and config.tls_web_port is None:
        return None
    return tls_files(config, "a TLS port")


def tls_files(config: BrokerConfig, needed_by: str, keys: tuple[str, ...] = ()) -> TlsSettings:
    """The broker's certificate, key, trust file and client-certificate policy, which
    ``needed_by`` (named in the error, with ``keys``) serves TLS with.

    Raises:
        InvalidConfig: no ``tlsCertificateFilePath`` or ``tlsKeyFilePath``.
    """
    if config.tls_certificate_file_path is None or config.tls_key_file_path is None:
        raise InvalidConfig(
            None,
            "",
            f"{needed_by} needs tlsCertificateFilePath and tlsKeyFilePath",
            keys=(*keys, "tlsCertificateFilePath", "tlsKeyFilePath"),
        )
    return TlsSettings(
        config.tls_certificate_file_path,
        config.tls_key_file_path,
        config.tls_trust_certs_file_path,
        config.tls_require_trusted_client_cert_on_connect,
        config.tls_allow_insecure_connection,
    )


def authentication_settings(config: BrokerConfig) -> AuthenticationSettings:
    """The authentication keys, for the broker's ``AuthenticationService``."""
    return AuthenticationSettings(
        enabled=config.authentication_enabled,
        providers=config.authentication_providers,
        anonymous_role=config.anonymous_user_role,
        token=TokenSettings(
            secret_key=config.token_secret_key,
            public_key=config.token_public_key,
            public_algorithm=config.token_public_alg,
            auth_claim=config.token_auth_claim,
            audience_claim=config.token_audience_claim,
            audience=config.token_audience,
        ),
        basic_conf=config.basic_auth_conf,
        refresh_check_seconds=config.authentication_refresh_check_seconds,
    )


def authorization_settings(config: BrokerConfig) -> AuthorizationSettings:
    """The authorization keys, for the broker's ``AuthorizationService``.

    Raises:
        InvalidConfig: ``authorizationProvider`` names a provider Braid does not have.
    """
    try:
        return AuthorizationSettings(
            enabled=config.authorization_enabled,
            super_user_roles=frozenset(config.super_user_roles),
            provider=config.authorization_provider,
            allow_wildcards=config.authorization_allow_wildcards_matching,
        )
    except InvalidInputError as exc:
        raise InvalidConfig(
            "authorizationProvider", config.authorization_provider, str(exc)
        ) from None


def binary_tls_context(
    config: BrokerConfig, authentication: AuthenticationService
) -> ssl.SSLContext | None:
    """The ``pulsar+ssl://`` listener's context (``None``: no TLS port); it asks for client
    certificates when the tls provider is on."""
    tls = tls_settings(config)
    if tls is None or config.tls_broker_port is None:
        return None
    return server_context(tls, request_client_certs=authentication.wants_client_certificates)


def broker_client_credentials(config: BrokerConfig) -> ClientCredentials | None:
    """What this broker presents to the others (``brokerClientAuthenticationPlugin`` and
    ``brokerClientAuthenticationParameters``), or ``None``.

    Raises:
        InvalidConfig: an unknown plugin or parameters it cannot use.
    """
    if not config.broker_client_authentication_plugin:
        return None
    try:
        return from_plugin(
            config.broker_client_authentication_plugin,
            config.broker_client_authentication_parameters,
        )
    except InvalidInputError as exc:
        raise InvalidConfig("brokerClientAuthenticationPlugin", "", str(exc)) from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def log_security_posture(config: BrokerConfig, log: logging.Logger) -> None:
    """Say once, at start-up, how the broker is protected: a warning when it listens beyond
    this machine with authentication off, an info line otherwise."""
    tls = "on" if config.tls_broker_port is not None or config.tls_web_port is not None else "off"
    if config.authorization_enabled:
        log.info(
            "authorization is enabled (super users: %s)",
            ", ".join(config.super_user_roles) or "none",
        )
        if not config.authentication_enabled:
            log.warning(
                "authorizationEnabled=true without authenticationEnabled=true: clients have no "
                "role, so only what needs no permission is allowed (docs/security.md)"
            )
    if config.authentication_enabled:
        log.info(
            "authentication is enabled (providers: %s); TLS listeners %s",
            ", ".join(p.rsplit(".", 1)[-1] for p in config.authentication_providers),
            tls,
        )
    elif is_loopback(config.bind_address):
        log.info(
            "authentication is disabled (authenticationEnabled=false): any client on this "
            "machine may produce, consume and administer; TLS listeners %s",
            tls,
        )
    else:
        log.warning(
            "authentication is disabled (authenticationEnabled=false) and the broker listens on "
            "%s: anyone who reaches it may produce, consume and administer (docs/security.md)",
            config.bind_address,
        )


__all__ = [
    "authentication_settings",
    "authorization_settings",
    "binary_tls_context",
    "broker_client_credentials",
    "is_loopback",
    "log_security_posture",
    "tls_files",
    "tls_settings",
]
