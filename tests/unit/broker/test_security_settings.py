"""The security keys of broker.conf and the start-up line about them."""

from __future__ import annotations

import logging

import pytest

from braid.broker.config import BrokerConfig, InvalidConfig, describe, load_config
from braid.broker.security_settings import (
    authentication_settings,
    authorization_settings,
    is_loopback,
    log_security_posture,
    tls_settings,
)

PROVIDERS = (
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
    " org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
)


def test_pulsar_security_keys_load() -> None:
    config = load_config(
        None,
        {
            "brokerServicePortTls": "6651",
            "tlsCertificateFilePath": "/c.pem",
            "tlsKeyFilePath": "/k.pem",
            "tlsRequireTrustedClientCertOnConnect": "true",
            "authenticationEnabled": "true",
            "authenticationProviders": PROVIDERS,
            "tokenSecretKey": "data:;base64,c2VjcmV0",
            "tokenAuthClaim": "role",
        },
        {},
    )
    tls = tls_settings(config)
    assert tls is not None and tls.require_trusted_client_cert
    assert config.tls_broker_port == 6651 and config.tls_web_port is None
    auth = authentication_settings(config)
    assert auth.enabled and len(auth.providers) == 2 and auth.token.auth_claim == "role"
    # The secret never reaches the start-up log.
    assert describe(config)["tokenSecretKey"] == "(set)"


def test_tls_enabled_alone_opens_pulsars_default_tls_ports() -> None:
    config = BrokerConfig(tls_enabled=True)
    assert (config.tls_broker_port, config.tls_web_port) == (6651, 8443)
    assert BrokerConfig().tls_broker_port is None
    with pytest.raises(InvalidConfig, match="tlsCertificateFilePath"):
        tls_settings(config)


def test_bad_provider_list_is_a_config_error() -> None:
    with pytest.raises(InvalidConfig, match="authenticationProviders"):
        load_config(None, {"authenticationProviders": "not a class!"}, {})


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_open_broker_on_loopback_says_so_once_at_info(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.posture")
    with caplog.at_level(logging.INFO, logger="test.posture"):
        log_security_posture(BrokerConfig(), log)
    [record] = caplog.records
    assert record.levelno == logging.INFO and "authentication is disabled" in record.getMessage()


def test_open_broker_beyond_loopback_warns(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.posture")
    with caplog.at_level(logging.INFO, logger="test.posture"):
        log_security_posture(BrokerConfig(bind_address="0.0.0.0"), log)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "0.0.0.0" in record.getMessage()


def test_an_unknown_authorization_provider_stops_start_up_naming_the_key() -> None:
    with pytest.raises(InvalidConfig) as info:
        authorization_settings(BrokerConfig(authorization_provider="org.example.Custom"))
    assert info.value.key == "authorizationProvider"
