"""``bookkeeper.conf``: BookKeeper's key names, defaults, one warning for unknown keys, clear
errors for values and settings that cannot work; the ``braid bookie`` command line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from braid.cli.bookie import _overrides
from braid.cli.main import build_parser, main
from braid.storage.bookie.config import (
    BookieConfig,
    InvalidBookieConfig,
    bookie_config_keys,
    load_bookie_config,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_the_shipped_bookkeeper_conf_loads_and_documents_every_key() -> None:
    config = load_bookie_config(REPO / "conf" / "bookkeeper.conf", {})
    assert config.bookie_port == 3181
    assert config.effective_bookie_id == "127.0.0.1:3181"
    assert config.metadata_service_uri == "zk://127.0.0.1:2181/braid"
    text = (REPO / "conf" / "bookkeeper.conf").read_text()
    documented = {k for k in bookie_config_keys() if f"\n{k}=" in text}
    assert documented == set(bookie_config_keys()) - {"journalDirectory"}  # the old alias


def test_unknown_keys_are_named_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_text("metadataServiceUri=memory://\nbookiePortt=1\nledgerStorageClass=x\n")
    with caplog.at_level(logging.WARNING):
        load_bookie_config(conf, {})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["ignoring unknown configuration keys: bookiePortt, ledgerStorageClass"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({}, "metadataServiceUri is required"),
        ({"metadataServiceUri": "memory://", "journalSyncData": "false"}, "journalSyncData"),
        ({"metadataServiceUri": "memory://", "bookiePort": "0"}, "needs a bookieId"),
        ({"metadataServiceUri": "memory://", "bookiePort": "70000"}, "bookiePort"),
        ({"metadataServiceUri": "nope"}, "metadataServiceUri"),
        ({"metadataServiceUri": "memory://", "ledgerDirectories": "/a,/b"}, "exactly one"),
        ({"metadataServiceUri": "memory://", "bookieId": "a/b"}, "bookieId"),
        (
            {"metadataServiceUri": "memory://", "diskUsageLwmThreshold": "0.99"},
            "diskUsageLwmThreshold",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(
    overrides: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidBookieConfig, match=message):
        load_bookie_config(None, overrides)


def test_flags_override_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "bk.conf"
    conf.write_text("metadataServiceUri=memory://\nbookiePort=3181\n")
    args = build_parser().parse_args(
        ["bookie", "--config", str(conf), "--port", "3999", "--bookie-id", "b1"]
    )
    config = load_bookie_config(args.config, _overrides(args))
    assert (config.bookie_port, config.effective_bookie_id) == (3999, "b1")
    assert isinstance(config, BookieConfig)


def test_bookie_help_teaches_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bookie", "--help"])
    text = capsys.readouterr().out
    assert "bookkeeper.conf" in text and "--format" in text and "examples:" in text
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "bookie" in capsys.readouterr().out


def test_a_bad_bookie_configuration_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bookie", "--port", "3181"]) == 2
    assert "metadataServiceUri is required" in capsys.readouterr().err


def test_bookie_tls_takes_bookkeepers_keys_with_pem_files(tmp_path: Path) -> None:
    base = {"metadataServiceUri": "zk://127.0.0.1:2181/braid"}
    assert not load_bookie_config(None, base).tls_enabled
    tls = {
        **base,
        "tlsProviderFactoryClass": "org.apache.bookkeeper.tls.TLSContextFactory",
        "tlsProvider": "OpenSSL",
        "tlsCertificatePath": "/etc/braid/bookie.cert.pem",
        "tlsKeyStoreType": "PEM",
        "tlsKeyStore": "/etc/braid/bookie.key-pk8.pem",
        "tlsTrustStoreType": "PEM",
        "tlsTrustStore": "/etc/braid/ca.cert.pem",
        "tlsClientAuthentication": "true",
    }
    config = load_bookie_config(None, tls)
    assert config.tls_enabled and config.tls_client_authentication
    assert config.tls_key_store == Path("/etc/braid/bookie.key-pk8.pem")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("tlsKeyStoreType", "JKS", "tlsKeyStoreType"),
        ("tlsTrustStoreType", "PKCS12", "tlsTrustStoreType"),
        ("tlsProviderFactoryClass", "com.example.Other", "tlsProviderFactoryClass"),
        ("tlsKeyStore", "", "tlsKeyStore"),
        ("tlsTrustStore", "", "tlsTrustStore"),
    ],
)
def test_bookie_tls_settings_that_cannot_work_are_refused_by_name(
    key: str, value: str, message: str
) -> None:
    tls = {
        "metadataServiceUri": "zk://127.0.0.1:2181/braid",
        "tlsCertificatePath": "/c.pem",
        "tlsKeyStore": "/k.pem",
        "tlsTrustStore": "/ca.pem",
        "tlsClientAuthentication": "true",
        key: value,
    }
    with pytest.raises(InvalidBookieConfig, match=message):
        load_bookie_config(None, tls)
