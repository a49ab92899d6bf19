"""Several bookies inside one process, reached over TCP on loopback (``braid standalone
--bookies N``; ADR 0034).

Each bookie is a full :class:`~braid.storage.bookie.service.BookieService` - engine on
``<data_dir>/bookie-<i>``, cookie, TCP server on a free port of ``host``, registration in the
metadata store - and the storage client finds them the way a broker finds bookie processes: by
their registrations (:func:`~braid.storage.remote.open_remote_cluster`). Only the processes are
missing: every byte goes through the bookie protocol, so replication, fencing and the network
client's failure handling are exercised on one machine. Bookie ids are ``bookie-<i>`` (stable
across restarts, and ``bookie-0`` is the id of the single embedded bookie, so its ledgers stay
readable when a standalone grows from one bookie to several).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from braid.clock import Clock
from braid.metadata.api import MetadataStore
from braid.security.tls import TlsSettings
from braid.storage.api import InvalidQuorum
from braid.storage.bookie.config import BookieConfig
from braid.storage.bookie.disk import DiskThresholds
from braid.storage.bookie.service import BookieService
from braid.storage.client import BookKeeperClient, ClientSettings
from braid.storage.remote import open_remote_cluster


async def open_loopback_cluster(
    metadata: MetadataStore,
    data_dir: Path,
    cluster_name: str,
    bookies: int,
    *,
    host: str = "127.0.0.1",
    clock: Clock | None = None,
    disk_thresholds: DiskThresholds | None = None,
    rack_mapping: Mapping[str, str] | None = None,
    settings: ClientSettings | None = None,
    timeout_s: float = 30.0,
    server_tls: TlsSettings | None = None,
    client_tls: ssl.SSLContext | None = None,
) -> BookKeeperClient:
    """Start ``bookies`` bookie services in this process and return the cluster's client, which
    reaches them over TCP and closes them when it closes. With ``server_tls`` the bookies serve
    TLS with those files, reached with ``client_tls``.

    Raises:
        InvalidQuorum: ``bookies`` < 1.
        CookieMismatch: a bookie directory's cookie disagrees with the metadata store.
        StorageIOError: a data directory cannot be opened.
    """
    if bookies < 1:
        raise InvalidQuorum(f"a storage cluster needs at least one bookie, got {bookies}")
    thresholds = disk_thresholds or DiskThresholds()
    services: list[BookieService] = []
    try:
        for i in range(bookies):
            directory = Path(data_dir) / f"bookie-{i}"
            config = BookieConfig(
                bookie_port=0,
                advertised_address=host,
                bookie_id=f"bookie-{i}",
                journal_directories=directory,
                ledger_directories=directory,
                metadata_service_uri="memory://in-process",  # unused: the store is passed in
                storage_cluster_name=cluster_name,
                http_server_enabled=False,
                disk_usage_threshold=thresholds.usage_threshold,
                disk_usage_lwm_threshold=thresholds.lwm_threshold,
                disk_check_interval=max(1, int(thresholds.check_interval_s * 1000)),
                **_tls_fields(server_tls),
            )
            service = BookieService(config, metadata=metadata, clock=clock)
            services.append(service)
            await service.start()
        return await open_remote_cluster(
            metadata,
            cluster_name,
            clock=clock,
            min_bookies=bookies,
            wait_s=timeout_s,
            rack_mapping=rack_mapping,
            settings=settings,
            # Closing the client closes the bookies, after their clients.
            after_close=[service.close for service in reversed(services)],
            tls=client_tls,
        )
    except BaseException:
        for service in reversed(services):
            await service.close()
        raise


def _tls_fields(tls: TlsSettings | None) -> dict[str, Any]:
    """The bookie settings of serving TLS with ``tls`` (none without it)."""
    if tls is None:
        return {}
    return {
        "tls_certificate_path": tls.certificate_file,
        "tls_key_store": tls.key_file,
        "tls_trust_store": tls.trust_certs_file,
        "tls_client_authentication": tls.require_trusted_client_cert,
    }
