"""A bookie process's configuration: ``conf/bookkeeper.conf`` with BookKeeper's key names.

The file is ``key=value`` lines (``#`` and ``!`` comments), as BookKeeper's ``bk_server.conf``.
Keys keep BookKeeper's names where BookKeeper has the setting (``bookiePort``,
``advertisedAddress``, ``journalDirectories``, ``ledgerDirectories``, ``metadataServiceUri``,
``httpServerEnabled``, ``httpServerPort``, ``readOnlyModeEnabled``, ``diskUsageThreshold``,
``diskUsageLwmThreshold``, ``diskCheckInterval``, ``journalSyncData``, ``journalMaxSizeMB``,
``nettyMaxFrameSizeBytes``, ``bookieId``, and auto-recovery's ``autoRecoveryDaemonEnabled``,
``lostBookieRecoveryDelay``, ``auditorPeriodicCheckInterval``); Braid's own are
``storageClusterName``, ``bindAddress`` and ``bookieRack``. TLS on the bookie port takes
BookKeeper's keys with PEM files (``tlsProviderFactoryClass``, ``tlsProvider``,
``tlsCertificatePath``, ``tlsKeyStoreType``, ``tlsKeyStore``, ``tlsTrustStoreType``,
``tlsTrustStore``, ``tlsClientAuthentication``; :mod:`braid.storage.bookie_tls`). Unknown keys are
named in one
warning; an empty value means the default; a value that does not parse raises
:class:`InvalidBookieConfig` naming the key. Command-line flags override the file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from braid.core.errors import InvalidInputError
from braid.storage.bookie.disk import DiskThresholds, InvalidDiskThresholds
from braid.storage.bookie.wire import DEFAULT_MAX_FRAME_SIZE
from braid.storage.bookie_registry import InvalidBookieId, validate_bookie_id
from braid.storage.ledger_metadata import validate_cluster_name

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
#: BookKeeper's TLS provider factory: naming it turns TLS on (as in BookKeeper).
TLS_PROVIDER_FACTORY_CLASS = "org.apache.bookkeeper.tls.TLSContextFactory"


class InvalidBookieConfig(InvalidInputError):
    """A bookie configuration value that does not parse, or settings that cannot work together."""


@dataclass(frozen=True, slots=True)
class BookieConfig:
    """The resolved settings of one bookie process (camelCase keys -> snake_case fields)."""

    bookie_port: int = 3181
    advertised_address: str = "127.0.0.1"
    bind_address: str = ""  # empty: the advertised address
    bookie_id: str = ""  # empty: advertisedAddress:bookiePort
    journal_directories: Path = Path("data/bookie")
    ledger_directories: Path = Path("data/bookie")
    metadata_service_uri: str = ""
    storage_cluster_name: str = "standalone"
    bookie_rack: str = ""
    http_server_enabled: bool = True
    http_server_port: int = 8000
    read_only_mode_enabled: bool = True
    disk_usage_threshold: float = 0.95
    disk_usage_lwm_threshold: float = 0.90
    disk_check_interval: int = 10_000  # milliseconds
    journal_sync_data: bool = True
    journal_max_size_mb: int = 2048
    netty_max_frame_size_bytes: int = DEFAULT_MAX_FRAME_SIZE
    #: Run the auditor election and a replication worker in this bookie (BookKeeper's key).
    auto_recovery_daemon_enabled: bool = False
    lost_bookie_recovery_delay: int = 0  # seconds
    auditor_periodic_check_interval: int = 604_800  # seconds; 0 = never
    #: TLS on the bookie port (BookKeeper's keys, PEM only; ``braid.storage.bookie_tls``).
    tls_provider_factory_class: str = ""
    tls_provider: str = ""
    tls_certificate_path: Path | None = None
    tls_key_store_type: str = "PEM"
    tls_key_store: Path | None = None
    tls_trust_store_type: str = "PEM"
    tls_trust_store: Path | None = None
    tls_client_authentication: bool = False

    @property
    def effective_bookie_id(self) -> str:
        """``bookieId``, or BookKeeper's default ``advertisedAddress:bookiePort``."""
        return self.bookie_id or f"{self.advertised_address}:{self.bookie_port}"

    @property
    def effective_bind_address(self) -> str:
        return self.bind_address or self.advertised_address

    @property
    def tls_enabled(self) -> bool:
        """TLS on the bookie port: ``tlsProviderFactoryClass`` or ``tlsCertificatePath`` set."""
        return bool(self.tls_provider_factory_class) or self.tls_certificate_path is not None

    def disk_thresholds(self) -> DiskThresholds:
        return DiskThresholds(
            self.disk_usage_threshold,
            self.disk_usage_lwm_threshold,
            self.disk_check_interval / 1000.0,
        )


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise ValueError(f"must be in {low}..{high}, got {value}")
        return value

    return parse


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"must be in (0, 1], got {value}")
    return value


