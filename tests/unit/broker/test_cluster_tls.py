"""TLS inside the cluster from ``broker.conf`` (:mod:`braid.broker.cluster_tls`, ADR 0066): when
the internal listener serves HTTPS, which files a call to another broker and to a bookie uses, no
plain fallback with ``brokerClientTlsEnabled=true`` (the other brokers' admin API at their
``webServiceUrlTls``, which every TLS broker must have), settings Braid does not have refused by
name, and a TLS failure logged once per peer. Certificates are made by a test CA at run time."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import httpx
import pytest

from braid.broker.broker_registry import BrokerInfo
from braid.broker.cluster_tls import (
    PlainPeerRefused,
    bookie_client_context,
    check_https_admin,
    check_tls_transaction_port,
    internal_server_context,
    peer_admin_url,
    peer_tls,
    standalone_bookie_tls,
)
from braid.broker.config import BrokerConfig, InvalidConfig, load_config
from braid.broker.ownership import OwnerData
from tests.support.certificates import CertPair, TestCertificateAuthority

pytestmark = pytest.mark.unit


@pytest.fixture
def ca(tmp_path: Path) -> TestCertificateAuthority:
    return TestCertificateAuthority(tmp_path / "pki")


@pytest.fixture
def server(ca: TestCertificateAuthority) -> CertPair:
    return ca.issue("broker", server=True)


def config(tmp_path: Path, **settings: str) -> BrokerConfig:
    return load_config(None, {"dataDir": str(tmp_path / "data"), **settings}, {})


def broker_tls(server: CertPair, **extra: str) -> dict[str, str]:
    """A broker's own certificate with ``brokerClientTlsEnabled`` on, plus ``extra`` keys."""
    return {
        "brokerClientTlsEnabled": "true",
        "tlsCertificateFilePath": str(server.cert),
        "tlsKeyFilePath": str(server.key),
        **extra,
    }


def test_a_broker_without_tls_serves_and_calls_in_plain_http(tmp_path: Path) -> None:
    plain = config(tmp_path)
    assert internal_server_context(plain) is None
    assert bookie_client_context(plain) is None
    assert standalone_bookie_tls(plain) is None
    tls = peer_tls(plain)
    assert not tls.required
    client = tls.client("http://127.0.0.1:1", timeout_s=1)
    assert str(client.base_url).startswith("http://")


def test_broker_client_tls_enabled_makes_the_internal_listener_https_and_refuses_plain_peers(
    tmp_path: Path, ca: TestCertificateAuthority, server: CertPair
) -> None:
    settings = broker_tls(
        server, tlsTrustCertsFilePath=str(ca.cert), tlsRequireTrustedClientCertOnConnect="true"
    )
    context = internal_server_context(config(tmp_path, **settings))
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    tls = peer_tls(config(tmp_path, **settings))
    assert tls.required
    assert tls.context.check_hostname  # Braid's default, unlike Pulsar's
    with pytest.raises(PlainPeerRefused, match="has TLS configured"):
        tls.client("http://127.0.0.1:1", timeout_s=1)
    relaxed = peer_tls(config(tmp_path, **settings, tlsHostnameVerificationEnabled="false"))
    assert not relaxed.context.check_hostname
    # A TLS port is TLS configured too: the internal listener serves HTTPS, peers must.
    del settings["brokerClientTlsEnabled"]
    with_port = config(tmp_path, **settings, webServicePortTls="0")
    assert internal_server_context(with_port) is not None
    assert peer_tls(with_port).required


def test_broker_client_tls_without_the_brokers_certificate_is_refused_naming_the_keys(
    tmp_path: Path,
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        internal_server_context(config(tmp_path, brokerClientTlsEnabled="true"))
    assert "tlsCertificateFilePath" in refused.value.keys


def test_a_broker_client_certificate_without_its_key_is_refused(
    tmp_path: Path, ca: TestCertificateAuthority
) -> None:
    client = ca.issue("broker-client")
    with pytest.raises(InvalidConfig, match="brokerClientCertificateFilePath"):
        peer_tls(config(tmp_path, brokerClientCertificateFilePath=str(client.cert)))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("bookkeeperTLSKeyFileType", "JKS"),
        ("bookkeeperTLSTrustCertTypes", "PKCS12"),
        ("bookkeeperTLSProviderFactoryClass", "com.example.OtherFactory"),
    ],
)
def test_bookie_tls_settings_braid_does_not_have_are_refused_by_name(
    tmp_path: Path, key: str, value: str
) -> None:
    settings = {"bookkeeperTLSClientAuthentication": "true", key: value}
    with pytest.raises(InvalidConfig) as refused:
        bookie_client_context(config(tmp_path, **settings))
    assert refused.value.key == key


