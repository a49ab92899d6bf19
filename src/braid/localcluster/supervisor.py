"""``braid cluster up``, ``down`` and ``status``: one machine's cluster of separate processes.

* :func:`cluster_up` starts ZooKeeper, waits for ``ruok``, writes the cluster's metadata
  (:func:`braid.broker.cluster_metadata.initialize_cluster_metadata`, idempotent), starts the
  bookies and waits until each says it is ready, then the brokers and waits until each serves
  ``/health`` and its service port. Each process is recorded in the state file the moment it is
  started. If any step fails, every process this call started is stopped again and
  :class:`ClusterStartFailed` carries the failing process's log tail. ``up`` is idempotent: on a
  directory used before it starts, with the recorded layout, only the processes that do not run
  (none if the cluster is up; the dead ones if it is partly up; all of them if the state file is
  stale after a reboot or a kill) and leaves the running ones alone.
* :func:`cluster_down` stops exactly the recorded processes, brokers first (they release their
  bundles), then bookies, then ZooKeeper: SIGTERM, then SIGKILL after a bound; it reports how each
  ended, and records that none runs. Running it again is harmless.
* :func:`cluster_status` says which recorded processes are alive and, from ZooKeeper, which
  brokers are registered and which one leads.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from braid.core.errors import BraidError, IllegalStateError, InvalidInputError
from braid.localcluster.layout import ClusterLayout, ProcessSpec, check_ports_free, plan
from braid.localcluster.processes import (
    ProcessId,
    Stopped,
    cpu_seconds,
    http_ok,
    spawn,
    stop,
    tcp_open,
)
from braid.localcluster.state import ClusterState, ProcessRecord, load_state, save_state
from braid.localcluster.zookeeper import command, find_zookeeper, ruok

Progress = Callable[[str], None]
_POLL_S = 0.1
_DEFAULT_BROKERS = 3
_DEFAULT_BOOKIES = 3


class ClusterStartFailed(IllegalStateError):
    """A process did not start; everything ``up`` had started was stopped again."""


class NoCluster(IllegalStateError):
    """The directory holds no cluster state file."""


def _ignore(_line: str) -> None:
    return None


def _log_tail(path: Path, offset: int, lines: int = 25) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class _Started:
    """A process this ``up`` started, and where its log began."""

    spec: ProcessSpec
    process: ProcessId
    log_offset: int


def _ready(spec: ProcessSpec, layout: ClusterLayout, started: _Started) -> bool:
    if spec.role == "zookeeper":
        return ruok(layout.address, spec.ports["client"])
    if spec.role == "bookie":
        return " ready on " in _log_tail(spec.log, started.log_offset, lines=1_000_000)
    return http_ok(spec.urls["web"] + "/health") and tcp_open(layout.address, spec.ports["service"])


class _Starter:
    """Starts processes, records each in the state file, waits until they are ready."""

    def __init__(self, state: ClusterState, env: Mapping[str, str], progress: Progress) -> None:
        self.state = state
        self.env = dict(env)
        self.progress = progress
        self.started: list[_Started] = []

    def start(self, spec: ProcessSpec) -> _Started:
        spec.config.parent.mkdir(parents=True, exist_ok=True)
        spec.config.write_text(spec.config_text)
        spec.data_dir.mkdir(parents=True, exist_ok=True)
        offset = spec.log.stat().st_size if spec.log.exists() else 0
        process = spawn(spec.argv, spec.log, env=self.env, cwd=spec.data_dir)
        record = ProcessRecord(
            spec.role,
            spec.name,
            process.pid,
            process.start_time,
            spec.log,
            spec.data_dir,
            spec.config,
            dict(spec.urls),
        )
        self.state = self.state.with_process(record)
        save_state(self.state)
        self.progress(f"started {spec.name} (pid {process.pid}), log {spec.log}")
        started = _Started(spec, process, offset)
        self.started.append(started)
        return started

    def wait_ready(self, group: Sequence[_Started], deadline: float) -> None:
        left = list(group)
        while left:
            for item in list(left):
                record = next(p for p in self.state.processes if p.pid == item.process.pid)
                if _ready(item.spec, self.state.layout, item):
                    left.remove(item)
                    self.progress(f"{item.spec.name} is ready")
                elif not record.running:
                    raise ClusterStartFailed(
                        f"{item.spec.name} exited during start-up; the end of {item.spec.log}:\n"
                        + _log_tail(item.spec.log, item.log_offset)
                    )
            if left and time.monotonic() > deadline:
                names = ", ".join(i.spec.name for i in left)
                tails = "\n".join(
                    f"--- {i.spec.log}:\n{_log_tail(i.spec.log, i.log_offset)}" for i in left
                )
                raise ClusterStartFailed(f"not ready in time: {names}\n{tails}")
            if left:
                time.sleep(_POLL_S)  # polling processes we started, with a deadline


async def _initialize_metadata(layout: ClusterLayout) -> list[str]:
    from braid.broker.cluster_metadata import ClusterData, initialize_cluster_metadata
    from braid.metadata import open_store

    store = await open_store(layout.metadata_url)
    try:
        first = layout.brokers()[0]
        data = ClusterData(first.urls["web"], first.urls["service"])
        return await initialize_cluster_metadata(store, store, layout.cluster, data)
    finally:
        await store.close()


def _reuse(state: ClusterState, brokers: int | None, bookies: int | None) -> ClusterLayout:
    layout = state.layout
    for flag, asked, recorded in (
        ("--brokers", brokers, len(layout.broker_ports)),
        ("--bookies", bookies, len(layout.bookie_ports)),
    ):
        if asked is not None and asked != recorded:
            raise InvalidInputError(
                f"{layout.directory} holds a cluster of {recorded} ({flag} {recorded}); use "
                f"another --dir for {asked}, or `braid cluster down --dir {layout.directory} "
                "--delete-data` first"
            )
    return layout


@dataclass(frozen=True)
class UpResult:
    """What :func:`cluster_up` did: the state now, and which processes it started or found."""

    state: ClusterState
    started: tuple[str, ...]
    already_running: tuple[str, ...]


def _plan_or_reuse(
    directory: Path,
    previous: ClusterState | None,
    brokers: int | None,
    bookies: int | None,
    ports: Mapping[str, int] | None,
    broker_settings: Mapping[str, str] | None,
    bookie_settings: Mapping[str, str] | None,
    cluster: str,
) -> ClusterLayout:
    if previous is not None:
        return _reuse(previous, brokers, bookies)
    base = {"zookeeper": 2181, "bookie": 3181, "broker": 6650, "web": 8080, **(ports or {})}
    return plan(
        directory,
        brokers=_DEFAULT_BROKERS if brokers is None else brokers,
        bookies=_DEFAULT_BOOKIES if bookies is None else bookies,
        broker_settings=broker_settings,
        bookie_settings=bookie_settings,
        cluster=cluster,
        zookeeper_port=base["zookeeper"],
        bookie_port=base["bookie"],
        broker_port=base["broker"],
        web_port=base["web"],
    )


def cluster_up(
    directory: Path,
    *,
    brokers: int | None = None,
    bookies: int | None = None,
    ports: Mapping[str, int] | None = None,
    broker_settings: Mapping[str, str] | None = None,
    bookie_settings: Mapping[str, str] | None = None,
    cluster: str = "local",
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
    progress: Progress = _ignore,
) -> UpResult:
    """Start every process of the cluster recorded in (or planned for) ``directory`` that does
    not run; see the module docstring.

    ``ports`` may hold base ports ``zookeeper``, ``bookie``, ``broker``, ``web`` (0 = free ones);
    they, the counts and the settings apply to a new directory only.

    Raises:
        ZooKeeperMissing: Debian's ZooKeeper (or Java) is not installed.
        PortInUse: a port of a process to start is taken.
        ClusterStartFailed: a process exited or was not ready within ``timeout_s``; the ones
            this call started are stopped again.
    """
    directory = directory.resolve()
    install = find_zookeeper(environ=env)
    previous = load_state(directory)
    layout = _plan_or_reuse(
        directory, previous, brokers, bookies, ports, broker_settings, bookie_settings, cluster
    )
    kept = tuple(previous.running()) if previous is not None else ()
    running = {p.name for p in kept}
    specs = [layout.zookeeper(command(install, layout.directory / "conf" / "zoo.cfg"))]
    specs += layout.bookies() + layout.brokers()
    to_start = [s for s in specs if s.name not in running]
    if previous is not None and previous.processes and not kept:
        progress(
            f"{layout.state_path} lists {len(previous.processes)} processes and none runs "
            "(stale: killed, or the machine restarted); starting them again"
        )
    elif kept and to_start:
        progress(f"already running: {', '.join(sorted(running))}; starting the others")
    check_ports_free(layout, recorded=previous is not None, only=to_start)
    state = ClusterState(layout, kept)
    save_state(state)
    starter = _Starter(state, os.environ if env is None else env, progress)
    deadline = time.monotonic() + timeout_s
    try:
        for role in ("zookeeper", "bookie", "broker"):
            group = [starter.start(s) for s in to_start if s.role == role]
            starter.wait_ready(group, deadline)
            if role == "zookeeper":
                created = asyncio.run(_initialize_metadata(layout))
                progress(f"cluster metadata of {layout.cluster!r}: created {len(created)} nodes")
    except BaseException:
        progress("start-up failed: stopping what this command started")
        stop([s.process for s in reversed(starter.started)], 10.0)
        save_state(ClusterState(layout, kept))
        raise
    return UpResult(starter.state, tuple(s.name for s in to_start), tuple(p.name for p in kept))


@dataclass(frozen=True)
class StoppedProcess:
    record: ProcessRecord
    how: Stopped


def cluster_down(
    directory: Path, *, timeout_s: float = 30.0, delete_data: bool = False
) -> list[StoppedProcess]:
    """Stop the processes recorded in ``directory`` (brokers, bookies, then ZooKeeper).

    Raises:
        NoCluster: ``directory`` holds no state file.
    """
    directory = directory.resolve()
    state = load_state(directory)
    if state is None:
        raise NoCluster(f"no cluster in {directory} (no cluster.json): nothing to stop")
    stopped: list[StoppedProcess] = []
    for role in ("broker", "bookie", "zookeeper"):
        group = [p for p in state.processes if p.role == role]
        outcome = stop([p.process_id for p in group], timeout_s)
        stopped.extend(StoppedProcess(p, outcome[p.process_id]) for p in group)
    save_state(replace(state, processes=()))
    if delete_data:
        for part in ("conf", "data", "logs"):
            shutil.rmtree(directory / part, ignore_errors=True)
        (directory / "cluster.json").unlink(missing_ok=True)
    return stopped


@dataclass(frozen=True)
class ProcessStatus:
    record: ProcessRecord
    running: bool
    cpu_s: float | None


@dataclass(frozen=True)
class ClusterStatus:
    layout: ClusterLayout
    processes: tuple[ProcessStatus, ...]
    #: ``host:port`` of each broker registered in ZooKeeper (``None``: could not be read).
    registered: tuple[str, ...] | None
    leader: str | None
    registry_error: str | None = None

    @property
    def all_running(self) -> bool:
        return bool(self.processes) and all(p.running for p in self.processes)


async def _registry(layout: ClusterLayout) -> tuple[tuple[str, ...], str | None]:
    from braid.broker.broker_registry import BrokerRegistry
    from braid.metadata import open_store

    store = await open_store(layout.metadata_url)
    try:
        registry = BrokerRegistry(store, cluster=layout.cluster)
        brokers = tuple(sorted(b.broker_id for b in await registry.brokers()))
        leader = await registry.leader()
        return brokers, None if leader is None else leader.get("brokerId")
    finally:
        await store.close()


async def _registry_within(
    layout: ClusterLayout, timeout_s: float
) -> tuple[tuple[str, ...], str | None]:
    async with asyncio.timeout(timeout_s):
        return await _registry(layout)


def cluster_status(directory: Path, *, timeout_s: float = 10.0) -> ClusterStatus:
    """Which recorded processes run, and the brokers registry (read from ZooKeeper).

    Raises:
        NoCluster: ``directory`` holds no state file.
    """
    directory = directory.resolve()
    state = load_state(directory)
    if state is None:
        raise NoCluster(f"no cluster in {directory} (no cluster.json): `braid cluster up` first")
    processes = tuple(
        ProcessStatus(p, p.running, cpu_seconds(p.process_id)) for p in state.processes
    )
    zookeeper_up = any(p.running and p.record.role == "zookeeper" for p in processes)
    if not zookeeper_up:
        return ClusterStatus(state.layout, processes, None, None, "ZooKeeper is not running")
    try:
        registered, leader = asyncio.run(_registry_within(state.layout, timeout_s))
    except (TimeoutError, OSError, BraidError) as exc:
        return ClusterStatus(state.layout, processes, None, None, f"registry unreadable: {exc!r}")
    return ClusterStatus(state.layout, processes, registered, leader)


__all__ = [
    "ClusterStartFailed",
    "ClusterStatus",
    "NoCluster",
    "ProcessStatus",
    "StoppedProcess",
    "UpResult",
    "cluster_down",
    "cluster_status",
    "cluster_up",
]