def _one_dir(text: str) -> Path:
    dirs = [d.strip() for d in text.split(",") if d.strip()]
    if len(dirs) != 1:
        raise ValueError(
            "exactly one directory is supported (a bookie has one journal and one "
            f"ledger directory), got {text!r}"
        )
    return Path(dirs[0])


def _pem_only(text: str) -> str:
    if text.upper() != "PEM":
        raise ValueError("only PEM files are supported (JKS and PKCS12 key stores are not)")
    return "PEM"


def _tls_provider(text: str) -> str:
    if text not in ("OpenSSL", "JDK"):
        raise ValueError("expected OpenSSL or JDK (both mean Python's OpenSSL here)")
    return text


def _tls_factory(text: str) -> str:
    if text != TLS_PROVIDER_FACTORY_CLASS:
        raise ValueError(f"the only TLS provider factory is {TLS_PROVIDER_FACTORY_CLASS}")
    return text


def _store_url(text: str) -> str:
    from braid.metadata.url import parse_store_url

    parse_store_url(text)
    return text


_PARSERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "bookiePort": ("bookie_port", _int(0, 65535)),
    "advertisedAddress": ("advertised_address", str),
    "bindAddress": ("bind_address", str),
    "bookieId": ("bookie_id", validate_bookie_id),
    "journalDirectories": ("journal_directories", _one_dir),
    "journalDirectory": ("journal_directories", _one_dir),  # BookKeeper's older, single form
    "ledgerDirectories": ("ledger_directories", _one_dir),
    "metadataServiceUri": ("metadata_service_uri", _store_url),
    "storageClusterName": ("storage_cluster_name", validate_cluster_name),
    "bookieRack": ("bookie_rack", str),
    "httpServerEnabled": ("http_server_enabled", _bool),
    "httpServerPort": ("http_server_port", _int(0, 65535)),
    "readOnlyModeEnabled": ("read_only_mode_enabled", _bool),
    "diskUsageThreshold": ("disk_usage_threshold", _fraction),
    "diskUsageLwmThreshold": ("disk_usage_lwm_threshold", _fraction),
    "diskCheckInterval": ("disk_check_interval", _int(1, 86_400_000)),
    "journalSyncData": ("journal_sync_data", _bool),
    "journalMaxSizeMB": ("journal_max_size_mb", _int(1, 1 << 20)),
    "nettyMaxFrameSizeBytes": ("netty_max_frame_size_bytes", _int(_MIB, 512 * _MIB)),
    "autoRecoveryDaemonEnabled": ("auto_recovery_daemon_enabled", _bool),
    "lostBookieRecoveryDelay": ("lost_bookie_recovery_delay", _int(0, 365 * 86_400)),
    "auditorPeriodicCheckInterval": ("auditor_periodic_check_interval", _int(0, 365 * 86_400)),
    "tlsProviderFactoryClass": ("tls_provider_factory_class", _tls_factory),
    "tlsProvider": ("tls_provider", _tls_provider),
    "tlsCertificatePath": ("tls_certificate_path", Path),
    "tlsKeyStoreType": ("tls_key_store_type", _pem_only),
    "tlsKeyStore": ("tls_key_store", Path),
    "tlsTrustStoreType": ("tls_trust_store_type", _pem_only),
    "tlsTrustStore": ("tls_trust_store", Path),
    "tlsClientAuthentication": ("tls_client_authentication", _bool),
}


