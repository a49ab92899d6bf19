"""The broker's storage-cluster service: what ``/admin/v2/bookie-clusters`` calls, the watcher of
the switch directive, and the owner of the switch orchestrator.

* **Bootstrap** (before the broker serves): the cluster the broker started with is registered
  (``ACTIVE`` when the registry is empty), clusters from ``bookieClusters`` are registered
  ``STANDBY``, a client is opened for every registered cluster (so a ledger stamped with any of
  them stays readable after a restart), and the switch directive, if any, makes its cluster
  active again.
* **register / list / get**; **precheck** (I11: the target's ledger-id generator is beyond every
  ledger id of the other clusters) and **advance-idgen** (what an operator runs to make it so).
* **switch**: refused (409) when another switch is unfinished, the target is unknown, already
  active or DEPRECATED, its client cannot be created, or the precheck fails (unless
  ``bookieClusterSwitchSkipIdgenPrecheck``). Otherwise the orchestrator's state is written, then
  the directive ``name\\norigin=<url>`` (CAS), then it is applied: the router's active cluster
  becomes the target (new ledgers go there; old ones are read where their stamp says), dual read
  is recorded, the origin broker runs the orchestrator.
* **rollback** (before CLEANUP deleted anything): the source's id generator is raised past the
  target's (I11 in reverse), the state asks for a rollback, the directive names the source again.
* **cleanup** (``dryRun`` by default) and **close-client**.

The watcher reacts to directive changes made by any broker sharing the metadata store; a
directive without an ``origin=`` line is orchestrated by the broker leading the election at
``/admin/bookie-clusters/orchestrator-leader`` (:class:`braid.metadata.LeaderElection`, joined by
every started service; standalone: itself). A broker that loses that leadership stops its
orchestrator; the next leader resumes from the persisted state (every step is idempotent).

Every started broker announces its origin URL in an ephemeral node under
``/admin/bookie-clusters/brokers``. When a directive's origin broker is gone (its announcement
removed by a clean stop or with its session), the elected leader *adopts* the directive: a CAS
rewrites its origin line to the leader's own, and the leader resumes the switch. The directive's
origin is thus always the one broker that orchestrates; a broker that sees the origin change away
from itself stops its orchestrator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from braid.clock import Clock
from braid.clusters.cursor_promotion import (
    CursorPromotion,
    CursorRolledOver,
    NotTheCursorOwner,
    PromoteRequest,
)
from braid.clusters.errors import (
    BookieClusterNotFound,
    IdgenPrecheckFailed,
    SwitchRejected,
)
from braid.clusters.factory import StorageClusterFactory
from braid.clusters.metrics import SwitchMetrics
from braid.clusters.orchestrator import StepHook, SwitchOrchestrator
from braid.clusters.registry import BookieClusterRegistry
from braid.clusters.switch_status import cleanup_preview, switch_status
from braid.core.errors import BraidError, InvalidInputError
from braid.core.storage_switch import (
    DEFAULT_BUILD_CONCURRENCY,
    DEFAULT_DUAL_READ_TIMEOUT_DAYS,
    DEFAULT_ROLLBACK_DELETION_DELAY_S,
    BookieClusterInfo,
    CleanupRequest,
    ClusterStatus,
    ItemStatus,
    RegistryPaths,
    SwitchPhase,
    SwitchState,
    SwitchTarget,
    can_roll_back,
    cleanup_deadline_ms,
    new_switch_state,
    validate_registry_name,
)
from braid.ledger.factory import DefaultManagedLedgerFactory
from braid.metadata.api import BadVersion, MetadataStore, Notification, NotificationType
from braid.metadata.election import LeaderElection, LeaderElectionState
from braid.storage.client import BookKeeperClient
from braid.storage.router import DualRead, StorageRouter

log = logging.getLogger(__name__)

_DAY_MS = 24 * 3600 * 1000


class StorageClusterService:
    """Registry, precheck, switch, watcher, orchestrator, rollback, cleanup (module docstring)."""

    def __init__(
        self,
        metadata: MetadataStore,
        router: StorageRouter,
        home: BookKeeperClient,
        home_uri: str,
        factory: StorageClusterFactory,
        ml_factory: DefaultManagedLedgerFactory,
        clock: Clock,
        *,
        dual_read_timeout_days: int = DEFAULT_DUAL_READ_TIMEOUT_DAYS,
        concurrency: int = DEFAULT_BUILD_CONCURRENCY,
        skip_idgen_precheck: bool = False,
        config_path: str | None = None,
        rollback_deletion_delay_s: int = DEFAULT_ROLLBACK_DELETION_DELAY_S,
        step_hook: StepHook | None = None,
    ) -> None:
        self._metadata = metadata
        self.metrics = SwitchMetrics()
        paths = RegistryPaths() if config_path is None else RegistryPaths(config_path)
        self._registry = BookieClusterRegistry(metadata, paths, self.metrics)
        self._router = router
        self._home = home
        self._home_uri = home_uri
        self._factory = factory
        self._clock = clock
        self._skip_precheck = skip_idgen_precheck
        self._window_ms = dual_read_timeout_days * _DAY_MS
        self._delay_ms = rollback_deletion_delay_s * 1000
        self._clients: dict[str, BookKeeperClient] = {home.cluster_name: home}
        self.origin: str | None = None
        self._lock = asyncio.Lock()
        self._apply_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._unlisten: Any = None
        self._election: LeaderElection | None = None
        self.orchestrator = SwitchOrchestrator(
            self._registry,
            router,
            ml_factory,
            clock,
            self.metrics,
            window_ms=self._window_ms,
            concurrency=concurrency,
            rollback_deletion_delay_ms=self._delay_ms,
            step_hook=step_hook,
        )
        self._ml_factory = ml_factory

    @property
    def registry(self) -> BookieClusterRegistry:
        return self._registry

    @property
    def active_name(self) -> str:
        return self._router.active_name

    # -- lifecycle --------------------------------------------------------------------------------

    async def bootstrap(self, configured: Sequence[tuple[str, str]] = ()) -> None:
        """Register the home and configured clusters, open every registered cluster's client
        and re-apply the switch directive (see the module docstring). Call before serving.

        Raises:
            ClusterUriCollision: a configured cluster collides with a registered one.
        """
        known = {c.name: c for c in await self._registry.list()}
        home = self._home.cluster_name
        if home not in known:
            status = (
                ClusterStatus.STANDBY
                if any(c.status is ClusterStatus.ACTIVE for c in known.values())
                else ClusterStatus.ACTIVE
            )
            known[home] = await self._registry.register(
                BookieClusterInfo(home, self._home_uri, status)
            )
        for name, uri in configured:
            if name not in known:
                known[name] = await self._registry.register(
                    BookieClusterInfo(validate_registry_name(name), uri, ClusterStatus.STANDBY)
                )
        for info in known.values():
            if info.name not in self._clients:
                try:
                    await self._ensure_client(info)
                except BraidError as exc:
                    log.error("storage cluster %s cannot be opened: %s", info.name, exc)
        got = await self._registry.state()
        if got is not None:
            state = got[0]
            self._router.restore_dual_read(
                DualRead(state.initial_cluster, state.boundary_ledger_id, state.switched_ms)
            )
        directive = await self._registry.switch_target()
        if directive is not None and directive[0].name != self._router.active_name:
            await self._activate(directive[0].name, record=False)

    async def start(self, origin: str) -> None:
        """Watch the directive and resume an unfinished switch this broker orchestrates."""
        self.origin = origin
        self._unlisten = self._metadata.register_listener(self._on_notification)
        self._election = LeaderElection(
            self._metadata,
            self._registry.paths.orchestrator_leader,
            origin.encode(),
            on_state_change=self._on_leadership,
        )
        await self._registry.announce(origin)
        await self._election.start()
        await self._maybe_orchestrate()

    @property
    def orchestrator_leader(self) -> bool:
        """This broker leads the election of the orchestrator of origin-less directives."""
        return self._election is not None and self._election.is_leader

    async def stop(self) -> None:
        """Stop watching and orchestrating (the state stays persisted: a restart resumes)."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        await self.orchestrator.close()
        if self.origin is not None:
            try:
                await self._registry.withdraw(self.origin)
            except BraidError as exc:  # the session ends anyway: the node goes with it
                log.warning("could not withdraw this broker's announcement: %s", exc)
        election, self._election = self._election, None
        if election is not None:
            # Resign after the orchestrator stopped (never two at once); the NO_LEADER change
            # it reports spawns a task, cancelled below.
            await election.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """:meth:`stop`, then close every client but the home cluster's (its owner closes it)."""
        await self.stop()
        for name in list(self._clients):
            if name != self._home.cluster_name:
                client = self._clients.pop(name)
                if self._router.has(name):
                    if name == self._router.active_name:
                        await client.close()
                    else:
                        await self._router.remove(name)
                else:
                    await client.close()
                await self._factory.release(name)

    def _on_notification(self, notification: Notification) -> None:
        paths = self._registry.paths
        if notification.path == paths.switch_target and notification.type in (
            NotificationType.CREATED,
            NotificationType.MODIFIED,
        ):
            self._spawn(self._apply_directive())
        elif (
            notification.path.startswith(paths.brokers + "/")
            and notification.type is NotificationType.DELETED
        ):
            # A broker went away: if it was the directive's origin, the leader adopts it.
            self._spawn(self._maybe_orchestrate())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        # Retrieve every failure (no "Task exception was never retrieved"): a step that failed
        # because the metadata store is unreachable runs again on the next notification or
        # leadership change, which its recovery brings.
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning(
                "storage-cluster background step failed (retried on the next event): %r", exc
            )

    def _on_leadership(self, state: LeaderElectionState) -> None:
        self._spawn(self._leadership_changed(state))

    async def _leadership_changed(self, state: LeaderElectionState) -> None:
        if state is LeaderElectionState.LEADING:
            log.info("this broker now orchestrates storage switches without an origin")
            await self._maybe_orchestrate()
            return
        directive = await self._registry.switch_target()
        if directive is not None and directive[0].origin is None and self.orchestrator.running:
            log.info("orchestrator leadership lost: stopping the switch orchestrator")
            await self.orchestrator.close()

    # -- clients ----------------------------------------------------------------------------------

    async def _ensure_client(self, info: BookieClusterInfo) -> BookKeeperClient:
        client = self._clients.get(info.name)
        if client is None:
            client = await self._factory.open(info)
            self._clients[info.name] = client
        if not self._router.has(info.name):
            self._router.register(client)
        return client

    async def _activate(self, name: str, *, record: bool) -> None:
        """Make ``name`` the active cluster (its client created lazily)."""
        info = await self._registry.get(name)
        try:
            client = await self._ensure_client(info)
        except BraidError as exc:
            self.metrics.record_switch_failure()
            log.error(
                "switch to %s failed: no client (%s); %s stays active", name, exc, self.active_name
            )
            raise
        previous = self._router.active_name
        self._router.set_active(name)
        # New writes move to the new cluster now, not when each log's ledger fills up.
        self._ml_factory.request_rollover_all()
        if record:
            boundary = await client.next_ledger_id()
            self._router.record_switch(previous, boundary, self._clock.now_ms())
            self.metrics.record_switch_success()
        log.info("storage cluster %s is now active (was %s)", name, previous)

    async def _apply_directive(self) -> None:
        """The watcher's callback chain: hot-swap the active cluster, orchestrate if origin."""
        directive = await self._registry.switch_target()
        if directive is None:
            return
        target = directive[0]
        async with self._apply_lock:  # the watcher and the switch call may race
            if target.name != self._router.active_name:
                try:
                    await self._activate(target.name, record=True)
                except BraidError:
                    return
        await self._maybe_orchestrate()

    async def _maybe_orchestrate(self) -> None:
        directive = await self._registry.switch_target()
        got = await self._registry.state()
        if directive is None or got is None or got[0].terminal:
            return
        target, version = directive
        origin = target.origin
        if (
            origin is not None
            and origin != self.origin
            and self.orchestrator_leader
            and not await self._registry.broker_alive(origin)
        ):
            origin = await self._adopt(target, version)
        # No origin line: the elected leader orchestrates (a standalone broker is the only
        # candidate).
        if origin == self.origin or (origin is None and self.orchestrator_leader):
            self.orchestrator.start()
            self.orchestrator.wake()
        elif self.orchestrator.running:
            log.info("the switch is orchestrated by %s now: stopping this orchestrator", origin)
            await self.orchestrator.close()

    async def _adopt(self, target: SwitchTarget, version: int) -> str | None:
        """Take over a directive whose origin broker is gone: CAS its origin line to this
        broker's. Returns the origin the directive names afterwards."""
        try:
            await self._registry.write_switch_target(
                SwitchTarget(target.name, self.origin), version
            )
        except BadVersion:
            # Changed meanwhile (a new switch, a rollback, another adopter): the watcher
            # calls again with the new directive.
            return target.origin
        log.warning(
            "the switch's origin broker %s is gone: this broker (%s) adopts it and resumes",
            target.origin,
            self.origin,
        )
        return self.origin

    # -- registry ---------------------------------------------------------------------------------

    async def register(self, name: str, uri: str, status: str | ClusterStatus) -> dict[str, Any]:
        """Register a cluster (or update a registered one's status).

        ``ACTIVE`` is accepted only for the cluster that is active in this broker (PIP-470's
        reconciliation after a failed status flip); the cluster that was ``ACTIVE`` becomes
        ``DEPRECATED``, so exactly one stays ``ACTIVE``.
        """
        name = validate_registry_name(name)
        parsed = status if isinstance(status, ClusterStatus) else ClusterStatus.parse(status)
        if not isinstance(uri, str) or not uri:
            raise InvalidInputError("metadataServiceUri is required")
        async with self._lock:
            if parsed is ClusterStatus.ACTIVE and name != self._router.active_name:
                raise SwitchRejected(
                    f"only the active cluster ({self._router.active_name}) can be registered "
                    f"ACTIVE; use `switch` to change it"
                )
            if parsed is not ClusterStatus.ACTIVE and name == self._router.active_name:
                raise SwitchRejected(f"{name} is the active cluster: it stays ACTIVE")
            info = await self._registry.register(BookieClusterInfo(name, uri, parsed))
            if parsed is ClusterStatus.ACTIVE:
                for other in await self._registry.list():
                    if other.name != name and other.status is ClusterStatus.ACTIVE:
                        await self._registry.set_status(other.name, ClusterStatus.DEPRECATED)
            return self._describe(info)

    def _describe(self, info: BookieClusterInfo) -> dict[str, Any]:
        doc: dict[str, Any] = info.to_json()
        doc["active"] = info.name == self._router.active_name
        doc["clientOpen"] = self._router.has(info.name)
        return doc

    async def list(self) -> list[dict[str, Any]]:
        return [self._describe(info) for info in await self._registry.list()]

    async def get(self, name: str) -> dict[str, Any]:
        return self._describe(await self._registry.get(validate_registry_name(name)))

    # -- precheck (I11) ---------------------------------------------------------------------------

    async def _source_max_ledger_id(self, excluding: str) -> int:
        highest = -1
        for name, client in self._clients.items():
            if name == excluding or not self._router.has(name):
                continue
            ids = await client.list_ledgers()
            highest = max(highest, max(ids, default=-1), await client.next_ledger_id() - 1)
        return highest

    async def precheck(self, name: str) -> dict[str, Any]:
        """PIP-470's structured result: is ``name``'s id generator beyond the source's ids?

        Raises:
            BookieClusterNotFound: not registered.
            SwitchRejected: its client cannot be created.
        """
        info = await self._registry.get(validate_registry_name(name))
        try:
            target = await self._ensure_client(info)
        except BraidError as exc:
            raise SwitchRejected(f"cannot open storage cluster {name}: {exc}") from exc
        source_max = await self._source_max_ledger_id(excluding=name)
        target_next = await target.next_ledger_id()
        ready = target_next > source_max
        return {
            "ready": ready,
            "idgenAdvancedBeyondSource": ready,
            "sourceClusterName": self._router.active_name,
            "targetClusterName": name,
            # Braid's ledger ids are flat 63-bit integers: the "high order" values are the
            # highest id any other cluster holds and the target generator's next id.
            "sourceMaxHighOrderBit": source_max,
            "targetMaxHighOrderBit": target_next,
        }

    async def advance_idgen(self, name: str, margin: int) -> dict[str, Any]:
        """Raise ``name``'s id generator to ``margin`` past every other cluster's ids."""
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise InvalidInputError(f"margin must be an integer >= 0, got {margin!r}")
        info = await self._registry.get(validate_registry_name(name))
        if name == self._router.active_name:
            raise SwitchRejected(f"{name} is the active cluster")
        target = await self._ensure_client(info)
        await target.raise_ledger_id_floor(await self._source_max_ledger_id(name) + 1 + margin)
        return await self.precheck(name)

    # -- switch -----------------------------------------------------------------------------------

    async def switch(self, name: str) -> dict[str, Any]:
        """Switch to ``name`` (module docstring); returns the status.

        Raises:
            BookieClusterNotFound, SwitchRejected, IdgenPrecheckFailed.
        """
        name = validate_registry_name(name)
        async with self._lock:
            info = await self._registry.get(name)
            got = await self._registry.state()
            previous, state_version = (got[0], got[1]) if got is not None else (None, -1)
            active = self._router.active_name
            if previous is not None and not previous.terminal:
                raise SwitchRejected(
                    f"the switch {previous.source} -> {previous.target} is in phase "
                    f"{previous.phase.value}: let it finish (cleanup; after a rollback, cleanup "
                    f"--execute --force deletes the kept copies now) or roll it back first"
                )
            if name == active:
                if (
                    previous is not None
                    and previous.target == name
                    and (previous.failed() or previous.count(ItemStatus.DEFERRED))
                ):
                    return await self._retry(previous, state_version)
                raise SwitchRejected(f"storage cluster {name} is already active")
            if info.status is ClusterStatus.DEPRECATED:
                raise SwitchRejected(f"storage cluster {name} is DEPRECATED")
            try:
                target = await self._ensure_client(info)
            except BraidError as exc:
                self.metrics.record_switch_failure()
                raise SwitchRejected(
                    f"switch rejected: no client for {name} ({exc}); {active} stays active"
                ) from exc
            if not self._skip_precheck:
                result = await self.precheck(name)
                if not result["ready"]:
                    self.metrics.record_switch_failure()
                    raise IdgenPrecheckFailed(
                        f"precheck failed: the ledger-id generator of {name} is at "
                        f"{result['targetMaxHighOrderBit']}, not beyond the source's highest "
                        f"ledger id {result['sourceMaxHighOrderBit']} (run `bookie-clusters "
                        f"advance-idgen {name}`)"
                    )
            dual = self._router.dual_read
            state = new_switch_state(
                active,
                name,
                self.origin,
                self._clock.now_ms(),
                await target.next_ledger_id(),
                dual.initial_cluster_name if dual is not None else active,
            )
            await self._registry.write_state(state, state_version)
            directive = await self._registry.switch_target()
            try:
                await self._registry.write_switch_target(
                    SwitchTarget(name, self.origin), -1 if directive is None else directive[1]
                )
            except BadVersion as exc:
                raise SwitchRejected("another switch changed the directive meanwhile") from exc
            await self._apply_directive()
        return await self.status()

    async def _retry(self, previous: SwitchState, version: int) -> dict[str, Any]:
        """``switch --target <active>`` after DONE_WITH_FAILURES / deferred items: run again."""
        state = new_switch_state(
            previous.source,
            previous.target,
            self.origin,
            self._clock.now_ms(),
            previous.boundary_ledger_id,
            previous.initial_cluster,
            previous,
        )
        await self._registry.write_state(state, version)
        await self._maybe_orchestrate()
        return await self.status()

    # -- rollback ---------------------------------------------------------------------------------

    async def rollback(self) -> dict[str, Any]:
        """Return every attribution to the source cluster (within the window)."""
        async with self._lock:
            got = await self._registry.state()
            if got is None or got[0].terminal:
                raise SwitchRejected("no switch in progress to roll back")
            state = got[0]
            if state.phase is SwitchPhase.ROLLBACK or not can_roll_back(state):
                raise SwitchRejected(
                    f"the switch is in phase {state.phase.value}: source copies are being or "
                    f"were deleted, it cannot be rolled back"
                )
            if state.rollback_requested:
                return await self.status()
            source = self._clients.get(state.source)
            target = self._clients.get(state.target)
            if source is None or target is None:
                raise SwitchRejected("the clusters of the switch are not open here")
            # I11 in reverse: ledgers created on the source from now on must have higher ids
            # than everything the target allocated.
            await source.raise_ledger_id_floor(await target.next_ledger_id())
            while True:
                current = await self._registry.state()
                assert current is not None
                try:
                    await self._registry.write_state(
                        dataclasses.replace(current[0], rollback_requested=True), current[1]
                    )
                except BadVersion:
                    continue
                break
            directive = await self._registry.switch_target()
            await self._registry.write_switch_target(
                SwitchTarget(state.source, self.origin), -1 if directive is None else directive[1]
            )
            await self._apply_directive()
            self.orchestrator.wake()
        return await self.status()

    # -- cleanup ----------------------------------------------------------------------------------

    async def cleanup(
        self,
        *,
        dry_run: bool = True,
        src_cluster_filter: str | None = None,
        max_deletions: int = 0,
        force: bool = False,
    ) -> dict[str, Any]:
        """Preview (``dry_run``) or start CLEANUP; returns what is (or would be) deleted."""
        if (
            isinstance(max_deletions, bool)
            or not isinstance(max_deletions, int)
            or max_deletions < 0
        ):
            raise InvalidInputError(f"maxDeletions must be an integer >= 0, got {max_deletions!r}")
        request = CleanupRequest(src_cluster_filter, max_deletions, force)
        async with self._lock:
            got = await self._registry.state()
            if got is None:
                raise SwitchRejected("no switch to clean up after")
            state = got[0]
            now = self._clock.now_ms()
            ledgers, deadline = cleanup_preview(state, request, self._window_ms, self._delay_ms)
            rolled_back = state.phase is SwitchPhase.ROLLBACK
            answer: dict[str, Any] = {
                "dryRun": dry_run,
                "ledgers": ledgers,
                "windowClosesAtMillis": cleanup_deadline_ms(state, self._window_ms),
                "newCopiesDeletionAtMillis": deadline if rolled_back else None,
                "phase": state.phase.value,
            }
            if dry_run:
                return answer
            if state.terminal or state.phase not in (SwitchPhase.CLEANUP, SwitchPhase.ROLLBACK):
                raise SwitchRejected(
                    f"the switch is in phase {state.phase.value}; cleanup follows PROMOTE "
                    f"(or a rollback)"
                )
            if rolled_back and deadline < 0:
                raise SwitchRejected("the rollback is still returning attributions; try again")
            if now < deadline and not force:
                what = "the new copies' deletion delay" if rolled_back else "the dual-read window"
                raise SwitchRejected(
                    f"{what} runs until {deadline} ms; pass force=true to clean up now (lab only)"
                )
            while True:
                current = await self._registry.state()
                assert current is not None
                try:
                    await self._registry.write_state(
                        dataclasses.replace(current[0], cleanup=request), current[1]
                    )
                except BadVersion:
                    continue
                break
            await self._maybe_orchestrate()
            self.orchestrator.wake()
            return answer

    # -- close-client -----------------------------------------------------------------------------

    async def close_client(self, name: str) -> None:
        """Close a cluster's client (after CLEANUP, once its topic data aged out)."""
        name = validate_registry_name(name)
        async with self._lock:
            await self._registry.get(name)
            if name == self._router.active_name:
                raise SwitchRejected(f"{name} is the active cluster")
            got = await self._registry.state()
            if (
                got is not None
                and not got[0].terminal
                and name
                in (
                    got[0].source,
                    got[0].target,
                )
            ):
                raise SwitchRejected(
                    f"{name} takes part in the switch in phase {got[0].phase.value}"
                )
            client = self._clients.pop(name, None)
            if client is None:
                raise SwitchRejected(f"no client of {name} is open")
            if self._router.has(name):
                await self._router.remove(name)
            else:
                await client.close()
            await self._factory.release(name)

    # -- PROMOTE of a cursor this broker owns (the internal endpoint) ------------------------------

    @property
    def cursors(self) -> CursorPromotion:
        """Where cursor PROMOTEs run (brokers set its routing: ADR 0061)."""
        return self.orchestrator.cursors

    async def promote_cursor(
        self,
        managed_ledger: str,
        cursor: str,
        target: str,
        expected_cursors_ledger_id: int,
        copied_last_entry: int,
        source: str | None = None,
    ) -> dict[str, Any]:
        """Re-point a cursor this broker owns at its copy on ``target`` (another broker's
        orchestrator asks; ``source`` defaults to the switch's source cluster).

        Raises:
            NotTheCursorOwner: this broker does not own the cursor's topic (503).
            CursorRolledOver: the cursor's ledger changed since BUILD (rolled over instead).
            CursorBusy: its managed ledger is being opened here (503: retried).
        """
        if source is None:
            got = await self._registry.state()
            source = got[0].source if got is not None else self._home.cluster_name
        await self.cursors.reattribute_here(
            PromoteRequest(
                managed_ledger,
                cursor,
                validate_registry_name(source),
                validate_registry_name(target),
                expected_cursors_ledger_id,
                copied_last_entry,
            )
        )
        return {"promoted": True}

    # -- status -----------------------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """The active cluster, the registry, dual read and the switch's phase and progress."""
        dual = self._router.dual_read
        got = await self._registry.state()
        switch: dict[str, Any] | None = None
        if got is not None:
            directive = await self._registry.switch_target()
            # The directive names who orchestrates now (a leader may have adopted it).
            origin = got[0].origin if directive is None else directive[0].origin
            switch = switch_status(got[0], origin, self._window_ms, self._delay_ms)
        clusters = await self.list()
        return {
            # PIP-470's switch state: the switch's phase, or NOT_REGISTERED / STANDBY before one.
            "state": self.metrics.switch_state.value,
            "activeCluster": self._router.active_name,
            "clusters": clusters,
            "dualRead": None
            if dual is None
            else {
                "initialClusterName": dual.initial_cluster_name,
                "switchLedgerIdBoundary": dual.switch_ledger_id_boundary,
                "switchTimestampMillis": dual.switch_timestamp_millis,
            },
            "switch": switch,
        }


__all__ = [
    "BookieClusterNotFound",
    "CursorRolledOver",
    "NotTheCursorOwner",
    "StorageClusterService",
]
