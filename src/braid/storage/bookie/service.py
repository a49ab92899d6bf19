"""One bookie process (``braid bookie``): engine, TCP server, registration, cookie and HTTP.

:class:`BookieService` starts, in order: the metadata store (``metadataServiceUri``), the cookie
check (:mod:`braid.storage.bookie.cookie` - a bookie whose data was wiped does not rejoin), the
storage engine on its directories (journal replay after a crash), the TCP server on
``bookiePort``, the HTTP endpoint on ``httpServerPort`` and last the registration - so a writer
never finds a bookie that cannot answer yet. It stops in the reverse order, registration first: a
clean stop takes the bookie out of the lists before its port closes, and every acknowledged entry
is in the journal before the process exits.

With ``autoRecoveryDaemonEnabled=true`` (BookKeeper's key) the bookie also hosts auto-recovery
once registered: a storage client over the cluster's registered bookies
(:class:`~braid.storage.remote.RegisteredBookieSet`) and an
:class:`~braid.storage.autorecovery.service.AutoRecoveryService` - it contends for the cluster's
one auditor election (brokers with the same key contend for the same one) and runs a replication
worker; its counters join ``/metrics``. It is stopped first on close, before the registration.

While it runs, a watch moves the registration between the writable and the read-only list as the
engine's disk state changes (``diskUsageThreshold``/``diskUsageLwmThreshold``). With
``readOnlyModeEnabled=false`` a full disk stops the bookie instead, as in BookKeeper. Losing the
metadata session (its ephemeral registration is gone) stops the bookie too: :attr:`stopped` is
set with the reason, and the process exits non-zero so a supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from braid.clock import Clock, SystemClock
from braid.metadata import MetadataStore, open_store
from braid.metadata.api import SessionEvent
from braid.storage.bookie.config import BookieConfig
from braid.storage.bookie.cookie import check_cookie
from braid.storage.bookie.engine import Bookie
from braid.storage.bookie.http import BookieHttpServer, bookie_metrics_registry
from braid.storage.bookie.registration import BookieRegistrar
from braid.storage.bookie.server import BookieServer
from braid.storage.bookie_registry import BookieRegistration
from braid.storage.bookie_tls import bookie_peer_context, bookie_server_context

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from braid.storage.autorecovery.service import AutoRecoveryService
    from braid.storage.client import BookKeeperClient

log = logging.getLogger(__name__)

#: How often the registration follows the engine's disk state.
STATE_POLL_S = 0.5


class BookieService:
    """A bookie: started with :meth:`start`, stopped with :meth:`close`."""

    def __init__(
        self,
        config: BookieConfig,
        *,
        new_bookie: bool = False,
        metadata: MetadataStore | None = None,
        clock: Clock | None = None,
        registration_wait_s: float = 30.0,
    ) -> None:
        """Args:
        new_bookie: ``--format``: join as a new bookie even if the store has an old cookie.
        metadata: an open store to register in (an in-process bookie of ``braid standalone``);
            ``None`` opens ``metadataServiceUri`` (and closes it on stop).
        """
        self.config = config
        self._new_bookie = new_bookie
        self._clock: Clock = clock or SystemClock()
        self._metadata = metadata
        self._owns_store = metadata is None
        self._registration_wait = registration_wait_s
        self.bookie: Bookie | None = None
        self.server: BookieServer | None = None
        self.http: BookieHttpServer | None = None
        self._registrar: BookieRegistrar | None = None
        self._watch: asyncio.Task[None] | None = None
        self._unlisten: Any = None
        self._metrics: CollectorRegistry | None = None
        #: Auto-recovery hosted here (``autoRecoveryDaemonEnabled``), else ``None``.
        self.auto_recovery: AutoRecoveryService | None = None
        self._recovery_client: BookKeeperClient | None = None
        self._closing = False
        #: Set when the bookie stopped by itself (session lost, full disk without read-only mode).
        self.stopped = asyncio.Event()
        self.stop_reason: str | None = None

    @property
    def bookie_id(self) -> str:
        return self.config.effective_bookie_id

    @property
    def port(self) -> int:
        """The bookie port (the real one when 0 was configured)."""
        return self.server.port if self.server is not None else self.config.bookie_port

    async def start(self) -> None:
        """Start everything; on failure close what was started and re-raise."""
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        config = self.config
        if self._metadata is None:
            self._metadata = await open_store(config.metadata_service_uri, clock=self._clock)
        store = self._metadata
        ledger_dir = Path(config.ledger_directories)
        journal_dir = Path(config.journal_directories)
        await check_cookie(
            store,
            config.storage_cluster_name,
            self.bookie_id,
            journal_dir,
            ledger_dir,
            new_bookie=self._new_bookie,
        )
        tls = bookie_server_context(config)  # bad files stop the start-up before the engine opens
        self.bookie = await Bookie.open(
            ledger_dir,
            bookie_id=self.bookie_id,
            journal_dir=journal_dir / "journal",
            journal_max_bytes=config.journal_max_size_mb * 1024 * 1024,
            disk_thresholds=config.disk_thresholds(),
            clock=self._clock,
        )
        self.server = BookieServer(
            self.bookie,
            config.effective_bind_address,
            config.bookie_port,
            max_frame_size=config.netty_max_frame_size_bytes,
            ssl_context=tls,
        )
        await self.server.start()
        self._metrics = bookie_metrics_registry(self.bookie, self.server.stats)
        if config.http_server_enabled:
            self.http = BookieHttpServer(
                config.effective_bind_address,
                config.http_server_port,
                self.health,
                self._metrics,
            )
            await self.http.start()
        reason = self.bookie.read_only_reason
        self._registrar = BookieRegistrar(
            store,
            config.storage_cluster_name,
            BookieRegistration(
                self.bookie_id,
                config.advertised_address,
                self.server.port,
                rack=config.bookie_rack or None,
                http_port=self.http.port if self.http is not None else None,
            ),
            clock=self._clock,
        )
        await self._registrar.set_read_only(reason)
        await self._registrar.register(wait_s=self._registration_wait)
        self._unlisten = store.register_session_listener(self._on_session)
        self._watch = asyncio.create_task(self._follow_disk_state(), name=f"{self.bookie_id}-state")
        if config.auto_recovery_daemon_enabled:
            await self._start_auto_recovery(store)

    async def _start_auto_recovery(self, store: MetadataStore) -> None:
        # Imported here: a bookie without auto-recovery never loads the ledger client.
        from braid.storage.autorecovery.metrics import AutoRecoveryCollector
        from braid.storage.autorecovery.service import AutoRecoveryService, AutoRecoverySettings
        from braid.storage.client import BookKeeperClient
        from braid.storage.remote import RegisteredBookieSet

        config = self.config
        bookies = await RegisteredBookieSet.open(
            store, config.storage_cluster_name, clock=self._clock, tls=bookie_peer_context(config)
        )
        self._recovery_client = BookKeeperClient(
            store, config.storage_cluster_name, bookies, clock=self._clock
        )
        self.auto_recovery = AutoRecoveryService(
            self._recovery_client,
            clock=self._clock,
            node_id=self.bookie_id,
            settings=AutoRecoverySettings(
                lost_bookie_recovery_delay_s=float(config.lost_bookie_recovery_delay),
                periodic_check_interval_s=float(config.auditor_periodic_check_interval),
            ),
        )
        await self.auto_recovery.start()
        if self._metrics is not None:
            self._metrics.register(AutoRecoveryCollector(self.auto_recovery))
        log.info("bookie %s runs auto-recovery", self.bookie_id)

    def health(self) -> tuple[int, Mapping[str, object]]:
        """``/health``: 200 while writable, 503 while read-only or stopping."""
        bookie = self.bookie
        if bookie is None or self._closing:
            return 503, {"bookie": self.bookie_id, "state": "stopping"}
        doc: dict[str, object] = {
            "bookie": self.bookie_id,
            "port": self.port,
            "cluster": self.config.storage_cluster_name,
            **bookie.disk_status(),
        }
        return (200 if bookie.read_only_reason is None else 503), doc

    async def _follow_disk_state(self) -> None:
        assert self.bookie is not None and self._registrar is not None
        while not self._closing:
            await self._clock.sleep(STATE_POLL_S)
            reason = self.bookie.read_only_reason
            if reason is not None and not self.config.read_only_mode_enabled:
                self._stop_by_itself(f"disk full and readOnlyModeEnabled=false: {reason}")
                return
            try:
                await self._registrar.set_read_only(reason)
            except Exception as exc:  # the store is unreachable for now: retried next turn
                log.warning("bookie %s: cannot update its registration: %s", self.bookie_id, exc)

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_LOST and not self._closing:
            self._stop_by_itself("metadata session lost: the registration is gone")

    def _stop_by_itself(self, reason: str) -> None:
        log.error("bookie %s stops: %s", self.bookie_id, reason)
        self.stop_reason = reason
        self.stopped.set()

    async def close(self) -> None:
        """Unregister, stop serving, close the engine (journal flushed) and the store."""
        if self._closing:
            return
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._unlisten is not None:
            self._unlisten()
        steps: list[tuple[str, Any]] = []
        if self.auto_recovery is not None:
            steps.append(("auto-recovery", self.auto_recovery.close))
        if self._recovery_client is not None:
            steps.append(("auto-recovery storage client", self._recovery_client.close))
        if self._registrar is not None:
            steps.append(("registration", self._registrar.unregister))
        if self.http is not None:
            steps.append(("http server", self.http.close))
        if self.server is not None:
            steps.append(("bookie server", self.server.close))
        if self.bookie is not None:
            steps.append(("storage engine", self.bookie.close))
        if self._metadata is not None and self._owns_store:
            steps.append(("metadata store", self._metadata.close))
        for what, step in steps:
            try:
                await step()
            except Exception as exc:
                log.error("bookie %s: error closing the %s: %s", self.bookie_id, what, exc)