def bookie_config_keys() -> list[str]:
    """Every key ``bookkeeper.conf`` may set."""
    return sorted(_PARSERS)


def parse_conf_text(text: str, *, source: str) -> dict[str, str]:
    """``key=value`` lines into a dict (later lines win). Raises :class:`InvalidBookieConfig`."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise InvalidBookieConfig(f"{source}:{number}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def load_bookie_config(path: Path | None, overrides: Mapping[str, str]) -> BookieConfig:
    """Defaults, then the file, then ``overrides`` (camelCase keys, from flags).

    Raises:
        InvalidBookieConfig: unreadable file, malformed line, bad value, or settings that
            cannot work (no ``metadataServiceUri``, ``journalSyncData=false``).
    """
    raw: dict[str, str] = {}
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidBookieConfig(f"{path}: cannot read: {exc}") from None
        raw.update(parse_conf_text(text, source=str(path)))
    raw.update(overrides)
    unknown = sorted(k for k in raw if k not in _PARSERS)
    if unknown:
        log.warning("ignoring unknown configuration keys: %s", ", ".join(unknown))
    values: dict[str, Any] = {}
    for key, text in raw.items():
        if key not in _PARSERS or text == "":
            continue
        attribute, parse = _PARSERS[key]
        try:
            values[attribute] = parse(text)
        except (ValueError, InvalidInputError) as exc:
            raise InvalidBookieConfig(f"{key}={text!r}: {exc}") from None
    config = BookieConfig(**values)
    _check(config)
    return config


def _check(config: BookieConfig) -> None:
    if not config.metadata_service_uri:
        raise InvalidBookieConfig(
            "metadataServiceUri is required: the metadata store the bookie registers in "
            "(e.g. zk://127.0.0.1:2181/braid)"
        )
    if not config.journal_sync_data:
        raise InvalidBookieConfig(
            "journalSyncData=false is not supported: a bookie acknowledges an entry only "
            "after the journal is fsync'd"
        )
    if config.bookie_port == 0 and not config.bookie_id:
        raise InvalidBookieConfig(
            "bookiePort=0 (a free port) needs a bookieId: the default id, "
            "advertisedAddress:bookiePort, would change at every start"
        )
    if config.tls_enabled and (config.tls_certificate_path is None or config.tls_key_store is None):
        raise InvalidBookieConfig(
            "TLS on the bookie port needs tlsCertificatePath (PEM certificate chain) and "
            "tlsKeyStore (PEM private key, with tlsKeyStoreType=PEM)"
        )
    if config.tls_client_authentication and config.tls_trust_store is None:
        raise InvalidBookieConfig(
            "tlsClientAuthentication=true needs tlsTrustStore "
            "(PEM CAs of the clients' certificates)"
        )
    if config.tls_client_authentication and not config.tls_enabled:
        raise InvalidBookieConfig("tlsClientAuthentication=true needs TLS (tlsCertificatePath)")
    try:
        config.disk_thresholds()
        validate_bookie_id(config.effective_bookie_id)
    except (InvalidDiskThresholds, InvalidBookieId) as exc:
        raise InvalidBookieConfig(str(exc)) from None


def describe(config: BookieConfig) -> dict[str, str]:
    """The settings as ``{field: text}`` for the start-up log line."""
    return {f.name: str(getattr(config, f.name)) for f in fields(config)}
