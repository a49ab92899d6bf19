"""Detached processes that outlive the command that started them, identified beyond their pid.

A process is identified by its **process id and its start time** (field 22 of
``/proc/<pid>/stat``, clock ticks since boot): a process id the kernel recycled for another
program has another start time, so :func:`is_running` says "not running" and :func:`stop` never
signals it. A zombie (exited, not yet reaped) counts as not running.

:func:`spawn` starts a command in a session of its own (``setsid``: a Ctrl+C in the terminal that
ran ``braid cluster up`` does not reach it), stdin from ``/dev/null``, stdout and stderr appended
to its log file. :func:`tcp_open` and :func:`http_ok` are the readiness probes (also used by
:mod:`braid.cli.process`). :func:`stop` sends SIGTERM, waits up to a bound, then SIGKILLs,
and reports which it took.
"""

from __future__ import annotations

import enum
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from braid.core.errors import DeadlineExceededError

_POLL_S = 0.05


@dataclass(frozen=True)
class ProcessId:
    """A process as the kernel knows it: its id and its start time (clock ticks since boot)."""

    pid: int
    start_time: int


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or ``None`` if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
    return raw[raw.rindex(")") + 2 :].split()


def identify(pid: int) -> ProcessId | None:
    """The identity of the running process ``pid``, or ``None`` if there is none."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] == "Z":
        return None
    return ProcessId(pid, int(fields[19]))  # field 22 of the file


def is_running(process: ProcessId) -> bool:
    """Whether ``process`` (this very process, not a recycled id) is alive and not a zombie."""
    return identify(process.pid) == process


def cpu_seconds(process: ProcessId) -> float | None:
    """User + system CPU time ``process`` has used, or ``None`` if it is gone."""
    fields = _stat_fields(process.pid)
    if fields is None or fields[0] == "Z" or int(fields[19]) != process.start_time:
        return None
    ticks = int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15
    return ticks / os.sysconf("SC_CLK_TCK")


def spawn(
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessId:
    """Start ``argv`` detached (own session), output appended to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    # The child is not waited for by this process: when this command exits, init reaps it.
    proc.returncode = 0  # keeps Popen.__del__ from warning about a running child
    found = identify(proc.pid)
    if found is None:  # it died at once; a start time is still needed to record it
        return ProcessId(proc.pid, -1)
    return found


def tcp_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (a readiness probe)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200 (a readiness probe, e.g. a broker's ``/health``)."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Stopped(enum.Enum):
    """How :func:`stop` ended a process."""

    NOT_RUNNING = "was not running"
    TERMINATED = "stopped (SIGTERM)"
    KILLED = "killed (SIGKILL after the SIGTERM bound)"


def _wait_gone(processes: Sequence[ProcessId], deadline: float) -> list[ProcessId]:
    """Poll until every process is gone or the deadline passes; returns those still running."""
    left = [p for p in processes if is_running(p)]
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)  # polling other processes' exit, with a deadline
        left = [p for p in left if is_running(p)]
    return left


def _signal(process: ProcessId, signum: signal.Signals) -> None:
    if is_running(process):
        try:
            os.kill(process.pid, signum)
        except ProcessLookupError:
            pass


def stop(processes: Sequence[ProcessId], term_timeout_s: float) -> dict[ProcessId, Stopped]:
    """SIGTERM every running process of ``processes`` at once, wait up to ``term_timeout_s``,
    then SIGKILL those left; returns how each ended.

    Raises:
        DeadlineExceededError: a process survived SIGKILL for 10 s (uninterruptible sleep).
    """
    outcome = {p: Stopped.NOT_RUNNING for p in processes if not is_running(p)}
    running = [p for p in processes if p not in outcome]
    for process in running:
        _signal(process, signal.SIGTERM)
    left = _wait_gone(running, time.monotonic() + term_timeout_s)
    for process in running:
        outcome[process] = Stopped.KILLED if process in left else Stopped.TERMINATED
    for process in left:
        _signal(process, signal.SIGKILL)
    stuck = _wait_gone(left, time.monotonic() + 10.0)
    if stuck:
        raise DeadlineExceededError(
            "still running 10 s after SIGKILL: " + ", ".join(str(p.pid) for p in stuck)
        )
    return outcome


__all__ = [
    "ProcessId",
    "Stopped",
    "cpu_seconds",
    "http_ok",
    "identify",
    "is_running",
    "spawn",
    "stop",
    "tcp_open",
]
