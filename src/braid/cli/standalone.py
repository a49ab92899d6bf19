"""``braid standalone``: a whole Braid in one process, on one data directory.

:class:`StandaloneServer` assembles, in order: the metadata store (SQLite file in the data dir
unless ``metadataStoreUrl`` says otherwise), an in-process bookie cluster on the data dir, the
managed-ledger factory, tenants/namespaces (creating ``public/default``), the broker and the admin
HTTP server, all in one event loop; it closes them in reverse order, so cursors are flushed and
files closed before the process exits. A lock file keeps a second process off the same data dir,
and a claim in the metadata store keeps a second broker off the same store
(:mod:`braid.broker.store_guard`).

:func:`run_standalone` is the command: set the process's GC policy (thresholds at once, and
``gc.freeze()`` once started: see :mod:`braid.broker.gc_policy`) and glibc's mmap threshold
(:mod:`braid.broker.malloc_policy`), start, print the URLs, wait for
SIGINT/SIGTERM, shut down, exit 0. Restarting on the same data dir keeps every topic, message and
cursor.

Data dir layout::

    <dataDir>/braid.lock           held (flock) while a process uses the directory
    <dataDir>/storage.id           the id of this directory's storage, which the metadata store
                                   is bound to (:mod:`braid.broker.store_guard`)
    <dataDir>/metadata/metadata.db the SQLite metadata store (default metadataStoreUrl)
    <dataDir>/bookie-0/            the in-process bookie: journal and ledger files
    <dataDir>/bookie-<i>/          with ``standaloneBookies`` N > 1, the N bookies (loopback TCP)
    <dataDir>/storage/<name>/      the bookies of another storage cluster (PIP-470,
                                   ``bookieClusters`` or ``braid admin bookie-clusters register``)
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import IO, TYPE_CHECKING, Any

from braid.admin import AdminServer, create_app
from braid.broker.broker_registry import BrokerRegistry, Listeners
from braid.broker.config import BrokerConfig, describe
from braid.broker.gc_policy import GC_STATS
from braid.broker.malloc_policy import set_mmap_threshold
from braid.broker.resources import BrokerResources
from braid.broker.security_settings import tls_settings
from braid.clock import Clock, SystemClock
from braid.core.errors import BraidError, IllegalStateError
from braid.event_loop import choose_event_loop
from braid.filelock import FileLock
from braid.metadata import MetadataStore, open_store
from braid.security.tls import server_context

if TYPE_CHECKING:
    from braid.broker.cluster_tls import PeerTls
    from braid.broker.load_manager import LoadManager
    from braid.broker.service import BrokerService
    from braid.broker.store_guard import StoreGuard
    from braid.clusters.factory import StorageClusterFactory
    from braid.clusters.service import StorageClusterService
    from braid.ledger.factory import DefaultManagedLedgerFactory
    from braid.scalable.service import ScalableTopicService
    from braid.storage import BookKeeperClient
    from braid.storage.autorecovery import AutoRecoveryService

log = logging.getLogger(__name__)

#: Name of the storage cluster the in-process bookie forms (PIP-470 attribution stamp).
LOCAL_STORAGE_CLUSTER = "standalone"


class StandaloneServer:
    """Metadata + bookie + managed ledgers + broker + admin, started and stopped as one."""

    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self._lock = FileLock(config.data_dir / "braid.lock")
        self._closers: list[tuple[str, Any]] = []
        #: What failed to close (``"<component>: <error>"``); empty after a clean stop.
        self.close_errors: list[str] = []
        self.metadata: MetadataStore | None = None
        self.resources: BrokerResources | None = None
        self.ml_factory: DefaultManagedLedgerFactory | None = None
        self.broker: BrokerService | None = None
        #: Auto-recovery run here (``autoRecoveryDaemonEnabled``), else ``None``.
        self.auto_recovery: AutoRecoveryService | None = None
        self.scalable: ScalableTopicService | None = None
        self.storage_clusters: StorageClusterService | None = None
        self.admin: AdminServer | None = None
        self.admin_tls: AdminServer | None = None
        self.guard: StoreGuard | None = None
        #: This broker's entry in the broker registry (``/loadbalance/brokers``).
        self.registry: BrokerRegistry | None = None
        #: The load manager (``braid broker`` only).
        self.load_manager: LoadManager | None = None
        #: How this broker reaches the others' HTTP APIs (``braid broker`` sets it; a
        #: standalone has no peers).
        self._peer_tls: PeerTls | None = None

    @property
    def service_url(self) -> str:
        """``pulsar://host:port`` of the broker (the real port when 0 was configured)."""
        if self.broker is None:
            raise IllegalStateError("standalone is not started")
        return str(self.broker.service_url)

    @property
    def web_service_url(self) -> str:
        """``http://host:port`` of the admin API."""
        if self.admin is None:
            raise IllegalStateError("standalone is not started")
        return f"http://{self.config.advertised_address}:{self.admin.port}"

    @property
    def service_url_tls(self) -> str | None:
        """``pulsar+ssl://host:port`` of the broker, or ``None`` without a TLS listener."""
        return None if self.broker is None else self.broker.service_url_tls

    @property
    def web_service_url_tls(self) -> str | None:
        """``https://host:port`` of the admin API, or ``None`` without an HTTPS listener."""
        if self.admin_tls is None:
            return None
        return f"https://{self.config.advertised_address}:{self.admin_tls.port}"

    async def start(self) -> None:
        """Start every component; on failure, close what was started and re-raise."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        # Imported here: these layers are heavy and `braid --help` should stay instant.
        from braid.broker.service import BrokerService
        from braid.clusters.faults import switch_pause_hook_from_env
        from braid.clusters.service import StorageClusterService
        from braid.ledger.factory import DefaultManagedLedgerFactory
        from braid.scalable.install import install_scalable_topics
        from braid.storage import StorageRouter
        from braid.storage.autorecovery import (
            AutoRecoveryService,
            BookieAdmin,
            UnderreplicationManager,
        )

        config = self.config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire(
            f"data directory {self.config.data_dir} is in use by another process",
            content=f"{os.getpid()}\n",
        )
        self._closers.append(("data dir lock", self._lock.release))
        log.info("starting standalone", extra={"fields": describe(config)})

        self.metadata = await open_store(
            config.metadata_store_url,
            clock=self.clock,
            session_timeout_s=config.metadata_store_session_timeout_millis / 1000,
        )
        self._closers.append(("metadata store", self.metadata.close))
        await self._claim_store(self.metadata)
        self.registry = BrokerRegistry(self.metadata, cluster=config.cluster_name)

        storage = await self._open_home_storage(self.metadata)
        self._closers.append(("storage", storage.close))
        router = StorageRouter([storage], active=LOCAL_STORAGE_CLUSTER)

        self.ml_factory = DefaultManagedLedgerFactory(self.metadata, router, clock=self.clock)
        cluster_factory = self._storage_cluster_factory(self.metadata)
        self.storage_clusters = StorageClusterService(
            self.metadata,
            router,
            storage,
            config.metadata_store_url,
            cluster_factory,
            self.ml_factory,
            self.clock,
            dual_read_timeout_days=config.bookie_cluster_dual_read_timeout_days,
            concurrency=config.bookie_cluster_switch_concurrency,
            skip_idgen_precheck=config.bookie_cluster_switch_skip_idgen_precheck,
            config_path=config.bookie_cluster_config_path,
            rollback_deletion_delay_s=config.bookie_cluster_rollback_deletion_delay_seconds,
            # Test-only: BRAID_SWITCH_FAULT_PAUSE_AT (braid.clusters.faults); unset, no hook.
            step_hook=switch_pause_hook_from_env(os.environ),
        )
        # Closed after the managed ledgers (their cursors flush through these clients).
        self._closers.append(("storage clusters", self.storage_clusters.close))
        await self.storage_clusters.bootstrap(config.bookie_clusters)
        self._closers.append(("managed ledgers", self.ml_factory.close))

        self.resources = BrokerResources(self.metadata)
        await self._prepare_namespaces(self.resources)

        self.broker = BrokerService(
            config, self.metadata, self.ml_factory, self.resources, clock=self.clock
        )
        self._closers.append(("broker", self.broker.close))  # safe on a half-started broker
        self._before_serving(self.broker, self.registry)
        await self.broker.start()

        if self._scalable_topics_enabled():
            self.scalable = await install_scalable_topics(
                self.broker, self.resources, registry=self.registry, **self._segment_routing()
            )
            self._closers.append(("scalable topics", self.scalable.close))

        bookies = BookieAdmin(
            storage, UnderreplicationManager(self.metadata, storage.cluster_name, self.clock)
        )
        if config.auto_recovery_daemon_enabled:
            self.auto_recovery = AutoRecoveryService(
                storage,
                clock=self.clock,
                node_id=f"{config.advertised_address}:{self.broker.port}",
                settings=config.auto_recovery_settings(),
            )
            self._closers.append(("auto-recovery", self.auto_recovery.close))
            await self.auto_recovery.start()
        app = create_app(
            config,
            self.resources,
            self.broker,
            self.scalable,
            self.storage_clusters,
            bookies=bookies,
            auto_recovery=self.auto_recovery,
            authentication=self.broker.authentication,
            authorization=self.broker.authorization,
            registry=self.registry,
            owner_redirect=self.broker.ownership is not None,
            bundle_service=self.broker,
            load_manager=lambda: self.load_manager,
            peer_tls=self._peer_tls,
        )
        self.admin = AdminServer(app, config.bind_address, config.web_service_port)
        self._closers.append(("admin server", self.admin.stop))
        await self.admin.start()
        tls = tls_settings(config)
        if tls is not None and config.tls_web_port is not None:
            # Client certificates are not asked for on HTTPS: the admin API authenticates by
            # its Authorization header (docs/security.md).
            self.admin_tls = AdminServer(
                app,
                config.bind_address,
                config.tls_web_port,
                ssl_context=server_context(tls, request_client_certs=False),
            )
            self._closers.append(("HTTPS admin server", self.admin_tls.stop))
            await self.admin_tls.start()
        await self._before_register(self.registry)
        await self.registry.register(
            self.service_url,
            self.web_service_url,
            self.service_url_tls,
            wait_s=2 * config.metadata_store_session_timeout_millis / 1000,
            listeners=self.listeners(),
            web_service_url_tls=self.web_service_url_tls,
        )
        self._closers.append(("broker registry", self.registry.unregister))
        await self._after_registered(self.registry)
        await self.storage_clusters.start(self.web_service_url)
        self._closers.append(("switch orchestrator", self.storage_clusters.stop))
        if self.scalable is not None:
            await self.scalable.start(self.web_service_url)
        if self.guard is not None:
            await self.guard.announce(self.service_url, self.web_service_url)
        log.info(
            "standalone ready",
            extra={"fields": {"broker": self.service_url, "web": self.web_service_url}},
        )

    def listeners(self) -> Listeners:
        """``advertisedListeners`` as the registry and ownership nodes carry them."""
        tls = self.config.listener_urls(scheme="pulsar+ssl://")
        return tuple((n, url, tls.get(n)) for n, url in self.config.listener_urls().items())

    # -- what `braid broker` (braid.cli.broker) does differently ---------------------------------

    async def _claim_store(self, metadata: MetadataStore) -> None:
        """Standalone: be the only broker on the store (:mod:`braid.broker.store_guard`)."""
        await self._guard_store(metadata)

    async def _prepare_namespaces(self, resources: BrokerResources) -> None:
        """Standalone: make ``public/default`` (a cluster gets it from its initialisation)."""
        await resources.ensure_default_namespace(self.config.cluster_name)

    def _before_serving(self, broker: BrokerService, registry: BrokerRegistry) -> None:
        """Called before the broker accepts connections (standalone: nothing to add)."""

    def _scalable_topics_enabled(self) -> bool:
        return self.config.scalable_topic_enabled

    def _segment_routing(self) -> dict[str, Any]:
        """Extra arguments of ``install_scalable_topics`` (standalone: segments are all here)."""
        return {}

    async def _before_register(self, registry: BrokerRegistry) -> None:
        """Called once the admin API listens, before the broker registers (standalone: nothing)."""

    async def _after_registered(self, registry: BrokerRegistry) -> None:
        """Called once the broker is in the registry with its real URLs: stand for leader
        broker (a standalone is a cluster of one, and leads it)."""
        await registry.elect_leader()

    async def _guard_store(self, metadata: MetadataStore) -> None:
        """Claim the metadata store before anything touches a ledger: refused while another
        broker uses it, or (process-local storage) when its ledgers live in another data
        directory (:mod:`braid.broker.store_guard`)."""
        from braid.broker.store_guard import StoreGuard

        config = self.config
        guard = StoreGuard(
            metadata,
            config.metadata_store_url,
            config.data_dir,
            service_url=f"pulsar://{config.advertised_address}:{config.broker_service_port}",
            web_service_url=config.web_service_url,
            clock=self.clock,
            session_timeout_s=config.metadata_store_session_timeout_millis / 1000,
            storage_is_process_local=config.storage_is_process_local,
        )
        await guard.acquire()
        self.guard = guard
        self._closers.append(("metadata store claim", guard.release))

    def _storage_cluster_factory(self, metadata: MetadataStore) -> StorageClusterFactory:
        """How other storage clusters are opened (PIP-470): in-process bookies under the data
        directory, or - when the home cluster is bookie processes - bookie processes too."""
        from braid.broker.cluster_tls import bookie_client_context
        from braid.clusters.factory import LocalClusterFactory, RemoteClusterFactory

        config = self.config
        if config.standalone_bookies == 0:
            return RemoteClusterFactory(
                metadata,
                config.metadata_store_url,
                clock=self.clock,
                settings=config.storage_client_settings(),
                timeout_s=float(config.bookkeeper_client_timeout_in_seconds),
                session_timeout_s=config.metadata_store_session_timeout_millis / 1000,
                tls=bookie_client_context(config),
            )
        return LocalClusterFactory(
            config.data_dir,
            metadata,
            config.metadata_store_url,
            home_cluster=LOCAL_STORAGE_CLUSTER,
            clock=self.clock,
        )

    async def _open_home_storage(self, metadata: MetadataStore) -> BookKeeperClient:
        """The home storage cluster: the embedded bookie, N bookies on loopback TCP, or the
        bookie processes registered in ``bookkeeperMetadataServiceUri`` (``standaloneBookies``)."""
        from braid.broker.cluster_tls import bookie_client_context, standalone_bookie_tls
        from braid.storage import open_local_cluster
        from braid.storage.loopback import open_loopback_cluster
        from braid.storage.remote import load_rack_mapping, open_remote_cluster

        config = self.config
        settings = config.storage_client_settings()
        tls = bookie_client_context(config)  # bookkeeperTLS*: the bookies are reached over TLS
        racks = None
        if config.bookkeeper_client_rack_mapping_file is not None:
            racks = load_rack_mapping(config.bookkeeper_client_rack_mapping_file)
        if config.standalone_bookies == 1:
            return await open_local_cluster(
                metadata,
                config.data_dir,
                LOCAL_STORAGE_CLUSTER,
                clock=self.clock,
                disk_thresholds=config.disk_thresholds(),
                settings=settings,
            )
        if config.standalone_bookies > 1:
            return await open_loopback_cluster(
                metadata,
                config.data_dir,
                LOCAL_STORAGE_CLUSTER,
                config.standalone_bookies,
                clock=self.clock,
                disk_thresholds=config.disk_thresholds(),
                rack_mapping=racks,
                settings=settings,
                server_tls=standalone_bookie_tls(config),
                client_tls=tls,
            )
        uri = config.bookkeeper_metadata_service_uri
        bookie_store = metadata
        if uri and uri != config.metadata_store_url:
            bookie_store = await open_store(
                uri,
                clock=self.clock,
                session_timeout_s=config.metadata_store_session_timeout_millis / 1000,
            )
        timeout = float(config.bookkeeper_client_timeout_in_seconds)
        try:
            return await open_remote_cluster(
                bookie_store,
                LOCAL_STORAGE_CLUSTER,
                clock=self.clock,
                rack_mapping=racks,
                settings=settings,
                add_timeout_s=timeout,
                read_timeout_s=timeout,
                after_close=[bookie_store.close] if bookie_store is not metadata else [],
                tls=tls,
            )
        except BaseException:
            if bookie_store is not metadata:
                await bookie_store.close()
            raise

    async def close(self) -> None:
        """Stop in reverse start order; keeps going past a failing component (each failure is
        logged and listed in :attr:`close_errors`). Idempotent."""
        while self._closers:
            what, closer = self._closers.pop()
            try:
                result = closer()
                if asyncio.iscoroutine(result):
                    await result
                log.debug("closed %s", what)
            except Exception as exc:
                # A typed error (a full disk, an unreachable store) is a state, not a bug: its
                # message says it all; anything else gets its traceback.
                log.error(
                    "error while closing %s: %s",
                    what,
                    exc,
                    exc_info=None if isinstance(exc, BraidError) else exc,
                )
                self.close_errors.append(f"{what}: {exc}")


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    count = 0

    def on_signal(signum: int) -> None:
        nonlocal count
        count += 1
        if count > 1:
            # A second signal while shutting down: the operator wants out now.
            log.warning("second %s: exiting immediately", signal.Signals(signum).name)
            os._exit(1)
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)


async def serve(config: BrokerConfig, *, out: IO[str] | None = None) -> None:
    """Run standalone until SIGINT/SIGTERM, printing the URLs once ready."""
    out = out or sys.stdout
    stop = asyncio.Event()
    _install_signal_handlers(stop)
    server = StandaloneServer(config)
    await server.start()
    # Everything alive now lives as long as the process: keep the collector off it.
    config.gc_policy().after_startup()
    try:
        print("Braid standalone is ready", file=out)
        print(f"  broker service URL: {server.service_url}", file=out)
        print(f"  admin/web URL:      {server.web_service_url}", file=out)
        if server.service_url_tls is not None:
            print(f"  broker TLS URL:     {server.service_url_tls}", file=out)
        if server.web_service_url_tls is not None:
            print(f"  admin/web TLS URL:  {server.web_service_url_tls}", file=out)
        print(f"  data directory:     {config.data_dir}", file=out)
        print("Press Ctrl+C (SIGINT) or send SIGTERM to stop.", file=out, flush=True)
        await stop.wait()
    finally:
        await server.close()
    if server.close_errors:
        # Data is safe either way (the journal and the metadata store are durable); say what
        # did not close rather than claim a clean stop.
        problems = "; ".join(server.close_errors)
        print(f"Braid standalone stopped, with errors while closing: {problems}", file=out)
    else:
        print("Braid standalone stopped cleanly", file=out, flush=True)


def run_standalone(config: BrokerConfig) -> int:
    """The ``braid standalone`` command; returns the process exit code."""
    return run_server_process(config, lambda: serve(config), "standalone")


def run_server_process(
    config: BrokerConfig, main: Callable[[], Coroutine[Any, Any, int | None]], command: str
) -> int:
    """Run a server command's ``main`` with the process settings of a broker (GC policy, mmap
    threshold, the event loop :func:`~braid.event_loop.choose_event_loop` picks: uvloop by
    default); returns its exit code (0 for ``None``), or 1 with one clear line for an expected
    start-up failure (port or data dir in use, unreadable files, an unknown event loop)."""
    config.gc_policy().apply_thresholds()
    set_mmap_threshold(config.malloc_mmap_threshold_bytes)
    GC_STATS.install()
    try:
        loop = choose_event_loop()
        log.info("%s running on the %s event loop", command, loop.name)
        with asyncio.Runner(loop_factory=loop.factory) as runner:
            code = runner.run(main())
    except (BraidError, OSError) as exc:
        log.error("%s failed: %s", command, exc)
        print(f"braid {command}: error: {exc}", file=sys.stderr)
        return 1
    return code or 0
