"""Run ``braid standalone`` as a child process: start, wait until ready, stop, kill, restart.

Used by ``braid demo``, the benchmarks and the test fixtures (``tests/support/standalone.py``), so
they all exercise the real command. Ports are chosen once (free 127.0.0.1 ports) and kept across
restarts, so a client holding the service URL reconnects to the restarted broker. Output goes to a
log file in the data directory's parent, never to a pipe nobody drains. Readiness is a deadline
poll of the admin ``/health`` endpoint *and* the broker's TCP port; the child is stopped by its
process id (SIGTERM, then SIGKILL after a deadline).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from braid.core.errors import DeadlineExceededError, IllegalStateError
from braid.localcluster.ports import free_port
from braid.localcluster.processes import http_ok, tcp_open


class StandaloneStartError(IllegalStateError):
    """The child exited or did not become ready before the deadline; the message has its log."""


class StandaloneProcess:
    """One ``braid standalone`` child process on a fixed data dir and fixed ports."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        web_port: int | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.web_port = web_port if web_port is not None else free_port(host)
        self.extra_args = tuple(extra_args)
        self.env = dict(os.environ if env is None else env)
        self.log_path = log_path or self.data_dir.with_name(self.data_dir.name + ".log")
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_offset = 0

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The command line of the child."""
        return [
            sys.executable,
            "-m",
            "braid.cli.main",
            "standalone",
            "--data-dir",
            str(self.data_dir),
            "--bind",
            self.host,
            "--port",
            str(self.port),
            "--web-port",
            str(self.web_port),
            *self.extra_args,
        ]

    def start(self, timeout: float = 30.0) -> None:
        """Start the child and wait until it serves both ports.

        Raises:
            StandaloneStartError: it exited, or was not ready within ``timeout`` seconds
                (then it is killed).
        """
        if self.running:
            raise IllegalStateError("standalone is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log_offset = self._log.tell()
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._close_log()
                raise StandaloneStartError(
                    f"braid standalone exited with {code} during start-up:\n{self.output()}"
                )
            if http_ok(f"{self.web_url}/health") and tcp_open(self.host, self.port):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise StandaloneStartError(
                    f"braid standalone was not ready after {timeout}s:\n{self.output()}"
                )
            time.sleep(0.05)  # polling a child process with a deadline, not waiting blindly

    @classmethod
    def start_on_free_ports(
        cls, data_dir: Path, *, attempts: int = 3, timeout: float = 30.0, **kwargs: Any
    ) -> StandaloneProcess:
        """Start on fresh free ports, retrying with new ones if another process took a port
        between choosing and binding it (other test runs share the machine)."""
        for attempt in range(attempts):
            process = cls(data_dir, **kwargs)
            try:
                process.start(timeout)
                return process
            except StandaloneStartError as exc:
                port_taken = re.search(r"address (already )?in use", str(exc)) is not None
                if not port_taken or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def output(self) -> str:
        """What the current (or last) run wrote to stdout/stderr."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(self._log_offset)
                return handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; returns the exit code."""
        return self._signal_and_wait(signal.SIGTERM, timeout)

    def interrupt(self, timeout: float = 20.0) -> int:
        """SIGINT (Ctrl+C), wait, then SIGKILL; returns the exit code."""
        return self._signal_and_wait(signal.SIGINT, timeout)

    def kill(self) -> int:
        """SIGKILL (a crash: nothing is flushed or closed); returns the exit code."""
        return self._signal_and_wait(signal.SIGKILL, 10.0)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop (SIGTERM) if running, then start again on the same data dir and ports."""
        if self.running:
            self.stop()
        self.start(timeout)

    def _signal_and_wait(self, signum: signal.Signals, timeout: float) -> int:
        proc = self._proc
        if proc is None:
            raise IllegalStateError("standalone was never started")
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signum)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                try:
                    proc.wait(timeout=10.0)
                except subprocess.TimeoutExpired as exc:
                    raise DeadlineExceededError(
                        f"process {proc.pid} did not die after SIGKILL"
                    ) from exc
        self._close_log()
        return int(proc.returncode)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> StandaloneProcess:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self.running:
            self.stop()