def test_tls_to_bookies_trusts_their_ca_and_presents_the_brokers_certificate(
    tmp_path: Path, ca: TestCertificateAuthority, server: CertPair
) -> None:
    client = ca.issue("broker-client")
    settings = {
        "bookkeeperTLSClientAuthentication": "true",
        "bookkeeperTLSTrustCertsFilePath": str(ca.cert),
        "bookkeeperTLSCertificateFilePath": str(client.cert),
        "bookkeeperTLSKeyFilePath": str(client.key),
    }
    context = bookie_client_context(config(tmp_path, **settings))
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    assert len(context.get_ca_certs()) == 1
    # In-process bookies need the broker's own certificate to serve TLS.
    with pytest.raises(InvalidConfig, match="tlsCertificateFilePath"):
        standalone_bookie_tls(config(tmp_path, **settings))
    served = standalone_bookie_tls(
        config(
            tmp_path,
            **settings,
            tlsCertificateFilePath=str(server.cert),
            tlsKeyFilePath=str(server.key),
            tlsTrustCertsFilePath=str(ca.cert),
        )
    )
    assert served is not None and served.require_trusted_client_cert


def test_a_tls_failure_to_a_peer_is_logged_once_until_a_call_succeeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tls = peer_tls(config(tmp_path))
    handshake = ssl.SSLCertVerificationError(1, "certificate verify failed")
    try:
        raise httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]") from handshake
    except httpx.ConnectError as exc:
        wrapped = exc
    caplog.set_level(logging.ERROR, logger="braid.broker.cluster_tls")
    assert tls.failed("pulsar://b1:6650", wrapped)
    assert tls.failed("pulsar://b1:6650", wrapped)
    assert not tls.failed("pulsar://b1:6650", httpx.ConnectError("connection refused"))
    assert len(caplog.records) == 1
    assert "brokerClientTrustCertsFilePath" in caplog.records[0].getMessage()
    tls.succeeded("pulsar://b1:6650")
    tls.failed("pulsar://b1:6650", wrapped)
    assert len(caplog.records) == 2


def test_a_broker_with_tls_calls_the_others_admin_api_at_their_https_url_only(
    tmp_path: Path, ca: TestCertificateAuthority, server: CertPair
) -> None:
    settings = broker_tls(server, tlsTrustCertsFilePath=str(ca.cert), webServicePortTls="0")
    tls = peer_tls(config(tmp_path, **settings))
    assert tls.admin_url("http://b1:8080", "https://b1:8443") == "https://b1:8443"
    # A peer without an HTTPS admin port: its plain URL, which the client refuses.
    plain = tls.admin_url("http://b1:8080", None)
    assert plain == "http://b1:8080"
    with pytest.raises(PlainPeerRefused):
        tls.client(plain, timeout_s=1)
    # Without TLS here: the plain admin URL, as before.
    assert peer_tls(config(tmp_path)).admin_url("http://b1:8080", "https://b1:8443") == (
        "http://b1:8080"
    )
    assert peer_admin_url(None, "http://b1:8080", "https://b1:8443") == "http://b1:8080"


def test_a_broker_with_tls_but_no_https_admin_port_is_refused_at_start_up_naming_the_key(
    tmp_path: Path, ca: TestCertificateAuthority, server: CertPair
) -> None:
    settings = broker_tls(server)
    with pytest.raises(InvalidConfig, match="webServicePortTls") as refused:
        check_https_admin(config(tmp_path, **settings))
    assert "webServicePortTls" in refused.value.keys
    check_https_admin(config(tmp_path, **settings, webServicePortTls="0"))
    check_https_admin(config(tmp_path, **settings, tlsEnabled="true"))  # 8443
    check_https_admin(config(tmp_path))  # no TLS: plain admin calls


def test_a_broker_with_tls_and_transactions_but_no_tls_binary_port_is_refused_at_start_up(
    tmp_path: Path, ca: TestCertificateAuthority, server: CertPair
) -> None:
    settings = broker_tls(server, transactionCoordinatorEnabled="true")
    with pytest.raises(InvalidConfig, match="brokerServicePortTls") as refused:
        check_tls_transaction_port(config(tmp_path, **settings))
    assert "brokerServicePortTls" in refused.value.keys
    check_tls_transaction_port(config(tmp_path, **settings, brokerServicePortTls="0"))
    check_tls_transaction_port(config(tmp_path, **settings, tlsEnabled="true"))  # 6651
    check_tls_transaction_port(config(tmp_path, **broker_tls(server)))  # no transactions
    check_tls_transaction_port(config(tmp_path, transactionCoordinatorEnabled="true"))  # no TLS


def test_a_brokers_https_admin_url_travels_in_its_registry_and_ownership_nodes() -> None:
    info = BrokerInfo(
        "b1:6650", "pulsar://b1:6650", "http://b1:8080", web_service_url_tls="https://b1:8443"
    )
    assert b'"webServiceUrlTls":"https://b1:8443"' in info.encode()
    assert BrokerInfo.decode("b1:6650", info.encode()) == info
    bare = BrokerInfo("b1:6650", "pulsar://b1:6650", "http://b1:8080")
    assert BrokerInfo.decode("b1:6650", bare.encode()) == bare  # none: stays None
    owner = OwnerData("pulsar://b1:6650", "http://b1:8080", http_url_tls="https://b1:8443")
    assert b'"httpUrlTls":"https://b1:8443"' in owner.encode()
    assert OwnerData.decode(owner.encode()) == owner
